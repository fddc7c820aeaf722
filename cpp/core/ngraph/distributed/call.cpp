#include "ngraph/distributed/call.hpp"

#include <algorithm>

namespace ngraph {
namespace distributed {

DistributedCall::DistributedCall(std::string where) : m_where(std::move(where)) {}

void DistributedCall::add(const std::shared_ptr<Communicator>& comm, const std::string& signature,
                          const std::string& label) {
  if (signature.empty()) return;
  auto it = std::find_if(m_checks.begin(), m_checks.end(), [&](const CollectiveCheck& c) { return c.comm == comm; });
  if (it == m_checks.end()) it = m_checks.insert(m_checks.end(), {comm, {}, {}});
  it->signature.push_back(signature);
  it->labels.push_back(label);
}

std::string* DistributedCall::last_signature(const Communicator& comm, const std::string& label) {
  for (auto& c : m_checks)
    if (c.comm.get() == &comm)
      for (size_t i = c.labels.size(); i-- > 0;)
        if (c.labels[i] == label) return &c.signature[i];
  return nullptr;
}

int DistributedCall::rank() const { return m_checks.empty() ? -1 : m_checks[0].comm->rank(); }

int DistributedCall::size() const { return m_checks.empty() ? 1 : m_checks[0].comm->size(); }

DistributedCall::Started DistributedCall::begin_checked() {
  Started started;
  started.hold = m_checks[0].comm->begin_call(m_where);
  auto mode = get_check_mode();
  if (mode == CheckMode::never) return started;
  if (mode == CheckMode::always || !m_checked_once) {
    for (auto& c : m_checks) c.comm->check_same_collectives(c.signature, c.labels, m_where);
    m_checked_once = true;
  }
  started.verified = true;
  return started;
}

void DistributedCall::settle(std::initializer_list<std::function<void()>> finish) noexcept {
  for (const auto& f : finish) try {
      if (f) f();
    } catch (...) {
    }
}

}  // namespace distributed
}  // namespace ngraph
