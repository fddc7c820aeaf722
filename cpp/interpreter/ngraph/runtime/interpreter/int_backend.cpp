#include "ngraph/ops/collective.hpp"
#include "ngraph/runtime/interpreter/int_backend.hpp"

#include <algorithm>
#include <cstring>

#include "ngraph/low_precision.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/pass/mixed_precision.hpp"

namespace ngraph {
namespace runtime {
namespace interpreter {

namespace {

// The function's ops in a topological order (the same on every rank for the same graph), the
// Sends first: a Send starts at once and completes at the end of the call, so ranks that
// exchange values in a ring never all wait in a Recv before sending.
NodeVector run_order(const Function& f) {
  NodeVector roots(f.get_parameters().begin(), f.get_parameters().end());
  for (const auto& sink : f.get_sinks())
    if (sink->get_type_name() == "Send") roots.push_back(sink);
  roots.insert(roots.end(), f.get_results().begin(), f.get_results().end());
  roots.insert(roots.end(), f.get_sinks().begin(), f.get_sinks().end());
  return topological_sort(roots);
}

// The kernel of an op reading bf16 matrix operands (Node::bf16_inputs): its f32 kernel (the
// op's output is f32) run on the operands widened to f32, which is exact.
std::shared_ptr<const Kernel> widening_bf16_operands(const Node& node, const Kernel& kernel) {
  std::vector<std::pair<size_t, size_t>> wide;  // (input, elements)
  for (size_t i : node.bf16_inputs())
    if (node.get_input_element_type(i) == element::bf16) wide.push_back({i, shape_size(node.get_input_shape(i))});
  if (wide.empty()) return nullptr;
  return std::make_shared<const Kernel>([wide, kernel](KernelCall& c) {
    std::vector<std::vector<float>> values(wide.size());
    KernelCall widened{c.node, c.in, c.out, c.call};
    for (size_t w = 0; w < wide.size(); ++w) {
      const auto* from = static_cast<const bfloat16*>(c.in[wide[w].first]);
      values[w].resize(wide[w].second);
      for (size_t e = 0; e < wide[w].second; ++e) values[w][e] = from[e].to_float();
      widened.in[wide[w].first] = values[w].data();
    }
    kernel(widened);
  });
}

}  // namespace

INTExecutable::INTExecutable(std::shared_ptr<Function> function, Precision precision)
    : m_function(function->clone()) {
  op::use_private_communicators(*m_function);  // collective when the graph has collectives
  if (precision == Precision::bf16)
    pass::insert_bf16_casts(
        *m_function, [](const Node&) { return true; },
        [](const Output& v) { return std::make_shared<op::Convert>(v, element::bf16); });
  m_distributed.set_where("graph '" +
                          (m_function->get_name().empty() ? std::string("unnamed") : m_function->get_name()) + "'");
  m_parameters = m_function->get_parameters();
  m_results = m_function->get_results();
  for (const auto& node : run_order(*m_function)) {
    const std::string& type = node->get_type_name();
    if (type == "Parameter") {
      auto* p = static_cast<op::Parameter*>(node.get());
      m_values[node->output(0)] = {Source::input, m_function->get_parameter_index(p)};
    } else if (type == "Constant") {
      m_values[node->output(0)] = {Source::constant, 0,
                                   static_cast<op::Constant&>(*node).get_data_ptr()};
    } else if (type == "Variable") {
      auto* state = static_cast<op::Variable&>(*node).get_state().get();
      m_values[node->output(0)] = {Source::variable, 0, nullptr, state};
      m_variables.push_back(state);
    } else if (type == "Result") {
      m_values[node->output(0)] = m_values.at(node->input_value(0));
    } else if (type == "Assign") {
      m_updates.push_back(std::static_pointer_cast<op::Assign>(node));
      m_variables.push_back(m_updates.back()->get_state().get());
    } else {
      const Kernel* kernel = KernelRegistry::get().find(type);
      if (!kernel)
        throw ngraph_error("[INTERPRETER] no kernel for op " + type + " (node " +
                           node->get_name() + ")");
      Step step{node, kernel, widening_bf16_operands(*node, *kernel), node->input_values(), {}};
      if (step.own) step.kernel = step.own.get();
      for (size_t o = 0; o < node->get_output_size(); ++o) {
        step.outputs.push_back(m_buffers.size());
        m_values[node->output(o)] = {Source::computed, m_buffers.size()};
        m_buffers.emplace_back(shape_size(node->get_output_shape(o)) *
                               node->get_output_element_type(o).size());
      }
      m_steps.push_back(std::move(step));
      // The collectives each communicator runs, in order, for the check that every rank
      // runs the same ones (point-to-point ops have no signature: they pair up per rank).
      if (auto* coll = dynamic_cast<op::Collective*>(node.get()))
        m_distributed.add(coll->get_communicator(), coll->collective_signature(), node->get_name());
    }
  }
}

const void* INTExecutable::value_ptr(const Output& v, const void* const* inputs) const {
  const Value& value = m_values.at(v);
  switch (value.source) {
    case Source::input: return inputs[value.index];
    case Source::constant: return value.data;
    case Source::variable: return value.variable->read_buffer();
    case Source::computed: return m_buffers[value.index].data();
  }
  return nullptr;
}

void INTExecutable::call_raw(void* const* outputs, const void* const* inputs) {
  std::lock_guard<std::mutex> lock(m_mutex);
  auto started = m_distributed.begin();
  // The kernels read variables row-major: one another backend keeps in a layout of its own
  // is laid out plainly again (the value is unchanged).
  for (auto* state : m_variables) state->set_layout(nullptr);
  m_call.clear();
  m_call.rng_step = next_rng_step();
  unsigned bits = instrumentation();
  try {
    if (bits) {
      run_probed(bits, inputs);
    } else {
      for (auto& step : m_steps) {
        KernelCall call{*step.node, {}, {}, m_call};
        for (const auto& in : step.inputs) call.in.push_back(value_ptr(in, inputs));
        for (size_t slot : step.outputs) call.out.push_back(m_buffers[slot].data());
        (*step.kernel)(call);
      }
    }
  } catch (...) {
    distributed::DistributedCall::settle({[&] { m_call.finish(); }});  // started sends complete
    throw;
  }
  m_call.finish();
  // A NaN or Inf found by the numerics check: raised after every collective of the call
  // completed, before any result or variable is written.
  if (bits) m_probe.end();
  for (size_t r = 0; r < m_results.size(); ++r) {
    size_t bytes = shape_size(m_results[r]->get_shape()) * m_results[r]->get_element_type().size();
    if (bytes) std::memcpy(outputs[r], value_ptr(m_results[r]->input_value(0), inputs), bytes);
  }
  // Updates last: every read in the call saw the values from before it, and a call that
  // failed changed no variable. The new values are copied out first: one update may read the
  // variable another one writes.
  std::vector<std::vector<char>> updated;
  for (const auto& assign : m_updates) {
    auto* value = static_cast<const char*>(value_ptr(assign->input_value(0), inputs));
    updated.emplace_back(value, value + assign->get_state()->byte_size());
  }
  for (size_t u = 0; u < m_updates.size(); ++u) m_updates[u]->get_state()->set(updated[u].data());
}

void INTExecutable::run_probed(unsigned bits, const void* const* inputs) {
  if (m_step_probes.size() != m_steps.size())
    for (const auto& step : m_steps) m_step_probes.push_back(make_probe(*step.node));
  m_probe.begin(bits, m_distributed.where(), m_distributed.rank(), m_distributed.size());
  for (size_t i = 0; i < m_parameters.size(); ++i)
    m_probe.check_value("argument " + std::to_string(i) + " (" + m_parameters[i]->get_name() + ")",
                        m_parameters[i]->get_element_type(), m_parameters[i]->get_shape(), inputs[i]);
  for (const auto& [output, value] : m_values)
    if (value.source == Source::variable)
      m_probe.check_value("variable '" + output.get_node()->get_name() + "'",
                          output.get_element_type(), output.get_shape(), value_ptr(output, inputs));
  for (size_t s = 0; s < m_steps.size(); ++s) {
    auto& step = m_steps[s];
    KernelCall call{*step.node, {}, {}, m_call};
    for (const auto& in : step.inputs) call.in.push_back(value_ptr(in, inputs));
    for (size_t slot : step.outputs) call.out.push_back(m_buffers[slot].data());
    int64_t t0 = now_ns();
    (*step.kernel)(call);
    m_probe.step_done(m_step_probes[s], t0, call.out.data());
  }
}

std::vector<std::string> INTExecutable::get_schedule() const {
  std::vector<std::string> names;
  for (const auto& step : m_steps) names.push_back(step.node->get_name());
  return names;
}

std::shared_ptr<Executable> INTBackend::compile(std::shared_ptr<Function> function) {
  return compile(std::move(function), default_precision());
}

std::shared_ptr<Executable> INTBackend::compile(std::shared_ptr<Function> function, Precision precision) {
  if (!function) throw std::invalid_argument("[INTERPRETER] compile: function is null");
  return std::make_shared<INTExecutable>(std::move(function), precision);
}

namespace {
const bool registered = [] {
  Backend::register_backend("INTERPRETER", [] { return std::make_shared<INTBackend>(); });
  return true;
}();
}  // namespace

}  // namespace interpreter
}  // namespace runtime
}  // namespace ngraph
