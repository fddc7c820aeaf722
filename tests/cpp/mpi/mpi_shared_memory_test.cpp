// The shared-memory allreduce (SharedRegion) used directly and through compiled graphs: results
// against references computed from every rank's values, bitwise equal on every rank, the
// two-level path across (simulated) nodes, the argument checks, and the switch that turns it
// off.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mpi_test_utils.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"

using namespace ngraph;
using distributed::ReduceOp;
using mpitest::all_close;

namespace {

// Rank r's value at i: odd elements grow with the rank, even ones shrink; products stay small.
template <typename T>
T value(size_t i, int r, ReduceOp op) {
  if (op == ReduceOp::prod) return static_cast<T>(1 + (i + static_cast<size_t>(r)) % 3);
  int sign = i % 2 ? 1 : -1;
  return static_cast<T>(static_cast<int>(i % 1000) * 3 - 4 + 10 * r * sign);
}

template <typename T>
std::vector<T> expected(size_t n, int ranks, ReduceOp op) {
  std::vector<T> out(n);
  for (size_t i = 0; i < n; ++i) {
    T acc = value<T>(i, 0, op);
    for (int r = 1; r < ranks; ++r) {
      T v = value<T>(i, r, op);
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::mean: acc = acc + v; break;
        case ReduceOp::prod: acc = acc * v; break;
        case ReduceOp::max: acc = v > acc ? v : acc; break;
        case ReduceOp::min: acc = v < acc ? v : acc; break;
      }
    }
    out[i] = op == ReduceOp::mean ? static_cast<T>(acc / static_cast<T>(ranks)) : acc;
  }
  return out;
}

// Every rank's copy of `v` is bitwise the same as rank 0's.
template <typename T>
bool same_on_every_rank(const std::vector<T>& v) {
  std::vector<T> root = v;
  MPI_Bcast(root.data(), static_cast<int>(root.size() * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
  int same = std::memcmp(root.data(), v.data(), v.size() * sizeof(T)) == 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

constexpr size_t kInPlace = ~size_t(0);  // out_shift: the output over the input

template <typename T>
void check_region(distributed::SharedRegion& region, size_t n, ReduceOp op, int repeats = 3,
                  size_t out_shift = 0) {
  const int r = mpitest::rank();
  const bool in_place = out_shift == kInPlace;
  const size_t in_off = 64;
  const size_t out_off = in_place ? in_off : 64 + ((n * sizeof(T) + 63) / 64) * 64 + out_shift;
  ASSERT_LE(out_off + n * sizeof(T), region.size());
  for (int k = 0; k < repeats; ++k) {  // the same buffers again: arrivals stay in step
    T* in = reinterpret_cast<T*>(region.local() + in_off);
    for (size_t i = 0; i < n; ++i) in[i] = value<T>(i, r, op);
    region.allreduce(in_off, out_off, n, element::from<T>(), op);
    const T* out = reinterpret_cast<const T*>(region.local() + out_off);
    std::vector<T> got(out, out + n);
    ASSERT_TRUE(all_close(got, expected<T>(n, mpitest::size(), op))) << to_string(op) << " n=" << n;
    if (!in_place) {
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(in[i], value<T>(i, r, op)) << "input changed at " << i;
    }
    ASSERT_TRUE(same_on_every_rank(got));
  }
}

std::shared_ptr<distributed::MPICommunicator> fresh_world() {
  return std::make_shared<distributed::MPICommunicator>(MPI_COMM_WORLD, "MPI_COMM_WORLD");
}

// Sets an environment variable for one scope (every rank does the same).
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old, m_had = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (m_had) setenv(m_name, m_old.c_str(), 1);
    else unsetenv(m_name);
  }
  const char* m_name;
  std::string m_old;
  bool m_had = false;
};

// The TCP run turns shared memory off (NGRAPH_SHM=0), as separate hosts would have none.
bool switched_off() {
  const char* e = std::getenv("NGRAPH_SHM");
  return e && std::string(e) == "0";
}
#define SKIP_IF_SWITCHED_OFF() \
  if (switched_off()) GTEST_SKIP() << "NGRAPH_SHM=0 in this run"

}  // namespace

TEST(MpiSharedMemory, EveryOpAndTypeOnOneNode) {
  SKIP_IF_SWITCHED_OFF();
  auto comm = fresh_world();
  auto region = comm->create_shared_region(1 << 17);
  ASSERT_TRUE(region) << "all ranks of this job run on one node: shared memory must be available";
  EXPECT_NE(region->describe().find(std::to_string(mpitest::size()) + " ranks on 1 node"), std::string::npos)
      << region->describe();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(region->local()) % 64, 0u);
  // Sizes below, at and above the ranks' 64-byte pieces, and an odd one.
  for (size_t n : {size_t(1), size_t(3), size_t(16), size_t(1001), size_t(4096 + 17)}) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::min, ReduceOp::prod}) {
      for (size_t shift : {size_t(0), kInPlace}) {
        check_region<float>(*region, n, op, 2, shift);
        check_region<double>(*region, n, op, 1, shift);
        if (op != ReduceOp::mean) {
          check_region<int32_t>(*region, n, op, 1, shift);
          check_region<int64_t>(*region, n, op, 1, shift);
        }
      }
    }
  }
}

TEST(MpiSharedMemory, LargeSumsAndMeans) {
  // Buffers of the order of ResNet-50's gradient buckets (8 MiB and more: many blocks per
  // rank's piece), with odd tails, and outputs one element off a cache-line boundary.
  SKIP_IF_SWITCHED_OFF();
  auto comm = fresh_world();
  const size_t mib8 = size_t(8) << 20;
  auto region = comm->create_shared_region(2 * mib8 + (1 << 16));
  ASSERT_TRUE(region);
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean}) {
    check_region<float>(*region, mib8 / sizeof(float) + 1001, op, 2);
    check_region<double>(*region, mib8 / sizeof(double) + 3, op, 2);
    check_region<float>(*region, mib8 / sizeof(float) + 7, op, 1, sizeof(float));
    check_region<double>(*region, mib8 / sizeof(double) + 5, op, 1, sizeof(double));
    check_region<float>(*region, mib8 / sizeof(float) + 1001, op, 2, kInPlace);
  }
}

TEST(MpiSharedMemory, BadArgumentsAreRejectedOnEveryRank) {
  SKIP_IF_SWITCHED_OFF();
  auto comm = fresh_world();
  auto region = comm->create_shared_region(4096);
  ASSERT_TRUE(region);
  EXPECT_THROW(region->allreduce(0, 16, 8, element::f32, ReduceOp::sum), std::invalid_argument);  // overlap
  EXPECT_THROW(region->allreduce(16, 0, 8, element::f32, ReduceOp::sum), std::invalid_argument);
  EXPECT_THROW(region->allreduce(0, 4096, 8, element::f32, ReduceOp::sum), std::invalid_argument);  // outside
  EXPECT_THROW(region->allreduce(0, 64, 8, element::i32, ReduceOp::mean), std::invalid_argument);
  EXPECT_THROW(region->allreduce(0, 64, 8, element::boolean, ReduceOp::sum), std::invalid_argument);
  check_region<float>(*region, 8, ReduceOp::sum);  // still in step after the rejections
}

TEST(MpiSharedMemory, TwoLevelAcrossNodes) {
  SKIP_IF_SWITCHED_OFF();
  // Pairs of consecutive ranks act as nodes: the pieces are joined by MPI between them.
  ScopedEnv nodes("NGRAPH_SHM_NODE_SIZE", "2");
  auto comm = fresh_world();
  auto region = comm->create_shared_region(1 << 17);
  if (mpitest::size() % 2) {
    EXPECT_FALSE(region) << "nodes of unequal size cannot share";
    return;
  }
  ASSERT_TRUE(region);
  int nodes_count = mpitest::size() / 2;
  EXPECT_NE(region->describe().find(std::to_string(nodes_count) + (nodes_count == 1 ? " node" : " nodes")),
            std::string::npos)
      << region->describe();
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max, ReduceOp::prod}) {
    check_region<float>(*region, 1001, op);
    check_region<double>(*region, 77, op);
    check_region<float>(*region, 4096 * 3 + 1, op, 2, kInPlace);
  }
  check_region<int64_t>(*region, 4096 + 5, ReduceOp::min);
  check_region<int64_t>(*region, 4096 + 5, ReduceOp::max, 1, kInPlace);
}

TEST(MpiSharedMemory, OneRankPerNodeIsANodeOfOneSlot) {
  SKIP_IF_SWITCHED_OFF();
  ScopedEnv nodes("NGRAPH_SHM_NODE_SIZE", "1");
  auto comm = fresh_world();
  auto region = comm->create_shared_region(1 << 16);
  ASSERT_TRUE(region);
  const int n = mpitest::size();
  EXPECT_EQ(region->local_size(), 1);
  EXPECT_EQ(region->nodes(), n);
  EXPECT_EQ(region->node(), mpitest::rank());
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean, ReduceOp::max}) {
    check_region<float>(*region, 1001, op);
    check_region<float>(*region, 4096 * 2 + 3, op, 2, kInPlace);
    check_region<double>(*region, 77, op);
  }
}

TEST(MpiSharedMemory, SwitchedOffMeansNone) {
  ScopedEnv off("NGRAPH_SHM", "0");
  EXPECT_FALSE(fresh_world()->create_shared_region(4096));
}

// A sharded update's exchanges across nodes: each rank's share of the reduce-scatter holds
// the sum (or mean) of every rank's values, the shares gathered into the common memory make
// the whole range on every node, and max_over_all is the maximum over every rank.
TEST(MpiSharedMemory, ReduceScatterAndGatherAcrossNodes) {
  SKIP_IF_SWITCHED_OFF();
  const int r = mpitest::rank(), n = mpitest::size();
  for (const char* node_size : {"1", "2"}) {
    int per_node = std::atoi(node_size);
    if (n % per_node || n / per_node < 2) continue;
    ScopedEnv nodes("NGRAPH_SHM_NODE_SIZE", node_size);
    auto comm = fresh_world();
    const size_t count = 4096 * 2 + 77, offset = 128;
    auto region = comm->create_shared_region(offset + count * sizeof(float), offset + count * sizeof(float));
    ASSERT_TRUE(region);
    ASSERT_EQ(region->nodes(), n / per_node);
    auto mine = distributed::SharedRegion::share(count, sizeof(float), region->local_rank(), region->local_size(),
                                                 region->node(), region->nodes());
    // The shares of all ranks tile the range.
    std::vector<int64_t> bounds = {static_cast<int64_t>(mine.lo), static_cast<int64_t>(mine.hi)};
    std::vector<int64_t> all(2 * static_cast<size_t>(n));
    MPI_Allgather(bounds.data(), 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, MPI_COMM_WORLD);
    std::vector<std::pair<int64_t, int64_t>> tiles;
    for (int q = 0; q < n; ++q) tiles.emplace_back(all[2 * q], all[2 * q + 1]);
    std::sort(tiles.begin(), tiles.end());
    int64_t at = 0;
    for (const auto& [lo, hi] : tiles) {
      EXPECT_EQ(lo, at);
      at = std::max(at, hi);
    }
    EXPECT_EQ(at, static_cast<int64_t>(count));
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::mean}) {
      float* slot = reinterpret_cast<float*>(region->local() + offset);
      for (size_t i = 0; i < count; ++i) slot[i] = value<float>(i, r, op);
      region->reduce_scatter(offset, count, op, "test");
      auto want = expected<float>(count, n, op);
      for (size_t i = mine.lo; i < mine.hi; ++i)  // integers: sums exact; means scaled once
        ASSERT_NEAR(slot[i], want[i], op == ReduceOp::sum ? 0.0 : 1e-6 * (1 + std::abs(want[i])))
            << to_string(op) << " at " << i;
      region->arrive("test", "after reading the share");  // before the slots are written again
    }
    float* common = reinterpret_cast<float*>(region->common() + offset);
    for (size_t i = mine.lo; i < mine.hi; ++i) common[i] = 0.5f * static_cast<float>(i);
    region->allgather_common(offset, count, "test");
    region->arrive("test", "after gathering");
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(common[i], 0.5f * static_cast<float>(i)) << "at " << i;
    int64_t v[2] = {r, -r};
    region->max_over_all(v, 2, "test");
    EXPECT_EQ(v[0], n - 1);
    EXPECT_EQ(v[1], 0);
    EXPECT_THROW(region->reduce_scatter(offset, count + 1000, ReduceOp::sum, "test"), std::invalid_argument);
  }
}

TEST(MpiSharedMemory, DifferentSizesAreRefusedEverywhere) {
  auto region = fresh_world()->create_shared_region(mpitest::rank() == 0 ? 4096 : 8192);
  EXPECT_FALSE(region);
}

TEST(MpiSharedMemory, MaxOverNodeAndCommonMemory) {
  SKIP_IF_SWITCHED_OFF();
  auto comm = fresh_world();  // outlives the region, which refers to it
  auto region = comm->create_shared_region(4096, 1000);
  ASSERT_TRUE(region);
  ASSERT_TRUE(region->common());
  EXPECT_EQ(region->common_size(), 1000u);
  const int r = mpitest::rank(), n = mpitest::size();
  for (int round = 0; round < 3; ++round) {  // the mailboxes are reused in turn
    int64_t v[3] = {r + round, -r, 7};
    region->max_over_node(v, 3, "test");
    EXPECT_EQ(v[0], n - 1 + round);
    EXPECT_EQ(v[1], 0);
    EXPECT_EQ(v[2], 7);
  }
  // One copy per node: what the last rank writes, every rank reads.
  if (r == n - 1) std::memset(region->common(), 0x5a, 1000);
  region->arrive("test", "after writing");
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(static_cast<unsigned char>(region->common()[i]), 0x5a);
  region->arrive("test", "after reading");
}

// Through the CPU backend: the fused gradient allreduce is planned into shared memory.
TEST(MpiSharedMemory, ExecutableFusesIntoSharedMemory) {
  const int r = mpitest::rank();
  auto comm = mpitest::world();
  std::vector<Shape> shapes{{3, 5}, {1001}, {7}};
  ParameterVector params;
  OutputVector sums;
  for (const auto& s : shapes) {
    auto p = std::make_shared<op::Parameter>(element::f32, s);
    params.push_back(p);
    auto twice = std::make_shared<op::Multiply>(p, std::make_shared<op::Constant>(element::f32, s, std::vector<float>(shape_size(s), 2.f)));
    sums.push_back(std::make_shared<op::AllReduce>(twice, "sum", comm));
  }
  auto exe = mpitest::compile(std::make_shared<Function>(sums, params, "shm"));
  auto& cpu = dynamic_cast<runtime::cpu::CPUExecutable&>(*exe);
  // Nothing reads the doubled values after the collective: reduced in place, one buffer.
  EXPECT_EQ(cpu.get_shared_bytes(), switched_off() ? 0u : (15 + 1001 + 7) * sizeof(float));
  const auto mode = distributed::get_check_mode();
  for (int call = 0; call < 3; ++call) {
    // The last call skips the check: MPI then reduces the buffers planned in place.
    if (call == 2) distributed::set_check_mode(distributed::CheckMode::never);
    std::vector<mpitest::Host> in;
    for (const auto& s : shapes) {
      std::vector<float> v(shape_size(s));
      for (size_t i = 0; i < v.size(); ++i) v[i] = value<float>(i, r, ReduceOp::sum) + static_cast<float>(call);
      in.push_back(mpitest::host(s, v));
    }
    auto out = mpitest::run(exe, in);
    for (size_t k = 0; k < shapes.size(); ++k) {
      auto want = expected<float>(shape_size(shapes[k]), mpitest::size(), ReduceOp::sum);
      for (auto& w : want) w = 2.f * (w + static_cast<float>(call * mpitest::size()));
      EXPECT_TRUE(all_close(mpitest::values_of<float>(out[k]), want)) << "call " << call << " tensor " << k;
    }
  }
  distributed::set_check_mode(mode);
  EXPECT_EQ(cpu.get_shared_memory().size(), switched_off() ? 0u : 1u);
}

// A group planned into shared memory keeps its arena place (where calls over MPI reduce it) past
// every value, not among the values alive from its first member to its last use: those sit
// where a plan without the collective puts them.
TEST(MpiSharedMemory, SharedGroupsLiePastTheArenaValues) {
  const int r = mpitest::rank();
  auto comm = mpitest::world();
  Shape s1{777}, s2{8, 128};  // members of 3108 and 512 bytes; the values in between 4096
  auto y = std::make_shared<op::Parameter>(element::f32, s1);
  auto x = std::make_shared<op::Parameter>(element::f32, s2);
  auto g1 = std::make_shared<op::Multiply>(y, y);  // the first member: needs only y
  auto u = std::make_shared<op::Reverse>(std::make_shared<op::Multiply>(x, x), AxisSet{1});
  auto w = std::make_shared<op::Reverse>(std::make_shared<op::Add>(u, x), AxisSet{0});
  auto g2 = std::make_shared<op::Sum>(w, AxisSet{0});  // the second: after u and w
  OutputVector sums{std::make_shared<op::AllReduce>(g1, "sum", comm), std::make_shared<op::AllReduce>(g2, "sum", comm)};
  auto exe = mpitest::compile(std::make_shared<Function>(sums, ParameterVector{y, x}, "apart"));
  auto& cpu = dynamic_cast<runtime::cpu::CPUExecutable&>(*exe);
  size_t values_end = 0, members_begin = SIZE_MAX, members = 0;
  std::string buffers;
  for (const auto& b : cpu.get_buffer_assignments()) {
    buffers += b.tensor + "@" + std::to_string(b.offset) + "+" + std::to_string(b.size) + " ";
    if (b.size == 777 * sizeof(float) || b.size == 128 * sizeof(float)) {
      members_begin = std::min(members_begin, b.offset);
      ++members;
    } else {
      values_end = std::max(values_end, b.offset + b.size);
    }
  }
  SCOPED_TRACE("buffers: " + buffers);
  EXPECT_GE(members, 2u);
  if (switched_off()) EXPECT_EQ(cpu.get_shared_bytes(), 0u);
  else EXPECT_GE(members_begin, values_end) << "a shared group's arena place lies among the values";
  std::vector<float> yv(777), xv(8 * 128);
  for (size_t i = 0; i < yv.size(); ++i) yv[i] = static_cast<float>(i % 5) + static_cast<float>(r);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 3) - static_cast<float>(r);
  const auto mode = distributed::get_check_mode();
  std::vector<float> first;
  for (int call = 0; call < 2; ++call) {  // in shared memory, then over MPI in the arena place
    if (call == 1) distributed::set_check_mode(distributed::CheckMode::never);
    auto out = mpitest::run(exe, {mpitest::host(s1, yv), mpitest::host(s2, xv)});
    auto a = mpitest::values_of<float>(out[0]), b = mpitest::values_of<float>(out[1]);
    a.insert(a.end(), b.begin(), b.end());
    if (call == 0) first = a;
    else EXPECT_TRUE(all_close(a, first)) << "over MPI";
  }
  distributed::set_check_mode(mode);
  // Rank-independent check of the first member: sum over ranks of (i % 5 + rank)^2.
  for (size_t i = 0; i < 777; ++i) {
    double want = 0;
    for (int q = 0; q < mpitest::size(); ++q) want += std::pow(static_cast<double>(i % 5) + q, 2);
    ASSERT_NEAR(first[i], want, 1e-3 * want + 1e-6) << i;
  }
}

// Where the inputs are read after the collective (by a later step, or returned), the outputs
// are placed apart from them, and those readers see the rank's own values.
TEST(MpiSharedMemory, InputsReadAfterTheCollectiveAreNotOverwritten) {
  const int r = mpitest::rank();
  auto comm = mpitest::world();
  const Shape shape{4097};
  for (bool returned : {false, true}) {
    auto p = std::make_shared<op::Parameter>(element::f32, shape);
    auto twice = std::make_shared<op::Add>(p, p);
    auto sum = std::make_shared<op::AllReduce>(twice, "sum", comm);
    OutputVector results{sum};
    if (returned) results.push_back(twice);
    else results.push_back(std::make_shared<op::Subtract>(sum, twice));  // the others' share
    auto exe = mpitest::compile(std::make_shared<Function>(results, ParameterVector{p}, "apart"));
    auto& cpu = dynamic_cast<runtime::cpu::CPUExecutable&>(*exe);
    if (!switched_off()) {
      EXPECT_GE(cpu.get_shared_bytes(), 2 * shape_size(shape) * sizeof(float)) << returned;
    }
    for (int call = 0; call < 3; ++call) {
      std::vector<float> mine(shape_size(shape));
      for (size_t i = 0; i < mine.size(); ++i) mine[i] = value<float>(i, r, ReduceOp::sum) + static_cast<float>(call);
      auto out = mpitest::run(exe, {mpitest::host(shape, mine)});
      auto total = expected<float>(mine.size(), mpitest::size(), ReduceOp::sum);
      std::vector<float> want_sum(mine.size()), want_second(mine.size());
      for (size_t i = 0; i < mine.size(); ++i) {
        want_sum[i] = 2.f * (total[i] + static_cast<float>(call * mpitest::size()));
        want_second[i] = returned ? 2.f * mine[i] : want_sum[i] - 2.f * mine[i];
      }
      EXPECT_TRUE(all_close(mpitest::values_of<float>(out[0]), want_sum)) << "call " << call;
      EXPECT_TRUE(all_close(mpitest::values_of<float>(out[1]), want_second, 1e-5, 1e-4))
          << "call " << call << (returned ? ": the returned input" : ": the input read later");
    }
  }
}

// SGD with momentum on variables of several sizes (one smaller than a piece), the gradients
// averaged across ranks: g = mean over ranks of x_r * w, m' = 0.9 m + g, w' = w - 0.25 m'.
// The update is one fused kernel per variable that reads the averaged gradient: on one node a
// sharded update (each rank sums its piece of the gradients and updates it in memory the
// node shares).
// The 0-d one is splatted into its kernel, not summed per piece: its gradient is reduced
// whole and its update runs on every rank.
const std::vector<Shape> kMomentumShapes{{3, 1001}, {4099}, {5}, {}};

float momentum_w0(size_t i, size_t k) { return 0.25f + static_cast<float>((i * 7 + k) % 13) / 8.0f; }
float momentum_x(size_t i, size_t k, int r) { return value<float>(i + k, r, ReduceOp::sum) / 64.0f; }

struct Momentum {
  std::vector<std::shared_ptr<VariableState>> w, m;
  std::shared_ptr<runtime::Executable> exe;
  std::vector<mpitest::Host> in;
  std::vector<mpitest::Host> out;
  runtime::cpu::CPUExecutable& cpu() { return dynamic_cast<runtime::cpu::CPUExecutable&>(*exe); }
  void step() { out = mpitest::run(exe, in); }
  // Every variable's value (w, then m), plain; momentum a sharded update across nodes left in
  // shares is gathered first (collective: every rank calls it).
  std::vector<std::vector<float>> values() const {
    std::vector<std::vector<float>> v;
    for (const auto* states : {&w, &m})
      for (const auto& st : *states) {
        v.emplace_back(shape_size(st->get_shape()));
        st->gather();
        st->get(v.back().data());
      }
    return v;
  }
};

// A second computation over the variables of `same` when given.
Momentum momentum(bool return_first_gradient = false,
                  std::shared_ptr<distributed::Communicator> comm = mpitest::world(),
                  const Momentum* same = nullptr) {
  Momentum t;
  ParameterVector params;
  NodeVector assigns;
  OutputVector results;
  auto scalar = [](float v, const Shape& shape) {
    AxisSet axes;
    for (size_t a = 0; a < shape.size(); ++a) axes.insert(a);
    return std::make_shared<op::Broadcast>(std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{v}),
                                           shape, axes);
  };
  for (size_t k = 0; k < kMomentumShapes.size(); ++k) {
    const Shape& shape = kMomentumShapes[k];
    size_t n = shape_size(shape);
    std::vector<float> w0(n), x(n);
    for (size_t i = 0; i < n; ++i) {
      w0[i] = momentum_w0(i, k);
      x[i] = momentum_x(i, k, mpitest::rank());
    }
    t.w.push_back(same ? same->w[k] : std::make_shared<VariableState>(element::f32, shape, w0.data()));
    t.m.push_back(same ? same->m[k] : std::make_shared<VariableState>(element::f32, shape));
    auto w = std::make_shared<op::Variable>(t.w.back());
    auto m = std::make_shared<op::Variable>(t.m.back());
    auto p = std::make_shared<op::Parameter>(element::f32, shape);
    params.push_back(p);
    t.in.push_back(mpitest::host(shape, x));
    auto g = std::make_shared<op::AllReduce>(std::make_shared<op::Multiply>(p, w), "mean", comm);
    auto m1 = std::make_shared<op::Add>(std::make_shared<op::Multiply>(m, scalar(0.9f, shape)), g);
    auto w1 = std::make_shared<op::Subtract>(w, std::make_shared<op::Multiply>(m1, scalar(0.25f, shape)));
    assigns.push_back(std::make_shared<op::Assign>(m, m1));
    assigns.push_back(std::make_shared<op::Assign>(w, w1));
    if (return_first_gradient && k == 0) results.push_back(g);
  }
  results.push_back(std::make_shared<op::Sum>(params[0], AxisSet{0, 1}));
  t.exe = mpitest::compile(std::make_shared<Function>(results, assigns, params, "momentum"));
  return t;
}

// The same steps in double precision, every rank's x known: w then m after `calls` calls.
std::vector<std::vector<float>> momentum_reference(int calls) {
  std::vector<std::vector<float>> w, m;
  for (size_t k = 0; k < kMomentumShapes.size(); ++k) {
    size_t n = shape_size(kMomentumShapes[k]);
    std::vector<double> wv(n), mv(n, 0.0);
    for (size_t i = 0; i < n; ++i) wv[i] = momentum_w0(i, k);
    for (int c = 0; c < calls; ++c)
      for (size_t i = 0; i < n; ++i) {
        double g = 0;
        for (int r = 0; r < mpitest::size(); ++r) g += momentum_x(i, k, r) * wv[i];
        mv[i] = 0.9 * mv[i] + g / mpitest::size();
        wv[i] -= 0.25 * mv[i];
      }
    w.emplace_back(wv.begin(), wv.end());
    m.emplace_back(mv.begin(), mv.end());
  }
  w.insert(w.end(), m.begin(), m.end());
  return w;
}

bool bitwise_equal(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].size() != b[k].size() || std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)) != 0)
      return false;
  return true;
}

TEST(MpiSharedMemory, ShardedUpdateIsBitwiseTheWholeUpdate) {
  const int calls = 3;
  auto run = [&](const char* on, std::vector<bool>* sharded, size_t* node_shared) {
    ScopedEnv env("NGRAPH_SHM_SHARDED_UPDATE", on);
    Momentum t = momentum();
    for (int c = 0; c < calls; ++c) {
      t.step();
      sharded->push_back(t.cpu().last_call_sharded());
    }
    *node_shared = t.cpu().get_node_shared_variables();
    return t.values();
  };
  std::vector<bool> sharded, whole;
  size_t shared_vars = 0, whole_vars = 0;
  auto got = run("1", &sharded, &shared_vars);
  auto want = run("0", &whole, &whole_vars);
  EXPECT_EQ(shared_vars, switched_off() ? 0u : 6u) << "weights and momentum of all three variables";
  EXPECT_EQ(whole_vars, 0u);
  for (int c = 0; c < calls; ++c) {
    EXPECT_EQ(sharded[c], !switched_off()) << "call " << c;
    EXPECT_FALSE(whole[c]) << "call " << c;
  }
  // Every rank adds the ranks' gradients in rank order and scales them, as the allreduce does.
  EXPECT_TRUE(bitwise_equal(got, want));
  auto reference = momentum_reference(calls);
  for (size_t k = 0; k < got.size(); ++k) {
    EXPECT_TRUE(all_close(got[k], reference[k], 1e-4, 1e-5)) << "variable " << k;
    EXPECT_TRUE(same_on_every_rank(got[k])) << "variable " << k;
  }
}

// Whatever else writes a variable of a sharded update makes the ranks fall back to private
// copies for that call (they decide together), and once the values match again they share
// them again. Every step is checked bitwise against the same sequence run unsharded.
TEST(MpiSharedMemory, ShardedVariablesWrittenElsewhereFallBackAndShareAgain) {
  auto sequence = [](const char* on, std::vector<bool>* flags) {
    ScopedEnv env("NGRAPH_SHM_SHARDED_UPDATE", on);
    Momentum t = momentum();
    std::vector<std::vector<std::vector<float>>> snapshots;
    auto call = [&] {
      t.step();
      flags->push_back(t.cpu().last_call_sharded());
      snapshots.push_back(t.values());
    };
    const Shape s0 = kMomentumShapes[0], s1 = kMomentumShapes[1];
    call();
    // One rank loads other values: the ranks' copies differ, so nothing can be shared.
    if (mpitest::rank() == 0) {
      std::vector<float> other(shape_size(s0), 0.5f);
      t.w[0]->set(other.data());
    }
    call();
    // Every rank loads the same values (a checkpoint): shared again.
    {
      std::vector<float> same(shape_size(s0));
      for (size_t i = 0; i < same.size(); ++i) same[i] = 0.125f * static_cast<float>(i % 7);
      t.w[0]->set(same.data());
    }
    call();
    // Another executable reads a shared variable: the value every rank holds, no fallback.
    {
      auto w = std::make_shared<op::Variable>(t.w[1]);
      auto zero = std::make_shared<op::Constant>(element::f32, s1, std::vector<float>(shape_size(s1), 0.f));
      auto read = mpitest::compile(std::make_shared<Function>(OutputVector{std::make_shared<op::Add>(w, zero)},
                                                              ParameterVector{}, "reader"));
      auto out = mpitest::run(read, {});
      std::vector<float> held(shape_size(s1));
      t.w[1]->get(held.data());
      EXPECT_EQ(std::memcmp(mpitest::values_of<float>(out[0]).data(), held.data(), held.size() * sizeof(float)), 0);
    }
    call();
    // The numerics check runs a call unsharded (it restores a variable it finds a NaN in).
    runtime::set_check_numerics(true);
    call();
    runtime::set_check_numerics(false);
    call();
    // Another executable writes a shared variable (w1 = 2 w1 + 0.5, one fused kernel that
    // writes it in place) on every rank.
    {
      auto w = std::make_shared<op::Variable>(t.w[1]);
      auto two = std::make_shared<op::Constant>(element::f32, s1, std::vector<float>(shape_size(s1), 2.f));
      auto half = std::make_shared<op::Constant>(element::f32, s1, std::vector<float>(shape_size(s1), 0.5f));
      auto assign = std::make_shared<op::Assign>(w, std::make_shared<op::Add>(std::make_shared<op::Multiply>(w, two), half));
      auto sum = std::make_shared<op::Sum>(w, AxisSet{0});
      mpitest::run(mpitest::compile(std::make_shared<Function>(OutputVector{sum}, NodeVector{assign},
                                                               ParameterVector{}, "writer")),
                   {});
    }
    call();
    call();
    return snapshots;
  };
  std::vector<bool> sharded, whole;
  auto got = sequence("1", &sharded);
  auto want = sequence("0", &whole);
  ASSERT_EQ(got.size(), want.size());
  for (size_t c = 0; c < got.size(); ++c) {
    EXPECT_TRUE(bitwise_equal(got[c], want[c])) << "after call " << c;
    EXPECT_FALSE(whole[c]);
  }
  if (switched_off()) return;
  std::vector<bool> expect{true, false, true, true, false, true, true, true};
  for (size_t c = 0; c < expect.size(); ++c) EXPECT_EQ(sharded[c], expect[c]) << "call " << c;
}

// Two computations updating the same variables (two batch sizes, say) take the node's copy
// over from each other: every call still runs sharded, with the same bits as unsharded.
TEST(MpiSharedMemory, TwoComputationsOverTheSameVariablesAlternate) {
  auto run = [](const char* on, std::vector<bool>* flags) {
    ScopedEnv env("NGRAPH_SHM_SHARDED_UPDATE", on);
    Momentum a = momentum();
    Momentum b = momentum(false, mpitest::world(), &a);
    for (int c = 0; c < 3; ++c)
      for (Momentum* t : {&a, &b}) {
        t->step();
        flags->push_back(t->cpu().last_call_sharded());
      }
    return a.values();
  };
  std::vector<bool> sharded, whole;
  auto got = run("1", &sharded);
  auto want = run("0", &whole);
  EXPECT_TRUE(bitwise_equal(got, want));
  EXPECT_TRUE(all_close(got[0], momentum_reference(6)[0], 1e-4, 1e-5));
  for (size_t c = 0; c < sharded.size(); ++c) {
    EXPECT_EQ(sharded[c], !switched_off()) << "call " << c;
    EXPECT_FALSE(whole[c]);
  }
}

// A gradient that is also returned is reduced whole (the result needs it); the others are
// still summed by the sharded update.
TEST(MpiSharedMemory, AReturnedGradientIsReducedWholeAndTheRestSharded) {
  SKIP_IF_SWITCHED_OFF();
  Momentum t = momentum(true);
  Momentum plain;
  {
    ScopedEnv env("NGRAPH_SHM_SHARDED_UPDATE", "0");
    plain = momentum(true);
  }
  EXPECT_EQ(t.cpu().get_node_shared_variables(), 4u) << "the second and third variables' w and m";
  for (int c = 0; c < 2; ++c) {
    t.step();
    plain.step();
    EXPECT_TRUE(t.cpu().last_call_sharded());
    EXPECT_EQ(t.out[0].bytes, plain.out[0].bytes) << "the returned mean gradient, call " << c;
    EXPECT_TRUE(bitwise_equal(t.values(), plain.values())) << "call " << c;
  }
  // The returned gradient of the first call: mean over ranks of x_r * w0.
  auto g = mpitest::values_of<float>(t.out[0]);
  EXPECT_TRUE(same_on_every_rank(g));
}

// Across (simulated) nodes each rank updates its share, reduce-scattered and gathered between
// the nodes: the same bits as the whole update on every rank, with 2 ranks per node and 1.
TEST(MpiSharedMemory, ShardedUpdateAcrossNodes) {
  SKIP_IF_SWITCHED_OFF();
  for (const char* node_size : {"2", "1"}) {
    int per_node = std::atoi(node_size);
    if (mpitest::size() % per_node != 0) continue;
    ScopedEnv nodes("NGRAPH_SHM_NODE_SIZE", node_size);
    ScopedEnv across("NGRAPH_SHM_SHARDED_ACROSS_NODES", "1");
    Momentum t = momentum(false, fresh_world());  // its own node topology
    Momentum plain;
    {
      ScopedEnv env("NGRAPH_SHM_SHARDED_UPDATE", "0");
      plain = momentum(false, fresh_world());
    }
    for (int c = 0; c < 2; ++c) {
      t.step();
      plain.step();
      EXPECT_TRUE(t.cpu().last_call_sharded()) << "call " << c << ", " << node_size << " per node";
      // Across nodes the momentum stays with its shares' owners (the weights are gathered); the
      // 0-d variable's update runs whole on every rank.
      bool several = mpitest::size() / per_node > 1;
      for (const auto& m : t.m)
        EXPECT_EQ(m->is_scattered(), several && !m->get_shape().empty()) << "call " << c << ", " << node_size << " per node";
      for (const auto& w : t.w) EXPECT_FALSE(w->is_scattered()) << "call " << c << ", " << node_size << " per node";
      EXPECT_TRUE(bitwise_equal(t.values(), plain.values())) << "call " << c << ", " << node_size << " per node";
    }
  }
}

TEST(MpiSharedMemory, AMissingRankTimesOutAndTheRegionStaysUnusable) {
  SKIP_IF_SWITCHED_OFF();
  auto comm = fresh_world();
  comm->set_timeout(1.0);
  auto region = comm->create_shared_region(4096);
  ASSERT_TRUE(region);
  if (mpitest::rank() == 0) {  // the others never arrive
    try {
      region->allreduce(0, 64, 4, element::f32, ReduceOp::sum);
      ADD_FAILURE() << "expected a timeout";
    } catch (const distributed::DistributedError& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find("[AllReduce]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 0 timed out after 1 s"), std::string::npos) << msg;
      EXPECT_NE(msg.find("waiting for rank(s) 1"), std::string::npos) << msg;
    }
    EXPECT_THROW(region->allreduce(0, 64, 4, element::f32, ReduceOp::sum), distributed::DistributedError);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}
