// Every collective op built into graphs on the MPI world (and on a sub-communicator), run on
// the CPU backend, checked against references computed here from every rank's input (each
// rank's values differ: base + 10 * rank), for f32, f64, i32 and i64. Also the Communicator
// interface used directly, in its blocking and start/wait forms.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <functional>

#include "mpi_test_utils.hpp"
#include "ngraph/distributed/communicator.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"

using namespace ngraph;
using distributed::ReduceOp;
using mpitest::all_close;
using mpitest::host;
using mpitest::Host;
using mpitest::values_of;
using mpitest::world;

namespace {

// Rank r's values: odd elements grow with the rank, even ones shrink, so max/min pick
// different ranks per element; negative values included.
template <typename T>
std::vector<T> rank_data(size_t n, int r) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) {
    int sign = i % 2 ? 1 : -1;
    v[i] = static_cast<T>(static_cast<int>(i) * 3 - 4 + 10 * r * sign);
  }
  return v;
}

// Small positive values for products (no overflow with 4 ranks).
template <typename T>
std::vector<T> prod_data(size_t n, int r) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<T>(1 + (static_cast<int>(i) + r) % 3);
  return v;
}

template <typename T>
std::vector<T> reduce_ref(ReduceOp op, const std::vector<std::vector<T>>& per_rank) {
  size_t n = per_rank.at(0).size();
  std::vector<T> out(n);
  for (size_t i = 0; i < n; ++i) {
    double acc = per_rank[0][i];
    for (size_t r = 1; r < per_rank.size(); ++r) {
      double v = per_rank[r][i];
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::mean: acc += v; break;
        case ReduceOp::max: acc = std::max(acc, v); break;
        case ReduceOp::min: acc = std::min(acc, v); break;
        case ReduceOp::prod: acc *= v; break;
      }
    }
    if (op == ReduceOp::mean) acc /= static_cast<double>(per_rank.size());
    out[i] = static_cast<T>(acc);
  }
  return out;
}

template <typename T>
std::vector<std::vector<T>> all_ranks(const std::function<std::vector<T>(int)>& make) {
  std::vector<std::vector<T>> out;
  for (int r = 0; r < mpitest::size(); ++r) out.push_back(make(r));
  return out;
}

// The ranks' values concatenated along `axis` (each rank's has shape `in`).
template <typename T>
std::vector<T> gather_ref(const std::vector<std::vector<T>>& per_rank, const Shape& in,
                          size_t axis) {
  Shape out_shape = in;
  out_shape[axis] *= per_rank.size();
  std::vector<T> out(shape_size(out_shape));
  for (size_t r = 0; r < per_rank.size(); ++r)
    for (size_t i = 0; i < shape_size(in); ++i) {
      auto c = mpitest::unravel(i, in);
      c[axis] += r * in[axis];
      out[mpitest::ravel(c, out_shape)] = per_rank[r][i];
    }
  return out;
}

// Part `part` (of shape `out`) of `full` split along `axis`.
template <typename T>
std::vector<T> slice_ref(const std::vector<T>& full, const Shape& out, size_t axis, size_t part,
                         size_t parts) {
  Shape full_shape = out;
  full_shape[axis] *= parts;
  std::vector<T> v(shape_size(out));
  for (size_t i = 0; i < v.size(); ++i) {
    auto c = mpitest::unravel(i, out);
    c[axis] += part * out[axis];
    v[i] = full[mpitest::ravel(c, full_shape)];
  }
  return v;
}

template <typename T>
std::shared_ptr<op::Parameter> param(const Shape& s) {
  return std::make_shared<op::Parameter>(element::from<T>(), s);
}

template <typename T>
class MpiCollectives : public ::testing::Test {};
using CollectiveTypes = ::testing::Types<float, double, int32_t, int64_t>;
TYPED_TEST_SUITE(MpiCollectives, CollectiveTypes);

TYPED_TEST(MpiCollectives, AllReduceEveryOp) {
  using T = TypeParam;
  const int r = mpitest::rank();
  const Shape s{2, 3};
  auto x = param<T>(s), p = param<T>(s);
  std::vector<ReduceOp> ops{ReduceOp::sum, ReduceOp::max, ReduceOp::min};
  if (std::is_floating_point_v<T>) ops.push_back(ReduceOp::mean);
  OutputVector results;
  for (auto o : ops) results.push_back(std::make_shared<op::AllReduce>(x, o, world()));
  results.push_back(std::make_shared<op::AllReduce>(p, "prod", world()));
  auto exe =
      mpitest::compile(std::make_shared<Function>(results, ParameterVector{x, p}, "allreduce"));
  // Two calls with different values: the compiled graph is reusable.
  for (int step = 0; step < 2; ++step) {
    auto data = [step](int k) {
      auto v = rank_data<T>(6, k);
      for (auto& e : v) e = static_cast<T>(e + step);
      return v;
    };
    auto xs = all_ranks<T>(data);
    auto ps = all_ranks<T>([](int k) { return prod_data<T>(6, k); });
    auto out = mpitest::run(exe, {host(s, xs[r]), host(s, ps[r])});
    ASSERT_EQ(out.size(), ops.size() + 1);
    for (size_t k = 0; k < ops.size(); ++k) {
      EXPECT_EQ(out[k].shape, s);
      EXPECT_TRUE(all_close(values_of<T>(out[k]), reduce_ref(ops[k], xs)))
          << "AllReduce " << distributed::to_string(ops[k]) << ", step " << step;
    }
    EXPECT_TRUE(all_close(values_of<T>(out.back()), reduce_ref(ReduceOp::prod, ps)))
        << "AllReduce prod, step " << step;
  }
}

TYPED_TEST(MpiCollectives, AllReduceMeanNeedsFloatingPoint) {
  using T = TypeParam;
  auto x = param<T>({3});
  if constexpr (std::is_floating_point_v<T>) {
    EXPECT_NO_THROW(std::make_shared<op::AllReduce>(x, "mean", world()));
  } else {
    EXPECT_THROW(std::make_shared<op::AllReduce>(x, "mean", world()), ElementTypeError);
  }
}

TYPED_TEST(MpiCollectives, BroadcastFromEveryRoot) {
  using T = TypeParam;
  const int r = mpitest::rank(), n = mpitest::size();
  const Shape s{3, 2};
  auto x = param<T>(s);
  OutputVector results;
  for (int root = 0; root < n; ++root)
    results.push_back(std::make_shared<op::BroadcastDistributed>(x, root, world()));
  // The same root twice in one graph, and a root that is not the first.
  results.push_back(std::make_shared<op::BroadcastDistributed>(x, n - 1, world()));
  auto xs = all_ranks<T>([](int k) { return rank_data<T>(6, k); });
  auto out = mpitest::run(std::make_shared<Function>(results, ParameterVector{x}, "bcast"),
                          {host(s, xs[r])});
  ASSERT_EQ(out.size(), static_cast<size_t>(n + 1));
  for (int root = 0; root < n; ++root)
    EXPECT_TRUE(all_close(values_of<T>(out[root]), xs[root])) << "root " << root;
  EXPECT_TRUE(all_close(values_of<T>(out[n]), xs[n - 1]));
}

TYPED_TEST(MpiCollectives, AllGatherAxes) {
  using T = TypeParam;
  const int r = mpitest::rank();
  const size_t n = static_cast<size_t>(mpitest::size());
  const Shape s2{2, 3}, s3{2, 2, 3};
  auto x = param<T>(s2), y = param<T>(s3);
  OutputVector results{std::make_shared<op::AllGather>(x, 0, world()),
                       std::make_shared<op::AllGather>(x, 1, world()),
                       std::make_shared<op::AllGather>(y, 1, world()),
                       std::make_shared<op::AllGather>(y, 2, world())};
  auto xs = all_ranks<T>([](int k) { return rank_data<T>(6, k); });
  auto ys = all_ranks<T>([](int k) { return rank_data<T>(12, k + 1); });
  auto out = mpitest::run(std::make_shared<Function>(results, ParameterVector{x, y}, "gather"),
                          {host(s2, xs[r]), host(s3, ys[r])});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].shape, (Shape{2 * n, 3}));
  EXPECT_EQ(out[1].shape, (Shape{2, 3 * n}));
  EXPECT_EQ(out[2].shape, (Shape{2, 2 * n, 3}));
  EXPECT_EQ(out[3].shape, (Shape{2, 2, 3 * n}));
  EXPECT_TRUE(all_close(values_of<T>(out[0]), gather_ref(xs, s2, 0))) << "axis 0";
  EXPECT_TRUE(all_close(values_of<T>(out[1]), gather_ref(xs, s2, 1))) << "axis 1";
  EXPECT_TRUE(all_close(values_of<T>(out[2]), gather_ref(ys, s3, 1))) << "3-d, axis 1";
  EXPECT_TRUE(all_close(values_of<T>(out[3]), gather_ref(ys, s3, 2))) << "3-d, axis 2";
}

TYPED_TEST(MpiCollectives, ReduceScatterAxes) {
  using T = TypeParam;
  const int r = mpitest::rank();
  const size_t n = static_cast<size_t>(mpitest::size());
  struct Case {
    Shape in;
    size_t axis;
    ReduceOp op;
  };
  std::vector<Case> cases{{{2 * n, 3}, 0, ReduceOp::sum},
                          {{3, 2 * n}, 1, ReduceOp::sum},
                          {{2, 2 * n, 3}, 1, ReduceOp::max},
                          {{2, 3, n}, 2, ReduceOp::min},
                          {{n, 2}, 0, ReduceOp::prod}};
  if (std::is_floating_point_v<T>) cases.push_back({{2, 2 * n}, 1, ReduceOp::mean});
  ParameterVector params;
  OutputVector results;
  std::vector<Host> inputs;
  std::vector<std::vector<std::vector<T>>> per_case;
  for (const auto& c : cases) {
    auto p = param<T>(c.in);
    params.push_back(p);
    results.push_back(std::make_shared<op::ReduceScatter>(p, c.op,
                                                          static_cast<int64_t>(c.axis), world()));
    size_t count = shape_size(c.in);
    bool prod = c.op == ReduceOp::prod;
    per_case.push_back(all_ranks<T>(
        [count, prod](int k) { return prod ? prod_data<T>(count, k) : rank_data<T>(count, k); }));
    inputs.push_back(host(c.in, per_case.back()[r]));
  }
  auto out = mpitest::run(std::make_shared<Function>(results, params, "reduce_scatter"), inputs);
  ASSERT_EQ(out.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    Shape expected_shape = cases[k].in;
    expected_shape[cases[k].axis] /= n;
    EXPECT_EQ(out[k].shape, expected_shape);
    auto full = reduce_ref(cases[k].op, per_case[k]);
    auto expected = slice_ref(full, expected_shape, cases[k].axis, static_cast<size_t>(r), n);
    EXPECT_TRUE(all_close(values_of<T>(out[k]), expected))
        << "ReduceScatter " << distributed::to_string(cases[k].op) << " of "
        << to_braces(cases[k].in) << " on axis " << cases[k].axis;
  }
}

TYPED_TEST(MpiCollectives, SendRecvRing) {
  using T = TypeParam;
  const int r = mpitest::rank(), n = mpitest::size();
  const Shape s{5};
  auto x = param<T>(s);
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  // Both directions in one graph, with different tags, plus a use of the received values.
  auto to_next = std::make_shared<op::Send>(x, next, 1, world());
  auto to_prev = std::make_shared<op::Send>(x, prev, 2, world());
  auto from_prev = std::make_shared<op::Recv>(s, element::from<T>(), prev, 1, world());
  auto from_next = std::make_shared<op::Recv>(s, element::from<T>(), next, 2, world());
  auto both = std::make_shared<op::Add>(from_prev, from_next);
  auto f = std::make_shared<Function>(OutputVector{from_prev, from_next, both},
                                      NodeVector{to_next, to_prev}, ParameterVector{x}, "ring");
  auto exe = mpitest::compile(f);
  for (int step = 0; step < 3; ++step) {
    auto data = [step](int k) {
      auto v = rank_data<T>(5, k);
      for (auto& e : v) e = static_cast<T>(e + 100 * step);
      return v;
    };
    auto out = mpitest::run(exe, {host(s, data(r))});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_TRUE(all_close(values_of<T>(out[0]), data(prev))) << "from rank " << prev;
    EXPECT_TRUE(all_close(values_of<T>(out[1]), data(next))) << "from rank " << next;
    std::vector<T> sum(5);
    for (size_t i = 0; i < 5; ++i) sum[i] = static_cast<T>(data(prev)[i] + data(next)[i]);
    EXPECT_TRUE(all_close(values_of<T>(out[2]), sum));
  }
}

// A pipeline through the ranks: each rank receives from the previous one, adds its rank and
// passes the value on; the Send depends on the Recv in the same graph.
TEST(MpiPointToPoint, Pipeline) {
  const int r = mpitest::rank(), n = mpitest::size();
  const Shape s{4};
  std::vector<double> start{1, 2, 3, 4};
  std::shared_ptr<Function> f;
  std::vector<Host> inputs;
  if (r == 0) {
    auto x = param<double>(s);
    auto send = std::make_shared<op::Send>(x, 1, 0, world());
    f = std::make_shared<Function>(OutputVector{}, NodeVector{send}, ParameterVector{x}, "first");
    inputs.push_back(host(s, start));
  } else {
    auto in = std::make_shared<op::Recv>(s, element::f64, r - 1, 0, world());
    auto plus = std::make_shared<op::Add>(
        in, std::make_shared<op::Constant>(element::f64, s, std::vector<double>{double(r)}));
    if (r + 1 < n) {
      auto send = std::make_shared<op::Send>(plus, r + 1, 0, world());
      f = std::make_shared<Function>(OutputVector{plus}, NodeVector{send}, ParameterVector{},
                                     "mid");
    } else {
      f = std::make_shared<Function>(OutputVector{plus}, ParameterVector{}, "last");
    }
  }
  auto out = mpitest::run(f, inputs);
  if (r > 0) {
    ASSERT_EQ(out.size(), 1u);
    std::vector<double> expected = start;
    for (auto& e : expected) e += r * (r + 1) / 2.0;
    EXPECT_TRUE(all_close(values_of<double>(out[0]), expected));
  } else {
    EXPECT_TRUE(out.empty());
  }
}

TEST(MpiPointToPoint, PeersAreChecked) {
  auto x = param<float>({2});
  const int r = mpitest::rank(), n = mpitest::size();
  EXPECT_THROW(std::make_shared<op::Send>(x, n, 0, world()), NodeValidationFailure);
  EXPECT_THROW(std::make_shared<op::Send>(x, r, 0, world()), NodeValidationFailure);
  EXPECT_THROW(std::make_shared<op::Recv>(Shape{2}, element::f32, -1, 0, world()),
               NodeValidationFailure);
  EXPECT_THROW(std::make_shared<op::BroadcastDistributed>(x, n, world()), NodeValidationFailure);
}

// Collectives of different kinds in one graph, depending on each other.
TEST(MpiCollectives, ChainedInOneGraph) {
  const int r = mpitest::rank();
  const size_t n = static_cast<size_t>(mpitest::size());
  const Shape s{2 * n};
  auto x = param<float>(s);
  auto b = std::make_shared<op::BroadcastDistributed>(x, 0, world());   // x_0
  auto rs = std::make_shared<op::ReduceScatter>(b, "sum", 0, world());  // n * x_0 part r
  auto g = std::make_shared<op::AllGather>(rs, 0, world());             // n * x_0
  auto ar = std::make_shared<op::AllReduce>(std::make_shared<op::Add>(g, x), "sum", world());
  auto xs = all_ranks<float>([n](int k) { return rank_data<float>(2 * n, k); });
  auto out =
      mpitest::run(std::make_shared<Function>(OutputVector{g, ar}, ParameterVector{x}, "chain"),
                   {host(s, xs[r])});
  std::vector<float> g_expected(2 * n), ar_expected(2 * n);
  auto sum = reduce_ref(ReduceOp::sum, xs);
  for (size_t i = 0; i < 2 * n; ++i) {
    g_expected[i] = static_cast<float>(n) * xs[0][i];
    ar_expected[i] = static_cast<float>(n) * g_expected[i] + sum[i];
  }
  EXPECT_TRUE(all_close(values_of<float>(out[0]), g_expected));
  EXPECT_TRUE(all_close(values_of<float>(out[1]), ar_expected));
}

// Without a communicator, ops use the default one: under mpirun, the MPI world.
TEST(MpiCollectives, DefaultCommunicatorIsTheWorld) {
  auto def = distributed::get_default_communicator();
  ASSERT_TRUE(def);
  EXPECT_EQ(def->size(), mpitest::size());
  EXPECT_EQ(def->rank(), mpitest::rank());
  EXPECT_NE(dynamic_cast<distributed::MPICommunicator*>(def.get()), nullptr) << def->name();
  auto x = param<int32_t>({3});
  auto ar = std::make_shared<op::AllReduce>(x);
  EXPECT_EQ(ar->get_communicator(), def);
  auto out = mpitest::run(std::make_shared<Function>(OutputVector{ar}, ParameterVector{x}),
                          {host(Shape{3}, std::vector<int32_t>{1, mpitest::rank(), 2})});
  int n = mpitest::size();
  EXPECT_EQ(values_of<int32_t>(out[0]), (std::vector<int32_t>{n, n * (n - 1) / 2, 2 * n}));
}

// Check modes: "first" checks agreement once per executable, "always" before every call.
TEST(MpiCollectives, CheckModes) {
  auto comm = std::make_shared<distributed::MPICommunicator>(MPI_COMM_WORLD, "check modes");
  auto x = param<float>({2});
  auto exe = mpitest::compile(std::make_shared<Function>(
      OutputVector{std::make_shared<op::AllReduce>(x, "sum", comm)}, ParameterVector{x}));
  Host in = host(Shape{2}, std::vector<float>{1, 2});
  auto before = distributed::get_check_mode();
  distributed::set_check_mode(distributed::CheckMode::always);
  mpitest::run(exe, {in});
  mpitest::run(exe, {in});
  EXPECT_EQ(comm->get_all_checks_passed(), 2u);
  distributed::set_check_mode(distributed::CheckMode::never);
  mpitest::run(exe, {in});
  EXPECT_EQ(comm->get_all_checks_passed(), 2u);
  distributed::set_check_mode(distributed::CheckMode::first);
  auto exe2 = mpitest::compile(std::make_shared<Function>(
      OutputVector{std::make_shared<op::AllReduce>(x, "max", comm)}, ParameterVector{x}));
  mpitest::run(exe2, {in});
  mpitest::run(exe2, {in});
  EXPECT_EQ(comm->get_all_checks_passed(), 3u);
  distributed::set_check_mode(before);
}

// ---------------------------------------------------------------- sub-communicators

TEST(MpiSubCommunicator, EvenAndOddRanks) {
  const int r = mpitest::rank(), n = mpitest::size();
  MPI_Comm split;
  ASSERT_EQ(MPI_Comm_split(MPI_COMM_WORLD, r % 2, r, &split), MPI_SUCCESS);
  auto sub =
      std::make_shared<distributed::MPICommunicator>(split, r % 2 ? "odd ranks" : "even ranks");
  MPI_Comm_free(&split);  // the communicator holds its own duplicate
  std::vector<int> members;
  for (int k = r % 2; k < n; k += 2) members.push_back(k);
  ASSERT_EQ(sub->size(), static_cast<int>(members.size()));
  EXPECT_EQ(sub->rank(), r / 2);
  EXPECT_TRUE(mpitest::contains(sub->name(), r % 2 ? "odd ranks" : "even ranks")) << sub->name();

  const Shape s{3};
  auto x = param<int64_t>(s);
  auto sum = std::make_shared<op::AllReduce>(x, "sum", sub);
  auto gathered = std::make_shared<op::AllGather>(x, 0, sub);
  auto from_first = std::make_shared<op::BroadcastDistributed>(x, 0, sub);
  auto world_sum = std::make_shared<op::AllReduce>(x, "sum", world());
  auto out =
      mpitest::run(std::make_shared<Function>(OutputVector{sum, gathered, from_first, world_sum},
                                              ParameterVector{x}, "sub"),
                   {host(s, rank_data<int64_t>(3, r))});
  std::vector<std::vector<int64_t>> group, everyone;
  for (int k : members) group.push_back(rank_data<int64_t>(3, k));
  for (int k = 0; k < n; ++k) everyone.push_back(rank_data<int64_t>(3, k));
  EXPECT_EQ(values_of<int64_t>(out[0]), reduce_ref(ReduceOp::sum, group));
  EXPECT_EQ(values_of<int64_t>(out[1]), gather_ref(group, s, 0));
  EXPECT_EQ(values_of<int64_t>(out[2]), group[0]);
  EXPECT_EQ(values_of<int64_t>(out[3]), reduce_ref(ReduceOp::sum, everyone));
}

// ------------------------------------------------------------ the interface directly

TEST(MpiCommunicatorInterface, BlockingForms) {
  auto& c = *world();
  const int r = c.rank(), n = c.size();
  // allreduce
  std::vector<double> in{1.0 + r, -2.0 * r, 0.5}, out(3);
  c.allreduce(in.data(), out.data(), 3, element::f64, ReduceOp::sum);
  EXPECT_TRUE(all_close(out, {n + n * (n - 1) / 2.0, -1.0 * n * (n - 1), 0.5 * n}));
  c.allreduce(in.data(), out.data(), 3, element::f64, ReduceOp::mean);
  EXPECT_TRUE(all_close(out, {1 + (n - 1) / 2.0, -1.0 * (n - 1), 0.5}));
  // broadcast from the last rank
  std::vector<int32_t> b{r, 10 * r};
  c.broadcast(b.data(), 2, element::i32, n - 1);
  EXPECT_EQ(b, (std::vector<int32_t>{n - 1, 10 * (n - 1)}));
  // allgather
  std::vector<int64_t> mine{r, 100 + r}, all(2 * static_cast<size_t>(n));
  c.allgather(mine.data(), all.data(), 2, element::i64);
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[2 * k], k);
    EXPECT_EQ(all[2 * k + 1], 100 + k);
  }
  // reduce_scatter: element i of the input is i + r; rank r keeps block r of the sums.
  std::vector<float> full(2 * static_cast<size_t>(n)), part(2);
  for (size_t i = 0; i < full.size(); ++i) full[i] = static_cast<float>(i) + static_cast<float>(r);
  c.reduce_scatter(full.data(), part.data(), 2, element::f32, ReduceOp::max);
  EXPECT_TRUE(all_close(part, {2.0f * r + n - 1, 2.0f * r + 1 + n - 1}));
  // send/recv in a ring (the ranks alternate so blocking sends cannot deadlock)
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<int32_t> token{r, -r}, got(2);
  if (r % 2 == 0) {
    c.send(token.data(), 2, element::i32, next, 5);
    c.recv(got.data(), 2, element::i32, prev, 5);
  } else {
    c.recv(got.data(), 2, element::i32, prev, 5);
    c.send(token.data(), 2, element::i32, next, 5);
  }
  EXPECT_EQ(got, (std::vector<int32_t>{prev, -prev}));
}

TEST(MpiCommunicatorInterface, StartAndWaitForms) {
  auto& c = *world();
  const int r = c.rank(), n = c.size();
  std::vector<float> a{1.0f * r}, a_out(1);
  std::vector<int32_t> m{r}, m_out(1);
  std::vector<int64_t> g{r}, g_out(static_cast<size_t>(n));
  std::vector<double> bc{r == 0 ? 3.5 : -1.0};
  // Several collectives in flight at once, completed in reverse order.
  auto r1 = c.start_allreduce(a.data(), a_out.data(), 1, element::f32, ReduceOp::sum);
  auto r2 = c.start_allreduce(m.data(), m_out.data(), 1, element::i32, ReduceOp::max);
  auto r3 = c.start_allgather(g.data(), g_out.data(), 1, element::i64);
  auto r4 = c.start_broadcast(bc.data(), 1, element::f64, 0);
  r4->wait();
  r3->wait();
  r2->wait();
  r1->wait();
  r1->wait();  // waiting again is harmless
  EXPECT_FLOAT_EQ(a_out[0], n * (n - 1) / 2.0f);
  EXPECT_EQ(m_out[0], n - 1);
  for (int k = 0; k < n; ++k) EXPECT_EQ(g_out[k], k);
  EXPECT_EQ(bc[0], 3.5);
  // Point to point: the receive is started before the send, on every rank.
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  std::vector<double> token{r + 0.25}, got(1);
  auto rr = c.start_recv(got.data(), 1, element::f64, prev, 9);
  auto rs = c.start_send(token.data(), 1, element::f64, next, 9);
  rr->wait();
  rs->wait();
  EXPECT_EQ(got[0], prev + 0.25);
  // allreduce in place (in == out), started and in the guarded blocking form
  std::vector<float> both{1.0f + r, -3.0f * r};
  c.start_allreduce(both.data(), both.data(), 2, element::f32, ReduceOp::sum)->wait();
  EXPECT_TRUE(all_close(both, {n + n * (n - 1) / 2.0f, -1.5f * n * (n - 1)}));
  std::vector<double> twice{2.0 * r};
  c.allreduce_guarded(twice.data(), twice.data(), 1, element::f64, ReduceOp::mean);
  EXPECT_DOUBLE_EQ(twice[0], n - 1.0);
  // reduce_scatter with mean
  std::vector<double> full(static_cast<size_t>(n), 2.0 * r), part(1);
  c.start_reduce_scatter(full.data(), part.data(), 1, element::f64, ReduceOp::mean)->wait();
  EXPECT_DOUBLE_EQ(part[0], n - 1.0);
}

TEST(MpiCommunicatorInterface, ArgumentErrors) {
  auto& c = *world();
  int32_t i = 0, o = 0;
  EXPECT_THROW(c.allreduce(&i, &o, 1, element::i32, ReduceOp::mean), std::invalid_argument);
  EXPECT_THROW(c.broadcast(&i, 1, element::i32, c.size()), std::invalid_argument);
  EXPECT_THROW(c.send(&i, 1, element::i32, -1), std::invalid_argument);
  EXPECT_THROW(c.recv(&i, 1, element::i32, c.size()), std::invalid_argument);
  char flag = 1, flag_out = 0;
  EXPECT_THROW(c.allreduce(&flag, &flag_out, 1, element::boolean, ReduceOp::max),
               std::invalid_argument);
  EXPECT_THROW(c.set_timeout(0), std::invalid_argument);
  // The communicator is still fine after argument errors (nothing was started).
  c.allreduce(&i, &o, 1, element::i32, ReduceOp::sum);
  EXPECT_EQ(o, 0);
  EXPECT_FALSE(world()->is_broken());
}

TEST(MpiCommunicatorInterface, TimeoutFromEnvironment) {
  // ctest sets NGRAPH_DIST_TIMEOUT; a new communicator picks it up.
  const char* env = std::getenv("NGRAPH_DIST_TIMEOUT");
  if (!env) GTEST_SKIP() << "NGRAPH_DIST_TIMEOUT is not set";
  EXPECT_DOUBLE_EQ(world()->get_timeout(), std::strtod(env, nullptr));
  EXPECT_TRUE(mpitest::contains(world()->name(), "MPI_COMM_WORLD")) << world()->name();
}

}  // namespace

namespace {

// A large computed value (rendezvous-sized, not eagerly copied by MPI) sent while the graph
// goes on computing: the buffer must not be reused before the send completes.
TEST(MpiPointToPoint, LargeSendOfAComputedValue) {
  const int r = mpitest::rank(), n = mpitest::size();
  const size_t count = size_t(1) << 20;  // 4 MiB of f32
  const Shape s{count};
  auto x = param<float>(s);
  auto y = std::make_shared<op::Add>(x, x);  // 2x, in the executable's own buffers
  auto send = std::make_shared<op::Send>(y, (r + 1) % n, 11, world());
  // Computed after the send started: w is y's last reader, so u may take y's buffer (a
  // Reverse, so that no fusion of elementwise ops folds the intermediates away).
  auto w = std::make_shared<op::Multiply>(y, x);
  auto u = std::make_shared<op::Reverse>(w, AxisSet{0});
  auto v = std::make_shared<op::Multiply>(u, x);
  auto got = std::make_shared<op::Recv>(s, element::f32, (r + n - 1) % n, 11, world());
  auto f = std::make_shared<Function>(OutputVector{got, v}, NodeVector{send}, ParameterVector{x},
                                      "large_send");
  auto exe = mpitest::compile(f);
  auto cpu = std::dynamic_pointer_cast<runtime::cpu::CPUExecutable>(exe);
  ASSERT_TRUE(cpu);
  std::string schedule;
  for (const auto& step : cpu->get_schedule()) schedule += step + " ";
  std::string buffers;
  for (const auto& b : cpu->get_buffer_assignments())
    buffers += b.tensor + "@" + std::to_string(b.offset) + " ";
  SCOPED_TRACE("schedule: " + schedule + "; buffers: " + buffers);
  // The sent value (y, the first step: every other op depends on it) keeps its buffer to the
  // end of the call: nothing allocated later overlaps it.
  const auto& assignments = cpu->get_buffer_assignments();
  auto sent =
      std::find_if(assignments.begin(), assignments.end(),
                   [](const runtime::cpu::BufferAssignment& b) { return b.first_step == 0; });
  ASSERT_NE(sent, assignments.end());
  for (const auto& b : assignments) {
    if (b.first_step > sent->first_step) {
      EXPECT_TRUE(b.offset >= sent->offset + sent->size || b.offset + b.size <= sent->offset)
          << b.tensor << " reuses the buffer of the value being sent";
    }
  }
  auto data = [count](int k) {
    std::vector<float> d(count);
    for (size_t i = 0; i < count; ++i) d[i] = static_cast<float>(k + 1) + static_cast<float>(i % 7);
    return d;
  };
  for (int step = 0; step < 3; ++step) {
    auto out = mpitest::run(exe, {host(s, data(r))});
    auto prev = data((r + n - 1) % n);
    for (auto& e : prev) e *= 2;
    EXPECT_TRUE(all_close(values_of<float>(out[0]), prev)) << "step " << step;
  }
}

}  // namespace
