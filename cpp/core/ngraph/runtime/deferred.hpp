// Work a kernel leaves for the end of a call (waits of overlapped collectives, copies): the
// one way both backends run it.
#pragma once

#include <functional>
#include <vector>

namespace ngraph {
namespace runtime {

// Runs every action in order, each even after an earlier one threw, then rethrows the first
// exception. `actions` is empty afterwards (also when this throws).
void run_deferred(std::vector<std::function<void()>>& actions);

}  // namespace runtime
}  // namespace ngraph
