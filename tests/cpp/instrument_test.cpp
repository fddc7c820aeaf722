// The instrumentation both backends share: the numerics check names the first op, argument or
// variable holding NaN or Inf; the timeline records one event per kernel inside its call.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/backend.hpp"
#include "ngraph/runtime/instrument.hpp"

using namespace ngraph;

namespace {

struct CheckOn {
  CheckOn() { runtime::set_check_numerics(true); }
  ~CheckOn() { runtime::set_check_numerics(false); }
};

std::string run_and_catch(const std::string& backend, const std::shared_ptr<Function>& f,
                          std::vector<float> x) {
  auto exe = runtime::Backend::create(backend)->compile(f);
  std::vector<float> out(x.size());
  void* outs[] = {out.data()};
  const void* ins[] = {x.data()};
  try {
    exe->call_raw(outs, ins);
  } catch (const runtime::NumericsError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Instrument, FirstNonFinite) {
  float f[] = {1, 2, std::numeric_limits<float>::quiet_NaN(), INFINITY};
  EXPECT_EQ(runtime::first_non_finite(element::f32, f, 4), 2);
  EXPECT_EQ(runtime::first_non_finite(element::f32, f, 2), -1);
  double d[] = {0, -INFINITY};
  EXPECT_EQ(runtime::first_non_finite(element::f64, d, 2), 1);
  int32_t i[] = {1, 2};
  EXPECT_EQ(runtime::first_non_finite(element::i32, i, 2), -1);
}

TEST(Instrument, NumericsErrorNamesTheOpOnBothBackends) {
  CheckOn on;
  for (std::string backend : {"CPU", "INTERPRETER"}) {
    auto x = std::make_shared<op::Parameter>(element::f32, Shape{2, 2});
    x->set_friendly_name("x");
    auto log = std::make_shared<op::Log>(x);
    log->set_friendly_name("the_log");
    auto f = std::make_shared<Function>(OutputVector{log}, ParameterVector{x}, "g");
    std::string msg = run_and_catch(backend, f, {1, 2, 3, -1});
    EXPECT_EQ(msg, "[NumericsError] NaN in output 0 of Log 'the_log' (f32{2,2}, first at index "
                   "[1, 1]) in graph 'g'")
        << backend;
    msg = run_and_catch(backend, f, {1, INFINITY, 3, 4});
    EXPECT_EQ(msg.rfind("[NumericsError] Inf in argument 0 (x)", 0), 0u) << msg;
  }
}

TEST(Instrument, OffByDefaultNaNPropagates) {
  ASSERT_FALSE(runtime::get_check_numerics());
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{1});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::Log>(x)}, ParameterVector{x});
  EXPECT_EQ(run_and_catch("CPU", f, {-1}), "");
}

TEST(Instrument, TimelineRecordsEveryKernelInsideTheCall) {
  auto x = std::make_shared<op::Parameter>(element::f32, Shape{3});
  auto f = std::make_shared<Function>(
      OutputVector{std::make_shared<op::Exp>(std::make_shared<op::Log>(x))}, ParameterVector{x});
  auto exe = runtime::Backend::create("INTERPRETER")->compile(f);
  std::vector<float> in{1, 2, 3}, out(3);
  void* outs[] = {out.data()};
  const void* ins[] = {in.data()};
  ASSERT_TRUE(runtime::timeline_start());
  EXPECT_FALSE(runtime::timeline_start());
  exe->call_raw(outs, ins);
  auto events = runtime::timeline_stop();
  ASSERT_EQ(events.size(), 3u);  // Log, Exp, the call
  EXPECT_EQ(events[0].type(), "Log");
  EXPECT_EQ(events[1].type(), "Exp");
  EXPECT_EQ(events[2].category(), "call");
  for (int k = 0; k < 2; ++k) {
    EXPECT_GE(events[k].start_ns, events[2].start_ns);
    EXPECT_LE(events[k].start_ns + events[k].dur_ns, events[2].start_ns + events[2].dur_ns);
    EXPECT_NE(events[k].args().find("\"outputs\":[{\"shape\":[3],\"dtype\":\"f32\"}]"), std::string::npos)
        << events[k].args();
  }
  exe->call_raw(outs, ins);
  EXPECT_TRUE(runtime::timeline_stop().empty());  // off: nothing recorded
}
