// JSON serialization: the JSON reader and writer, a round trip of every registered op (the
// document reads back into the same graph, writes back to the same text, and computes the
// same values on the CPU backend), a whole training step, hostile documents, and a seeded
// mutation fuzzer (NGRAPH_FUZZ_CASES=n for more cases, NGRAPH_FUZZ_SEED=s for another seed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/distributed/communicator.hpp"
#include "ngraph/json.hpp"
#include "ngraph/serializer.hpp"
#include "test_utils.hpp"

using namespace ngraph;
using test::contains;

namespace {

// ---------------------------------------------------------------------------------- JSON

std::string json_error(const std::string& text, json::Limits limits = {}) {
  try {
    json::parse(text, limits);
  } catch (const json::Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed: " << text;
  return "";
}

TEST(json, parses_and_writes_back) {
  std::string text = R"([{"a":[1,-2.5e3,true,false,null],"b":"x\"\\\n\u00e9\ud83d\ude00","c":{}}])";
  auto v = json::parse(text);
  ASSERT_TRUE(v.is(json::Value::Kind::array));
  const auto& obj = v.items()[0];
  EXPECT_EQ(obj.find("a")->items()[1].text(), "-2.5e3");
  EXPECT_EQ(obj.find("b")->text(), "x\"\\\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(json::write(v), R"([{"a":[1,-2.5e3,true,false,null],"b":"x\"\\\né😀","c":{}}])");
  EXPECT_EQ(json::write(json::parse("[1,{\"k\":[]}]"), 2), "[\n  1,\n  {\n    \"k\": []\n  }\n]");
  EXPECT_EQ(json::write(json::parse(json::write(v, 4))), json::write(v));
}

TEST(json, numbers_keep_their_text) {
  int64_t i = 0;
  EXPECT_TRUE(json::parse("-9223372036854775808").to_int64(i));
  EXPECT_EQ(i, INT64_MIN);
  EXPECT_FALSE(json::parse("9223372036854775808").to_int64(i));
  EXPECT_FALSE(json::parse("1.0").to_int64(i));
  double d = 0;
  EXPECT_TRUE(json::parse("1e999").to_double(d));
  EXPECT_TRUE(std::isinf(d));
  EXPECT_EQ(json::Value::real(0.1).text(), "0.1");
  EXPECT_THROW(json::Value::real(NAN), json::Error);
}

TEST(json, errors_name_the_position) {
  EXPECT_TRUE(contains(json_error("[1,\n 2,]"), "line 2, column 4: expected a value, found ']'"));
  EXPECT_TRUE(contains(json_error("{\"a\":1,\"a\":2}"), "column 8: duplicate key \"a\""));
  EXPECT_TRUE(contains(json_error("[01]"), "leading zeros"));
  EXPECT_TRUE(contains(json_error("[1] x"), "unexpected 'x' after the document"));
  EXPECT_TRUE(contains(json_error("\"abc"), "unterminated string"));
  EXPECT_TRUE(contains(json_error("\"\\ud800\""), "unpaired high surrogate"));
  EXPECT_TRUE(contains(json_error("\"\\udc00\""), "unpaired low surrogate"));
  EXPECT_TRUE(contains(json_error("\"\xc0\xaf\""), "invalid UTF-8"));
  EXPECT_TRUE(contains(json_error("\"\x01\""), "control character"));
  EXPECT_TRUE(contains(json_error("[1 2]"), "expected ',' or ']'"));
  EXPECT_TRUE(contains(json_error("{1:2}"), "expected a string key"));
  EXPECT_TRUE(contains(json_error("[-]"), "expected a digit"));
  EXPECT_TRUE(contains(json_error("[1.]"), "after '.'"));
  EXPECT_TRUE(contains(json_error("tru"), "expected a value"));
  EXPECT_TRUE(contains(json_error(""), "found end of document"));
  EXPECT_TRUE(contains(json_error(std::string(100000, '[')), "nesting deeper than 64 levels"));
  EXPECT_TRUE(contains(json_error("[1,2]", json::Limits{3, 64}), "exceeds the limit of 3 bytes"));
  EXPECT_THROW(json::write(json::Value::string("\xff")), json::Error);
}

TEST(json, large_documents_read_in_linear_time) {
  // Duplicate keys are found with a hash set: 50,000 members, not 10^9 comparisons.
  std::string text = "{";
  for (int i = 0; i < 50000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":[1]";
  text += "}";
  auto v = json::parse(text);
  EXPECT_EQ(v.members().size(), 50000u);
  EXPECT_EQ(json::write(v), text);
  EXPECT_TRUE(contains(json_error(text.substr(0, text.size() - 1) + ",\"k7\":0}"),
                       "duplicate key \"k7\""));
}

// ------------------------------------------------------------------------------- helpers

std::shared_ptr<op::Parameter> param(element::Type t, const Shape& s) {
  return std::make_shared<op::Parameter>(t, s);
}

std::shared_ptr<Function> function_of(const OutputVector& results, const NodeVector& sinks = {}) {
  // Parameters in the order the graph reaches them.
  ParameterVector params;
  NodeVector roots;
  for (const auto& r : results) roots.push_back(r.get_node_shared_ptr());
  roots.insert(roots.end(), sinks.begin(), sinks.end());
  for (const auto& n : topological_sort(roots))
    if (auto p = std::dynamic_pointer_cast<op::Parameter>(n)) params.push_back(p);
  return std::make_shared<Function>(results, sinks, params, "case");
}

// Deterministic inputs that every op accepts: reals in [0.5, 2], integers in [1, 3].
std::vector<test::Value> inputs_for(const Function& f, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<test::Value> out;
  for (const auto& p : f.get_parameters()) {
    test::Value v{p->get_element_type(), p->get_shape(), {}};
    size_t n = shape_size(v.shape);
    v.bytes.resize(n * v.type.size());
    element::dispatch(v.type, [&](auto tag) {
      using S = decltype(tag);
      S* d = reinterpret_cast<S*>(v.bytes.data());
      for (size_t i = 0; i < n; ++i) {
        if (v.type == element::boolean) d[i] = static_cast<S>(rng() & 1);
        else if (v.type.is_real()) d[i] = static_cast<S>(0.5 + 1.5 * (rng() % 1000) / 1000.0);
        else d[i] = static_cast<S>(1 + rng() % 3);
      }
    });
    out.push_back(std::move(v));
  }
  return out;
}

// Rank 0 of two, for Send and Recv (which check their peer); never runs a collective.
std::shared_ptr<distributed::Communicator> two_ranks() {
  struct TwoRanks : distributed::LocalCommunicator {
    int size() const override { return 2; }
    std::string name() const override { return "two ranks (test)"; }
  };
  static auto comm = std::make_shared<TwoRanks>();
  return comm;
}

bool runs_on_one_process(const Function& f) {
  for (const auto& n : f.get_ordered_ops())
    if (n->get_type_name() == "Send" || n->get_type_name() == "Recv") return false;
  return true;
}

// Structure, text and values of the round trip.
void check_round_trip(const std::shared_ptr<Function>& f, const std::string& what) {
  SCOPED_TRACE(what);
  std::string text = serialize(f, 2);
  std::shared_ptr<Function> g;
  DeserializeOptions options;
  if (!runs_on_one_process(*f)) options.communicator = two_ranks();
  try {
    g = deserialize(text, options);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "does not read back: " << e.what() << "\n" << text;
    return;
  }
  EXPECT_EQ(serialize(g, 2), text) << "the document does not write back the same";
  EXPECT_EQ(g->get_sinks().size(), f->get_sinks().size());
  EXPECT_EQ(serialize(g), serialize(f)) << "compact text differs";
  auto a = f->get_ordered_ops(), b = g->get_ordered_ops();
  EXPECT_EQ(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    EXPECT_EQ(a[i]->get_type_name(), b[i]->get_type_name());
    EXPECT_EQ(a[i]->attributes_string(), b[i]->attributes_string()) << a[i]->get_type_name();
    EXPECT_TRUE(a[i]->attributes_equal(*b[i])) << a[i]->get_type_name();
    ASSERT_EQ(a[i]->get_output_size(), b[i]->get_output_size());
    for (size_t k = 0; k < a[i]->get_output_size(); ++k) {
      EXPECT_EQ(a[i]->get_output_shape(k), b[i]->get_output_shape(k));
      EXPECT_EQ(a[i]->get_output_element_type(k), b[i]->get_output_element_type(k));
    }
  }
  if (runs_on_one_process(*f)) {
    auto in = inputs_for(*f, 7);
    auto ra = test::run_function(f, in), rb = test::run_function(g, in);
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t i = 0; i < ra.size(); ++i) EXPECT_EQ(ra[i].bytes, rb[i].bytes) << "result " << i;
  }
}

// ------------------------------------------------------------------ one case per op family

using Case = std::function<std::shared_ptr<Function>()>;
const element::Type F32 = element::f32;

std::map<std::string, Case> cases() {
  std::map<std::string, Case> c;
  c["Constant"] = [] {
    auto x = param(F32, {2, 3});
    OutputVector rs{std::make_shared<op::Add>(
        x, std::make_shared<op::Constant>(F32, Shape{2, 3},
                                          std::vector<double>{1.5, -0.1, 3e38, 1e-45, 0, -2}))};
    rs.push_back(std::make_shared<op::Constant>(element::f64, Shape{3},
                                                std::vector<double>{0.1, -1e308, 5e-324}));
    rs.push_back(std::make_shared<op::Constant>(element::i64, Shape{2},
                                                std::vector<int64_t>{INT64_MIN, INT64_MAX}));
    rs.push_back(std::make_shared<op::Constant>(element::i32, Shape{2, 2}, std::vector<int>{7}));
    rs.push_back(std::make_shared<op::Constant>(element::boolean, Shape{3},
                                                std::vector<char>{1, 0, 1}));
    rs.push_back(std::make_shared<op::Constant>(F32, Shape{0}, std::vector<float>{}));
    return function_of(rs);
  };
  c["Add"] = [] {  // non-default auto_broadcast; Parameter and Result come with every case
    return function_of({std::make_shared<op::Add>(param(F32, {2, 3}), param(F32, {3}), "numpy")});
  };
  c["Divide"] = [] {
    return function_of({std::make_shared<op::Divide>(param(element::i32, {4}),
                                                     param(element::i32, {4}),
                                                     op::AutoBroadcast::none, false)});
  };
  c["Select"] = [] {
    return function_of({std::make_shared<op::Select>(param(element::boolean, {2, 3}),
                                                     param(F32, {2, 3}), param(F32, {3}),
                                                     "numpy")});
  };
  c["Convert"] = [] {
    return function_of({std::make_shared<op::Convert>(param(F32, {4}), element::i32)});
  };
  c["Dot"] = [] {
    return function_of(
        {std::make_shared<op::Dot>(param(F32, {2, 3, 4}), param(F32, {3, 4, 5}), 2)});
  };
  c["MatMul"] = [] {
    return function_of(
        {std::make_shared<op::MatMul>(param(F32, {3, 2}), param(F32, {4, 3}), true, true)});
  };
  c["Broadcast"] = [] {
    return function_of(
        {std::make_shared<op::Broadcast>(param(F32, {3}), Shape{2, 3, 4}, AxisSet{0, 2})});
  };
  c["Reshape"] = [] {
    return function_of(
        {std::make_shared<op::Reshape>(param(F32, {2, 3, 4}), AxisVector{2, 0, 1}, Shape{4, 6})});
  };
  c["Slice"] = [] {
    return function_of({std::make_shared<op::Slice>(param(F32, {5, 6}), Coordinate{1, 0},
                                                    Coordinate{5, 5}, Strides{2, 3})});
  };
  c["Concat"] = [] {
    return function_of({std::make_shared<op::Concat>(
        OutputVector{param(F32, {2, 3}), param(F32, {2, 1}), param(F32, {2, 2})}, 1)});
  };
  c["Pad"] = [] {
    return function_of({std::make_shared<op::Pad>(param(F32, {3, 4}), param(F32, {}),
                                                  CoordinateDiff{1, -1}, CoordinateDiff{2, 0},
                                                  "reflect")});
  };
  c["Reverse"] = [] {
    return function_of({std::make_shared<op::Reverse>(param(F32, {2, 3}), AxisSet{1})});
  };
  c["Sum"] = [] {
    auto x = param(F32, {2, 3, 4});
    return function_of({std::make_shared<op::Sum>(x, AxisSet{0, 2}),
                        std::make_shared<op::Product>(x, AxisSet{1}),
                        std::make_shared<op::Max>(x, AxisSet{}),
                        std::make_shared<op::Min>(x, AxisSet{0, 1, 2})});
  };
  c["ArgMax"] = [] {
    return function_of({std::make_shared<op::ArgMax>(param(F32, {3, 4}), 1, element::i32)});
  };
  c["ArgMin"] = [] {
    return function_of({std::make_shared<op::ArgMin>(param(element::i64, {3, 4}), 0)});
  };
  c["Softmax"] = [] {
    return function_of({std::make_shared<op::Softmax>(param(F32, {2, 3, 4}), AxisSet{1, 2})});
  };
  c["OneHot"] = [] {
    return function_of({std::make_shared<op::OneHot>(param(element::i32, {3}), Shape{3, 4}, 1)});
  };
  c["Convolution"] = [] {
    auto data = param(F32, {1, 4, 7, 6}), filters = param(F32, {6, 2, 3, 2});
    auto conv = std::make_shared<op::Convolution>(data, filters, Strides{2, 1}, Strides{1, 2},
                                                  CoordinateDiff{1, 0}, CoordinateDiff{0, 1},
                                                  Strides{1, 1}, 2);
    auto window = conv->get_window();
    auto bd = std::make_shared<op::ConvolutionBackpropData>(Shape{1, 4, 7, 6}, filters,
                                                            param(F32, conv->get_shape()), window);
    auto bf = std::make_shared<op::ConvolutionBackpropFilters>(
        data, Shape{6, 2, 3, 2}, param(F32, conv->get_shape()), window);
    return function_of({conv, bd, bf});
  };
  c["MaxPool"] = [] {
    auto x = param(F32, {1, 2, 5, 5});
    auto mp = std::make_shared<op::MaxPool>(x, Shape{3, 2}, Strides{2, 2}, Shape{1, 0},
                                            Shape{0, 1}, true);
    auto ap = std::make_shared<op::AvgPool>(x, Shape{2, 2}, Strides{1, 2}, Shape{1, 1},
                                            Shape{1, 1}, true, false);
    auto mb = std::make_shared<op::MaxPoolBackprop>(x, param(F32, {1, 2, 3, 3}), Shape{2, 2},
                                                    Strides{2, 2}, Shape{0, 0}, Shape{1, 1});
    auto ab = std::make_shared<op::AvgPoolBackprop>(Shape{1, 2, 5, 5}, param(F32, ap->get_shape()),
                                                    Shape{2, 2}, Strides{1, 2}, Shape{1, 1},
                                                    Shape{1, 1}, true);
    return function_of({mp, ap, mb, ab});
  };
  c["LRN"] = [] {
    auto x = param(F32, {1, 5, 2, 2});
    return function_of({std::make_shared<op::LRN>(x, 0.25, 0.75, 2.0, 3),
                        std::make_shared<op::LRNBackprop>(x, param(F32, {1, 5, 2, 2}), 0.5, 0.25,
                                                          1.5, 5)});
  };
  c["BatchNormTraining"] = [] {  // multi-output: inputs {"node", "index"}, GetOutputElement
    auto x = param(F32, {2, 3, 2}), g = param(F32, {3}), b = param(F32, {3});
    auto bn = std::make_shared<op::BatchNormTraining>(x, g, b, 1e-3);
    auto inf = std::make_shared<op::BatchNormInference>(x, g, b, bn->output(1), bn->output(2), 0.5);
    auto bp = std::make_shared<op::BatchNormTrainingBackprop>(x, g, b, bn->output(1), bn->output(2),
                                                              param(F32, {2, 3, 2}), 1e-3);
    auto goe = std::make_shared<op::GetOutputElement>(bp, 2);
    return function_of({bn->output(0), inf, bp->output(0), bp->output(1), goe});
  };
  c["Gather"] = [] {  // constant indices, in range for any data
    auto idx = std::make_shared<op::Constant>(element::i64, Shape{2, 2}, std::vector<int64_t>{0, -1, 2, 2});
    auto idx32 = std::make_shared<op::Constant>(element::i32, Shape{3}, std::vector<int>{1, 0, 1});
    auto x = param(F32, {2, 3, 4});
    return function_of({std::make_shared<op::Gather>(x, idx, 1),
                        std::make_shared<op::EmbeddingLookup>(idx32, param(F32, {2, 5})),
                        std::make_shared<op::ScatterAdd>(x, idx32, param(F32, {2, 3, 4}), 1)});
  };
  c["LayerNorm"] = [] {
    auto x = param(F32, {2, 3, 4}), s = param(F32, {12}), b = param(F32, {12});
    auto ln = std::make_shared<op::LayerNorm>(x, s, b, 1, 1e-3);
    auto plain = std::make_shared<op::LayerNorm>(x, -1, 0.5);
    auto bp = std::make_shared<op::LayerNormBackprop>(
        OutputVector{x, param(F32, {2, 3, 4}), ln->output(1), ln->output(2), s}, 1, 1e-3);
    return function_of({ln->output(0), plain->output(2), bp->output(0), bp->output(1), bp->output(2)});
  };
  c["Dropout"] = [] {
    auto d = std::make_shared<op::Dropout>(param(F32, {3, 5}), 0.25, 42);
    return function_of({d->output(0), d->output(1)});
  };
  c["Split"] = [] {
    auto x = param(F32, {2, 6});
    auto sp = std::make_shared<op::Split>(x, -1, std::vector<int64_t>{1, 0, 5});
    return function_of({sp->output(0), sp->output(1), sp->output(2),
                        std::make_shared<op::Tile>(x, std::vector<int64_t>{2, 1, 2}),
                        std::make_shared<op::ReplaceSlice>(x, param(F32, {2, 2}), Coordinate{0, 1},
                                                           Coordinate{2, 5}, Strides{1, 2})});
  };
  c["AllReduce"] = [] {
    auto x = param(F32, {2, 3});
    return function_of({std::make_shared<op::AllReduce>(x, "max"),
                        std::make_shared<op::BroadcastDistributed>(x, 0),
                        std::make_shared<op::AllGather>(x, 1),
                        std::make_shared<op::ReduceScatter>(x, "mean", 0)});
  };
  c["Send"] = [] {
    auto recv = std::make_shared<op::Recv>(Shape{2}, element::i64, 1, 5, two_ranks());
    auto send = std::make_shared<op::Send>(param(element::i64, {2}), 1, 5, two_ranks());
    return function_of({recv}, {send});
  };
  c["Variable"] = [] {
    float w0[] = {1, 2, 3, 4};
    auto state = std::make_shared<VariableState>(F32, Shape{2, 2}, w0);
    state->set_name("w");
    auto w = std::make_shared<op::Variable>(state);
    auto x = param(F32, {2, 2});
    auto next = std::make_shared<op::Add>(w, x);
    auto unnamed = std::make_shared<VariableState>(element::i32, Shape{});
    auto step = std::make_shared<op::Variable>(unnamed);
    auto one = std::make_shared<op::Constant>(element::i32, Shape{}, std::vector<int>{1});
    return function_of({std::make_shared<op::Multiply>(w, x), step},
                       {std::make_shared<op::Assign>(w, next),
                        std::make_shared<op::Assign>(step, std::make_shared<op::Add>(step, one))});
  };
  return c;
}

// An op without a case above: built through the registry with default attributes on one to
// three inputs of one type (f32, then boolean), as the new elementwise ops are.
std::shared_ptr<Function> generic_case(const std::string& name) {
  for (auto type : {F32, element::boolean, element::i32})
    for (size_t n = 1; n <= 3; ++n) {
      try {
        auto node = OpRegistry::get().create(name);
        OutputVector args;
        for (size_t i = 0; i < n; ++i) args.push_back(param(type, {2, 3}));
        node->set_arguments(args);
        node->validate_and_infer_types();
        if (node->get_output_size() == 0) continue;
        return function_of(node->outputs());
      } catch (const std::exception&) {
      }
    }
  return nullptr;
}

std::vector<std::pair<std::string, std::shared_ptr<Function>>> all_cases() {
  std::vector<std::pair<std::string, std::shared_ptr<Function>>> out;
  auto explicit_cases = cases();
  std::set<std::string> covered;
  for (auto& [name, make] : explicit_cases) {
    auto f = make();
    for (const auto& n : f->get_ordered_ops()) covered.insert(n->get_type_name());
    out.emplace_back(name, f);
  }
  for (const auto& name : OpRegistry::get().names())
    if (!covered.count(name))
      if (auto f = generic_case(name)) out.emplace_back(name + " (generic)", f);
  return out;
}

}  // namespace

// ----------------------------------------------------------------- a document to break

namespace {

const char* kValid = R"([{"name":"f","parameters":["a","b"],"result":["r"],"ops":[
  {"name":"a","op":"Parameter","element_type":"f32","shape":[2,3],"outputs":["a_0"]},
  {"name":"b","op":"Parameter","element_type":"f32","shape":[3],"outputs":["b_0"]},
  {"name":"k","op":"Constant","element_type":"f32","shape":[3],"value":["1","2","3"],"outputs":["k_0"]},
  {"name":"m","op":"Multiply","inputs":["b","k"],"auto_broadcast":"none","outputs":["m_0"]},
  {"name":"s","op":"Add","inputs":["a","m"],"auto_broadcast":"numpy","outputs":["s_0"]},
  {"name":"r","op":"Result","inputs":["s"],"outputs":["r_0"]}]}])";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  if (pos == std::string::npos) throw std::logic_error("test: '" + from + "' not in the document");
  return text.replace(pos, from.size(), to);
}

void expect_rejected(const std::string& text, const std::string& expected) {
  SCOPED_TRACE(expected);
  try {
    deserialize(text);
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const SerializationError& e) {
    EXPECT_TRUE(contains(e.what(), expected)) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw something else than SerializationError: " << e.what();
  }
}

}  // namespace

// ----------------------------------------------------------------------------- round trips

TEST(serializer, every_registered_op_round_trips) {
  std::set<std::string> seen;
  for (const auto& [name, f] : all_cases()) {
    check_round_trip(f, name);
    for (const auto& n : f->get_ordered_ops()) seen.insert(n->get_type_name());
  }
  std::vector<std::string> missing;
  for (const auto& name : OpRegistry::get().names())
    if (!seen.count(name)) missing.push_back(name);
  EXPECT_TRUE(missing.empty())
      << "ops without a round-trip case (their defaults do not validate on 1-3 inputs of "
         "shape {2,3}: add a case to cases() in serializer_test.cpp): "
      << join(missing, ", ");
}

TEST(serializer, every_element_type_round_trips) {
  // Every type the element type table knows by one of these names (new ones need no change
  // to the serializer): a Parameter, and a Constant holding the type's extremes.
  size_t known = 0;
  for (const char* name : {"boolean", "f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64",
                           "u8", "u16", "u32", "u64"}) {
    element::Type type;
    try {
      type = element::Type::from_name(name);
    } catch (const std::invalid_argument&) {
      continue;
    }
    SCOPED_TRACE(name);
    ++known;
    std::vector<char> bytes(3 * type.size());
    element::dispatch_storage(type, [&](auto tag) {
      using S = decltype(tag);
      if constexpr (is_low_precision_v<S>) {  // the largest finite values, a subnormal
        uint16_t max = type == element::f16 ? 0x7BFF : 0x7F7F;
        S* d = reinterpret_cast<S*>(bytes.data());
        d[0] = S::from_bits(static_cast<uint16_t>(max | 0x8000));
        d[1] = S::from_bits(0x8001);
        d[2] = S::from_bits(max);
      } else if constexpr (std::is_arithmetic_v<S>) {
        S* d = reinterpret_cast<S*>(bytes.data());
        d[0] = type == element::boolean ? S(1) : std::numeric_limits<S>::lowest();
        d[1] = S(0);
        d[2] = type == element::boolean ? S(1) : std::numeric_limits<S>::max();
      }
    });
    auto c = std::make_shared<op::Constant>(type, Shape{3}, bytes.data());
    auto p = param(type, {3});
    auto f = std::make_shared<Function>(OutputVector{c, p}, ParameterVector{p});
    auto g = deserialize(serialize(f));
    EXPECT_EQ(serialize(g), serialize(f));
    auto c2 = std::dynamic_pointer_cast<op::Constant>(
        g->get_results()[0]->input_value(0).get_node_shared_ptr());
    ASSERT_TRUE(c2);
    EXPECT_EQ(c2->get_element_type(), type);
    EXPECT_EQ(std::memcmp(c2->get_data_ptr(), bytes.data(), bytes.size()), 0);
    EXPECT_EQ(g->get_parameters()[0]->get_element_type(), type);
  }
  EXPECT_EQ(known, 13u);
}

TEST(serializer, no_op_attribute_clashes_with_the_format) {
  // Default-constructed ops visit their attributes: a name the format uses would clash.
  for (const auto& name : OpRegistry::get().names()) {
    auto node = OpRegistry::get().create(name);
    std::string attrs = node->attributes_string();
    for (const char* key : {"name=", "friendly_name=", "op=", "inputs=", "outputs=", "value=",
                            "variable_id="})
      EXPECT_FALSE(test::starts_with(attrs, key) || contains(attrs, std::string(", ") + key))
          << name << " has an attribute named " << key;
  }
}

TEST(serializer, writes_ngraphs_format) {
  auto x = param(F32, {2, 3});
  x->set_friendly_name("x");
  auto g = param(F32, {3}), b = param(F32, {3});
  auto bn = std::make_shared<op::BatchNormTraining>(x, g, b, 0.5);
  auto mean = std::make_shared<op::Negative>(bn->output(1));
  mean->set_friendly_name("x");  // a duplicate friendly name gets a unique "name"
  auto c = std::make_shared<op::Constant>(element::i32, Shape{2}, std::vector<int>{3, 3});
  auto f = std::make_shared<Function>(OutputVector{mean, c}, ParameterVector{x, g, b}, "f");
  auto doc = json::parse(serialize(f));
  ASSERT_EQ(doc.items().size(), 1u);
  const auto& fn = doc.items()[0];
  EXPECT_EQ(fn.find("name")->text(), "f");
  EXPECT_EQ(fn.find("parameters")->items()[0].text(), "x");
  EXPECT_EQ(fn.find("result")->items().size(), 2u);
  std::map<std::string, const json::Value*> ops;
  for (const auto& op : fn.find("ops")->items()) ops[op.find("op")->text()] = &op;
  const auto& neg = *ops.at("Negative");
  EXPECT_EQ(neg.find("friendly_name")->text(), "x");
  EXPECT_NE(neg.find("name")->text(), "x");
  const auto& in = neg.find("inputs")->items()[0];
  EXPECT_EQ(in.find("node")->text(), ops.at("BatchNormTraining")->find("name")->text());
  EXPECT_EQ(in.find("index")->text(), "1");
  const auto& bn_obj = *ops.at("BatchNormTraining");
  EXPECT_EQ(bn_obj.find("outputs")->items().size(), 3u);
  EXPECT_EQ(bn_obj.find("eps")->text(), "0.5");  // nGraph's key; inputs gamma, beta, x
  EXPECT_EQ(bn_obj.find("epsilon"), nullptr);
  EXPECT_EQ(json::write(*bn_obj.find("inputs")),
            "[\"" + g->get_name() + "\",\"" + b->get_name() + "\",\"x\"]");
  const auto& cst = *ops.at("Constant");
  EXPECT_EQ(cst.find("element_type")->text(), "int32_t");  // nGraph's C type names
  EXPECT_EQ(fn.find("ops")->items()[0].find("element_type")->text(), "float");
  EXPECT_EQ(json::write(*cst.find("shape")), "[2]");
  EXPECT_EQ(json::write(*cst.find("value")), "[\"3\"]");  // nGraph: one string when all equal
  EXPECT_EQ(json::write(*fn.find("ops")->items()[0].find("shape")), "[2,3]");
  // Stream overloads.
  std::stringstream ss;
  serialize(ss, f, 4);
  EXPECT_EQ(serialize(deserialize(ss)), serialize(f));
}

// The keys, enums and orders nGraph's serializer (v0.26) uses for our ops, op by op.
TEST(serializer, writes_ngraphs_keys_enums_and_orders) {
  auto x = param(F32, {1, 2, 4, 4}), w = param(F32, {3, 2, 3, 3}), v = param(F32, {2, 3});
  auto conv = std::make_shared<op::Convolution>(x, w, Strides{1, 2}, Strides{1, 1},
                                                CoordinateDiff{1, 0}, CoordinateDiff{1, 2});
  auto topk = std::make_shared<op::TopK>(v, 2, 1, true, element::i32);
  OutputVector results{
      conv,
      std::make_shared<op::Concat>(OutputVector{v, v}, 1),
      std::make_shared<op::Convert>(v, element::f64),
      std::make_shared<op::Broadcast>(param(F32, {3}), Shape{2, 3}, AxisSet{0}),
      std::make_shared<op::Softmax>(v, AxisSet{1}),
      std::make_shared<op::Pad>(
          v, std::make_shared<op::Constant>(F32, Shape{}, std::vector<float>{0}),
          CoordinateDiff{0, 1}, CoordinateDiff{1, 0}, "edge"),
      std::make_shared<op::Add>(v, param(F32, {3}), "numpy"),
      std::make_shared<op::Multiply>(v, v),
      std::make_shared<op::LRN>(x, 1e-4, 0.75, 2.0, 3),
      topk->output(0),
      std::make_shared<op::Negative>(topk->output(1)),
      std::make_shared<op::GetOutputElement>(topk, 0)};
  auto f = function_of(results);
  auto doc = json::parse(serialize(f));
  std::map<std::string, const json::Value*> ops;
  for (const auto& op : doc.items()[0].find("ops")->items()) ops[op.find("op")->text()] = &op;
  auto text = [&](const char* op, const char* key) {
    const json::Value* found = ops.at(op)->find(key);
    return found ? json::write(*found) : std::string("(missing)");
  };
  EXPECT_EQ(text("Convolution", "window_movement_strides"), "[1,2]");
  EXPECT_EQ(text("Convolution", "window_dilation_strides"), "[1,1]");
  EXPECT_EQ(text("Convolution", "padding_above"), "[1,2]");
  EXPECT_EQ(text("Convolution", "data_dilation_strides"), "[1,1]");
  EXPECT_EQ(text("Convolution", "strides"), "(missing)");
  EXPECT_EQ(text("Concat", "axis"), "1");
  EXPECT_EQ(text("Convert", "target_type"), "\"double\"");
  EXPECT_EQ(text("Broadcast", "axes"), "[0]");
  EXPECT_EQ(text("Softmax", "softmax_axes"), "[1]");
  EXPECT_EQ(text("Pad", "pad_mode"), "1");  // op::PadMode::EDGE
  EXPECT_EQ(text("Add", "autob"), "{\"type\":1,\"axis\":0}");
  // v0.26 reads "auto_broadcast" (and ignores "autob"), v0.20-v0.25 "autob": both are written.
  EXPECT_EQ(text("Add", "auto_broadcast"), "{\"type\":1,\"axis\":0}");
  EXPECT_EQ(text("Multiply", "auto_broadcast"), "(missing)");
  EXPECT_EQ(text("Multiply", "autob"), "(missing)");  // nGraph leaves NONE out
  EXPECT_EQ(text("LRN", "nsize"), "3");
  EXPECT_EQ(text("TopK", "top_k_axis"), "1");
  EXPECT_EQ(text("TopK", "index_element_type"), "\"int32_t\"");
  // nGraph v0's TopK has the indices as output 0 and the values as output 1.
  const std::string topk_name = ops.at("TopK")->find("name")->text();
  EXPECT_EQ(text("Negative", "inputs"), "[\"" + topk_name + "\"]");
  EXPECT_EQ(text("GetOutputElement", "inputs"), "[{\"node\":\"" + topk_name + "\",\"index\":1}]");
  EXPECT_EQ(text("GetOutputElement", "n"), "1");
  // Read back: the same graph, in our numbering.
  auto g = deserialize(serialize(f));
  EXPECT_EQ(serialize(g), serialize(f));
  auto neg = g->get_results()[10]->input_value(0).get_node_shared_ptr();
  EXPECT_EQ(neg->input_value(0).get_index(), 1u);
  EXPECT_EQ(neg->get_element_type(), element::i32);
  EXPECT_EQ(g->get_results()[11]->get_element_type(), F32);
}

// A document in nGraph's spelling, as nGraph's serializer writes it (keys, enum numbers, C type
// names, TopK's output order, keys we have no use for); batch normalization's inputs are
// gamma, beta, data in both.
TEST(serializer, reads_a_document_written_by_ngraph) {
  auto f = deserialize(R"([{"name":"Function_0","parameters":["Parameter_0","Parameter_1"],
  "result":["Result_9","Result_10","Result_11"],"ops":[
  {"name":"Parameter_0","op":"Parameter","cacheable":false,"element_type":"float","shape":[2,3],
   "outputs":["Parameter_0_0"]},
  {"name":"Parameter_1","op":"Parameter","cacheable":false,"element_type":"float","shape":[3],
   "outputs":["Parameter_1_0"]},
  {"name":"Constant_2","op":"Constant","element_type":"float","shape":[3],"value":["1"],
   "outputs":["Constant_2_0"]},
  {"name":"Constant_3","op":"Constant","element_type":"float","shape":[3],"value":["0","1","2"],
   "outputs":["Constant_3_0"]},
  {"name":"Add_4","op":"Add","inputs":["Parameter_0","Parameter_1"],
   "autob":{"type":1,"axis":0},"outputs":["Add_4_0"]},
  {"name":"BatchNormTraining_5","op":"BatchNormTraining",
   "inputs":["Constant_2","Constant_3","Add_4"],"eps":0.001,
   "outputs":["BatchNormTraining_5_0","BatchNormTraining_5_1","BatchNormTraining_5_2"]},
  {"name":"GetOutputElement_6","op":"GetOutputElement","inputs":["BatchNormTraining_5"],"n":0,
   "outputs":["GetOutputElement_6_0"]},
  {"name":"TopK_7","op":"TopK","inputs":["Add_4"],"top_k_axis":1,"k":2,"compute_max":true,
   "index_element_type":"int32_t","outputs":["TopK_7_0","TopK_7_1"]},
  {"name":"GetOutputElement_8","op":"GetOutputElement","inputs":[{"node":"TopK_7","index":1}],
   "n":1,"outputs":["GetOutputElement_8_0"]},
  {"name":"Result_9","op":"Result","inputs":["GetOutputElement_6"],"needs_default_layout":false,
   "outputs":["Result_9_0"]},
  {"name":"Result_10","op":"Result","inputs":["GetOutputElement_8"],"outputs":["Result_10_0"]},
  {"name":"Result_11","op":"Result","inputs":["TopK_7"],"outputs":["Result_11_0"]}]}])");
  auto r = test::run_function(f, {test::make_value<float>({2, 3}, {1, 5, 3, 4, 2, 6}),
                                  test::make_value<float>({3}, {1, 1, 1})});
  // x + 1 = [[2, 6, 4], [5, 3, 7]]: per column mean [3.5, 4.5, 5.5], variance 2.25, so the
  // normalized values are -1 and 1; gamma 1, beta [0, 1, 2].
  auto bn = test::to_vector<float>(r[0]);
  std::vector<float> expected{-1, 2, 1, 1, 0, 3};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(bn[i], expected[i], 1e-3) << i;
  EXPECT_EQ(test::to_vector<float>(r[1]), (std::vector<float>{6, 4, 7, 5}));  // values
  EXPECT_EQ(test::to_vector<int32_t>(r[2]), (std::vector<int32_t>{1, 2, 2, 0}));  // indices
  // Keys we cannot honour are refused by name.
  auto doc = [](const std::string& extra) {
    return R"([{"name":"f","parameters":["a"],"result":["c"],"ops":[
      {"name":"a","op":"Parameter","element_type":"float","shape":[1,1,3,3]},
      {"name":"w","op":"Constant","element_type":"float","shape":[1,1,1,1],"value":["1"]},
      {"name":"c","op":"Convolution","inputs":["a","w"],"window_movement_strides":[1,1],
       "window_dilation_strides":[1,1],"padding_below":[0,0],"padding_above":[0,0])" +
           extra + "}]}]";
  };
  EXPECT_EQ(deserialize(doc(",\"pad_type\":0"))->get_results()[0]->get_shape(),
            (Shape{1, 1, 3, 3}));
  // nGraph's SAME_UPPER (2) and SAME_LOWER (1): padding from the shapes, replacing the given.
  auto padded = [&](const std::string& extra) {
    auto c = deserialize(replaced(doc(extra), "\"shape\":[1,1,1,1]", "\"shape\":[1,1,2,2]"))
                 ->get_results()[0]
                 ->input_value(0)
                 .get_node_shared_ptr();
    auto* conv = dynamic_cast<op::Convolution*>(c.get());
    return std::make_pair(conv->get_window().padding_below, conv->get_window().padding_above);
  };
  EXPECT_EQ(padded(",\"pad_type\":2"), std::make_pair(CoordinateDiff{0, 0}, CoordinateDiff{1, 1}));
  EXPECT_EQ(padded(",\"pad_type\":1"), std::make_pair(CoordinateDiff{1, 1}, CoordinateDiff{0, 0}));
  EXPECT_EQ(padded(",\"pad_type\":3"), std::make_pair(CoordinateDiff{0, 0}, CoordinateDiff{0, 0}));
  expect_rejected(doc(",\"pad_type\":4"), "\"pad_type\": expected nGraph's op::PadType");
  expect_rejected(doc(",\"control_deps\":[\"a\"]"), "control dependencies are not supported");
  expect_rejected(doc(",\"strides\":[1,1]"),
                  "both \"strides\" (ngraph's key) and \"window_movement_strides\" (nGraph's)");
}

TEST(serializer, writing_a_name_that_is_not_utf8_fails) {
  auto x = param(F32, {2});
  x->set_friendly_name("x\xff");
  auto f = std::make_shared<Function>(OutputVector{x}, ParameterVector{x});
  auto message = test::error_of<SerializationError>([&] { serialize(f); });
  EXPECT_TRUE(contains(message, "serialize: cannot write a string that is not valid UTF-8"))
      << message;
  EXPECT_TRUE(contains(test::error_of<SerializationError>([] { serialize(nullptr); }),
                       "the function is null"));
}

TEST(serializer, reads_ngraphs_spellings) {
  // C type names, results that are not Result ops, values as numbers.
  auto f = deserialize(R"([{"name":"g","parameters":["a"],"result":["n"],"ops":[
    {"name":"a","op":"Parameter","element_type":"float","shape":[2],"outputs":["a_0"]},
    {"name":"k","op":"Constant","element_type":"int32_t","shape":[2],"value":[1, "2"]},
    {"name":"b","op":"Constant","element_type":"char","shape":[2],"value":["1", false]},
    {"name":"n","op":"Negative","inputs":["a"]}]}])");
  EXPECT_EQ(f->get_results().size(), 1u);
  EXPECT_EQ(f->get_parameters()[0]->get_element_type(), element::f32);
  auto r = test::run_function(f, {test::make_value<float>({2}, {1, -2})});
  EXPECT_EQ(test::to_vector<float>(r[0]), (std::vector<float>{-1, 2}));
}

// The formats of nGraph's writers and bridges of 2017-2020, as its readers (v0.18-v0.26) took
// them (docs/cpp.md, "Reading the documents of every nGraph version"): recorded output types,
// element types as objects, op versions, Dot's default count, results that are not Results,
// axes also as a Constant input, several functions, the binary cpio container.
TEST(serializer, reads_the_formats_of_every_ngraph_version) {
  const std::string body = R"({"name":"Function_1","parameters":["P0","P1"],
  "result":["Dot_3","Sum_4","Constant_5"],"result_shape":[2],
  "result_type":{"bitwidth":32,"c_type_string":"float","is_real":true,"is_signed":true},
  "value_type":[{"element_type":"float","shape":[2]}],"ops":[
  {"name":"P0","op":"Parameter","inputs":[],"outputs":["P0_0"],"op_version":0,
   "value_type":{"element_type":"float","shape":[2,3]}},
  {"name":"P1","op":"Parameter","inputs":[],"outputs":["P1_0"],"shape":[3],
   "element_type":{"bitwidth":32,"c_type_string":"float","is_real":true,"is_signed":true,
   "is_quantized":false},"type_info":{"name":"Parameter","version":0}},
  {"name":"axes","op":"Constant","element_type":"int64_t","shape":[1],"value":["0"],
   "outputs":["axes_0"]},
  {"name":"Dot_3","op":"Dot","inputs":["P0","P1"],"outputs":["Dot_3_0"],
   "value_type":{"element_type":"float","shape":[2]}},
  {"name":"Sum_4","op":"Sum","inputs":["Dot_3","axes"],"reduction_axes":[0],
   "outputs":["Sum_4_0"],"op_version":0},
  {"name":"Constant_5","op":"Constant","element_type":"float","shape":[2],
   "outputs":["Constant_5_0"]CONSTANT_VALUE}]})";
  auto with_value = [&](const std::string& value) {
    return replaced(body, "CONSTANT_VALUE", value);
  };
  auto check = [](const std::shared_ptr<Function>& f) {
    auto r = test::run_function(f, {test::make_value<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                                    test::make_value<float>({3}, {1, 0, -1})});
    EXPECT_EQ(test::to_vector<float>(r[0]), (std::vector<float>{-2, -2}));  // Dot, count 1
    EXPECT_EQ(test::to_vector<float>(r[1]), (std::vector<float>{-4}));
    EXPECT_EQ(test::to_vector<float>(r[2]), (std::vector<float>{1.5f, -2}));
  };
  // A first function (nGraph wrote those an op calls first): the last is the function.
  const std::string first = R"({"name":"Function_0","parameters":["a"],"result":["a"],"ops":[
  {"name":"a","op":"Parameter","element_type":"float","shape":[1],"outputs":["a_0"]}]})";
  auto f = deserialize("[" + first + "," + with_value(R"(,"value":["1.5","-2"])") + "]");
  EXPECT_EQ(f->get_name(), "Function_1");
  check(f);

  // nGraph's cpio container: the JSON, then each value-less Constant's data by its name.
  auto u16 = [](std::string& out, uint32_t v) {
    out += static_cast<char>(v & 0xFF);
    out += static_cast<char>(v >> 8);
  };
  auto record = [&](std::string& out, const std::string& name, const std::string& data) {
    uint32_t namesize = static_cast<uint32_t>(name.size() + 1);
    for (uint32_t v : {0x71C7u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}) u16(out, v);
    u16(out, namesize);
    u16(out, static_cast<uint32_t>(data.size() >> 16));
    u16(out, static_cast<uint32_t>(data.size() & 0xFFFF));
    out += name + std::string(1 + namesize % 2, '\0') + data + std::string(data.size() % 2, '\0');
  };
  const float values[2] = {1.5f, -2};
  std::string archive;
  record(archive, "Function_1", "[" + with_value("") + "]");
  record(archive, "Constant_5", std::string(reinterpret_cast<const char*>(values), 8));
  record(archive, "TRAILER!!!", "");
  check(deserialize(archive));
  expect_rejected(archive.substr(0, 30), "nGraph's cpio container: record 0 at byte 0: truncated");

  // What ngraph cannot represent names the parameter, the op and the node.
  std::string dynamic = with_value(R"(,"value":["1"])");
  expect_rejected("[" + replaced(dynamic, R"("shape":[3])", R"("shape":[3,null])") + "]",
                  "ops[1] 'P1' (Parameter): parameter 'P1' has a dynamic shape: dimension 1 is "
                  "null");
  expect_rejected("[" + replaced(dynamic, R"("shape":[3])", R"("shape":null)") + "]",
                  "parameter 'P1' has a dynamic shape (null: nGraph's dynamic rank)");
  expect_rejected("[" + replaced(dynamic, R"("op":"Sum")", R"("op":"ReverseSequence")") + "]",
                  "ops[4] 'Sum_4' (ReverseSequence): unknown op 'ReverseSequence'");
  expect_rejected("[" + replaced(dynamic, R"("reduction_axes":[0])", R"("reduction_axes":[])") +
                      "]",
                  "ops[4] 'Sum_4' (Sum): inputs[1]: the Constant 'axes' holds reduction_axes "
                  "{0}, but \"reduction_axes\" is {}");
  expect_rejected("[" + replaced(dynamic, R"("outputs":["Sum_4_0"],"op_version":0)",
                                 R"("outputs":["Sum_4_0"],"op_version":1)") + "]",
                  "ops[4] 'Sum_4' (Sum): version 1 of nGraph's Sum is not supported");
}

TEST(serializer, binds_a_communicator_to_collectives) {
  auto f = cases()["AllReduce"]();
  auto comm = std::make_shared<distributed::LocalCommunicator>();
  DeserializeOptions options;
  options.communicator = comm;
  size_t bound = 0;
  for (const auto& n : deserialize(serialize(f), options)->get_ordered_ops())
    if (auto* c = dynamic_cast<op::Collective*>(n.get())) {
      EXPECT_EQ(c->get_communicator(), comm);
      ++bound;
    }
  EXPECT_EQ(bound, 4u);
  for (const auto& n : deserialize(serialize(f))->get_ordered_ops()) {
    if (auto* c = dynamic_cast<op::Collective*>(n.get())) {
      EXPECT_EQ(c->get_communicator(), distributed::get_default_communicator());
    }
  }
  // Peers are checked against the communicator the document is read with.
  auto send = cases()["Send"]();
  DeserializeOptions two;
  two.communicator = two_ranks();
  EXPECT_NO_THROW(deserialize(serialize(send), two));
  expect_rejected(serialize(send), "1 is out of range for local (one process)");
}

// A compiled training step (forward, backward, SGD updates of variables) runs the same steps
// after a round trip: same losses, same weights.
TEST(serializer, training_step_round_trips) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 0.5f);
  auto variable = [&](const Shape& s, const std::string& name) {
    std::vector<float> v(shape_size(s));
    for (auto& x : v) x = normal(rng);
    auto state = std::make_shared<VariableState>(F32, s, v.data());
    state->set_name(name);
    return std::make_shared<op::Variable>(state);
  };
  auto x = param(F32, {8, 4}), y = param(F32, {8, 2});
  auto w1 = variable({4, 6}, "w1"), b1 = variable({6}, "b1"), w2 = variable({6, 2}, "w2");
  auto h = std::make_shared<op::Relu>(
      std::make_shared<op::Add>(std::make_shared<op::Dot>(x, w1), b1, "numpy"));
  auto d = std::make_shared<op::Subtract>(std::make_shared<op::Dot>(h, w2), y);
  auto loss = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(d, d), AxisSet{0, 1});
  autodiff::Adjoints adj(OutputVector{loss}, OutputVector{autodiff::scalar(F32, 1.0)});
  NodeVector updates;
  for (const auto& v : {w1, b1, w2}) {
    auto lr = std::make_shared<op::Broadcast>(autodiff::scalar(F32, 0.01), v->get_shape(),
                                              [&] {
                                                AxisSet all;
                                                for (size_t i = 0; i < v->get_shape().size(); ++i)
                                                  all.insert(i);
                                                return all;
                                              }());
    updates.push_back(std::make_shared<op::Assign>(
        v, std::make_shared<op::Subtract>(
               v, std::make_shared<op::Multiply>(adj.backprop_output(v->output(0)), lr))));
  }
  auto f = std::make_shared<Function>(OutputVector{loss}, updates, ParameterVector{x, y}, "step");
  auto g = deserialize(serialize(f));
  EXPECT_EQ(serialize(g), serialize(f));
  auto in = inputs_for(*f, 11);
  std::vector<float> la, lb;
  for (int step = 0; step < 4; ++step) {
    la.push_back(test::to_vector<float>(test::run_function(f, in)[0])[0]);
    lb.push_back(test::to_vector<float>(test::run_function(g, in)[0])[0]);
  }
  EXPECT_EQ(la, lb);
  EXPECT_LT(la.back(), la.front()) << "the step does not train";
  // Both functions' variables moved the same way (the documents now hold the new values).
  EXPECT_EQ(serialize(g), serialize(f));
}


// ------------------------------------------------------------------------ hostile documents

TEST(serializer, the_hostile_test_document_is_valid) {
  auto f = deserialize(kValid);
  auto r = test::run_function(f, {test::make_value<float>({2, 3}, {1, 2, 3, 4, 5, 6}),
                                  test::make_value<float>({3}, {1, 1, 2})});
  EXPECT_EQ(test::to_vector<float>(r[0]), (std::vector<float>{2, 4, 9, 5, 7, 12}));
}

TEST(serializer, hostile_documents_raise_errors_naming_the_field) {
  std::string v = kValid;
  expect_rejected("[{", "JSON line 1, column 3");
  expect_rejected("{}", "the document (an array of functions): expected an array, got an object");
  expect_rejected("[]", "the document is an empty array (expected an array of functions)");
  // Of several functions (nGraph wrote those an op calls first), each must be valid.
  expect_rejected("[" + replaced(v.substr(1, v.size() - 2), "\"Add\"", "\"Ad\"") + "," +
                      v.substr(1),
                  "ops[4] 's' (Ad): unknown op 'Ad': ngraph has no op of that name");
  // Each edit of the valid document and the error it must raise.
  struct Edit {
    const char* from;
    const char* to;
    const char* expected;
  };
  const Edit edits[] = {
      {"\"ops\":[", "\"ops\":3,\"x\":[",
       "unknown key \"x\""},
      {"\"result\":[\"r\"]", "\"result\":3",
       "\"result\": expected an array, got a number (3)"},
      {"\"op\":\"Multiply\"", "\"op\":\"Frobnicate\"",
       "ops[3] 'm' (Frobnicate): unknown op 'Frobnicate': ngraph has no op of that name "
       "(line 5, column"},
      // A cycle: m reads s, which reads m.
      {"[\"b\",\"k\"]", "[\"b\",\"s\"]",
       "ops[3] 'm' (Multiply): inputs[1] refers to 's', which no earlier op defines"},
      {"{\"name\":\"k\"", "{\"name\":\"a\"",
       "the name 'a' is used twice"},
      {"\"result\":[\"r\"]", "\"result\":[\"zz\"]",
       "\"result\"[0] refers to 'zz'"},
      {"\"parameters\":[\"a\",\"b\"]", "\"parameters\":[\"a\",\"m\"]",
       "\"parameters\": 'm' is a Multiply, not a Parameter"},
      {"\"parameters\":[\"a\",\"b\"]", "\"parameters\":[\"a\"]",
       "which is not among the function's parameters"},
      {"\"parameters\":[\"a\",\"b\"]", "\"parameters\":[\"a\",\"a\"]",
       "is listed twice"},
      {"[2,3]", "[4294967296,4294967296,16]",
       "ops[0] 'a' (Parameter): [Parameter] output 0 of shape {4294967296,4294967296,16} and "
       "type f32 has more bytes than fit in 64 bits"},
      {"[2,3]", "[2,-3]",
       "attribute 'shape' must not be negative"},
      {"[2,3]", "[2,1e3]",
       "attribute 'shape[1]': expected an integer in the int64 range, got a number (1e3)"},
      {"[2,3]", "[2,99999999999999999999]",
       "int64 range"},
      {"[\"b\",\"k\"]", "[\"b\",\"k\",\"k\"]",
       "ops[3] 'm' (Multiply): [Multiply] expects 2 inputs, got 3"},
      {"\"auto_broadcast\":\"numpy\"", "\"auto_broadcast\":\"sideways\"",
       "ops[4] 's' (Add): "},
      {"\"auto_broadcast\":\"numpy\"", "\"auto_broadcast\":3",
       "attribute 'auto_broadcast': expected a string, got a number (3)"},
      // Left out, auto_broadcast is "none", as nGraph's reader takes it: {2,3} + {3} fails.
      {",\"auto_broadcast\":\"numpy\"", "",
       "ops[4] 's' (Add): [Add] "},
      // Shapes {2,3} and {3} do not match without broadcasting.
      {"\"auto_broadcast\":\"numpy\"", "\"auto_broadcast\":\"none\"",
       "[Add] "},
      {"\"inputs\":[\"a\",\"m\"]", "\"inputs\":[\"a\",\"m\"],\"bogus\":1",
       "unknown key \"bogus\" (expected: friendly_name, inputs, name, op, outputs, "
       "auto_broadcast)"},
      {"[\"a\",\"m\"]", "[\"a\",{\"node\":\"m\",\"index\":5}]",
       "inputs[1]: output index 5 is out of range for 'm' (Multiply), which has 1 outputs"},
      {"[\"a\",\"m\"]", "[\"a\",{\"node\":\"m\"}]",
       "missing \"index\""},
      {"[\"a\",\"m\"]", "[\"a\",7]",
       "inputs[1]: expected a node name or {\"node\": name, \"index\": i}, got a number"},
      {"\"f32\",\"shape\":[2,3]", "\"f128\",\"shape\":[2,3]",
       "attribute 'element_type': unknown element type 'f128'"},
      {"[\"1\",\"2\",\"3\"]", "[\"1\",\"2\"]",
       "\"value\" has 2 elements for 3"},
      {"[\"1\",\"2\",\"3\"]", "[\"1\",\"x\",\"3\"]",
       "\"value\"[1]: a string 'x' is not a f32 value"},
      {"[\"1\",\"2\",\"3\"]", "[\"1\",1e999,\"3\"]",
       "is not a f32 value"},
      {"\"outputs\":[\"m_0\"]", "\"outputs\":[\"m_0\",\"m_1\"]",
       "\"outputs\" names 2 outputs, but the op has 1"},
      {"\"name\":\"m\"", "\"name\":5",
       "\"name\": expected a string"},
      {"{\"name\":\"m\",", "{",
       "ops[3]: missing \"name\""},
      {"\"ops\":[", "\"ops\":[3,",
       "ops[0]: the op: expected an object"},
      {"\"shape\":[3],\"value\":[\"1\",\"2\",\"3\"]", "\"shape\":[1000000000000],\"value\":[\"1\"]",
       "shape {1000000000000} of f32 exceeds the limit of 1073741824 bytes"},
  };
  for (const auto& e : edits) expect_rejected(replaced(v, e.from, e.to), e.expected);
  expect_rejected("[" + std::string(70, '[') + std::string(70, ']') + "]", "nesting deeper than");
  expect_rejected("[[]]", "function: the function: expected an object, got an array");
  expect_rejected(R"([{"name":"v","parameters":[],"result":["x"],"ops":[
      {"name":"x","op":"Variable","element_type":"f32","shape":[],"variable_id":"nope"}]}])",
                  "variable_id 'nope' is not among the function's \"variables\"");
  expect_rejected(R"([{"name":"v","parameters":[],"result":["x"],"variables":[
      {"variable_id":"w","element_type":"f32","shape":[2],"value":["1","2"]}],"ops":[
      {"name":"x","op":"Variable","element_type":"f32","shape":[3],"variable_id":"w"}]}])",
                  "the op says f32{3} but variable 'w' holds f32{2}");
  expect_rejected(R"([{"name":"v","parameters":[],"result":["x"],"variables":[
      {"variable_id":"w","element_type":"f32","shape":[2],"value":["1","2"]},
      {"variable_id":"w","element_type":"f32","shape":[2],"value":["1","2"]}],"ops":[]}])",
                  "variables[1] 'w': variable_id is listed twice");
  expect_rejected(R"([{"name":"v","parameters":[],"result":[],"sinks":["c"],"ops":[
      {"name":"c","op":"Constant","element_type":"f32","shape":[],"value":["1"]}]}])",
                  "is not a node without outputs");
  expect_rejected(R"([{"name":"v","parameters":[],"result":["a"],"variables":[
      {"variable_id":"w","element_type":"f32","shape":[],"value":["1"]}],"ops":[
      {"name":"c","op":"Constant","element_type":"f32","shape":[],"value":["2"]},
      {"name":"a","op":"Assign","inputs":["c"],"variable_id":"w"}]}])",
                  "\"result\"[0]: 'a' (Assign) has no outputs");
  expect_rejected(R"([{"name":"v","parameters":[],"result":["g"],"ops":[
      {"name":"c","op":"Constant","element_type":"f32","shape":[],"value":["1"]},
      {"name":"g","op":"GetOutputElement","inputs":["c"],"n":3}]}])",
                  "[GetOutputElement] n = 3 is out of range");
  expect_rejected(R"([{"name":"v","parameters":[],"result":["c"],"ops":[
      {"name":"c","op":"Constant","element_type":"undefined","shape":[],"value":["1"]}]}])",
                  "unknown element type 'undefined'");
}

// ------------------------------------------------------------------------------- fuzzing

namespace {

// JSON tokens of a document: strings, numbers, literals and punctuation.
std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    if (c == ' ' || c == '\n') {
      ++i;
    } else if (c == '"') {
      size_t j = i + 1;
      while (text[j] != '"') j += text[j] == '\\' ? 2 : 1;
      out.push_back(text.substr(i, j + 1 - i));
      i = j + 1;
    } else if (std::strchr("[]{}:,", c)) {
      out.push_back(std::string(1, c));
      ++i;
    } else {
      size_t j = i;
      while (j < text.size() && !std::strchr("[]{}:,\" \n", text[j])) ++j;
      out.push_back(text.substr(i, j - i));
      i = j;
    }
  }
  return out;
}

const std::vector<std::string> kPool = {
    "0",     "-1",     "1",     "2",        "-0",   "1.5",     "1e308",  "-1e308", "1e999",
    "4294967296",      "9223372036854775807",       "9223372036854775808",
    "-9223372036854775808", "18446744073709551615", "[]",  "{}",     "null",   "true",
    "false", "\"\"",   "\"f32\"", "\"boolean\"",    "\"i64\"", "\"nan\"", "\"inf\"", "\"Add\"",
    "\"Parameter\"",   "\"Constant\"", "\"GetOutputElement\"", "\"Result\"", "\"sum\"",
    "\"numpy\"", "\"x\"", "[1,2]", "[-1]", "[1000000,1000000,1000000]",
    "{\"node\":\"a\",\"index\":1}",
    ",", ":", "[", "]", "{", "}",
};

bool is_number(const std::string& t) {
  return !t.empty() && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9'));
}

std::string mutate(const std::vector<std::string>& tokens, std::mt19937_64& rng) {
  std::vector<std::string> t = tokens;
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  size_t edits = 1 + pick(3);
  for (size_t e = 0; e < edits && !t.empty(); ++e) {
    size_t i = pick(t.size());
    switch (pick(8)) {
      case 0: t.erase(t.begin() + static_cast<std::ptrdiff_t>(i)); break;
      case 1: t.insert(t.begin() + static_cast<std::ptrdiff_t>(i), t[i]); break;
      case 2: t[i] = kPool[pick(kPool.size())]; break;
      case 3: std::swap(t[i], t[pick(t.size())]); break;
      case 4: {  // a number becomes huge, negative or fractional
        std::vector<size_t> numbers;
        for (size_t k = 0; k < t.size(); ++k)
          if (is_number(t[k])) numbers.push_back(k);
        if (numbers.empty()) break;
        const char* edges[] = {"-1", "0", "4611686018427387904", "1e20", "0.5", "3", "-7", "65"};
        t[numbers[pick(numbers.size())]] = edges[pick(8)];
        break;
      }
      case 5: {  // a string becomes another of the document's strings (names: cycles, dups)
        std::vector<size_t> strings;
        for (size_t k = 0; k < t.size(); ++k)
          if (t[k][0] == '"') strings.push_back(k);
        if (strings.size() < 2) break;
        t[strings[pick(strings.size())]] = t[strings[pick(strings.size())]];
        break;
      }
      case 6: t.resize(i); break;
      case 7: t[i] = (rng() & 1) ? "[" + t[i] + "]" : "{\"k\":" + t[i] + "}"; break;
    }
  }
  std::string out;
  for (const auto& s : t) out += s;
  return out;
}

size_t env_size(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? static_cast<size_t>(std::strtoull(v, nullptr, 10)) : fallback;
}

}  // namespace

TEST(serializer, fuzzed_documents_read_or_raise_serialization_errors) {
  std::vector<std::vector<std::string>> seeds;
  seeds.push_back(tokenize(kValid));
  for (const auto& [name, f] : all_cases()) seeds.push_back(tokenize(serialize(f)));
  size_t cases = env_size("NGRAPH_FUZZ_CASES", 3000);
  uint64_t seed = env_size("NGRAPH_FUZZ_SEED", 1);
  std::mt19937_64 rng(seed);
  size_t accepted = 0, rejected = 0;
  for (size_t c = 0; c < cases; ++c) {
    std::string doc = mutate(seeds[rng() % seeds.size()], rng);
    try {
      auto f = deserialize(doc);
      ++accepted;
      // What reads must write, and what it writes must read back the same.
      std::string again = serialize(f);
      ASSERT_EQ(serialize(deserialize(again)), again) << "case " << c << ":\n" << doc;
    } catch (const SerializationError& e) {
      ++rejected;
      // Every message says where: the JSON position, the op, the function or the document.
      std::string m = e.what();
      bool located = false;
      for (const char* where :
           {"deserialize: JSON line ", "deserialize: ops[", "deserialize: function",
            "deserialize: the document"})
        located = located || test::starts_with(m, where);
      ASSERT_TRUE(located) << "case " << c << ": an error without its field: " << m << "\n" << doc;
    } catch (const std::exception& e) {
      FAIL() << "case " << c << " (seed " << seed << ") threw " << e.what() << ":\n" << doc;
    }
  }
  EXPECT_GT(rejected, cases / 4);
  EXPECT_GT(accepted, 0u);
  std::cout << "[ fuzz     ] " << cases << " documents (seed " << seed << "): " << accepted
            << " read, " << rejected << " rejected\n";
}
