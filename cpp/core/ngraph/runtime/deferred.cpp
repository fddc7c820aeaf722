#include "ngraph/runtime/deferred.hpp"

#include <exception>
#include <utility>

namespace ngraph {
namespace runtime {

void run_deferred(std::vector<std::function<void()>>& actions) {
  std::exception_ptr first;
  auto pending = std::move(actions);
  actions.clear();
  for (auto& f : pending) {
    try {
      f();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace runtime
}  // namespace ngraph
