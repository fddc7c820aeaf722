// Shared declarations of the binding files.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "ngraph/element_type.hpp"

namespace ngraph {
namespace python {

void init_graph(pybind11::module_& m);
void init_runtime(pybind11::module_& m);
void init_training(pybind11::module_& m);
void init_distributed(pybind11::module_& m);

// NumPy dtype <-> element type; unsupported dtypes raise TypeError naming the supported ones.
element::Type element_type_of(const pybind11::dtype& dtype, const char* what);
pybind11::dtype dtype_of(element::Type type);

}  // namespace python
}  // namespace ngraph
