// Backends compile functions into executables (nGraph's runtime API).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ngraph/function.hpp"
#include "ngraph/runtime/tensor.hpp"

namespace ngraph {
namespace runtime {

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs the function: checks that the tensors match the parameters and results in count,
  // element type and shape (errors name the parameter), then calls call_raw. Returns true.
  bool call(const std::vector<std::shared_ptr<Tensor>>& outputs,
            const std::vector<std::shared_ptr<Tensor>>& inputs);
  // The unchecked fast path: one pointer per result and per parameter, in order, each to
  // row-major data of the right type and shape.
  virtual void call_raw(void* const* outputs, const void* const* inputs) = 0;

  const ParameterVector& get_parameters() const { return m_parameters; }
  const ResultVector& get_results() const { return m_results; }

 protected:
  ParameterVector m_parameters;
  ResultVector m_results;
};

class Backend {
 public:
  using Factory = std::function<std::shared_ptr<Backend>()>;
  virtual ~Backend() = default;

  // "CPU" (the name is case-sensitive); throws listing the registered backends.
  static std::shared_ptr<Backend> create(const std::string& type);
  static std::vector<std::string> get_registered_devices();
  static void register_backend(const std::string& type, Factory factory);

  std::shared_ptr<Tensor> create_tensor(element::Type type, const Shape& shape);
  std::shared_ptr<Tensor> create_tensor(element::Type type, const Shape& shape, void* memory);
  virtual std::shared_ptr<Executable> compile(std::shared_ptr<Function> function) = 0;
};

}  // namespace runtime
}  // namespace ngraph
