// The shared-memory allreduce (SharedRegion) used directly and through compiled graphs: results
// against references computed from every rank's values, bitwise equal on every rank, the
// two-level path across (simulated) nodes, the argument checks, and the switch that turns it
// off.
#include <gtest/gtest.h>
#include <mpi.h>

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

TEST(MpiSharedMemory, OneRankPerNodeOrSwitchedOffMeansNone) {
  {
    ScopedEnv nodes("NGRAPH_SHM_NODE_SIZE", "1");
    EXPECT_FALSE(fresh_world()->create_shared_region(4096));
  }
  {
    ScopedEnv off("NGRAPH_SHM", "0");
    EXPECT_FALSE(fresh_world()->create_shared_region(4096));
  }
}

TEST(MpiSharedMemory, DifferentSizesAreRefusedEverywhere) {
  auto region = fresh_world()->create_shared_region(mpitest::rank() == 0 ? 4096 : 8192);
  EXPECT_FALSE(region);
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
