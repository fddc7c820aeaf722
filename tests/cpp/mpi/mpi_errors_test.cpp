// Failures must end in DistributedError on every rank, bounded in time, never in a hang:
// ranks that build different collectives, a rank that skips a collective, a message of the
// wrong size.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <thread>

#include "mpi_test_utils.hpp"
#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/ops.hpp"

using namespace ngraph;
using distributed::DistributedError;
using mpitest::contains;
using mpitest::host;
using mpitest::Host;
using mpitest::world;

namespace {

std::shared_ptr<op::Parameter> param(element::Type t, const Shape& s) {
  return std::make_shared<op::Parameter>(t, s);
}

// Runs `f` (built per rank) once and returns the DistributedError's message ("" and a
// failure when it does not throw one).
std::string distributed_error_of(const std::shared_ptr<Function>& f, const std::vector<Host>& in) {
  try {
    mpitest::run(f, in);
  } catch (const DistributedError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << mpitest::rank() << " threw another error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "rank " << mpitest::rank() << " did not throw";
  return "";
}

std::vector<int> ranks_where(const std::function<bool(int)>& pred) {
  std::vector<int> out;
  for (int k = 0; k < mpitest::size(); ++k)
    if (pred(k)) out.push_back(k);
  return out;
}

// After a disagreement every rank is still in step: the communicator keeps working.
void expect_world_still_works() {
  auto x = param(element::i32, {1});
  auto out = mpitest::run(
      std::make_shared<Function>(OutputVector{std::make_shared<op::AllReduce>(x, "sum", world())},
                                 ParameterVector{x}),
      {host(Shape{1}, std::vector<int32_t>{1})});
  EXPECT_EQ(mpitest::values_of<int32_t>(out[0]), std::vector<int32_t>{mpitest::size()});
  EXPECT_FALSE(world()->is_broken());
}

TEST(MpiDisagreement, AllReduceShapes) {
  const int r = mpitest::rank();
  Shape s{4 + static_cast<size_t>(r % 2)};
  auto x = param(element::f32, s);
  auto f =
      std::make_shared<Function>(OutputVector{std::make_shared<op::AllReduce>(x, "sum", world())},
                                 ParameterVector{x}, "shapes");
  std::string msg = distributed_error_of(f, {host(s, std::vector<float>(shape_size(s), 1.0f))});
  EXPECT_EQ(msg.rfind("[AllReduce]", 0), 0u) << msg;
  EXPECT_TRUE(contains(msg, "graph 'shapes'")) << msg;
  EXPECT_TRUE(contains(msg, "AllReduce f32{4} sum")) << msg;
  EXPECT_TRUE(contains(msg, "AllReduce f32{5} sum")) << msg;
  auto even = mpitest::rank_list(ranks_where([](int k) { return k % 2 == 0; }));
  auto odd = mpitest::rank_list(ranks_where([](int k) { return k % 2 == 1; }));
  EXPECT_TRUE(contains(msg, even + " run")) << msg;  // "rank 0 runs", "ranks 0,2 run"
  EXPECT_TRUE(contains(msg, odd + " run")) << msg;
  expect_world_still_works();
}

TEST(MpiDisagreement, NumberOfCollectives) {
  const int r = mpitest::rank(), n = mpitest::size();
  auto x = param(element::f64, {3});
  OutputVector results{std::make_shared<op::AllReduce>(x, "sum", world())};
  if (r == n - 1) results.push_back(std::make_shared<op::AllGather>(x, 0, world()));
  auto f = std::make_shared<Function>(results, ParameterVector{x}, "count");
  std::string msg = distributed_error_of(f, {host(Shape{3}, std::vector<double>{1, 2, 3})});
  EXPECT_TRUE(contains(msg, "collective #1")) << msg;
  EXPECT_TRUE(contains(msg, "AllGather f64{3} axis=0")) << msg;
  EXPECT_TRUE(contains(msg, "(no collective)")) << msg;
  EXPECT_TRUE(contains(msg, mpitest::rank_list({n - 1}) + " run")) << msg;
  // The message names the op even though rank 0 has none at that position.
  EXPECT_EQ(msg.rfind("[AllGather]", 0), 0u) << msg;
  expect_world_still_works();
}

TEST(MpiDisagreement, OpTypeAndOrder) {
  const int r = mpitest::rank();
  auto x = param(element::f32, {2});
  // Rank 0 reduces with max, the others with sum.
  auto f1 = std::make_shared<Function>(
      OutputVector{std::make_shared<op::AllReduce>(x, r == 0 ? "max" : "sum", world())},
      ParameterVector{x});
  Host in = host(Shape{2}, std::vector<float>{1, 2});
  std::string msg = distributed_error_of(f1, {in});
  EXPECT_TRUE(contains(msg, "AllReduce f32{2} max")) << msg;
  EXPECT_TRUE(contains(msg, "AllReduce f32{2} sum")) << msg;
  // Same collectives, different order on rank 0.
  auto a = std::make_shared<op::AllReduce>(x, "sum", world());
  auto b = std::make_shared<op::BroadcastDistributed>(x, 0, world());
  auto b_of_a = std::make_shared<op::BroadcastDistributed>(a, 0, world());
  auto a_of_b = std::make_shared<op::AllReduce>(b, "sum", world());
  auto f2 = std::make_shared<Function>(OutputVector{r == 0 ? Output(a_of_b) : Output(b_of_a)},
                                       ParameterVector{x});
  msg = distributed_error_of(f2, {in});
  EXPECT_TRUE(contains(msg, "collective #0")) << msg;
  EXPECT_TRUE(contains(msg, "BroadcastDistributed f32{2} root=0")) << msg;
  EXPECT_TRUE(contains(msg, "AllReduce f32{2} sum")) << msg;
  expect_world_still_works();
}

TEST(MpiDisagreement, ElementTypes) {
  const int r = mpitest::rank();
  element::Type t = r == 0 ? element::i32 : element::i64;
  auto x = param(t, {2});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::AllGather>(x, 0, world())},
                                      ParameterVector{x});
  Host in = r == 0 ? host(Shape{2}, std::vector<int32_t>{1, 2})
                   : host(Shape{2}, std::vector<int64_t>{1, 2});
  std::string msg = distributed_error_of(f, {in});
  EXPECT_TRUE(contains(msg, "AllGather i32{2} axis=0")) << msg;
  EXPECT_TRUE(contains(msg, "AllGather i64{2} axis=0")) << msg;
  expect_world_still_works();
}

// The completion dance after a timeout: the ranks that timed out keep their MPI request
// pending; the rank that skipped completes the collective late (matching it), and the
// barriers drive MPI's progress so every request finishes before the test returns.
template <typename F>
void complete_late(int skipper, F&& late_call) {
  MPI_Barrier(MPI_COMM_WORLD);
  if (mpitest::rank() == skipper) late_call();
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(MpiTimeout, RankSkipsACollective) {
  const int r = mpitest::rank(), n = mpitest::size();
  const int skipper = n - 1;
  auto comm = std::make_shared<distributed::MPICommunicator>(MPI_COMM_WORLD, "timeout test");
  comm->set_timeout(2);
  auto x = param(element::f32, {4});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::AllReduce>(x, "sum", comm)},
                                      ParameterVector{x}, "skip");
  auto exe = mpitest::compile(f);
  std::vector<float> in(4, 1.0f), out(4, 0.0f);
  auto before = distributed::get_check_mode();
  distributed::set_check_mode(distributed::CheckMode::never);  // the AllReduce itself waits
  std::vector<std::shared_ptr<runtime::Tensor>> ins{
      std::make_shared<runtime::Tensor>(element::f32, Shape{4}, in.data())};
  std::vector<std::shared_ptr<runtime::Tensor>> outs{
      std::make_shared<runtime::Tensor>(element::f32, Shape{4}, out.data())};
  if (r != skipper) {
    auto start = std::chrono::steady_clock::now();
    std::string msg;
    try {
      exe->call(outs, ins);
      ADD_FAILURE() << "rank " << r << " did not time out";
    } catch (const DistributedError& e) {
      msg = e.what();
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 1.9) << msg;
    EXPECT_LT(waited, 10.0) << msg;
    EXPECT_TRUE(contains(msg, "[AllReduce]")) << msg;
    EXPECT_TRUE(contains(msg, "timed out after 2 s")) << msg;
    EXPECT_TRUE(contains(msg, "rank " + std::to_string(r))) << msg;
    EXPECT_TRUE(contains(msg, "timeout test")) << msg;
    // Later calls fail at once, naming the first failure: the computation's own
    // communicator is broken; the one its ops name stays usable.
    EXPECT_FALSE(comm->is_broken());
    start = std::chrono::steady_clock::now();
    try {
      exe->call(outs, ins);
      ADD_FAILURE() << "a broken communicator ran a collective";
    } catch (const DistributedError& e) {
      EXPECT_TRUE(contains(e.what(), "unusable after an earlier failure")) << e.what();
      EXPECT_TRUE(contains(e.what(), "timed out")) << e.what();
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
  }
  // The skipping rank completes the pending allreduce (on the computation's communicator:
  // it calls the computation) so MPI can finalise cleanly (the other ranks' buffers, `in`
  // and `out`, stay alive until then).
  complete_late(skipper, [&] {
    exe->call(outs, ins);
    EXPECT_EQ(out[0], static_cast<float>(n));
  });
  distributed::set_check_mode(before);
  EXPECT_FALSE(world()->is_broken());
}

// The same with the agreement check on: the ranks that wait time out in the check.
TEST(MpiTimeout, RankSkipsACallWithChecks) {
  const int r = mpitest::rank(), n = mpitest::size();
  const int skipper = 0;
  auto comm = std::make_shared<distributed::MPICommunicator>(MPI_COMM_WORLD, "check timeout");
  comm->set_timeout(2);
  auto x = param(element::f64, {2});
  auto f = std::make_shared<Function>(OutputVector{std::make_shared<op::AllGather>(x, 0, comm)},
                                      ParameterVector{x});
  auto before = distributed::get_check_mode();
  distributed::set_check_mode(distributed::CheckMode::always);
  if (r != skipper) {
    auto start = std::chrono::steady_clock::now();
    std::string msg;
    try {
      mpitest::run(f, {host(Shape{2}, std::vector<double>{1, 2})});
      ADD_FAILURE() << "rank " << r << " did not time out";
    } catch (const DistributedError& e) {
      msg = e.what();
    }
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 1.9) << msg;
    EXPECT_LT(waited, 10.0) << msg;
    EXPECT_TRUE(contains(msg, "timed out")) << msg;
  }
  distributed::set_check_mode(before);
  // Compiling is collective (the computation's communicator is duplicated then): the others
  // timed out there, in the barrier before the node topology's split. A late compile on the
  // skipping rank would pass that barrier and then wait in MPI_Comm_split_type forever (the
  // blocking split a late rank can still reach: see docs/distributed.md, Failure
  // behaviour), so the skipping rank does not follow.
  MPI_Barrier(MPI_COMM_WORLD);
  (void)n;
}

TEST(MpiTimeout, RecvWithoutSender) {
  auto comm = std::make_shared<distributed::MPICommunicator>(MPI_COMM_WORLD, "recv timeout");
  comm->set_timeout(1);
  const int r = mpitest::rank(), n = mpitest::size();
  if (r == 0) {
    auto y = std::make_shared<op::Recv>(Shape{3}, element::i32, n - 1, 3, comm);
    auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{});
    auto start = std::chrono::steady_clock::now();
    std::string msg = distributed_error_of(f, {});
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 0.9) << msg;
    EXPECT_LT(waited, 8.0) << msg;
    EXPECT_TRUE(contains(msg, "[Recv]")) << msg;
    EXPECT_TRUE(contains(msg, "timed out")) << msg;
    EXPECT_TRUE(contains(msg, "from rank " + std::to_string(n - 1))) << msg;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(MpiPointToPointErrors, RecvOfTheWrongSize) {
  const int r = mpitest::rank();
  if (r == 0) {
    auto x = param(element::f32, {5});
    auto send = std::make_shared<op::Send>(x, 1, 4, world());
    auto f = std::make_shared<Function>(OutputVector{}, NodeVector{send}, ParameterVector{x});
    EXPECT_NO_THROW(mpitest::run(f, {host(Shape{5}, std::vector<float>{1, 2, 3, 4, 5})}));
  } else if (r == 1) {
    auto y = std::make_shared<op::Recv>(Shape{4}, element::f32, 0, 4, world());
    auto f = std::make_shared<Function>(OutputVector{y}, ParameterVector{});
    std::string msg = distributed_error_of(f, {});
    EXPECT_TRUE(contains(msg, "[Recv]")) << msg;
    EXPECT_TRUE(contains(msg, "expected 4 elements of f32")) << msg;
    EXPECT_TRUE(contains(msg, "from rank 0")) << msg;
    EXPECT_TRUE(contains(msg, "20 bytes (5 elements)")) << msg;
  }
  // The bad message was consumed: point-to-point traffic on the world still works.
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) {
    auto x = param(element::f32, {4});
    auto send = std::make_shared<op::Send>(x, 1, 4, world());
    mpitest::run(std::make_shared<Function>(OutputVector{}, NodeVector{send}, ParameterVector{x}),
                 {host(Shape{4}, std::vector<float>{1, 2, 3, 4})});
  } else if (r == 1) {
    auto y = std::make_shared<op::Recv>(Shape{4}, element::f32, 0, 4, world());
    auto out = mpitest::run(std::make_shared<Function>(OutputVector{y}, ParameterVector{}), {});
    EXPECT_EQ(mpitest::values_of<float>(out[0]), (std::vector<float>{1, 2, 3, 4}));
  }
  EXPECT_FALSE(world()->is_broken());
  expect_world_still_works();
}

}  // namespace
