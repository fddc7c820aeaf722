// The communicator's timeout arithmetic: an infinite or huge timeout is "never", not an
// overflow into the past (which ended healthy jobs at once), and messages print it readably.
#include <gtest/gtest.h>

#include <limits>

#include "ngraph/distributed/communicator.hpp"

using namespace ngraph::distributed;
using clock_type = std::chrono::steady_clock;

TEST(communicator_timeout, infinite_and_huge_timeouts_never_expire) {
  for (double s : {std::numeric_limits<double>::infinity(), 1e10 * 1e10, 1e300, 9.3e9 * 1e3})
    EXPECT_EQ(deadline_after(s), clock_type::time_point::max()) << s;
}

TEST(communicator_timeout, finite_timeouts_are_from_now) {
  auto before = clock_type::now();
  auto deadline = deadline_after(2.5);
  auto after = clock_type::now();
  EXPECT_GE(deadline - before, std::chrono::milliseconds(2500));
  EXPECT_LE(deadline - after, std::chrono::milliseconds(2500));
  // A timeout of ten years still fits the clock and is not clamped.
  EXPECT_LT(deadline_after(3.2e8), clock_type::time_point::max());
  EXPECT_GT(deadline_after(3.2e8), deadline);
}

TEST(communicator_timeout, timeout_text) {
  EXPECT_EQ(timeout_text(60), "60 s");
  EXPECT_EQ(timeout_text(2.5), "2.5 s");
  EXPECT_EQ(timeout_text(std::numeric_limits<double>::infinity()), "no limit");
}
