// Backends and executables: NumPy arrays in and out, the GIL released while running.
#include "bindings.hpp"
#include "ngraph/runtime/backend.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"
#include "ngraph/runtime/cpu/cpu_features.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/interpreter/int_backend.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

namespace {

std::string describe(element::Type t, const Shape& s) { return t.get_type_name() + to_braces(s); }

// Runs `exe` on `inputs` (one C-contiguous array of the right dtype and shape per parameter,
// used in place) and returns one new array per result.
py::list call(runtime::Executable& exe, const py::sequence& inputs) {
  const auto& params = exe.get_parameters();
  const auto& results = exe.get_results();
  if (static_cast<size_t>(py::len(inputs)) != params.size())
    throw py::type_error("[Executable] expects " + std::to_string(params.size()) +
                         " input arrays, got " + std::to_string(py::len(inputs)));
  std::vector<py::array> keep;
  std::vector<const void*> in_ptrs(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& p = params[i];
    py::object o = inputs[i];
    if (!py::isinstance<py::array>(o))
      throw py::type_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                           ") must be a NumPy array");
    auto a = o.cast<py::array>();
    element::Type t = element_type_of(a.dtype(), ("[Executable] input " + std::to_string(i) +
                                                  " (" + p->get_name() + ")").c_str());
    Shape s(a.shape(), a.shape() + a.ndim());
    if (t != p->get_element_type())
      throw py::type_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                           ") expects " + describe(p->get_element_type(), p->get_shape()) +
                           ", got " + describe(t, s));
    if (s != p->get_shape())
      throw py::value_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                            ") expects " + describe(p->get_element_type(), p->get_shape()) +
                            ", got " + describe(t, s));
    if (!(a.flags() & py::array::c_style))
      throw py::value_error("[Executable] input " + std::to_string(i) + " (" + p->get_name() +
                            ") must be C-contiguous");
    in_ptrs[i] = a.data();
    keep.push_back(std::move(a));
  }
  py::list outs;
  std::vector<void*> out_ptrs(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    const Shape& s = results[i]->get_shape();
    py::array a(dtype_of(results[i]->get_element_type()), std::vector<py::ssize_t>(s.begin(), s.end()));
    out_ptrs[i] = a.mutable_data();
    outs.append(a);
  }
  {
    py::gil_scoped_release release;
    exe.call_raw(out_ptrs.data(), in_ptrs.data());
  }
  return outs;
}

// The call path of ng.runtime().computation(...)(*arrays), in C++: arrays that already have
// the parameter's dtype, shape and layout are used in place; anything else goes to the
// Python class's _call_slow (conversions and error messages).
struct CallPlan {
  std::shared_ptr<runtime::Executable> exe;
  std::vector<int> in_type;
  std::vector<std::vector<py::ssize_t>> in_shape;
  std::vector<py::dtype> out_dtype;
  std::vector<std::vector<py::ssize_t>> out_shape;
  std::vector<bool> layout;  // per returned entry: a value (true) or None (a sink)
  bool single = false;
  bool release_gil = true;

  void bind(const std::shared_ptr<runtime::Executable>& e, const std::vector<bool>& lay, bool one) {
    exe = e;
    layout = lay;
    single = one;
    in_type.clear();
    in_shape.clear();
    out_dtype.clear();
    out_shape.clear();
    for (const auto& p : e->get_parameters()) {
      in_type.push_back(dtype_of(p->get_element_type()).num());
      in_shape.emplace_back(p->get_shape().begin(), p->get_shape().end());
    }
    for (const auto& r : e->get_results()) {
      out_dtype.push_back(dtype_of(r->get_element_type()));
      out_shape.emplace_back(r->get_shape().begin(), r->get_shape().end());
    }
    auto* cpu = dynamic_cast<runtime::cpu::CPUExecutable*>(e.get());
    release_gil = !(cpu && cpu->is_lightweight());
  }

  // Pointer to the data of args[i] if it can be used as is, else nullptr.
  const void* usable(PyObject* o, size_t i) const {
    auto& api = py::detail::npy_api::get();
    if (!api.PyArray_Check_(o)) return nullptr;
    auto* a = py::detail::array_proxy(o);
    auto* d = py::detail::array_descriptor_proxy(a->descr);
    if (d->type_num != in_type[i] || d->byteorder == '>') return nullptr;
    const int need = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
    if ((a->flags & need) != need) return nullptr;
    const auto& shape = in_shape[i];
    if (a->nd != static_cast<int>(shape.size())) return nullptr;
    for (size_t k = 0; k < shape.size(); ++k)
      if (a->dimensions[k] != shape[k]) return nullptr;
    return a->data;
  }

  // Runs on `args` if every one is usable as is; returns false otherwise (nothing ran).
  bool try_run(const py::args& args, py::object& result) const {
    size_t n = in_type.size();
    if (args.size() != n) return false;
    const void* in_small[8];
    std::vector<const void*> in_big;
    const void** in = n <= 8 ? in_small : (in_big.resize(n), in_big.data());
    for (size_t i = 0; i < n; ++i)
      if (!(in[i] = usable(args[i].ptr(), i))) return false;
    size_t m = out_dtype.size();
    std::vector<py::array> outs;
    outs.reserve(m);
    void* out_small[8];
    std::vector<void*> out_big;
    void** out = m <= 8 ? out_small : (out_big.resize(m), out_big.data());
    for (size_t j = 0; j < m; ++j) {
      outs.emplace_back(out_dtype[j], out_shape[j]);
      out[j] = outs.back().mutable_data();
    }
    if (release_gil) {
      py::gil_scoped_release release;
      exe->call_raw(out, in);
    } else {
      exe->call_raw(out, in);
    }
    if (single) {
      result = layout[0] ? py::object(outs[0]) : py::none();
      return true;
    }
    py::list list(layout.size());
    size_t k = 0;
    for (size_t j = 0; j < layout.size(); ++j)
      list[j] = layout[j] ? py::object(outs[k++]) : py::none();
    result = std::move(list);
    return true;
  }
};

runtime::cpu::CPUExecutable& as_cpu(runtime::Executable& e) {
  auto* c = dynamic_cast<runtime::cpu::CPUExecutable*>(&e);
  if (!c) throw py::type_error("not a CPU executable");
  return *c;
}

// What both backends' executables report: the compiled function and the nodes run, in order.
template <typename F>
decltype(auto) on_executable(runtime::Executable& e, F&& f) {
  if (auto* c = dynamic_cast<runtime::cpu::CPUExecutable*>(&e)) return f(*c);
  if (auto* i = dynamic_cast<runtime::interpreter::INTExecutable*>(&e)) return f(*i);
  throw py::type_error("not a CPU or INTERPRETER executable");
}

// Threads, and what the INTERPRETER backend has kernels for.
void def_backend_settings(py::module_& m) {
  m.def("set_num_threads", &runtime::cpu::set_num_threads, py::arg("n"),
        "Threads each rank's kernels use (default: cores / MPI ranks on this node).");
  m.def("get_num_threads", &runtime::cpu::get_num_threads);
  m.def("interpreter_kernel_names",
        [] { return runtime::interpreter::KernelRegistry::get().names(); },
        "The ops the INTERPRETER backend has a kernel for.");
  m.def("interpreter_element_types", [] {
    std::vector<std::string> names;
    for (auto t : runtime::interpreter::supported_element_types()) names.push_back(t.get_type_name());
    return names;
  }, "The element types the INTERPRETER backend's kernels are instantiated for.");
}

void def_backend(py::module_& m) {
  py::class_<runtime::Backend, std::shared_ptr<runtime::Backend>>(m, "Backend")
      .def_static("create", &runtime::Backend::create, py::arg("type"))
      .def_static("get_registered_devices", &runtime::Backend::get_registered_devices)
      .def("compile",
           [](runtime::Backend& b, const std::shared_ptr<Function>& f, const std::string& precision) {
             runtime::Precision p = runtime::precision_from_name(precision);
             py::gil_scoped_release release;
             return b.compile(f, p);
           },
           py::arg("function"), py::arg("precision") = "f32");
  m.def("cpu_features", [] {
    const auto& f = runtime::cpu::cpu_features();
    py::dict d;
    for (const auto& [name, on] : f.flags) d[py::str(name)] = on;
    d["onednn_isa"] = f.onednn_isa;
    d["bf16_path"] = f.bf16_path;
    d["loops"] = runtime::cpu::loops_in_use();
    return d;
  }, "What this CPU has (CPUID flags), oneDNN's effective ISA, the bf16 path and ngraph's "
     "loops: see ng.cpu_features.");
}

void def_computation_base(py::module_& m) {
  py::class_<CallPlan>(m, "ComputationBase", py::dynamic_attr(),
                       "Base of ngraph.runtime.Computation: the C++ call path.")
      .def(py::init<>())
      .def("_bind", &CallPlan::bind, py::arg("executable"), py::arg("layout"), py::arg("single"))
      .def("__call__",
           [](py::object self, py::args args) -> py::object {
             const auto& plan = self.cast<const CallPlan&>();
             if (!plan.exe) throw py::type_error("computation is not compiled");
             py::object result;
             if (plan.try_run(args, result)) return result;
             return self.attr("_call_slow")(*args);
           })
      .def("_run_converted",
           [](const CallPlan& plan, py::args args) -> py::object {
             py::object result;
             if (!plan.try_run(args, result))
               throw py::type_error("internal: converted arguments do not match the parameters");
             return result;
           });
}

void def_executable(py::module_& m) {
  py::class_<runtime::Executable, std::shared_ptr<runtime::Executable>>(m, "Executable")
      .def("call", &call, py::arg("inputs"),
           "Runs on one array per parameter; returns one new array per result.")
      .def("get_parameters",
           [](const runtime::Executable& e) {
             return NodeVector(e.get_parameters().begin(), e.get_parameters().end());
           })
      .def("get_results",
           [](const runtime::Executable& e) {
             return NodeVector(e.get_results().begin(), e.get_results().end());
           })
      .def_property("rng_step", &runtime::Executable::get_rng_step, &runtime::Executable::set_rng_step,
                    "The step the random ops (ng.dropout) of the next call draw with: the number "
                    "of calls so far unless set. Set it back to repeat a call's masks (a resumed "
                    "run sets the step it checkpointed).")
      .def_property_readonly("schedule",
                             [](runtime::Executable& e) {
                               return on_executable(e, [](auto& x) { return x.get_schedule(); });
                             },
                             "The names of the nodes the executable runs, in order.")
      .def_property_readonly("arena_bytes", [](runtime::Executable& e) { return as_cpu(e).get_arena_bytes(); },
                             "Bytes of the planned buffer for intermediates.")
      .def_property_readonly("precision",
                             [](runtime::Executable& e) {
                               const auto& p = as_cpu(e).get_precision();
                               py::dict d;
                               d["requested"] = p.requested;
                               d["runs"] = p.runs;
                               d["casts"] = p.casts;
                               d["fused_casts"] = p.fused_casts;
                               d["bf16_values"] = p.bf16_values;
                               return d;
                             },
                             "Mixed precision: {'requested': 'f32' or 'bf16', 'runs': what runs "
                             "('f32' where nothing was cast), 'casts': bf16 casts run per call, "
                             "'fused_casts': casts that also re-lay out (one reorder), "
                             "'bf16_values': activations and gradients stored in bf16 beyond "
                             "the casts (outputs of products, normalizations, elementwise loops)}.")
      .def_property_readonly("unshared_bytes",
                             [](runtime::Executable& e) { return as_cpu(e).get_unshared_bytes(); },
                             "Bytes the intermediates would need without buffer reuse.")
      .def_property_readonly("shared_bytes", [](runtime::Executable& e) { return as_cpu(e).get_shared_bytes(); },
                             "Bytes per rank of fused allreduce buffers planned into memory the "
                             "node's ranks share (0: none).")
      .def_property_readonly("shared_memory",
                             [](runtime::Executable& e) { return as_cpu(e).get_shared_memory(); },
                             "One description per shared-memory region in use, e.g. '2 ranks on "
                             "1 node (2 per node), 3815936 bytes per rank'; empty before the "
                             "first call and when shared memory cannot be used.")
      .def_property_readonly("node_shared_variables",
                             [](runtime::Executable& e) { return as_cpu(e).get_node_shared_variables(); },
                             "Variables a sharded update keeps once per node (weights and optimizer "
                             "state updated piecewise by the node's ranks; 0: none planned).")
      .def_property_readonly("sharded_update_bytes",
                             [](runtime::Executable& e) { return as_cpu(e).get_sharded_update_bytes(); },
                             "Bytes of the node-shared variables (weights and optimizer state) this "
                             "rank updates in a sharded call: its piece on one node, its share "
                             "(1/ranks) across nodes; 0 before the first call or with none.")
      .def_property_readonly("optimizer_state_bytes",
                             [](runtime::Executable& e) { return as_cpu(e).get_optimizer_state_bytes(); },
                             "Bytes of the sharded update's optimizer state (its variables no other "
                             "step reads: momentum, Adam's moments) this rank holds in memory, "
                             "measured: its private copies and the resident pages of its piece of "
                             "the node's common memory. About 1/ranks across nodes; 0 before the "
                             "first call or with none.")
      .def_property_readonly("last_call_sharded",
                             [](runtime::Executable& e) { return as_cpu(e).last_call_sharded(); },
                             "Whether the last call ran the sharded update (the ranks decide it "
                             "together per call).")
      .def_property_readonly("function",
                             [](runtime::Executable& e) {
                               return on_executable(e, [](auto& x) { return x.get_function(); });
                             },
                             "The optimised function that was compiled.")
      .def("set_profiling", [](runtime::Executable& e, bool on) { as_cpu(e).set_profiling(on); },
           py::arg("on"), "Time every step of every call (reset when switched).")
      .def_property_readonly("step_seconds", [](runtime::Executable& e) { return as_cpu(e).get_step_seconds(); },
                             "Seconds spent in each step (same order as schedule) while profiling.");
}

}  // namespace

void init_runtime(py::module_& m) {
  def_backend_settings(m);
  def_backend(m);
  def_computation_base(m);
  def_executable(m);
}

}  // namespace python
}  // namespace ngraph
