// The per-call protocol of a compiled computation with collectives, the same for every
// backend: one call at a time where MPI needs it, the check that every rank is about to run
// the same collectives (as the check mode says), and, when the call fails part-way, finishing
// what was started so no other rank is left waiting for a message that is never sent.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ngraph/distributed/communicator.hpp"

namespace ngraph {
namespace distributed {

// The collectives a computation runs on one communicator, in order, for the agreement
// check: one signature line per collective and the node names, for messages.
struct CollectiveCheck {
  std::shared_ptr<Communicator> comm;
  std::vector<std::string> signature, labels;
};

class DistributedCall {
 public:
  // `where` names the computation in messages ("graph 'name'").
  explicit DistributedCall(std::string where = "");
  // Adds a collective of node `label` on `comm` (compile time, in schedule order); an empty
  // signature (point-to-point ops: they pair up per rank) adds nothing.
  void add(const std::shared_ptr<Communicator>& comm, const std::string& signature, const std::string& label);
  // The signature line of the collective last added on `comm` (a backend appends how it
  // runs it, e.g. in shared memory: part of what the ranks must agree on).
  std::string* last_signature(const Communicator& comm, const std::string& label);
  bool empty() const { return m_checks.empty(); }
  const std::vector<CollectiveCheck>& checks() const { return m_checks; }
  const std::string& where() const { return m_where; }
  void set_where(std::string where) { m_where = std::move(where); }
  // This rank and the ranks of the first communicator (-1 and 1 without collectives).
  int rank() const;
  int size() const;

  // Starts a call: `hold` keeps the call registered with the communicator (begin_call:
  // refuses a second thread's call where MPI cannot take it) until it is released, and the
  // agreement check runs as the check mode says. `verified`: the ranks are known to agree
  // (kernels may then use MPI's faster blocking collectives).
  struct Started {
    std::shared_ptr<void> hold;
    bool verified = false;
  };
  Started begin() { return m_checks.empty() ? Started{} : begin_checked(); }

  // After a failure part-way through a call: runs each of `finish` (completing started
  // collectives and sends), ignoring their own failures, so the first error is the one raised.
  static void settle(std::initializer_list<std::function<void()>> finish) noexcept;

 private:
  Started begin_checked();
  std::vector<CollectiveCheck> m_checks;
  std::string m_where;
  bool m_checked_once = false;
};

}  // namespace distributed
}  // namespace ngraph
