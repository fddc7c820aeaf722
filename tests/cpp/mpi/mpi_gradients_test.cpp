// Gradient rules of the collectives, for the global objective (the sum over ranks of every
// rank's loss): each rank's analytic gradient is checked against central differences of the
// global objective (rank k perturbs one element of its x while the others keep theirs), and
// against closed forms where there is one.
#include <gtest/gtest.h>
#include <mpi.h>

#include <functional>

#include "mpi_test_utils.hpp"
#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops.hpp"

using namespace ngraph;
using mpitest::all_close;
using mpitest::host;
using mpitest::values_of;
using mpitest::world;

namespace {

// Builds rank's loss (a scalar) from x.
using LossBuilder = std::function<Output(const Output& x)>;

struct Gradient {
  std::vector<double> analytic;  // this rank's dL/dx from the gradient rules
  std::vector<double> numeric;   // this rank's dL/dx from central differences of L
  std::shared_ptr<Node> dx;      // the gradient node (to inspect the rule's ops)
};

// Per-rank weights, so that every rank's incoming gradient differs.
std::vector<double> weights(size_t n, int r) {
  std::vector<double> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = 0.5 + 0.25 * static_cast<double>(i) - 0.75 * r;
  return w;
}

std::shared_ptr<op::Constant> constant(const Shape& s, const std::vector<double>& v) {
  return std::make_shared<op::Constant>(element::f64, s, v);
}

// sum(y * w_rank): the loss of one rank for an output y.
Output weighted_sum(const Output& y) {
  const Shape& s = y.get_shape();
  AxisSet all;
  for (size_t d = 0; d < s.size(); ++d) all.insert(d);
  auto w = constant(s, weights(shape_size(s), mpitest::rank()));
  return std::make_shared<op::Sum>(std::make_shared<op::Multiply>(y, w), all);
}

Gradient gradient(const Shape& shape, const std::function<std::vector<double>(int)>& x_of,
                  const LossBuilder& loss_of) {
  const int r = mpitest::rank(), n = mpitest::size();
  Gradient g;
  auto x = std::make_shared<op::Parameter>(element::f64, shape);
  Output loss = loss_of(x);
  auto seed = constant(Shape{}, {1.0});
  autodiff::Adjoints adjoints({loss}, {seed});
  Output dx = adjoints.backprop_output(x);
  g.dx = dx.get_node_shared_ptr();
  auto grad_exe =
      mpitest::compile(std::make_shared<Function>(OutputVector{dx}, ParameterVector{x}));
  std::vector<double> mine = x_of(r);
  g.analytic = values_of<double>(mpitest::run(grad_exe, {host(shape, mine)})[0]);

  auto loss_exe =
      mpitest::compile(std::make_shared<Function>(OutputVector{loss}, ParameterVector{x}));
  auto global_loss = [&](const std::vector<double>& xv) {
    double l = values_of<double>(mpitest::run(loss_exe, {host(shape, xv)})[0]).at(0), total = 0;
    MPI_Allreduce(&l, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return total;
  };
  const double eps = 1e-3;
  g.numeric.assign(mine.size(), 0.0);
  for (int k = 0; k < n; ++k)
    for (size_t i = 0; i < mine.size(); ++i) {
      std::vector<double> plus = mine, minus = mine;
      if (k == r) {
        plus[i] += eps;
        minus[i] -= eps;
      }
      double d = (global_loss(plus) - global_loss(minus)) / (2 * eps);
      if (k == r) g.numeric[i] = d;
    }
  return g;
}

bool graph_has(const std::shared_ptr<Node>& root, const std::string& type) {
  for (const auto& node : topological_sort({root}))
    if (node->get_type_name() == type) return true;
  return false;
}

// Distinct values per element across ranks (max/min have a single winner), none zero.
std::vector<double> distinct(size_t count, int r) {
  std::vector<double> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = (i % 2 ? 1.0 : -1.0) * (1.0 + 0.3 * static_cast<double>(i)) +
           1.7 * r * (i % 3 ? 1.0 : -1.0);
  return v;
}

TEST(MpiGradients, AllReduceSumIsTheSumOfTheWeights) {
  const Shape s{2, 3};
  auto g = gradient(
      s, [&](int k) { return distinct(6, k); },
      [](const Output& x) {
        return weighted_sum(std::make_shared<op::AllReduce>(x, "sum", world()));
      });
  std::vector<double> expected(6, 0.0);
  for (int k = 0; k < mpitest::size(); ++k) {
    auto w = weights(6, k);
    for (size_t i = 0; i < 6; ++i) expected[i] += w[i];
  }
  EXPECT_TRUE(all_close(g.analytic, expected, 1e-12, 1e-12));
  EXPECT_TRUE(all_close(g.numeric, expected, 1e-6, 1e-6));
  EXPECT_TRUE(graph_has(g.dx, "AllReduce"));
}

TEST(MpiGradients, AllReduceEveryOpMatchesCentralDifferences) {
  const Shape s{4};
  for (const char* op : {"sum", "mean", "max", "min", "prod"}) {
    auto g = gradient(
        s, [&](int k) { return distinct(4, k); },
        [op](const Output& x) {
          // A nonlinear use, so the incoming gradient depends on the value.
          auto y = std::make_shared<op::AllReduce>(x, op, world());
          return weighted_sum(std::make_shared<op::Multiply>(y, y));
        });
    EXPECT_TRUE(all_close(g.analytic, g.numeric, 1e-5, 1e-5)) << "AllReduce " << op;
  }
}

TEST(MpiGradients, AllReduceProdWithAZero) {
  const Shape s{3};
  // Element 0: one zero (on rank 0); element 1: two zeros (ranks 0 and 1); element 2: none.
  auto x_of = [](int k) {
    return std::vector<double>{k == 0 ? 0.0 : 1.5 + k, k <= 1 ? 0.0 : 2.0, 0.5 + k};
  };
  auto g = gradient(s, x_of, [](const Output& x) {
    return weighted_sum(std::make_shared<op::AllReduce>(x, "prod", world()));
  });
  EXPECT_TRUE(all_close(g.analytic, g.numeric, 1e-6, 1e-6));
}

TEST(MpiGradients, AllGatherGradientIsReduceScatter) {
  for (int64_t axis : {0, 1}) {
    const Shape s{2, 3};
    auto g = gradient(
        s, [](int k) { return distinct(6, k); },
        [axis](const Output& x) {
          return weighted_sum(std::make_shared<op::AllGather>(x, axis, world()));
        });
    EXPECT_TRUE(graph_has(g.dx, "ReduceScatter")) << "axis " << axis;
    // Closed form: this rank's block of the sum of every rank's weights.
    const size_t n = static_cast<size_t>(mpitest::size());
    Shape gathered = s;
    gathered[static_cast<size_t>(axis)] *= n;
    std::vector<double> total(shape_size(gathered), 0.0);
    for (int k = 0; k < mpitest::size(); ++k) {
      auto w = weights(total.size(), k);
      for (size_t i = 0; i < total.size(); ++i) total[i] += w[i];
    }
    std::vector<double> expected(6);
    for (size_t i = 0; i < 6; ++i) {
      auto c = mpitest::unravel(i, s);
      c[static_cast<size_t>(axis)] +=
          static_cast<size_t>(mpitest::rank()) * s[static_cast<size_t>(axis)];
      expected[i] = total[mpitest::ravel(c, gathered)];
    }
    EXPECT_TRUE(all_close(g.analytic, expected, 1e-12, 1e-12)) << "axis " << axis;
    EXPECT_TRUE(all_close(g.numeric, expected, 1e-6, 1e-6)) << "axis " << axis;
  }
}

TEST(MpiGradients, ReduceScatterGradientIsAllGather) {
  const size_t n = static_cast<size_t>(mpitest::size());
  for (const char* op : {"sum", "mean"}) {
    for (int64_t axis : {0, 1}) {
      Shape s{2, 2};
      s[static_cast<size_t>(axis)] *= n;
      auto g = gradient(
          s, [&](int k) { return distinct(shape_size(s), k); },
          [op, axis](const Output& x) {
            return weighted_sum(std::make_shared<op::ReduceScatter>(x, op, axis, world()));
          });
      EXPECT_TRUE(graph_has(g.dx, "AllGather")) << op << " axis " << axis;
      EXPECT_TRUE(all_close(g.analytic, g.numeric, 1e-6, 1e-6)) << op << " axis " << axis;
    }
  }
  // max has no rule: asking for it is an error naming the op, never a silent zero.
  auto x = std::make_shared<op::Parameter>(element::f64, Shape{n});
  Output loss = weighted_sum(std::make_shared<op::ReduceScatter>(x, "max", 0, world()));
  autodiff::Adjoints adjoints({loss}, {constant(Shape{}, {1.0})});
  try {
    adjoints.backprop_output(x);
    ADD_FAILURE() << "no error for the gradient of ReduceScatter max";
  } catch (const autodiff::NoGradientRule& e) {
    EXPECT_TRUE(mpitest::contains(e.what(), "ReduceScatter")) << e.what();
  }
}

TEST(MpiGradients, BroadcastGradientOnlyOnRoot) {
  const int r = mpitest::rank(), n = mpitest::size();
  const Shape s{3};
  for (int root = 0; root < n; ++root) {
    auto g = gradient(
        s, [](int k) { return distinct(3, k); },
        [root](const Output& x) {
          return weighted_sum(std::make_shared<op::BroadcastDistributed>(x, root, world()));
        });
    std::vector<double> expected(3, 0.0);
    if (r == root)
      for (int k = 0; k < n; ++k) {
        auto w = weights(3, k);
        for (size_t i = 0; i < 3; ++i) expected[i] += w[i];
      }
    EXPECT_TRUE(all_close(g.analytic, expected, 1e-12, 1e-12)) << "root " << root;
    EXPECT_TRUE(all_close(g.numeric, expected, 1e-6, 1e-6)) << "root " << root;
  }
}

TEST(MpiGradients, RecvHasNoGradient) {
  const int r = mpitest::rank(), n = mpitest::size();
  auto y = std::make_shared<op::Recv>(Shape{2}, element::f64, (r + 1) % n, 0, world());
  auto x = std::make_shared<op::Parameter>(element::f64, Shape{2});
  Output loss = weighted_sum(std::make_shared<op::Multiply>(y, x));
  autodiff::Adjoints adjoints({loss}, {constant(Shape{}, {1.0})});
  // The received value is a constant for this rank's autodiff: x's gradient uses it.
  std::shared_ptr<Node> dx;
  ASSERT_NO_THROW(dx = adjoints.backprop_output(x).get_node_shared_ptr());
  EXPECT_TRUE(graph_has(dx, "Recv"));
  // Its own rule refuses, naming Recv (gradients do not flow back to the sender).
  try {
    y->generate_adjoints(adjoints, {constant(Shape{2}, {1.0, 1.0})});
    ADD_FAILURE() << "Recv has a gradient rule";
  } catch (const autodiff::NoGradientRule& e) {
    EXPECT_TRUE(mpitest::contains(e.what(), "[Recv]")) << e.what();
  }
}

}  // namespace
