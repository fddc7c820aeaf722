// The plan's reader index (plan.hpp).
#include <algorithm>

#include "ngraph/runtime/cpu/plan.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

void ReaderIndex::build(const std::vector<PlannedStep>& steps) {
  m_readers.clear();
  for (size_t s = 0; s < steps.size(); ++s)
    for (const auto& v : steps[s].node->input_values()) {
      Steps& readers = m_readers[v];
      if (readers.empty() || readers.back() != s) readers.push_back(s);
    }
}

const ReaderIndex::Steps& ReaderIndex::of(const Output& v) const {
  static const Steps no_readers;
  auto it = m_readers.find(v);
  return it == m_readers.end() ? no_readers : it->second;
}

bool ReaderIndex::reads(size_t s, const Output& v) const {
  const Steps& readers = of(v);
  return std::binary_search(readers.begin(), readers.end(), s);
}

bool ReaderIndex::read_after(const Output& v, size_t s) const {
  return first_after(v, s) != none;
}

size_t ReaderIndex::first_after(const Output& v, size_t s) const {
  const Steps& readers = of(v);
  auto it = std::upper_bound(readers.begin(), readers.end(), s);
  return it == readers.end() ? none : *it;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
