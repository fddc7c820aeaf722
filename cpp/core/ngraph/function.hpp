// A function: a graph with parameters (inputs) and results (outputs).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ngraph/node.hpp"
#include "ngraph/ops/parameter.hpp"

namespace ngraph {

using ParameterVector = std::vector<std::shared_ptr<op::Parameter>>;
using ResultVector = std::vector<std::shared_ptr<op::Result>>;

// Every node that `roots` depend on, inputs before users; deterministic (depth-first, inputs
// in order).
NodeVector topological_sort(const NodeVector& roots);

class Function {
 public:
  // Each result that is not already a Result node is wrapped in one. Every Parameter the
  // results depend on must be listed in `parameters` (unused parameters are allowed).
  Function(const OutputVector& results, const ParameterVector& parameters,
           const std::string& name = "");
  Function(const NodeVector& results, const ParameterVector& parameters,
           const std::string& name = "");
  // With sinks: nodes without outputs that must run (variable updates: op::Assign; op::Send).
  // At most one Assign per variable.
  Function(const OutputVector& results, const NodeVector& sinks, const ParameterVector& parameters,
           const std::string& name = "");

  const ParameterVector& get_parameters() const { return m_parameters; }
  const ResultVector& get_results() const { return m_results; }
  const NodeVector& get_sinks() const { return m_sinks; }
  const std::string& get_name() const { return m_name; }
  size_t get_parameter_index(const op::Parameter* p) const;  // throws if absent

  // Parameters first (in order), then everything the results and sinks need.
  NodeVector get_ordered_ops() const;
  // A deep copy: new nodes, same ops, attributes, names and constant data.
  std::shared_ptr<Function> clone() const;
  // One line per node, in order.
  std::string to_string() const;
  // Re-checks that the results only depend on listed parameters (after passes).
  void validate() const;

 private:
  std::string m_name;
  ParameterVector m_parameters;
  ResultVector m_results;
  NodeVector m_sinks;
};

// Redirects every use of a key inside `f` to its value (chains are followed). The values must
// have the same element type and shape as their keys.
void replace_outputs(const Function& f, const std::map<Output, Output>& replacements);

}  // namespace ngraph
