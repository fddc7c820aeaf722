// ngraph._ngraph._testing: fault injection for tests only (ngraph/distributed/testing.hpp).
// A test process installs a hook at a point of the communicators' set-up (before it calls
// ngraph.distributed.init or compiles), to stall or stop there; nothing else uses it.
#include <signal.h>

#include <chrono>
#include <thread>

#include "bindings.hpp"
#include "ngraph/distributed/testing.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

void init_testing(py::module_& m) {
  py::module_ t = m.def_submodule(
      "_testing",
      "Fault injection for tests only: hooks at points of the communicators' set-up and of a "
      "sharded update.");
  using distributed::testing::point_named;
  using distributed::testing::set_hook;
  t.def("sleep_at", [](const std::string& point, double seconds) {
    set_hook(point_named(point), [seconds] { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); });
  }, py::arg("point"), py::arg("seconds"), "This process sleeps `seconds` each time it passes `point`.");
  t.def("stop_at", [](const std::string& point) {
    set_hook(point_named(point), [] { raise(SIGSTOP); });
  }, py::arg("point"), "This process stops itself (SIGSTOP) when it passes `point`.");
  t.def("kill_at", [](const std::string& point) {
    set_hook(point_named(point), [] { raise(SIGKILL); });
  }, py::arg("point"), "This process kills itself (SIGKILL) when it passes `point`.");
  t.def("clear", &distributed::testing::clear_hooks, "Removes every hook.");
}

}  // namespace python
}  // namespace ngraph
