// Multi-output nodes. A node may have several outputs (BatchNormTraining: the normalized value,
// the batch mean and the batch variance); an op reads one of them through an Output (node and
// index). GetOutputElement(arg, n) is nGraph's node for "output n of arg": front ends whose
// nodes stand for a single value (the Python API) use it to name one output. Compiling removes
// it (its users read output n directly), so it never copies.
#pragma once

#include <memory>

#include "ngraph/node.hpp"

namespace ngraph {
namespace op {

// GetOutputElement(arg, n): the value of output n of `arg`. Its input is that output; its
// gradient passes the delta on to it.
class GetOutputElement : public Op<GetOutputElement> {
 public:
  static constexpr const char* type_name = "GetOutputElement";
  bool admits_storage_only_types() const override { return true; }
  GetOutputElement() = default;
  // Throws (naming arg and its output count) when arg has no output n.
  GetOutputElement(const std::shared_ptr<Node>& arg, size_t n);
  void validate_and_infer_types() override;
  void visit_attributes(AttributeVisitor& v) override { v.on("n", m_n); }
  void generate_adjoints(autodiff::Adjoints& adjoints, const OutputVector& deltas) override;
  size_t get_n() const { return m_n; }

 private:
  size_t m_n = 0;
};

// A single-output node holding `output`: its node when that has one output, else a
// GetOutputElement of it (nGraph's get_output_element).
std::shared_ptr<Node> get_output_element(const Output& output);

// GetOutputElements for every output of `node` (the node itself when it has one output).
NodeVector get_output_elements(const std::shared_ptr<Node>& node);

}  // namespace op
}  // namespace ngraph
