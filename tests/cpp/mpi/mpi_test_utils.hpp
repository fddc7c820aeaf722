// Helpers for the MPI suites: the world communicator every test shares (created in main),
// host values, compiling and running functions on the CPU backend, and per-rank test data.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/function.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/backend.hpp"

namespace ngraph {
namespace mpitest {

// A duplicate of MPI_COMM_WORLD made by main after MPI_Init_thread; freed before MPI_Finalize.
std::shared_ptr<distributed::MPICommunicator> world();
int rank();
int size();

// Row-major host data with its type and shape.
struct Host {
  element::Type type;
  Shape shape;
  std::vector<char> bytes;
};

template <typename T>
Host host(const Shape& shape, const std::vector<T>& values) {
  if (values.size() != shape_size(shape))
    throw std::logic_error("host value: " + std::to_string(values.size()) + " values for shape " +
                           to_braces(shape));
  Host h{element::from<T>(), shape, std::vector<char>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(h.bytes.data(), values.data(), h.bytes.size());
  return h;
}

template <typename T>
std::vector<T> values_of(const Host& h) {
  if (h.type != element::from<T>())
    throw std::logic_error("host value holds " + h.type.get_type_name() + ", read as " +
                           element::from<T>().get_type_name());
  std::vector<T> out(h.bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), h.bytes.data(), h.bytes.size());
  return out;
}

std::shared_ptr<runtime::Executable> compile(const std::shared_ptr<Function>& f);
// Runs a compiled function once: one Host per parameter in, one per result out.
std::vector<Host> run(const std::shared_ptr<runtime::Executable>& exe,
                      const std::vector<Host>& inputs);
inline std::vector<Host> run(const std::shared_ptr<Function>& f, const std::vector<Host>& inputs) {
  return run(compile(f), inputs);
}

// Exact for integers; relative + absolute tolerance for floating point.
template <typename T>
::testing::AssertionResult all_close(const std::vector<T>& actual, const std::vector<T>& expected,
                                     double rtol = 1e-5, double atol = 1e-6) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "rank " << rank() << ": size " << actual.size() << " != expected " << expected.size();
  for (size_t i = 0; i < actual.size(); ++i) {
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      ok = std::fabs(static_cast<double>(actual[i]) - static_cast<double>(expected[i])) <=
           atol + rtol * std::fabs(static_cast<double>(expected[i]));
    } else {
      ok = actual[i] == expected[i];
    }
    if (!ok)
      return ::testing::AssertionFailure() << "rank " << rank() << ", element " << i << ": got "
                                           << +actual[i] << ", expected " << +expected[i];
  }
  return ::testing::AssertionSuccess();
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// "rank 1" or "ranks 0,2": how disagreement messages list a group of ranks.
inline std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

// Row-major strides helpers for references of gathers and scatters.
inline std::vector<size_t> unravel(size_t index, const Shape& shape) {
  std::vector<size_t> c(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    c[d] = index % shape[d];
    index /= shape[d];
  }
  return c;
}
inline size_t ravel(const std::vector<size_t>& c, const Shape& shape) {
  size_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + c[d];
  return i;
}

}  // namespace mpitest
}  // namespace ngraph
