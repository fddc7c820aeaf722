#include "ngraph/runtime/instrument.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "ngraph/ops/collective.hpp"
#include "ngraph/settings.hpp"

namespace ngraph {
namespace runtime {

namespace {
unsigned initial_bits() { return settings::flag("NGRAPH_CHECK_NUMERICS") ? check_numerics_bit : 0u; }

struct Timeline {
  std::mutex mutex;
  std::vector<TraceEvent> events;
  std::unordered_map<std::thread::id, int> threads;
};
Timeline& timeline() {
  static Timeline t;
  return t;
}

void set_bit(unsigned bit, bool on) {
  if (on)
    detail::g_instrumentation.fetch_or(bit);
  else
    detail::g_instrumentation.fetch_and(~bit);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string shape_list(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// "[1, 2]" for flat index 5 of shape {3, 4}.
std::string coordinate_of(const Shape& shape, int64_t index) {
  std::vector<size_t> c(shape.size());
  auto rest = static_cast<size_t>(index);
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = shape[i] ? rest % shape[i] : 0;
    rest = shape[i] ? rest / shape[i] : 0;
  }
  std::string out = "[";
  for (size_t i = 0; i < c.size(); ++i) out += (i ? ", " : "") + std::to_string(c[i]);
  return out + "]";
}

template <typename T>
int64_t first_bad(const T* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return static_cast<int64_t>(i);
  return -1;
}
}  // namespace

namespace detail {
std::atomic<unsigned> g_instrumentation{initial_bits()};
}

void set_check_numerics(bool on) { set_bit(check_numerics_bit, on); }
bool get_check_numerics() { return instrumentation() & check_numerics_bit; }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool timeline_start() {
  auto& t = timeline();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (instrumentation() & timeline_bit) return false;
  t.events.clear();
  set_bit(timeline_bit, true);
  return true;
}

std::vector<TraceEvent> timeline_stop() {
  auto& t = timeline();
  std::lock_guard<std::mutex> lock(t.mutex);
  set_bit(timeline_bit, false);
  return std::move(t.events);
}

bool timeline_active() { return instrumentation() & timeline_bit; }

void timeline_record(TraceEvent event) {
  auto& t = timeline();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (instrumentation() & timeline_bit) t.events.push_back(std::move(event));
}

int timeline_thread_id() {
  thread_local int id = -1;
  if (id < 0) {
    auto& t = timeline();
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.threads.emplace(std::this_thread::get_id(), static_cast<int>(t.threads.size()));
    id = it.first->second;
  }
  return id;
}

std::shared_ptr<const StepProbe> make_probe(const Node& node) {
  auto probe = std::make_shared<StepProbe>();
  StepProbe& p = *probe;
  p.name = node.get_name();
  p.type = node.get_type_name();
  bool collective = dynamic_cast<const op::Collective*>(&node) != nullptr;
  bool fused = p.type.rfind("CPU", 0) == 0;
  p.category = collective ? "collective" : fused ? "fused" : "kernel";
  if (fused && !collective) {
    // "program='Log,Add'" (a fused elementwise chain) reads better as "Log,Add".
    p.contains = node.attributes_string();
    const std::string program = "program='";
    if (p.contains.rfind(program, 0) == 0 && p.contains.back() == '\'')
      p.contains = p.contains.substr(program.size(), p.contains.size() - program.size() - 1);
  }
  std::ostringstream a;
  size_t in_bytes = 0, out_bytes = 0;
  a << "{\"op\":" << json_string(p.type) << ",\"inputs\":[";
  for (size_t i = 0; i < node.get_input_size(); ++i) {
    const auto& t = node.get_input_element_type(i);
    const auto& s = node.get_input_shape(i);
    in_bytes += shape_size(s) * t.size();
    a << (i ? "," : "") << "{\"shape\":" << shape_list(s) << ",\"dtype\":" << json_string(t.get_type_name()) << "}";
  }
  a << "],\"outputs\":[";
  for (size_t o = 0; o < node.get_output_size(); ++o) {
    const auto& t = node.get_output_element_type(o);
    const auto& s = node.get_output_shape(o);
    out_bytes += shape_size(s) * t.size();
    p.outputs.emplace_back(t, s);
    a << (o ? "," : "") << "{\"shape\":" << shape_list(s) << ",\"dtype\":" << json_string(t.get_type_name()) << "}";
  }
  a << "],\"input_bytes\":" << in_bytes << ",\"output_bytes\":" << out_bytes;
  if (!p.contains.empty()) a << ",\"fused\":" << json_string(p.contains);
  if (collective) {
    auto* c = dynamic_cast<const op::Collective*>(&node);
    a << ",\"bytes\":" << in_bytes << ",\"signature\":" << json_string(c->collective_signature());
  }
  a << "}";
  p.args = a.str();
  return probe;
}

int64_t first_non_finite(element::Type type, const void* data, size_t count) {
  if (type == element::f32) return first_bad(static_cast<const float*>(data), count);
  if (type == element::f64) return first_bad(static_cast<const double*>(data), count);
  return -1;
}

std::string numerics_message(const std::string& what, element::Type type, const Shape& shape,
                             const void* data, int64_t index, const std::string& where, int rank,
                             int size) {
  double v = type == element::f32 ? static_cast<const float*>(data)[index]
                                  : static_cast<const double*>(data)[index];
  std::string kind = std::isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf";
  std::string out = "[NumericsError] " + kind + " in " + what + " (" + type.get_type_name() +
                    to_braces(shape) + ", first at index " + coordinate_of(shape, index) + ")";
  if (!where.empty()) out += " in " + where;
  if (rank >= 0) out += " on rank " + std::to_string(rank) + " of " + std::to_string(size);
  return out;
}

void CallProbe::begin(unsigned bits, const std::string& where, int rank, int size) {
  m_bits = bits;
  m_where = where;
  m_rank = rank;
  m_size = size;
  m_first.clear();
  m_start = timing() ? now_ns() : 0;
}

void CallProbe::check_value(const std::string& what, element::Type type, const Shape& shape,
                            const void* data) {
  if (!checking() || found()) return;
  int64_t bad = first_non_finite(type, data, shape_size(shape));
  if (bad >= 0) m_first = numerics_message(what, type, shape, data, bad, m_where, m_rank, m_size);
}

void CallProbe::check_outputs(const StepProbe& p, void* const* outputs) {
  if (!checking() || found()) return;
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    const auto& [type, shape] = p.outputs[o];
    int64_t bad = first_non_finite(type, outputs[o], shape_size(shape));
    if (bad < 0) continue;
    std::string what = "output " + std::to_string(o) + " of " + p.type + " '" + p.name + "'";
    if (!p.contains.empty()) what += " (a fused kernel of " + p.contains + ")";
    if (p.category == "collective")
      what += " (a collective whose inputs on this rank were finite: the value came from another "
              "rank, whose own check names the op that made it)";
    m_first = numerics_message(what, type, shape, outputs[o], bad, m_where, m_rank, m_size);
    return;
  }
}

void CallProbe::step_done(const std::shared_ptr<const StepProbe>& p, int64_t t0,
                          void* const* outputs, bool check, bool wait) {
  if (timing()) {
    TraceEvent e;
    e.step = p;
    e.wait = wait;
    e.start_ns = t0;
    e.dur_ns = now_ns() - t0;
    e.tid = timeline_thread_id();
    timeline_record(std::move(e));
  }
  if (check) check_outputs(*p, outputs);
}

void CallProbe::end() {
  if (timing()) {
    int64_t t1 = now_ns();
    TraceEvent e;
    e.call = m_where;
    e.start_ns = m_start;
    e.dur_ns = t1 - m_start;
    e.tid = timeline_thread_id();
    timeline_record(std::move(e));
  }
  if (found()) {
    std::string message = std::move(m_first);
    m_first.clear();
    throw NumericsError(message);
  }
}

}  // namespace runtime
}  // namespace ngraph
