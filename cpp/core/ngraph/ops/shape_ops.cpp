#include "ngraph/ops/shape_ops.hpp"

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/ops/elementwise.hpp"
#include "ngraph/ops/reduction.hpp"

#include <algorithm>
#include <numeric>

namespace ngraph {
namespace op {

Shape sliced_shape(const Node& node, const Shape& in, const Coordinate& lower,
                   const Coordinate& upper, Strides& strides);

void check_axes(const Node& node, const char* what, const AxisSet& axes, const Shape& shape) {
  for (auto a : axes)
    if (a >= shape.size())
      node.fail(concat_message(what, " ", axes, " has axis ", a, " out of range for arg shape ",
                               shape, " (rank ", shape.size(), ")"));
}

Broadcast::Broadcast(const Output& arg, const Shape& shape, const AxisSet& broadcast_axes)
    : Op<Broadcast>({arg}), m_shape(shape), m_broadcast_axes(broadcast_axes) {
  constructor_validate_and_infer_types();
}

void Broadcast::validate_and_infer_types() {
  check_input_count(1);
  for (auto a : m_broadcast_axes)
    if (a >= m_shape.size())
      fail(concat_message("broadcast axis ", a, " is out of range for result shape ", m_shape));
  Shape expected;
  for (size_t i = 0; i < m_shape.size(); ++i)
    if (!m_broadcast_axes.count(i)) expected.push_back(m_shape[i]);
  if (expected != get_input_shape(0))
    fail(concat_message("arg shape ", get_input_shape(0), " does not match result shape ",
                        m_shape, " with broadcast axes ", m_broadcast_axes,
                        " removed (", expected, ")"));
  set_output_type(0, get_input_element_type(0), m_shape);
}

Reshape::Reshape(const Output& arg, const AxisVector& input_order, const Shape& output_shape)
    : Op<Reshape>({arg}), m_input_order(input_order), m_output_shape(output_shape) {
  constructor_validate_and_infer_types();
}

bool Reshape::is_transpose() const {
  for (size_t i = 0; i < m_input_order.size(); ++i)
    if (m_input_order[i] != i) return true;
  return false;
}

void Reshape::validate_and_infer_types() {
  check_input_count(1);
  const Shape& in = get_input_shape(0);
  if (m_input_order.empty() && !in.empty()) {
    // Default-constructed (e.g. from the bindings without input_order): identity.
    m_input_order.resize(in.size());
    std::iota(m_input_order.begin(), m_input_order.end(), 0);
  }
  AxisVector sorted = m_input_order;
  std::sort(sorted.begin(), sorted.end());
  bool perm = sorted.size() == in.size();
  for (size_t i = 0; perm && i < sorted.size(); ++i) perm = sorted[i] == i;
  if (!perm)
    fail(concat_message("input_order ", m_input_order, " is not a permutation of the axes of arg shape ",
                        in));
  if (shape_size(in) != shape_size(m_output_shape))
    fail(concat_message("arg shape ", in, " (", shape_size(in), " elements) cannot be reshaped to ",
                        m_output_shape, " (", shape_size(m_output_shape), " elements)"));
  set_output_type(0, get_input_element_type(0), m_output_shape);
}

Slice::Slice(const Output& arg, const Coordinate& lower_bounds, const Coordinate& upper_bounds,
             const Strides& strides)
    : Op<Slice>({arg}), m_lower(lower_bounds), m_upper(upper_bounds), m_strides(strides) {
  constructor_validate_and_infer_types();
}

void Slice::validate_and_infer_types() {
  check_input_count(1);
  set_output_type(0, get_input_element_type(0),
                  sliced_shape(*this, get_input_shape(0), m_lower, m_upper, m_strides));
}

Concat::Concat(const OutputVector& args, size_t concatenation_axis)
    : Op<Concat>(args), m_axis(concatenation_axis) {
  constructor_validate_and_infer_types();
}

std::vector<Node::Bf16Set> Concat::bf16_sets() const {
  Bf16Set all{{}, {0}};
  for (size_t i = 0; i < get_input_size(); ++i) all.inputs.push_back(i);
  return {all};
}

void Concat::validate_and_infer_types() {
  if (get_input_size() == 0) fail("needs at least one argument");
  Shape out = get_input_shape(0);
  auto type = get_input_element_type(0);
  if (m_axis >= out.size())
    fail(concat_message("concatenation axis ", m_axis, " is out of range for arg0 shape ", out));
  for (size_t i = 1; i < get_input_size(); ++i) {
    const Shape& s = get_input_shape(i);
    if (get_input_element_type(i) != type)
      fail_type(concat_message("arg", i, " has element type ", get_input_element_type(i),
                               ", arg0 has ", type));
    bool ok = s.size() == out.size();
    for (size_t a = 0; ok && a < s.size(); ++a) ok = a == m_axis || s[a] == out[a];
    if (!ok)
      fail(concat_message("arg", i, " shape ", s, " does not match arg0 shape ",
                          get_input_shape(0), " outside the concatenation axis ", m_axis));
    out[m_axis] += s[m_axis];
  }
  set_output_type(0, type, out);
}

Pad::Pad(const Output& arg, const Output& pad_value, const CoordinateDiff& padding_below,
         const CoordinateDiff& padding_above, const std::string& pad_mode)
    : Op<Pad>({arg, pad_value}), m_below(padding_below), m_above(padding_above), m_mode(pad_mode) {
  constructor_validate_and_infer_types();
}

void Pad::validate_and_infer_types() {
  check_input_count(2);
  const Shape& in = get_input_shape(0);
  if (!get_input_shape(1).empty())
    fail(concat_message("pad value must be a scalar, got shape ", get_input_shape(1)));
  if (get_input_element_type(0) != get_input_element_type(1))
    fail_type(concat_message("pad value type ", get_input_element_type(1),
                             " does not match arg type ", get_input_element_type(0)));
  if (m_mode != "constant" && m_mode != "edge" && m_mode != "reflect" && m_mode != "symmetric")
    fail("pad_mode must be 'constant', 'edge', 'reflect' or 'symmetric', got '" + m_mode + "'");
  if (m_below.empty()) m_below = CoordinateDiff(in.size(), 0);
  if (m_above.empty()) m_above = CoordinateDiff(in.size(), 0);
  if (m_below.size() != in.size() || m_above.size() != in.size())
    fail(concat_message("padding_below ", m_below, " and padding_above ", m_above,
                        " must each have one entry per axis of arg shape ", in));
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    auto d = static_cast<std::ptrdiff_t>(in[i]) + m_below[i] + m_above[i];
    if (d < 0)
      fail(concat_message("padding ", m_below[i], "/", m_above[i], " on axis ", i,
                          " of arg shape ", in, " gives a negative size"));
    bool pads = m_below[i] > 0 || m_above[i] > 0;
    if (m_mode != "constant" && pads && in[i] == 0)
      fail(concat_message("pad_mode '", m_mode, "' cannot pad axis ", i, " of size 0"));
    std::ptrdiff_t limit = m_mode == "reflect" ? static_cast<std::ptrdiff_t>(in[i]) - 1
                           : m_mode == "symmetric" ? static_cast<std::ptrdiff_t>(in[i])
                                                   : -1;
    if (limit >= 0 && (m_below[i] > limit || m_above[i] > limit))
      fail(concat_message("pad_mode '", m_mode, "' can pad axis ", i, " of arg shape ", in,
                          " by at most ", limit, " (got ", m_below[i], "/", m_above[i], ")"));
    out[i] = static_cast<size_t>(d);
  }
  set_output_type(0, get_input_element_type(0), out);
}

Reverse::Reverse(const Output& arg, const AxisSet& reversed_axes)
    : Op<Reverse>({arg}), m_axes(reversed_axes) {
  constructor_validate_and_infer_types();
}

void Reverse::validate_and_infer_types() {
  check_input_count(1);
  check_axes(*this, "reversed_axes", m_axes, get_input_shape(0));
  set_output_type(0, get_input_element_type(0), get_input_shape(0));
}

// The shape of the slice [lower, upper) step strides of `in`, checking the bounds (`node`
// names the op in errors); fills in unit strides when none are given.
Shape sliced_shape(const Node& node, const Shape& in, const Coordinate& lower,
                   const Coordinate& upper, Strides& strides) {
  if (strides.empty()) strides = Strides(in.size(), 1);
  if (lower.size() != in.size() || upper.size() != in.size() || strides.size() != in.size())
    node.fail(concat_message("lower_bounds ", lower, ", upper_bounds ", upper, " and strides ",
                             strides, " must each have one entry per axis of arg shape ", in));
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (upper[i] > in[i])
      node.fail(concat_message("upper bound ", upper[i], " of axis ", i, " exceeds arg shape ", in));
    if (lower[i] > upper[i])
      node.fail(concat_message("lower bound ", lower[i], " of axis ", i, " exceeds upper bound ",
                               upper[i]));
    if (strides[i] == 0) node.fail(concat_message("stride of axis ", i, " is zero"));
    out[i] = (upper[i] - lower[i] + strides[i] - 1) / strides[i];
  }
  return out;
}

ReplaceSlice::ReplaceSlice(const Output& dest, const Output& src, const Coordinate& lower_bounds,
                           const Coordinate& upper_bounds, const Strides& strides)
    : Op<ReplaceSlice>({dest, src}), m_lower(lower_bounds), m_upper(upper_bounds),
      m_strides(strides) {
  constructor_validate_and_infer_types();
}

void ReplaceSlice::validate_and_infer_types() {
  check_input_count(2);
  const Shape& in = get_input_shape(0);
  if (m_lower.empty() && m_upper.empty() && m_strides.empty()) {  // default: the whole of dest
    m_lower = Coordinate(in.size(), 0);
    m_upper = Coordinate(in.begin(), in.end());
  }
  Shape slice = sliced_shape(*this, in, m_lower, m_upper, m_strides);
  if (get_input_element_type(1) != get_input_element_type(0))
    fail_type(concat_message("src has element type ", get_input_element_type(1), ", dest has ",
                             get_input_element_type(0)));
  if (get_input_shape(1) != slice)
    fail(concat_message("src shape ", get_input_shape(1), " does not match the slice shape ", slice,
                        " of dest shape ", in, " (lower ", m_lower, ", upper ", m_upper,
                        ", strides ", m_strides, ")"));
  set_output_type(0, get_input_element_type(0), in);
}

Split::Split(const Output& data, int64_t axis, const std::vector<int64_t>& splits)
    : Op<Split>({data}), m_axis(axis), m_splits(splits) {
  constructor_validate_and_infer_types();
}

size_t Split::get_axis() const {
  auto rank = static_cast<int64_t>(get_input_shape(0).size());
  if (m_axis < -rank || m_axis >= rank)
    fail(concat_message("axis ", m_axis, " is out of range for data of rank ", rank));
  return static_cast<size_t>(m_axis < 0 ? m_axis + rank : m_axis);
}

std::vector<Node::Bf16Set> Split::bf16_sets() const {
  Bf16Set all{{0}, {}};
  for (size_t i = 0; i < get_output_size(); ++i) all.outputs.push_back(i);
  return {all};
}

void Split::validate_and_infer_types() {
  check_input_count(1);
  const Shape& in = get_input_shape(0);
  if (in.empty()) fail("data must have rank >= 1, got a scalar");
  size_t axis = get_axis();
  std::vector<int64_t> splits = m_splits;
  if (splits.empty()) splits.push_back(static_cast<int64_t>(in[axis]));
  int64_t total = 0;
  for (auto s : splits) {
    if (s < 0) fail(concat_message("splits ", m_splits, " has a negative length"));
    total += s;
  }
  if (total != static_cast<int64_t>(in[axis]))
    fail(concat_message("splits ", splits, " sum to ", total, ", not to the size ", in[axis],
                        " of axis ", axis, " of data shape ", in));
  set_output_size(splits.size());
  for (size_t i = 0; i < splits.size(); ++i) {
    Shape s = in;
    s[axis] = static_cast<size_t>(splits[i]);
    set_output_type(i, get_input_element_type(0), s);
  }
}

Tile::Tile(const Output& data, const std::vector<int64_t>& repeats)
    : Op<Tile>({data}), m_repeats(repeats) {
  constructor_validate_and_infer_types();
}

void Tile::get_padded(Shape& data, Shape& repeats) const {
  data = get_input_shape(0);
  size_t rank = std::max(data.size(), m_repeats.size());
  data.insert(data.begin(), rank - data.size(), 1);
  repeats.assign(rank - m_repeats.size(), 1);
  for (auto r : m_repeats) repeats.push_back(static_cast<size_t>(r));
}

void Tile::validate_and_infer_types() {
  check_input_count(1);
  for (auto r : m_repeats)
    if (r < 0) fail(concat_message("repeats ", m_repeats, " has a negative count"));
  Shape data, repeats;
  get_padded(data, repeats);
  Shape out(data.size());
  for (size_t i = 0; i < data.size(); ++i) out[i] = data[i] * repeats[i];
  set_output_type(0, get_input_element_type(0), out);
}

// ------------------------------------------------------------------------ gradient rules

namespace {
AxisVector identity_order(size_t rank) {
  AxisVector order(rank);
  std::iota(order.begin(), order.end(), 0);
  return order;
}
Output reshape_to(const Output& v, const Shape& s) {
  if (v.get_shape() == s) return v;
  return std::make_shared<Reshape>(v, identity_order(v.get_shape().size()), s);
}
// Places `v` (shape `part`) at `lower` inside zeros of shape `whole`.
Output pad_into(const Output& v, const Coordinate& lower, const Shape& whole) {
  CoordinateDiff below, above;
  for (size_t i = 0; i < whole.size(); ++i) {
    below.push_back(static_cast<std::ptrdiff_t>(lower[i]));
    above.push_back(static_cast<std::ptrdiff_t>(whole[i] - lower[i] - v.get_shape()[i]));
  }
  return std::make_shared<Pad>(v, autodiff::scalar(v.get_element_type(), 0.0), below, above);
}
}  // namespace

void Broadcast::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  element::Type t = deltas[0].get_element_type();
  if (!t.is_storage_only()) {
    adj.add_delta(input_value(0), std::make_shared<Sum>(deltas[0], m_broadcast_axes));
    return;
  }
  // f16/bf16: summed in f32, rounded once to the type.
  auto sum = std::make_shared<Sum>(std::make_shared<Convert>(deltas[0], element::f32), m_broadcast_axes);
  adj.add_delta(input_value(0), std::make_shared<Convert>(sum, t));
}

void Reshape::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  // Undo the layout (to the permuted input shape), then the permutation.
  const Shape& in = get_input_shape(0);
  Shape permuted;
  for (auto a : m_input_order) permuted.push_back(in[a]);
  Output d = reshape_to(deltas[0], permuted);
  if (is_transpose()) {
    AxisVector inverse(m_input_order.size());
    for (size_t i = 0; i < m_input_order.size(); ++i) inverse[m_input_order[i]] = i;
    d = std::make_shared<Reshape>(d, inverse, in);
  }
  adj.add_delta(input_value(0), d);
}

// The gradient of a slice is the delta scattered back: strides are undone by interleaving
// zeros (reshape to {n,1}, pad to {n,stride}, flatten, trim), then padded into place.
void Slice::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  const Shape& in = get_input_shape(0);
  const Shape& out = get_shape();
  element::Type t = get_element_type();
  if (shape_size(out) == 0) {
    adj.add_delta(input_value(0), autodiff::zeros(t, in));  // nothing was read
    return;
  }
  Output d = deltas[0];
  bool strided = false;
  for (auto s : m_strides) strided = strided || s > 1;
  Shape spread;  // extent covered by the strided elements: (n - 1) * stride + 1
  for (size_t i = 0; i < out.size(); ++i) spread.push_back((out[i] - 1) * m_strides[i] + 1);
  if (strided) {
    Shape interleaved, padded_shape, flat;
    CoordinateDiff below, above;
    for (size_t i = 0; i < out.size(); ++i) {
      interleaved.push_back(out[i]);
      interleaved.push_back(1);
      below.push_back(0);
      below.push_back(0);
      above.push_back(0);
      above.push_back(static_cast<std::ptrdiff_t>(m_strides[i]) - 1);
      flat.push_back(out[i] * m_strides[i]);
    }
    Output p = std::make_shared<Pad>(reshape_to(d, interleaved), autodiff::scalar(t, 0.0), below,
                                     above);
    d = std::make_shared<Slice>(reshape_to(p, flat), Coordinate(out.size(), 0), Coordinate(spread));
  }
  adj.add_delta(input_value(0), pad_into(d, m_lower, in));
}

void Concat::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  const Shape& out = get_shape();
  size_t offset = 0;
  for (size_t i = 0; i < get_input_size(); ++i) {
    const Shape& s = get_input_shape(i);
    Coordinate lower(out.size(), 0), upper(out.begin(), out.end());
    lower[m_axis] = offset;
    upper[m_axis] = offset + s[m_axis];
    offset += s[m_axis];
    adj.add_delta(input_value(i), std::make_shared<Slice>(deltas[0], lower, upper));
  }
}

// Axis by axis: the part of delta that holds arg's values goes back to arg; in "constant"
// mode the rest goes to the pad value, in the other modes it is folded back onto the
// elements it copies (edge: the first/last element; reflect/symmetric: mirrored ranges).
void Pad::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  const Shape& in = get_input_shape(0);
  element::Type t = get_element_type();
  Output d = deltas[0];
  Output kept_total;  // for the pad value: sum of what reached arg
  for (size_t ax = 0; ax < in.size(); ++ax) {
    Shape cur = d.get_shape();
    auto n = static_cast<std::ptrdiff_t>(in[ax]);
    std::ptrdiff_t below = m_below[ax], above = m_above[ax];
    // arg indices [lo, hi) are present in the output, starting at out index max(below, 0).
    std::ptrdiff_t lo = std::max<std::ptrdiff_t>(0, -below), hi = n - std::max<std::ptrdiff_t>(0, -above);
    std::ptrdiff_t start = std::max<std::ptrdiff_t>(below, 0);
    auto slice_axis = [&](const Output& v, std::ptrdiff_t b, std::ptrdiff_t e) -> Output {
      Coordinate lower(cur.size(), 0), upper(v.get_shape().begin(), v.get_shape().end());
      lower[ax] = static_cast<size_t>(b);
      upper[ax] = static_cast<size_t>(e);
      return std::make_shared<Slice>(v, lower, upper);
    };
    auto place = [&](const Output& v, std::ptrdiff_t at) -> Output {  // into arg's extent
      Coordinate lower(cur.size(), 0);
      lower[ax] = static_cast<size_t>(at);
      Shape whole = v.get_shape();
      whole[ax] = in[ax];
      return pad_into(v, lower, whole);
    };
    Shape next = cur;
    next[ax] = in[ax];
    Output g;
    if (hi > lo) g = place(slice_axis(d, start, start + (hi - lo)), lo);
    else g = autodiff::zeros(t, next);
    if (m_mode != "constant") {
      auto add = [&](const Output& part) { g = std::make_shared<Add>(g, part); };
      AxisSet axis{ax};
      if (below > 0) {
        Output region = slice_axis(d, 0, below);
        if (m_mode == "edge") {
          Shape one = region.get_shape();
          one[ax] = 1;
          add(place(reshape_to(std::make_shared<Sum>(region, axis), one), 0));
        } else {
          Output r = std::make_shared<Reverse>(region, axis);
          add(place(r, m_mode == "reflect" ? 1 : 0));
        }
      }
      if (above > 0) {
        std::ptrdiff_t e = static_cast<std::ptrdiff_t>(cur[ax]);
        Output region = slice_axis(d, e - above, e);
        if (m_mode == "edge") {
          Shape one = region.get_shape();
          one[ax] = 1;
          add(place(reshape_to(std::make_shared<Sum>(region, axis), one), n - 1));
        } else {
          Output r = std::make_shared<Reverse>(region, axis);
          add(place(r, m_mode == "reflect" ? n - 1 - above : n - above));
        }
      }
    }
    d = g;
  }
  adj.add_delta(input_value(0), d);
  // The pad value fills every output element that is not a copy of arg (constant mode).
  Output value_grad;
  if (m_mode == "constant") {
    AxisSet all;
    for (size_t i = 0; i < get_shape().size(); ++i) all.insert(i);
    AxisSet all_in;
    for (size_t i = 0; i < in.size(); ++i) all_in.insert(i);
    value_grad = std::make_shared<Subtract>(std::make_shared<Sum>(deltas[0], all),
                                            std::make_shared<Sum>(d, all_in));
  } else {
    value_grad = autodiff::zeros(t, Shape{});  // the value is not used
  }
  adj.add_delta(input_value(1), value_grad);
}

void Reverse::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  adj.add_delta(input_value(0), std::make_shared<Reverse>(deltas[0], m_axes));
}

void ReplaceSlice::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  element::Type t = get_element_type();
  adj.add_delta(input_value(0), std::make_shared<ReplaceSlice>(
                                    deltas[0], autodiff::zeros(t, get_input_shape(1)), m_lower,
                                    m_upper, m_strides));
  adj.add_delta(input_value(1), std::make_shared<Slice>(deltas[0], m_lower, m_upper, m_strides));
}

void Split::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  OutputVector parts;
  for (size_t i = 0; i < get_output_size(); ++i)
    if (get_output_shape(i)[get_axis()] > 0) parts.push_back(deltas[i]);
  if (parts.empty()) {
    adj.add_delta(input_value(0), autodiff::zeros(get_input_element_type(0), get_input_shape(0)));
    return;
  }
  adj.add_delta(input_value(0), parts.size() == 1 ? parts[0]
                                                  : Output(std::make_shared<Concat>(parts, get_axis())));
}

// The result viewed as [r0, d0, r1, d1, ...]: the gradient sums over the r axes.
void Tile::generate_adjoints(autodiff::Adjoints& adj, const OutputVector& deltas) {
  Shape data, repeats;
  get_padded(data, repeats);
  Shape split;
  AxisSet repeat_axes;
  for (size_t i = 0; i < data.size(); ++i) {
    repeat_axes.insert(split.size());
    split.push_back(repeats[i]);
    split.push_back(data[i]);
  }
  element::Type t = get_element_type();
  Output d = reshape_to(deltas[0], split);
  if (t.is_storage_only())
    d = std::make_shared<Convert>(std::make_shared<Sum>(std::make_shared<Convert>(d, element::f32),
                                                        repeat_axes), t);
  else
    d = std::make_shared<Sum>(d, repeat_axes);
  adj.add_delta(input_value(0), reshape_to(d, get_input_shape(0)));
}

NGRAPH_REGISTER_OP(Broadcast);
NGRAPH_REGISTER_OP(Reshape);
NGRAPH_REGISTER_OP(Slice);
NGRAPH_REGISTER_OP(Concat);
NGRAPH_REGISTER_OP(Pad);
NGRAPH_REGISTER_OP(Reverse);
NGRAPH_REGISTER_OP(ReplaceSlice);
NGRAPH_REGISTER_OP(Split);
NGRAPH_REGISTER_OP(Tile);

}  // namespace op
}  // namespace ngraph
