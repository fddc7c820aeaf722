// Constant folding without compiling a function: the node's kernel is looked up in the
// KernelRegistry and built over the descriptors the compiler would give it (row-major, unless
// the kernel's layout rule asks for another layout: then Reorders to it and back, as the
// layout pass inserts them), and the kernels are called once, in order, on the constants'
// data. The result is bitwise what the compiled function computed.
#include "ngraph/runtime/cpu/constant_evaluator.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "ngraph/runtime/cpu/cpu_backend.hpp"
#include "ngraph/runtime/cpu/kernel.hpp"
#include "ngraph/runtime/cpu/layout.hpp"
#include "ngraph/runtime/cpu/plan.hpp"
#include "ngraph/runtime/instrument.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {

using Buffer = std::shared_ptr<char>;

// `bytes` of zeros, 64-byte aligned (as the arena and the scratch memory the planner places).
Buffer allocate(size_t bytes) {
  size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  Buffer b(static_cast<char*>(std::aligned_alloc(64, rounded)), std::free);
  if (!b) throw std::bad_alloc();
  std::memset(b.get(), 0, rounded);
  return b;
}

// One kernel call: the node's kernel, its inputs, and its outputs followed by the scratch
// buffers its builder asked for.
struct KernelCall {
  std::shared_ptr<Node> node;
  Kernel kernel;
  std::vector<const void*> in;
  std::vector<void*> out;
  std::vector<Buffer> scratch;
};

KernelCall build(const std::shared_ptr<Node>& node, std::vector<const TensorDesc*> in,
                 std::vector<const TensorDesc*> out, CallState& call_state) {
  const KernelBuilder* builder = KernelRegistry::get().find(node->get_type_name());
  if (!builder)
    throw ngraph_error("[CPU] no kernel for op " + node->get_type_name() + " (node " +
                       node->get_name() + ")");
  KernelContext ctx(*node, std::move(in), std::move(out), call_state, /*overlap=*/false);
  KernelCall call{node, (*builder)(ctx), {}, {}, {}};
  for (size_t bytes : ctx.scratch_bytes()) call.scratch.push_back(allocate(bytes));
  return call;
}

// The layouts the compiler gives the node's values: its inputs as the Constants give them
// (row-major), what its kernel reads and writes (its layout rule's choice, else row-major).
struct Layouts {
  std::vector<TensorDesc> produced, wanted, outputs;
};

Layouts layouts(const Node& node) {
  LayoutContext lc{node, {}, {}, {}, {}, {}, CompileOptions::default_variable_layouts()};
  for (const auto& in : node.input_values()) {
    lc.produced.push_back(TensorDesc::plain(in.get_element_type(), in.get_shape()));
    lc.wanted.push_back(lc.produced.back());
    lc.free.push_back(false);
    lc.any_layout.push_back(false);
  }
  for (size_t o = 0; o < node.get_output_size(); ++o)
    lc.outputs.push_back(TensorDesc::plain(node.get_output_element_type(o), node.get_output_shape(o)));
  if (const LayoutRule* rule = KernelRegistry::get().find_layout(node.get_type_name())) (*rule)(lc);
  return {std::move(lc.produced), std::move(lc.wanted), std::move(lc.outputs)};
}

void check_foldable(const std::shared_ptr<Node>& node) {
  if (!node) throw std::invalid_argument("[CPU] evaluate_constant: the node is null");
  if (!node->is_pure())
    throw std::invalid_argument("[CPU] evaluate_constant: " + node->get_type_name() + " '" +
                                node->get_name() +
                                "' is not pure (its value is not a function of its inputs)");
  for (size_t i = 0; i < node->get_input_size(); ++i) {
    const Node* producer = node->input_value(i).get_node();
    if (!dynamic_cast<const op::Constant*>(producer))
      throw std::invalid_argument("[CPU] evaluate_constant: input " + std::to_string(i) + " of " +
                                  node->get_type_name() + " '" + node->get_name() + "' is " +
                                  producer->get_type_name() + " '" + producer->get_name() +
                                  "', not a Constant");
  }
}

// The kernel calls that compute `node` into `result` (output 0, row-major), in order:
// Reorders of the inputs the kernel reads in another layout (one per value and layout), the
// node's kernel, and a Reorder of its output to row-major when it writes another layout.
class Evaluation {
 public:
  Evaluation(const std::shared_ptr<Node>& node, void* result)
      : m_node(node), m_layouts(layouts(*node)) {
    std::vector<const void*> in;
    for (size_t i = 0; i < node->get_input_size(); ++i) in.push_back(input(i));
    std::vector<void*> out;
    for (size_t o = 0; o < node->get_output_size(); ++o)
      out.push_back(o == 0 && plain_output() ? result : buffer(m_layouts.outputs[o].bytes()));
    std::vector<const TensorDesc*> in_descs, out_descs;
    for (const auto& d : m_layouts.wanted) in_descs.push_back(&d);
    for (const auto& d : m_layouts.outputs) out_descs.push_back(&d);
    add(build(node, in_descs, out_descs, m_call_state), in, out);
    if (!plain_output()) {
      m_plain = TensorDesc::plain(node->get_output_element_type(0), node->get_output_shape(0));
      add(build(std::make_shared<Reorder>(node->output(0)), {&m_layouts.outputs[0]}, {&m_plain},
                m_call_state),
          {out[0]}, {result});
    }
  }

  // Every call in order, with the backend's thread count (the calling thread's is put back);
  // under the timeline or the numerics check as an executable's call.
  void run() {
    int threads = omp_get_max_threads();
    omp_set_num_threads(get_num_threads());
    try {
      unsigned bits = instrumentation();
      if (bits)
        run_probed(bits);
      else
        for (auto& c : m_calls) c.kernel(c.in.data(), c.out.data());
    } catch (...) {
      omp_set_num_threads(threads);
      throw;
    }
    omp_set_num_threads(threads);
  }

 private:
  bool plain_output() const { return m_layouts.outputs.at(0).is_plain(); }

  void* buffer(size_t bytes) {
    m_buffers.push_back(allocate(bytes));
    return m_buffers.back().get();
  }

  void add(KernelCall call, std::vector<const void*> in, std::vector<void*> out) {
    for (const auto& s : call.scratch) out.push_back(s.get());
    call.in = std::move(in);
    call.out = std::move(out);
    m_calls.push_back(std::move(call));
  }

  // Input i as the kernel reads it: the Constant's data, or a Reorder of it.
  const void* input(size_t i) {
    Output value = m_node->input_value(i);
    const void* data = static_cast<const op::Constant*>(value.get_node())->get_data_ptr();
    const TensorDesc& want = m_layouts.wanted[i];
    if (m_layouts.produced[i].same_layout(want)) return data;
    for (size_t j = 0; j < i; ++j)
      if (m_node->input_value(j) == value && m_layouts.wanted[j].same_layout(want))
        return m_reordered[j];
    void* to = buffer(want.bytes());
    add(build(std::make_shared<Reorder>(value), {&m_layouts.produced[i]}, {&want}, m_call_state),
        {data}, {to});
    m_reordered.resize(i + 1, nullptr);
    m_reordered[i] = to;
    return to;
  }

  void run_probed(unsigned bits) {
    CallProbe probe;
    probe.begin(bits, "graph 'unnamed'", -1, 1);
    for (auto& c : m_calls) {
      auto step = make_probe(*c.node);
      int64_t t0 = now_ns();
      c.kernel(c.in.data(), c.out.data());
      probe.step_done(step, t0, c.out.data());
    }
    probe.end();
  }

  std::shared_ptr<Node> m_node;
  Layouts m_layouts;
  TensorDesc m_plain;
  CallState m_call_state;  // kernels keep a pointer to it
  std::vector<Buffer> m_buffers;
  std::vector<void*> m_reordered;
  std::vector<KernelCall> m_calls;
};

}  // namespace

std::shared_ptr<op::Constant> evaluate_constant(const std::shared_ptr<Node>& node) {
  check_foldable(node);
  // The value is written straight into the new constant's (aligned, unshared) buffer.
  auto c = std::make_shared<op::Constant>(node->get_element_type(), node->get_shape(),
                                          std::vector<int64_t>{0});
  Evaluation evaluation(node, const_cast<void*>(c->get_data_ptr()));
  evaluation.run();
  return c;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
