#include "ngraph/runtime/backend.hpp"

#include "ngraph/settings.hpp"

#include <map>
#include <mutex>
#include <stdexcept>

namespace ngraph {
namespace runtime {

namespace {
std::map<std::string, Backend::Factory>& registry() {
  static std::map<std::string, Backend::Factory> r;
  return r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

void check_tensor(const char* what, size_t i, const std::string& name, element::Type type,
                  const Shape& shape, const Tensor& t) {
  if (t.get_element_type() != type || t.get_shape() != shape)
    throw std::invalid_argument(std::string("[Executable] ") + what + " " + std::to_string(i) +
                                " (" + name + ") expects " + type.get_type_name() +
                                to_braces(shape) + ", got " +
                                t.get_element_type().get_type_name() + to_braces(t.get_shape()));
}
}  // namespace

bool Executable::call(const std::vector<std::shared_ptr<Tensor>>& outputs,
                      const std::vector<std::shared_ptr<Tensor>>& inputs) {
  if (inputs.size() != m_parameters.size())
    throw std::invalid_argument("[Executable] expects " + std::to_string(m_parameters.size()) +
                                " input tensors, got " + std::to_string(inputs.size()));
  if (outputs.size() != m_results.size())
    throw std::invalid_argument("[Executable] expects " + std::to_string(m_results.size()) +
                                " output tensors, got " + std::to_string(outputs.size()));
  std::vector<const void*> in(inputs.size());
  std::vector<void*> out(outputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) throw std::invalid_argument("[Executable] input " + std::to_string(i) + " is null");
    const auto& p = m_parameters[i];
    check_tensor("input", i, p->get_name(), p->get_element_type(), p->get_shape(), *inputs[i]);
    in[i] = inputs[i]->data();
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) throw std::invalid_argument("[Executable] output " + std::to_string(i) + " is null");
    const auto& r = m_results[i];
    check_tensor("output", i, r->get_name(), r->get_element_type(), r->get_shape(), *outputs[i]);
    out[i] = outputs[i]->data();
  }
  call_raw(out.data(), in.data());
  return true;
}

Precision precision_from_name(const std::string& name, const std::string& what) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  throw std::invalid_argument(what + " must be \"f32\" or \"bf16\", got \"" + name + "\"");
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "f32"; }

Precision default_precision() {
  return precision_from_name(settings::text("NGRAPH_PRECISION"), "NGRAPH_PRECISION");
}

std::shared_ptr<Executable> Backend::compile(std::shared_ptr<Function> function, Precision precision) {
  if (precision != Precision::f32)
    throw std::invalid_argument("[" + name() + "] compile: precision " + precision_name(precision) +
                                " is not supported by this backend (use f32)");
  return compile(std::move(function));
}

std::shared_ptr<Backend> Backend::create(const std::string& type) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(type);
  if (it == registry().end()) {
    std::string known;
    for (auto& e : registry()) known += (known.empty() ? "" : ", ") + e.first;
    throw std::invalid_argument("[Backend] unknown backend '" + type + "' (registered: " +
                                (known.empty() ? "none" : known) + ")");
  }
  return it->second();
}

std::vector<std::string> Backend::get_registered_devices() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> out;
  for (auto& e : registry()) out.push_back(e.first);
  return out;
}

void Backend::register_backend(const std::string& type, Factory factory) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[type] = std::move(factory);
}

std::shared_ptr<Tensor> Backend::create_tensor(element::Type type, const Shape& shape) {
  return std::make_shared<Tensor>(type, shape);
}

std::shared_ptr<Tensor> Backend::create_tensor(element::Type type, const Shape& shape,
                                               void* memory) {
  return std::make_shared<Tensor>(type, shape, memory);
}

}  // namespace runtime
}  // namespace ngraph
