#include <gtest/gtest.h>

#include "ngraph/ops.hpp"
#include "ngraph/runtime/backend.hpp"

using namespace ngraph;

TEST(smoke, add_multiply) {
  auto A = std::make_shared<op::Parameter>(element::f32, Shape{2, 2});
  auto B = std::make_shared<op::Parameter>(element::f32, Shape{2, 2});
  auto C = std::make_shared<op::Parameter>(element::f32, Shape{2, 2});
  auto f = std::make_shared<Function>(
      OutputVector{std::make_shared<op::Multiply>(std::make_shared<op::Add>(A, B), C)},
      ParameterVector{A, B, C});
  auto backend = runtime::Backend::create("CPU");
  auto exe = backend->compile(f);
  std::vector<float> a{1, 2, 3, 4}, b{5, 6, 7, 8}, c{1, 0, 2, -1}, out(4);
  auto ta = backend->create_tensor(element::f32, Shape{2, 2}, a.data());
  auto tb = backend->create_tensor(element::f32, Shape{2, 2}, b.data());
  auto tc = backend->create_tensor(element::f32, Shape{2, 2}, c.data());
  auto to = backend->create_tensor(element::f32, Shape{2, 2}, out.data());
  exe->call({to}, {ta, tb, tc});
  EXPECT_EQ(out, (std::vector<float>{6, 0, 20, -12}));
}
