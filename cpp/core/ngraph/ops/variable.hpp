// Training state that lives in the runtime between calls: a Variable reads it, an Assign
// (an update of a computation) replaces it at the end of the call. All reads in a call see
// the values from before the call: updates are written to a second buffer that becomes the
// current one when the call ends, so no update is copied.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ngraph/node.hpp"

namespace ngraph {

// A layout a backend keeps a variable's value in between calls (a oneDNN blocked layout its
// convolutions read without reordering the weights every step): the same elements in another
// order, in the same number of bytes. Plain row-major is the absence of one.
class StorageLayout {
 public:
  virtual ~StorageLayout() = default;
  virtual void to_plain(const void* stored, void* plain) const = 0;
  virtual void from_plain(const void* plain, void* stored) const = 0;
  virtual bool same_as(const StorageLayout& other) const = 0;
  virtual std::string to_string() const = 0;
};

class VariableState {
 public:
  VariableState(element::Type type, const Shape& shape, const void* initial = nullptr);
  element::Type get_element_type() const { return m_type; }
  const Shape& get_shape() const { return m_shape; }
  size_t byte_size() const { return shape_size(m_shape) * m_type.size(); }
  // The current value, in the storage layout (see get_layout).
  const void* read_buffer() const { return m_shared ? m_shared : m_buffers[m_current].get(); }
  void* read_buffer() { return m_shared ? m_shared : m_buffers[m_current].get(); }
  // Where an update writes; becomes current at commit(). Takes a private copy of a shared value.
  void* write_buffer();
  void commit() {
    m_current ^= 1;
    ++m_version;
  }
  // Copies of the value in plain row-major order, whatever the storage layout (the caller
  // checks the size).
  void get(void* dst) const;
  void set(const void* src);
  // The layout read_buffer() holds the value in; null: plain row-major. A backend that
  // compiled its kernels for a layout sets it before a call; the value stays the same.
  const std::shared_ptr<const StorageLayout>& get_layout() const { return m_layout; }
  void set_layout(std::shared_ptr<const StorageLayout> layout);
  const std::string& get_name() const { return m_name; }
  void set_name(const std::string& name) { m_name = name; }

  // Node sharing, for a backend's sharded update (the CPU executable's, see
  // docs/distributed.md): the value lives at `shared`, memory the ranks of one node share, where
  // every rank's state of this variable finds the same value and each rank updates its own
  // piece. `owner` keeps that memory mapped. Whoever else writes the value (set, set_layout,
  // write_buffer, or a kernel writing in place: the backend calls unshare first) works on a
  // private copy, taken by unshare().
  void share(char* shared, std::shared_ptr<void> owner);
  void unshare();
  bool is_shared() const { return m_shared != nullptr; }
  // Frees the private copy while the value is shared (unshare() allocates one again): an
  // optimizer state whose shares stay with their owners needs none.
  void release_private();
  size_t private_bytes() const { return (m_buffers[0] ? byte_size() : 0) + (m_buffers[1] ? byte_size() : 0); }

  // Across nodes a sharded update leaves an optimizer state's shares with their owners: this
  // rank's copy is then current only in its own share (docs/distributed.md, "Across nodes").
  // While scattered, get() and set_layout() throw `why` (which names the variable, the rank
  // and what to do); gather() runs `gather`, collective over every rank of the computation,
  // which makes the value whole again and calls gathered() (a null `gather`: the shares are
  // lost, gather() throws `why`). set() replaces the whole value, so it is whole afterwards.
  void scatter(std::string why, std::function<void()> gather);
  bool is_scattered() const { return m_scattered; }
  const std::string& scattered_why() const { return m_scattered_why; }
  void gather();
  void gathered() {
    m_scattered = false;
    m_gather = nullptr;
  }
  // Counts the changes of where or what the value is (set, commit, share, unshare), so a
  // backend can tell whether values may have changed since it last compared them.
  uint64_t version() const { return m_version; }

 private:
  element::Type m_type;
  Shape m_shape;
  std::shared_ptr<char> m_buffers[2];
  int m_current = 0;
  char* m_shared = nullptr;
  std::shared_ptr<void> m_shared_owner;
  bool m_scattered = false;
  std::string m_scattered_why;
  std::function<void()> m_gather;
  uint64_t m_version = 0;
  std::string m_name;
  std::shared_ptr<const StorageLayout> m_layout;
};

namespace op {

class Variable : public Op<Variable> {
 public:
  static constexpr const char* type_name = "Variable";
  bool admits_storage_only_types() const override { return true; }
  Variable() = default;
  explicit Variable(std::shared_ptr<VariableState> state);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override;
  bool is_pure() const override { return false; }
  const std::shared_ptr<VariableState>& get_state() const { return m_state; }
  // A variable's value is a leaf for autodiff, like a Parameter.
  void generate_adjoints(autodiff::Adjoints&, const OutputVector&) override {}

 private:
  std::shared_ptr<VariableState> m_state;
};

// Assign(value) to a variable: a sink of a function, run at the end of each call.
class Assign : public Op<Assign> {
 public:
  static constexpr const char* type_name = "Assign";
  bool admits_storage_only_types() const override { return true; }
  Assign() = default;
  Assign(const std::shared_ptr<Variable>& variable, const Output& value);
  void validate_and_infer_types() override;
  bool is_pure() const override { return false; }
  const std::shared_ptr<VariableState>& get_state() const { return m_state; }

 private:
  std::shared_ptr<VariableState> m_state;
};

}  // namespace op
}  // namespace ngraph
