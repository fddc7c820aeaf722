#include "ngraph/ops/get_output_element.hpp"

#include "ngraph/autodiff/adjoints.hpp"

namespace ngraph {
namespace op {

namespace {
Output output_of(const std::shared_ptr<Node>& arg, size_t n) {
  if (!arg) throw NodeValidationFailure("[GetOutputElement] arg is a null node");
  if (n >= arg->get_output_size())
    throw NodeValidationFailure(concat_message("[GetOutputElement] output index ", n,
                                               " is out of range for ", arg->get_name(),
                                               ", which has ", arg->get_output_size(),
                                               " output", arg->get_output_size() == 1 ? "" : "s"));
  return Output(arg, n);
}
}  // namespace

GetOutputElement::GetOutputElement(const std::shared_ptr<Node>& arg, size_t n)
    : Op<GetOutputElement>({output_of(arg, n)}), m_n(n) {
  constructor_validate_and_infer_types();
}

void GetOutputElement::validate_and_infer_types() {
  check_input_count(1);
  const Output& in = input_value(0);
  size_t outputs = in.get_node()->get_output_size();
  if (m_n >= outputs)
    fail(concat_message("n = ", m_n, " is out of range for ", in.get_node()->get_name(),
                        ", which has ", outputs, " output", outputs == 1 ? "" : "s"));
  if (in.get_index() != m_n)
    fail(concat_message("n = ", m_n, " but the input is output ", in.get_index(), " of ",
                        in.get_node()->get_name()));
  set_output_type(0, in.get_element_type(), in.get_shape());
}

void GetOutputElement::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), deltas[0]);
}

std::shared_ptr<Node> get_output_element(const Output& output) {
  const auto& node = output.get_node_shared_ptr();
  if (node->get_output_size() == 1) return node;
  return std::make_shared<GetOutputElement>(node, output.get_index());
}

NodeVector get_output_elements(const std::shared_ptr<Node>& node) {
  NodeVector out;
  for (const auto& o : node->outputs()) out.push_back(get_output_element(o));
  return out;
}

NGRAPH_REGISTER_OP(GetOutputElement);

}  // namespace op
}  // namespace ngraph
