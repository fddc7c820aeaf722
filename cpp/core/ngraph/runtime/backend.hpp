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

  // The step of the random ops' generator (ngraph/random.hpp) the next call draws with: the
  // number of calls started so far, unless set. A run resumed from a checkpoint sets it back
  // to draw the same dropout masks as the run it continues.
  uint64_t get_rng_step() const { return m_rng_step; }
  void set_rng_step(uint64_t step) { m_rng_step = step; }

 protected:
  // For call_raw: the step this call draws with; the next call draws with the one after.
  uint64_t next_rng_step() { return m_rng_step++; }
  ParameterVector m_parameters;
  ResultVector m_results;

 private:
  uint64_t m_rng_step = 0;
};

// The precision a function is compiled in. f32: as built. bf16 (mixed precision): matrix
// products and convolutions read their f32 operands rounded to bf16 and accumulate in f32;
// everything else (and every variable) stays f32. See docs/training.md.
enum class Precision { f32, bf16 };
// "f32" or "bf16"; another name throws std::invalid_argument naming `what` and the choices.
Precision precision_from_name(const std::string& name, const std::string& what = "precision");
const char* precision_name(Precision p);
// NGRAPH_PRECISION (default f32).
Precision default_precision();

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
  // Compiles in default_precision() (NGRAPH_PRECISION).
  virtual std::shared_ptr<Executable> compile(std::shared_ptr<Function> function) = 0;
  // Compiles in `precision`. The default runs f32 as compile(function) and refuses bf16
  // naming the backend; backends that compile bf16 override it.
  virtual std::shared_ptr<Executable> compile(std::shared_ptr<Function> function, Precision precision);
  virtual std::string name() const { return "backend"; }
};

}  // namespace runtime
}  // namespace ngraph
