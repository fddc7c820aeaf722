// INTERPRETER kernels: one plain reference kernel per op, looked up by op name. A kernel is
// handed the node and its row-major input and output buffers, reads the node's attributes
// and computes the outputs with straightforward loops (no layouts, fusion or planning): it is
// the oracle the CPU backend is tested against.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "ngraph/node.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {

// The element types the interpreter runs, as (element::Type_t enumerator, storage type). Every
// kernel that depends on the type is a template instantiated from this one list: adding an
// element type to the core means adding it here (and giving the templates' `if constexpr`
// branches whatever the new type needs, e.g. no sign for unsigned types).
#define NGRAPH_INTERPRETER_ELEMENT_TYPES(X) \
  X(boolean, ::ngraph::element::boolean_t)  \
  X(f32, float)                             \
  X(f64, double)                            \
  X(i32, int32_t)                           \
  X(i64, int64_t)                           \
  X(i8, int8_t)                             \
  X(i16, int16_t)                           \
  X(u8, uint8_t)                            \
  X(u16, uint16_t)                          \
  X(u32, uint32_t)                          \
  X(u64, uint64_t)

// The element types of NGRAPH_INTERPRETER_ELEMENT_TYPES, for tests and error messages.
const std::vector<element::Type>& supported_element_types();

// Calls f(T{}) with T the storage type of `t`; a type missing from the list fails from
// `node`, naming it.
template <typename F>
decltype(auto) dispatch(const Node& node, element::Type t, F&& f) {
  switch (t.get_type_enum()) {
#define NGRAPH_INTERPRETER_CASE(name, T) \
  case element::Type_t::name: return f(T{});
    NGRAPH_INTERPRETER_ELEMENT_TYPES(NGRAPH_INTERPRETER_CASE)
#undef NGRAPH_INTERPRETER_CASE
    default: break;
  }
  node.fail_type("INTERPRETER has no kernel for element type " + t.get_type_name());
}

// Storage type traits the kernels branch on.
template <typename T>
inline constexpr bool is_boolean_v = std::is_same_v<T, element::boolean_t>;
template <typename T>
inline constexpr bool is_real_v = std::is_floating_point_v<T>;

template <typename T>
bool is_nan(T x) {
  if constexpr (is_real_v<T>) return x != x;
  (void)x;
  return false;
}

// The accumulator of sums and products: double for floats (the reference is more accurate
// than the type), the unsigned type of the same width for integers (wrapping, as NumPy's).
template <typename T, typename = void>
struct AccumulatorOf {
  using type = T;  // boolean
};
template <typename T>
struct AccumulatorOf<T, std::enable_if_t<is_real_v<T>>> {
  using type = double;
};
template <typename T>
struct AccumulatorOf<T, std::enable_if_t<std::is_integral_v<T> && !is_boolean_v<T>>> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using Accumulator = typename AccumulatorOf<T>::type;

// Work that must finish by the end of the call (a started Send), run after the last kernel.
class CallState {
 public:
  void defer(std::function<void()> finish) { m_deferred.push_back(std::move(finish)); }
  // Runs every deferred completion, even after one throws; rethrows the first failure.
  void finish();
  void clear() { m_deferred.clear(); }
  // The step random ops draw with in this call (Executable::get_rng_step).
  uint64_t rng_step = 0;
  // A compressed AllReduce's carried rounding error (error feedback), kept between calls of
  // the executable (transient: set_value and checkpoints leave it alone).
  std::vector<float>& residual(const Node* node) { return m_residuals[node]; }

 private:
  std::vector<std::function<void()>> m_deferred;
  std::map<const Node*, std::vector<float>> m_residuals;
};

// One run of a kernel: the node, one pointer per input and per output (row-major data of the
// node's shapes and types), and the call in progress.
struct KernelCall {
  const Node& node;
  std::vector<const void*> in;
  std::vector<void*> out;
  CallState& call;

  template <typename T>
  const T* input(size_t i) const {
    return static_cast<const T*>(in[i]);
  }
  template <typename T>
  T* output(size_t i) const {
    return static_cast<T*>(out[i]);
  }
};

using Kernel = std::function<void(KernelCall&)>;

class KernelRegistry {
 public:
  static KernelRegistry& get();
  void add(const std::string& op, Kernel kernel);
  const Kernel* find(const std::string& op) const;
  bool contains(const std::string& op) const { return find(op) != nullptr; }
  std::vector<std::string> names() const;

 private:
  std::vector<std::pair<std::string, Kernel>> m_kernels;
};

// Ops whose values the executable provides itself instead of a kernel: Parameter (the
// caller's input), Constant (its data), Variable (the state), Result (its input), Assign (the
// update, applied after the call).
bool is_structural_op(const std::string& op);

#define NGRAPH_INTERPRETER_KERNEL(OpName, ...)                                        \
  static const bool NGRAPH_CONCAT(ngraph_interpreter_kernel_, __COUNTER__) = [] {     \
    ::ngraph::runtime::interpreter::KernelRegistry::get().add(OpName, __VA_ARGS__);   \
    return true;                                                                      \
  }()

// ------------------------------------------------------------------------ index helpers

// For each row-major index of `shape`, the element offset sum(coordinate[d] * strides[d]) +
// offset: the source positions of a view (Broadcast, Reshape, Slice, Reverse), or with 0
// strides along reduced axes, the output position of each element of a reduction.
std::vector<size_t> view_offsets(const Shape& shape, const std::vector<std::ptrdiff_t>& strides,
                                 std::ptrdiff_t offset = 0);
// Row-major strides of `s`, signed.
std::vector<std::ptrdiff_t> signed_strides(const Shape& s);
// The offsets into `in` of each element of `out` under NumPy broadcasting (right-aligned,
// size-1 axes repeated).
std::vector<size_t> broadcast_offsets(const Shape& in, const Shape& out);
// For each element of `in`, the offset of its reduction in the row-major result without
// `axes`.
std::vector<size_t> reduction_offsets(const Shape& in, const AxisSet& axes);

}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
