// The cross-node exchange (CrossNodeExchange): reduce-scatter, allgather and allreduce of
// float pieces with the values on the wire in f32, bf16 or fp16, against sums computed here in
// the same rank order from every rank's values (bitwise); every rank's buffer bitwise the same;
// the bytes it counts; its 16-bit conversions against ngraph's reference rounding; error
// feedback; a sub-communicator; and a rank that never comes (DistributedError, not a hang).
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mpi_test_utils.hpp"
#include "ngraph/distributed/cross_node.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/low_precision.hpp"

using namespace ngraph;
using distributed::CrossNodeExchange;
using distributed::DistributedError;
using distributed::Wire;
using mpitest::contains;

namespace {

const Wire kWires[] = {Wire::f32, Wire::bf16, Wire::fp16};
// Counts: none, fewer than the ranks, not divisible by them, pieces of one 64-byte line, large.
const size_t kCounts[] = {0, 1, 2, 3, 5, 16, 17, 100, 1000, 4099, 100003};

// Rank r's value at i: differs by rank, with bits below 16-bit precision, some large.
float value(size_t i, int r) {
  float v = std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(r)) * (1.0f + static_cast<float>(r));
  if (i % 97 == 5) v *= 1000.0f;
  return v + 0.001f * static_cast<float>(r);
}

// The reference rounding (ngraph::bfloat16 / float16; fp16 saturating as cross_node.hpp says).
float on_wire(float v, Wire w) {
  switch (w) {
    case Wire::f32: return v;
    case Wire::bf16: return static_cast<float>(bfloat16(v));
    case Wire::fp16: {
      float a = std::fabs(v);
      if (a > 65504.0f && std::isfinite(a)) v = std::copysign(65504.0f, v);
      return static_cast<float>(float16(v));
    }
  }
  return v;
}

// The sum of element i over `ranks` (their values on the wire), rank 0 first, in f32.
float rank_order_sum(size_t i, const std::vector<int>& ranks, Wire w) {
  float acc = on_wire(value(i, ranks[0]), w);
  for (size_t k = 1; k < ranks.size(); ++k) acc += on_wire(value(i, ranks[k]), w);
  return acc;
}

std::vector<int> all_ranks() {
  std::vector<int> r;
  for (int k = 0; k < mpitest::size(); ++k) r.push_back(k);
  return r;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

::testing::AssertionResult bitwise(const float* got, size_t lo, size_t hi, const std::function<float(size_t)>& want) {
  for (size_t i = lo; i < hi; ++i)
    if (!same_bits(got[i], want(i)))
      return ::testing::AssertionFailure() << "rank " << mpitest::rank() << ", element " << i << ": got " << got[i]
                                           << ", expected " << want(i);
  return ::testing::AssertionSuccess();
}

bool same_on_every_rank(const std::vector<float>& v) {
  std::vector<float> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * sizeof(float)), MPI_BYTE, 0, MPI_COMM_WORLD);
  // memcmp may not take the null data() of an empty vector
  int same = v.empty() || std::memcmp(root.data(), v.data(), v.size() * sizeof(float)) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

std::vector<float> values_of_rank(size_t n, int r) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = value(i, r);
  return v;
}

TEST(CrossNodeExchange, ReduceScatterSumsInRankOrder) {
  CrossNodeExchange x(*mpitest::world(), mpitest::world()->handle());
  for (Wire w : kWires)
    for (size_t n : kCounts) {
      auto buf = values_of_rank(n, x.rank());
      x.reduce_scatter_sum(buf.data(), n, w, "[test] reduce-scatter");
      auto p = x.piece(n, x.rank());
      EXPECT_TRUE(bitwise(buf.data(), p.lo, p.hi, [&](size_t i) { return rank_order_sum(i, all_ranks(), w); }))
          << to_string(w) << " n=" << n;
    }
}

TEST(CrossNodeExchange, AllgatherCopiesEachOwnersPiece) {
  CrossNodeExchange x(*mpitest::world(), mpitest::world()->handle());
  for (Wire w : kWires)
    for (size_t n : kCounts) {
      std::vector<float> buf(n, std::nanf(""));  // only this rank's piece is meaningful
      auto p = x.piece(n, x.rank());
      for (size_t i = p.lo; i < p.hi; ++i) buf[i] = value(i, x.rank());
      x.allgather(buf.data(), n, w, "[test] allgather");
      for (int q = 0; q < x.size(); ++q) {
        auto pq = x.piece(n, q);
        EXPECT_TRUE(bitwise(buf.data(), pq.lo, pq.hi, [&](size_t i) { return on_wire(value(i, q), w); }))
            << to_string(w) << " n=" << n << " piece " << q;
      }
      EXPECT_TRUE(same_on_every_rank(buf));
    }
}

TEST(CrossNodeExchange, AllreduceIsBitwiseTheSameOnEveryRank) {
  CrossNodeExchange x(*mpitest::world(), mpitest::world()->handle());
  for (Wire w : kWires)
    for (size_t n : kCounts) {
      for (int repeat = 0; repeat < 2; ++repeat) {  // reused scratch gives the same bits
        auto buf = values_of_rank(n, x.rank());
        x.allreduce_sum(buf.data(), n, w, "[test] allreduce");
        EXPECT_TRUE(bitwise(buf.data(), 0, n, [&](size_t i) { return on_wire(rank_order_sum(i, all_ranks(), w), w); }))
            << to_string(w) << " n=" << n;
        EXPECT_TRUE(same_on_every_rank(buf));
      }
    }
}

TEST(CrossNodeExchange, CountsBytesAndHalvesThemIn16Bits) {
  const size_t n = 1000;
  uint64_t sent[3];
  for (Wire w : kWires) {
    CrossNodeExchange x(*mpitest::world(), mpitest::world()->handle());
    auto buf = values_of_rank(n, x.rank());
    x.allreduce_sum(buf.data(), n, w, "[test] bytes");
    auto p = x.piece(n, x.rank());
    size_t m = p.hi - p.lo;
    // The other ranks' pieces once each, then this rank's piece to every other rank.
    uint64_t values = (n - m) + m * static_cast<size_t>(x.size() - 1);
    EXPECT_EQ(x.bytes_sent(), values * distributed::wire_bytes(w)) << to_string(w);
    sent[static_cast<int>(w)] = x.bytes_sent();
  }
  if (mpitest::size() > 1) {
    EXPECT_GT(sent[0], 0u);
  }
  EXPECT_EQ(sent[1] * 2, sent[0]);
  EXPECT_EQ(sent[2] * 2, sent[0]);
}

TEST(CrossNodeExchange, WireNames) {
  for (Wire w : kWires) EXPECT_EQ(distributed::wire_from_string(distributed::to_string(w)), w);
  EXPECT_STREQ(distributed::to_string(Wire::f32), "none");
  try {
    distributed::wire_from_string("int8");
    ADD_FAILURE() << "int8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "'int8'")) << e.what();
    EXPECT_TRUE(contains(e.what(), "bf16")) << e.what();
  }
}

// The fast conversions (vector loops, F16C) against the reference rounding, bit for bit, on
// random bit patterns, every tail length, and the values at the edges.
TEST(CrossNodeExchange, ConversionsMatchTheReferenceRounding) {
  std::mt19937 gen(7);
  std::vector<float> x;
  for (int i = 0; i < 20000; ++i) {
    uint32_t u = gen();
    float f;
    std::memcpy(&f, &u, sizeof f);
    x.push_back(f);
  }
  for (int i = 0; i < 20000; ++i) {
    float mantissa = static_cast<float>(gen() % 100000) - 50000.0f;
    x.push_back(std::ldexp(mantissa, -30 + static_cast<int>(gen() % 40)));
  }
  const float specials[] = {0.0f, -0.0f, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256, 65504.0f, 65519.0f, 65520.0f,
                            70000.0f, -1e9f, 3.4e38f, INFINITY, -INFINITY, std::ldexp(1.0f, -24),
                            std::ldexp(1.0f, -25), std::ldexp(3.0f, -26), std::ldexp(1.0f, -14), 1e-45f};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  for (Wire w : {Wire::bf16, Wire::fp16}) {
    for (size_t len : {x.size(), size_t(1), size_t(7), size_t(9), size_t(17)}) {
      std::vector<uint16_t> bits(len);
      std::vector<float> back(len);
      size_t start = x.size() - len;  // the specials are at the end
      distributed::wire::encode(x.data() + start, bits.data(), len, w);
      distributed::wire::decode(bits.data(), back.data(), len, w);
      for (size_t i = 0; i < len; ++i) {
        float want = on_wire(x[start + i], w);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(back[i])) << to_string(w) << " at " << i;
          continue;
        }
        ASSERT_TRUE(same_bits(back[i], want)) << to_string(w) << ": " << x[start + i] << " gave " << back[i]
                                              << ", expected " << want;
      }
    }
  }
  // The documented edges.
  float edge[] = {70000.0f, -1e9f, INFINITY, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256};
  float out[5];
  std::copy(std::begin(edge), std::end(edge), out);
  distributed::wire::round_in_place(out, 5, Wire::fp16);
  EXPECT_EQ(out[0], 65504.0f);
  EXPECT_EQ(out[1], -65504.0f);
  EXPECT_EQ(out[2], INFINITY);
  std::copy(std::begin(edge), std::end(edge), out);
  distributed::wire::round_in_place(out, 5, Wire::bf16);
  EXPECT_EQ(out[0], 70144.0f);               // nearest bf16
  EXPECT_EQ(out[3], 1.0f);                   // a tie goes to the even neighbour
  EXPECT_EQ(out[4], 1.0f + 1.0f / 64);       // a tie going up to the even neighbour
  EXPECT_THROW(distributed::wire::round_in_place(out, 5, Wire::f32), std::invalid_argument);
}

// With error feedback the residual is what the wire lost, saturation included (fp16 beyond
// 65504 carries the excess), the same on the vector path (8 values at a time) as on the
// portable tail: 17 values take both.
TEST(CrossNodeExchange, ResidualsCarryWhatRoundingAndSaturationLost) {
  std::vector<float> x(17);
  for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * (65000.0f + 1000.0f * static_cast<float>(i));
  x[3] = 1.0f + 1.0f / 4096;  // rounds in fp16 and in bf16
  x[12] = INFINITY;
  for (Wire w : {Wire::bf16, Wire::fp16}) {
    std::vector<float> residual(x.size(), 0.0f), back(x.size());
    std::vector<uint16_t> bits(x.size());
    distributed::wire::encode(x.data(), bits.data(), x.size(), w, residual.data());
    distributed::wire::decode(bits.data(), back.data(), x.size(), w);
    for (size_t i = 0; i < x.size(); ++i) {
      float want = std::isfinite(back[i]) ? x[i] - back[i] : 0.0f;
      EXPECT_EQ(residual[i], want) << to_string(w) << " at " << i << ": " << x[i] << " sent as " << back[i];
    }
    if (w == Wire::fp16) {
      EXPECT_EQ(back[2], 65504.0f);  // 67000 saturates
      EXPECT_EQ(residual[10], 75000.0f - 65504.0f);  // the vector path's second block
      EXPECT_EQ(residual[16], 81000.0f - 65504.0f);  // the portable tail
    }
  }
}

// Every rank sends 1 + 2^-9 each step, which bf16 rounds to 1: without error feedback the
// accumulated results fall short by 2^-9 per rank and step; with it the shortfall stays
// below a few bf16 steps however many steps run.
TEST(CrossNodeExchange, ErrorFeedbackKeepsTheAccumulatedSumOnTrack) {
  CrossNodeExchange x(*mpitest::world(), mpitest::world()->handle());
  const size_t n = 40;
  const int steps = 512;
  const double truth = static_cast<double>(steps) * x.size() * (1.0 + 1.0 / 512);
  for (bool feedback : {false, true}) {
    std::vector<float> residual(x.residual_count(n), 0.0f);
    std::vector<double> accumulated(n, 0.0);
    for (int s = 0; s < steps; ++s) {
      std::vector<float> buf(n, 1.0f + 1.0f / 512);
      x.allreduce_sum(buf.data(), n, Wire::bf16, "[test] error feedback", feedback ? residual.data() : nullptr);
      for (size_t i = 0; i < n; ++i) accumulated[i] += buf[i];
    }
    for (size_t i = 0; i < n; ++i) {
      double off = std::fabs(accumulated[i] - truth);
      if (feedback) {
        EXPECT_LT(off, 0.05 * x.size()) << "element " << i;
      } else {
        EXPECT_GT(off, 0.9 * x.size()) << "element " << i;  // 512 * 2^-9 per rank
      }
    }
    if (feedback) {
      for (float r : residual) EXPECT_LT(std::fabs(r), 1.0f / 64);  // below one bf16 step near the values
    }
  }
}

// The ranks of one parity exchange among themselves (a communicator other than the owner's).
TEST(CrossNodeExchange, SubCommunicator) {
  MPI_Comm half;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, mpitest::rank() % 2, mpitest::rank(), &half), MPI_SUCCESS);
  {
    CrossNodeExchange x(*mpitest::world(), half);
    std::vector<int> members;
    for (int k = mpitest::rank() % 2; k < mpitest::size(); k += 2) members.push_back(k);
    ASSERT_EQ(x.size(), static_cast<int>(members.size()));
    for (Wire w : kWires) {
      const size_t n = 1001;
      auto buf = values_of_rank(n, mpitest::rank());
      x.allreduce_sum(buf.data(), n, w, "[test] half");
      EXPECT_TRUE(bitwise(buf.data(), 0, n, [&](size_t i) { return on_wire(rank_order_sum(i, members, w), w); }))
          << to_string(w);
    }
  }
  MPI_Comm_free(&half);
}

// The last rank does not come: the others fail within the timeout with the exchange named,
// and later exchanges on that communicator fail at once; then the late rank completes the
// pending exchange so MPI finishes cleanly.
TEST(CrossNodeExchange, ARankThatNeverComesIsAnErrorNotAHang) {
  const int r = mpitest::rank(), n = mpitest::size();
  if (n < 2) GTEST_SKIP();
  const int late = n - 1;
  auto comm = std::make_shared<distributed::MPICommunicator>(MPI_COMM_WORLD, "cross-node timeout test");
  comm->set_timeout(1.5);
  CrossNodeExchange x(*comm, comm->handle());
  std::vector<float> buf = values_of_rank(100, r);
  if (r != late) {
    auto start = std::chrono::steady_clock::now();
    std::string msg;
    try {
      x.reduce_scatter_sum(buf.data(), buf.size(), Wire::bf16, "[AllReduce] 100 x f32 between nodes");
      ADD_FAILURE() << "rank " << r << " did not time out";
    } catch (const DistributedError& e) {
      msg = e.what();
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 1.4) << msg;
    EXPECT_LT(waited, 10.0) << msg;
    EXPECT_TRUE(contains(msg, "[AllReduce] 100 x f32 between nodes")) << msg;
    EXPECT_TRUE(contains(msg, "timed out after 1.5 s")) << msg;
    EXPECT_TRUE(comm->is_broken());
    try {
      x.allreduce_sum(buf.data(), buf.size(), Wire::bf16, "[test] again");
      ADD_FAILURE() << "a broken communicator exchanged";
    } catch (const DistributedError& e) {
      EXPECT_TRUE(contains(e.what(), "unusable after an earlier failure")) << e.what();
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == late) x.reduce_scatter_sum(buf.data(), buf.size(), Wire::bf16, "[test] late");
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
