// The oneCCL communicator (cpp/ccl): every collective against reference values computed from
// rank-dependent data, graph ops running on it, a sub-communicator, point-to-point (on MPI),
// errors, and a rank that never arrives. Linked with the MPI suites' main (../mpi/mpi_main.cpp)
// and run by ctest under mpirun with 2 and 4 ranks.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "../mpi/mpi_test_utils.hpp"
#include "ngraph/distributed/ccl_communicator.hpp"

namespace ngraph {
namespace {

using distributed::CCLCommunicator;
using distributed::DistributedError;
using distributed::ReduceOp;
using mpitest::all_close;
using mpitest::contains;
using mpitest::host;
using mpitest::values_of;

// One oneCCL communicator over the world for the whole suite (creating one takes seconds),
// released before MPI_Finalize by the environment's TearDown.
std::shared_ptr<CCLCommunicator> g_ccl;
// Starting oneCCL takes seconds (longer on a loaded machine): made with a 120 s timeout,
// then given the suites' (NGRAPH_DIST_TIMEOUT).
std::shared_ptr<CCLCommunicator> make_ccl(const std::string& description) {
  auto mpi = std::make_shared<distributed::MPICommunicator>(MPI_COMM_WORLD, description);
  double timeout = mpi->get_timeout();
  mpi->set_timeout(120);
  auto c = std::make_shared<CCLCommunicator>(mpi);
  c->set_timeout(timeout);
  return c;
}
std::shared_ptr<CCLCommunicator> ccl() {
  if (!g_ccl) g_ccl = make_ccl("MPI_COMM_WORLD");
  return g_ccl;
}
class ReleaseCCL : public ::testing::Environment {
 public:
  void TearDown() override { g_ccl.reset(); }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new ReleaseCCL);

template <typename T>
std::vector<T> rank_data(size_t n, int r) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>((r + 1) * 3 + static_cast<int>(i % 7) - 4);
  return v;
}

template <typename T>
std::vector<T> reduce_ref(ReduceOp op, int n, size_t count) {
  std::vector<T> acc = rank_data<T>(count, 0);
  for (int k = 1; k < n; ++k) {
    auto v = rank_data<T>(count, k);
    for (size_t i = 0; i < count; ++i) {
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::mean: acc[i] += v[i]; break;
        case ReduceOp::prod: acc[i] *= v[i]; break;
        case ReduceOp::max: acc[i] = std::max(acc[i], v[i]); break;
        case ReduceOp::min: acc[i] = std::min(acc[i], v[i]); break;
      }
    }
  }
  if (op == ReduceOp::mean)
    for (auto& e : acc) e = static_cast<T>(e * (1.0 / n));
  return acc;
}

template <typename T>
class CclCollectives : public ::testing::Test {};
using CollectiveTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(CclCollectives, CollectiveTypes);

TYPED_TEST(CclCollectives, EveryOpOfTheInterface) {
  using T = TypeParam;
  auto& c = *ccl();
  const int r = c.rank(), n = c.size();
  const element::Type t = element::from<T>();
  const size_t count = 1000;  // a few KB: oneCCL's ring and direct algorithms both show up
  std::vector<ReduceOp> ops{ReduceOp::sum, ReduceOp::max, ReduceOp::min, ReduceOp::prod};
  if (std::is_floating_point_v<T>) ops.push_back(ReduceOp::mean);
  for (auto op : ops) {
    auto in = rank_data<T>(count, r);
    std::vector<T> out(count), guarded(count);
    c.allreduce(in.data(), out.data(), count, t, op);
    c.allreduce_guarded(in.data(), guarded.data(), count, t, op);
    auto want = reduce_ref<T>(op, n, count);
    EXPECT_TRUE(all_close(out, want)) << "allreduce " << distributed::to_string(op);
    EXPECT_TRUE(all_close(guarded, want)) << "allreduce_guarded " << distributed::to_string(op);
    // reduce_scatter: rank r keeps part r of the reduction.
    std::vector<T> part(count / 10);
    auto full = rank_data<T>(part.size() * static_cast<size_t>(n), r);
    c.reduce_scatter(full.data(), part.data(), part.size(), t, op);
    auto all = reduce_ref<T>(op, n, full.size());
    std::vector<T> mine(all.begin() + static_cast<long>(part.size()) * r,
                        all.begin() + static_cast<long>(part.size()) * (r + 1));
    EXPECT_TRUE(all_close(part, mine)) << "reduce_scatter " << distributed::to_string(op);
  }
  for (int root = 0; root < n; ++root) {
    auto v = r == root ? rank_data<T>(count, root) : std::vector<T>(count);
    c.broadcast(v.data(), count, t, root);
    EXPECT_EQ(v, rank_data<T>(count, root)) << "broadcast from " << root;
  }
  std::vector<T> gathered(count * static_cast<size_t>(n));
  auto in = rank_data<T>(count, r);
  c.allgather(in.data(), gathered.data(), count, t);
  for (int k = 0; k < n; ++k)
    EXPECT_EQ(std::vector<T>(gathered.begin() + static_cast<long>(count) * k,
                             gathered.begin() + static_cast<long>(count) * (k + 1)),
              rank_data<T>(count, k))
        << "allgather, part of rank " << k;
}

TEST(CclCollectives, GraphOpsRunOnIt) {
  auto comm = ccl();
  const int r = comm->rank(), n = comm->size();
  const Shape s{4, 3};
  auto x = std::make_shared<op::Parameter>(element::f32, s);
  auto mean = std::make_shared<op::AllReduce>(x, "mean", comm);
  auto gathered = std::make_shared<op::AllGather>(x, 1, comm);
  auto from_last = std::make_shared<op::BroadcastDistributed>(x, n - 1, comm);
  auto exe = mpitest::compile(
      std::make_shared<Function>(OutputVector{mean, gathered, from_last}, ParameterVector{x}, "ccl"));
  for (int step = 0; step < 3; ++step) {  // the agreement check, then the verified fast path
    auto mine = rank_data<float>(12, r + step);
    auto out = mpitest::run(exe, {host(s, mine)});
    std::vector<float> want_mean(12, 0.f);
    for (int k = 0; k < n; ++k) {
      auto v = rank_data<float>(12, k + step);
      for (size_t i = 0; i < 12; ++i) want_mean[i] += v[i] / static_cast<float>(n);
    }
    EXPECT_TRUE(all_close(values_of<float>(out[0]), want_mean)) << "step " << step;
    auto g = values_of<float>(out[1]);  // [4, 3 * n]: rank k's columns at 3k..3k+2
    ASSERT_EQ(g.size(), 12u * static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      auto v = rank_data<float>(12, k + step);
      for (size_t row = 0; row < 4; ++row)
        for (size_t col = 0; col < 3; ++col)
          EXPECT_EQ(g[row * 3 * static_cast<size_t>(n) + static_cast<size_t>(k) * 3 + col], v[row * 3 + col]);
    }
    EXPECT_EQ(values_of<float>(out[2]), rank_data<float>(12, n - 1 + step));
  }
  EXPECT_GE(comm->get_checks_passed(), 1u);
}

TEST(CclCollectives, SubCommunicatorOfEvenAndOddRanks) {
  const int r = mpitest::rank(), n = mpitest::size();
  MPI_Comm split;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &split), MPI_SUCCESS);
  auto mpi = std::make_shared<distributed::MPICommunicator>(split, r % 2 ? "odd ranks" : "even ranks");
  MPI_Comm_free(&split);
  if (mpi->size() < 2) GTEST_SKIP() << "one rank in this half";
  mpi->set_timeout(120);
  auto sub = std::make_shared<CCLCommunicator>(mpi);
  EXPECT_EQ(sub->rank(), r / 2);
  EXPECT_TRUE(contains(sub->name(), "oneCCL")) << sub->name();
  std::vector<int64_t> in = rank_data<int64_t>(5, r), out(5), want(5, 0);
  sub->allreduce(in.data(), out.data(), 5, element::i64, ReduceOp::sum);
  for (int k = r % 2; k < n; k += 2) {
    auto v = rank_data<int64_t>(5, k);
    for (size_t i = 0; i < 5; ++i) want[i] += v[i];
  }
  EXPECT_EQ(out, want);
}

TEST(CclPointToPoint, RingOverMPI) {
  auto& c = *ccl();
  const int r = c.rank(), n = c.size();
  auto mine = rank_data<double>(7, r);
  std::vector<double> got(7);
  auto send = c.start_send(mine.data(), 7, element::f64, (r + 1) % n, 3);
  c.recv(got.data(), 7, element::f64, (r + n - 1) % n, 3);
  send->wait();
  EXPECT_EQ(got, rank_data<double>(7, (r + n - 1) % n));
}

TEST(CclErrors, ArgumentsAreChecked) {
  auto& c = *ccl();
  std::vector<int8_t> small(4);
  try {
    c.start_allreduce(small.data(), small.data() + 2, 2, element::i8, ReduceOp::sum);
    FAIL() << "i8 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "[AllReduce] element type i8")) << e.what();
  }
  std::vector<int32_t> ints(4);
  EXPECT_THROW(c.start_allreduce(ints.data(), ints.data() + 2, 2, element::i32, ReduceOp::mean),
               std::invalid_argument);
  EXPECT_THROW(c.start_broadcast(ints.data(), 2, element::i32, c.size()), std::invalid_argument);
  EXPECT_THROW(distributed::CCLCommunicator(nullptr), std::invalid_argument);
}

// The last rank never joins an allreduce: every other rank fails within the timeout with a
// DistributedError naming the op, its bytes, the rank and oneCCL; the communicator then
// refuses further work at once. A communicator of its own, since this one is broken after.
TEST(CclTimeout, RankThatNeverArrives) {
  const int n = mpitest::size();
  auto c = make_ccl("the timeout test's world");
  c->set_timeout(1.5);
  const int r = c->rank();
  std::vector<float> in(256, 1.f), out(256);
  if (r != n - 1) {
    auto start = std::chrono::steady_clock::now();
    try {
      c->allreduce(in.data(), out.data(), 256, element::f32, ReduceOp::sum);
      ADD_FAILURE() << "the allreduce completed without rank " << n - 1;
    } catch (const DistributedError& e) {
      std::string m = e.what();
      EXPECT_TRUE(contains(m, "[AllReduce] 256 x f32 (1024 bytes, oneCCL)")) << m;
      EXPECT_TRUE(contains(m, "rank " + std::to_string(r) + " timed out after 1.5 s")) << m;
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(s, 10.0);
    EXPECT_TRUE(c->is_broken());
    try {
      c->allreduce(in.data(), out.data(), 256, element::f32, ReduceOp::sum);
      ADD_FAILURE() << "a broken communicator ran an allreduce";
    } catch (const DistributedError& e) {
      EXPECT_TRUE(contains(e.what(), "unusable after an earlier failure")) << e.what();
    }
  }
  // In step again over MPI (the world's suites go on), then the late rank completes the
  // pending allreduce so that oneCCL is left with nothing in flight.
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == n - 1) c->allreduce(in.data(), out.data(), 256, element::f32, ReduceOp::sum);
  MPI_Barrier(MPI_COMM_WORLD);
}

// Nodes of 2 ranks (NGRAPH_SHM_NODE_SIZE): the fused allreduce reduces in shared memory on each
// "node" and joins the nodes on oneCCL.
TEST(CclSharedMemory, TwoLevelAcrossNodes) {
  const int n = mpitest::size();
  if (n < 4 || n % 2) GTEST_SKIP() << "needs an even number of ranks, at least 4";
  setenv("NGRAPH_SHM_NODE_SIZE", "2", 1);
  auto c = make_ccl("world, nodes of 2");
  double timeout = c->get_timeout();
  c->set_timeout(120);  // the region makes a oneCCL communicator between the nodes
  auto region = c->create_shared_region(4096);
  c->set_timeout(timeout);
  unsetenv("NGRAPH_SHM_NODE_SIZE");
  ASSERT_TRUE(region) << "no shared memory";
  EXPECT_TRUE(contains(region->describe(), "on 2 nodes")) << region->describe();
  auto in = rank_data<float>(256, c->rank());
  std::memcpy(region->local(), in.data(), 1024);
  region->allreduce(0, 2048, 256, element::f32, ReduceOp::mean);
  std::vector<float> got(256);
  std::memcpy(got.data(), region->local() + 2048, 1024);
  EXPECT_TRUE(all_close(got, reduce_ref<float>(ReduceOp::mean, n, 256)));
}

}  // namespace
}  // namespace ngraph
