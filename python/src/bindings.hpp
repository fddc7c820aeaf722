// Shared declarations of the binding files.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "ngraph/element_type.hpp"
#include "ngraph/node.hpp"

namespace ngraph {
namespace python {

void init_graph(pybind11::module_& m);
void init_runtime(pybind11::module_& m);
void init_training(pybind11::module_& m);
void init_distributed(pybind11::module_& m);
void init_serializer(pybind11::module_& m);
void init_profiling(pybind11::module_& m);
// The settings registry; the test-only fault injection (the submodule _ngraph._testing).
void init_settings(pybind11::module_& m);
void init_testing(pybind11::module_& m);

// NumPy dtype <-> element type; unsupported dtypes raise TypeError naming the supported ones.
element::Type element_type_of(const pybind11::dtype& dtype, const char* what);
pybind11::dtype dtype_of(element::Type type);
// The dtypes element_type_of accepts, as the end of an error message.
std::string supported_dtypes();

// The value a Python node stands for: its one output. A node with several outputs (or none)
// raises TypeError naming `what`, the node and its output count, and how to pick an output
// (node[i], ng.get_output_element); None raises TypeError naming `what`.
Output value_of(const std::shared_ptr<Node>& node, const std::string& what);
// The single-output node Python shows for `value`: its node, or a GetOutputElement of it.
std::shared_ptr<Node> node_of(const Output& value);

}  // namespace python
}  // namespace ngraph
