// The settings registry (ngraph/settings.hpp): each type's parsing and default, the errors
// for names that are not registered, the agreement flags, and the test-only fault hooks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/testing.hpp"
#include "ngraph/settings.hpp"

using namespace ngraph;

namespace {

// Sets (or, with nullptr, unsets) an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old, m_had = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (m_had)
      setenv(m_name, m_old.c_str(), 1);
    else
      unsetenv(m_name);
  }
  const char* m_name;
  std::string m_old;
  bool m_had = false;
};

}  // namespace

TEST(settings, flag_is_off_only_with_0) {
  const char* name = "NGRAPH_CPU_FUSION";  // default on
  for (auto [value, on] : {std::pair<const char*, bool>{nullptr, true}, {"", true}, {"0", false}, {"1", true},
                           {"no", true}, {" 0", true}}) {
    ScopedEnv env(name, value);
    EXPECT_EQ(settings::flag(name), on) << (value ? value : "(unset)");
  }
  const char* off = "NGRAPH_CHECK_NUMERICS";  // default off
  for (auto [value, on] : {std::pair<const char*, bool>{nullptr, false}, {"", false}, {"0", false}, {"1", true},
                           {"yes", true}}) {
    ScopedEnv env(off, value);
    EXPECT_EQ(settings::flag(off), on) << (value ? value : "(unset)");
  }
}

TEST(settings, integer_and_real_parse_a_leading_number_else_the_default) {
  const char* t = "NGRAPH_FUSION_THRESHOLD";
  {
    ScopedEnv env(t, nullptr);
    EXPECT_EQ(settings::integer(t), 64ll << 20);
  }
  for (auto [value, n] : {std::pair<const char*, long long>{"0", 0}, {"1000", 1000}, {"12abc", 12}, {"abc", 64ll << 20},
                          {"", 64ll << 20}, {"-1", -1}}) {
    ScopedEnv env(t, value);
    EXPECT_EQ(settings::integer(t), n) << value;
  }
  const char* threads = "NGRAPH_NUM_THREADS";  // > 0, default 0
  for (auto [value, n] : {std::pair<const char*, long long>{"3", 3}, {"0", 0}, {"-2", 0}, {"x", 0}}) {
    ScopedEnv env(threads, value);
    EXPECT_EQ(settings::integer(threads), n) << value;
  }
  const char* timeout = "NGRAPH_DIST_TIMEOUT";  // > 0, default 60
  for (auto [value, x] : {std::pair<const char*, double>{"2.5", 2.5}, {"0", 60}, {"-1", 60}, {"nan", 60}, {"s", 60}}) {
    ScopedEnv env(timeout, value);
    EXPECT_EQ(settings::real(timeout), x) << value;
  }
  ScopedEnv env(timeout, "inf");
  EXPECT_TRUE(std::isinf(settings::real(timeout)));
}

TEST(settings, text_and_choice_are_the_value_or_the_default) {
  {
    ScopedEnv env("NGRAPH_CPU_POOL", nullptr);
    EXPECT_EQ(settings::text("NGRAPH_CPU_POOL"), "own");
  }
  {
    ScopedEnv env("NGRAPH_CPU_POOL", "");
    EXPECT_EQ(settings::text("NGRAPH_CPU_POOL"), "own");
    EXPECT_EQ(settings::value("NGRAPH_CPU_POOL"), std::optional<std::string>(""));
  }
  ScopedEnv env("NGRAPH_CPU_POOL", "fast");  // the reader decides what another value does
  EXPECT_EQ(settings::text("NGRAPH_CPU_POOL"), "fast");
  ScopedEnv unset("NGRAPH_TIMELINE", nullptr);
  EXPECT_EQ(settings::text("NGRAPH_TIMELINE"), "");
  EXPECT_EQ(settings::value("NGRAPH_TIMELINE"), std::nullopt);
}

TEST(settings, names_that_are_not_registered_and_wrong_getters_are_logic_errors) {
  for (auto read : {+[] { settings::flag("NGRAPH_NO_SUCH_SETTING"); }, +[] { settings::text("NGRAPH_CPU_FUSIN"); },
                    +[] { settings::integer("NGRAPH_CPU_FUSION"); }, +[] { settings::flag("NGRAPH_DIST_TIMEOUT"); },
                    +[] { settings::environment("NGRAPH_SHM"); }, +[] { settings::value("OMP_NUM_THREADS"); }}) {
    EXPECT_THROW(read(), std::logic_error);
  }
  try {
    settings::flag("NGRAPH_NO_SUCH_SETTING");
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("NGRAPH_NO_SUCH_SETTING is not a registered setting"), std::string::npos)
        << e.what();
  }
  ScopedEnv env("OMP_NUM_THREADS", "3");
  EXPECT_EQ(settings::environment("OMP_NUM_THREADS"), std::optional<std::string>("3"));
}

TEST(settings, the_ranks_agree_on_these_in_this_order) {
  std::vector<std::string> agree;
  for (const auto& s : settings::all())
    if (s.agree) agree.push_back(s.name);
  EXPECT_EQ(agree, (std::vector<std::string>{"NGRAPH_SHM", "NGRAPH_SHM_NODE_SIZE", "NGRAPH_SHM_SHARDED_UPDATE",
                                             "NGRAPH_SHM_SHARDED_ACROSS_NODES", "NGRAPH_SHM_SHARDED_COMPRESSED",
                                             "NGRAPH_DIST_CHECK", "NGRAPH_DIST_COMPRESSION",
                                             "NGRAPH_DIST_ERROR_FEEDBACK", "NGRAPH_CPU_FUSION",
                                             "NGRAPH_FUSION_THRESHOLD", "NGRAPH_PRECISION"}));
  for (const auto& s : settings::all()) {
    EXPECT_EQ(s.name.rfind("NGRAPH_", 0), 0u) << s.name;
    EXPECT_FALSE(s.read.empty()) << s.name;
    EXPECT_FALSE(s.doc.empty()) << s.name;
    EXPECT_EQ(s.choices.empty(), s.type != settings::Type::choice) << s.name;
  }
}

TEST(settings, effective_values_are_what_the_ranks_compare) {
  {
    ScopedEnv env("NGRAPH_SHM", "0");
    EXPECT_EQ(settings::effective("NGRAPH_SHM"), "0 (off)");
  }
  {
    ScopedEnv env("NGRAPH_SHM", nullptr);
    EXPECT_EQ(settings::effective("NGRAPH_SHM"), "on");
  }
  {
    ScopedEnv env("NGRAPH_FUSION_THRESHOLD", "1000000");
    EXPECT_EQ(settings::effective("NGRAPH_FUSION_THRESHOLD"), "1000000");
  }
  // The check mode in effect, which ngraph.distributed.init(check=...) sets.
  auto before = distributed::get_check_mode();
  distributed::set_check_mode(distributed::CheckMode::never);
  EXPECT_EQ(settings::effective("NGRAPH_DIST_CHECK"), "never");
  distributed::set_check_mode(distributed::CheckMode::first);
  EXPECT_EQ(settings::effective("NGRAPH_DIST_CHECK"), "first");
  distributed::set_check_mode(before);
}

TEST(settings, fault_hooks_do_nothing_until_a_test_installs_one) {
  using namespace distributed::testing;
  int passed = 0;
  at(Point::topology_split);
  set_hook(Point::topology_split, [&] { ++passed; });
  at(Point::topology_barrier);
  at(Point::topology_split);
  at(Point::topology_split);
  EXPECT_EQ(passed, 2);
  clear_hooks();
  at(Point::topology_split);
  EXPECT_EQ(passed, 2);
  EXPECT_EQ(point_named("shared_object_made"), Point::shared_object_made);
  EXPECT_THROW(point_named("nowhere"), std::invalid_argument);
}
