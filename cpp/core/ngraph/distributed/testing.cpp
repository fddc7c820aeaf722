#include "ngraph/distributed/testing.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <stdexcept>

namespace ngraph {
namespace distributed {
namespace testing {

namespace {

constexpr std::array<const char*, 5> kNames = {"topology_barrier", "topology_split", "shared_object_made",
                                               "sharded_update_gather", "sharded_update_reduce_scatter"};

struct Hooks {
  std::mutex mutex;
  std::array<std::function<void()>, kNames.size()> at;
  std::atomic<bool> any{false};  // so that a point without a test costs one load
};

Hooks& hooks() {
  static Hooks* h = new Hooks;  // never destroyed: a point may be passed at exit
  return *h;
}

}  // namespace

void set_hook(Point point, std::function<void()> hook) {
  Hooks& h = hooks();
  std::lock_guard<std::mutex> lock(h.mutex);
  h.at[static_cast<size_t>(point)] = std::move(hook);
  bool any = false;
  for (const auto& f : h.at) any = any || static_cast<bool>(f);
  h.any = any;
}

void clear_hooks() {
  Hooks& h = hooks();
  std::lock_guard<std::mutex> lock(h.mutex);
  for (auto& f : h.at) f = nullptr;
  h.any = false;
}

void at(Point point) {
  Hooks& h = hooks();
  if (!h.any) return;
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(h.mutex);
    hook = h.at[static_cast<size_t>(point)];
  }
  if (hook) hook();
}

Point point_named(const std::string& name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (name == kNames[i]) return static_cast<Point>(i);
  std::string known;
  for (const char* n : kNames) known += std::string(known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("[testing] no fault-injection point '" + name + "' (" + known + ")");
}

}  // namespace testing
}  // namespace distributed
}  // namespace ngraph
