#include "ngraph/serializer_spelling.hpp"

#include <algorithm>
#include <map>
#include <utility>

namespace ngraph {
namespace serializer_spelling {

namespace {

using json::Value;
using Kind = json::Value::Kind;
using Renames = std::vector<std::pair<std::string, std::string>>;  // (ours, nGraph's)

// The keys nGraph's serializer spells differently, per op.
const Renames& renames(const std::string& op) {
  static const Renames conv = {{"strides", "window_movement_strides"},
                               {"dilations", "window_dilation_strides"},
                               {"data_dilations", "data_dilation_strides"}};
  static const Renames conv_backprop = {{"strides", "window_movement_strides_forward"},
                                        {"dilations", "window_dilation_strides_forward"},
                                        {"padding_below", "padding_below_forward"},
                                        {"padding_above", "padding_above_forward"},
                                        {"data_dilations", "data_dilation_strides_forward"}};
  static const Renames batch_norm = {{"epsilon", "eps"}};
  static const Renames lrn = {{"size", "nsize"}};
  static const std::map<std::string, Renames> table = {
      {"BatchNormTraining", batch_norm},
      {"BatchNormInference", batch_norm},
      {"BatchNormTrainingBackprop", batch_norm},
      {"Broadcast", {{"broadcast_axes", "axes"}}},
      {"Concat", {{"concatenation_axis", "axis"}}},
      {"Convert", {{"destination_type", "target_type"}}},
      {"Convolution", conv},
      {"ConvolutionBackpropData", conv_backprop},
      {"ConvolutionBackpropFilters", conv_backprop},
      {"LRN", lrn},
      {"LRNBackprop", lrn},
      {"Recv", {{"src", "source_id"}}},
      {"Send", {{"dest", "dest_id"}}},
      {"Softmax", {{"axes", "softmax_axes"}}},
      {"TopK", {{"axis", "top_k_axis"}}},
  };
  static const Renames none;
  auto it = table.find(op);
  return it == table.end() ? none : it->second;
}

// nGraph's op::PadMode and op::AutoBroadcastType, in their enum order.
const std::vector<std::string>& pad_modes() {
  static const std::vector<std::string> modes = {"constant", "edge", "reflect", "symmetric"};
  return modes;
}
const std::vector<std::string>& broadcast_types() {
  static const std::vector<std::string> types = {"none", "numpy"};
  return types;
}

// What nGraph's reader assumes for an attribute its writer may leave out.
const std::vector<std::pair<std::string, Value>>& defaults() {
  static const std::vector<std::pair<std::string, Value>> d = {
      {"auto_broadcast", Value::string("none")},
      {"pythondiv", Value::boolean(true)},
      {"pad_mode", Value::string("constant")},
      {"ceil_mode", Value::boolean(false)},
      {"include_padding_in_avg_computation", Value::boolean(false)},
      {"data_dilations", Value::array()},  // the op fills in ones
      {"groups", Value::integer(1)},
      {"reduction_axes_count", Value::integer(-1)},  // Dot: 0 with a scalar, else 1
      {"reduce_op", Value::string("sum")},            // nGraph's AllReduce sums
      {"compression", Value::string("none")},         // AllReduce: f32 on the wire
      {"error_feedback", Value::boolean(false)},
      {"root", Value::integer(0)},                    // BroadcastDistributed from rank 0
      {"tag", Value::integer(0)},                     // Send, Recv
  };
  return d;
}

Value* member(Value& obj, const std::string& key) {
  for (auto& [k, v] : obj.members())
    if (k == key) return &v;
  return nullptr;
}

void erase(Value& obj, const std::string& key) {
  auto& m = obj.members();
  m.erase(std::remove_if(m.begin(), m.end(), [&](const auto& kv) { return kv.first == key; }),
          m.end());
}

void rename(Value& obj, const std::string& from, const std::string& to) {
  for (auto& kv : obj.members())
    if (kv.first == from) kv.first = to;
}

bool visits(const std::vector<std::string>& visited, const std::string& name) {
  return std::find(visited.begin(), visited.end(), name) != visited.end();
}

// An enum written as nGraph's integer, as its name; fails for other numbers.
void enum_from_number(Value& v, const std::vector<std::string>& names, const std::string& key,
                      const Fail& fail) {
  if (!v.is(Kind::number)) return;  // a name (ours), checked by the op
  int64_t i = -1;
  if (!v.to_int64(i) || i < 0 || static_cast<size_t>(i) >= names.size()) {
    std::string known;
    for (size_t k = 0; k < names.size(); ++k)
      known += (k ? ", " : "") + std::to_string(k) + " (" + names[k] + ")";
    fail(&v, "'" + key + "' " + v.text() + " is not one we support (" + known + ")");
  }
  v = Value::string(names[static_cast<size_t>(i)]);
}

// nGraph's op version: "op_version" (v0.26) or "type_info" {"name", "version"} (later).
// Ours are nGraph's v0 ops; its v1 Softmax (one "softmax_axis") is our Softmax over that axis.
void op_version(const std::string& op, Value& obj, const Fail& fail) {
  const Value* at = nullptr;
  int64_t version = 0;
  if (Value* v = member(obj, "op_version")) {
    if (!v->to_int64(version) || version < 0)
      fail(v, "\"op_version\": expected an integer >= 0, got " + std::string(v->kind_name()));
    at = v;
  }
  if (Value* info = member(obj, "type_info")) {
    const Value* name = info->is(Kind::object) ? info->find("name") : nullptr;
    const Value* ver = info->is(Kind::object) ? info->find("version") : nullptr;
    int64_t v = -1;
    if (!name || !name->is(Kind::string) || !ver || !ver->to_int64(v) || v < 0)
      fail(info, "\"type_info\": expected {\"name\": the op, \"version\": n}");
    if (name->text() != op)
      fail(name, "\"type_info\" names the op '" + name->text() + "', but \"op\" is '" + op + "'");
    if (at && v != version)
      fail(ver, "\"type_info\" has version " + std::to_string(v) + " but \"op_version\" is " +
                    std::to_string(version));
    version = v;
    at = ver;
  }
  if (version == 1 && op == "Softmax") {
    Value* axis = member(obj, "softmax_axis");
    int64_t a = -1;
    if (!axis || !axis->to_int64(a) || a < 0)
      fail(axis ? axis : &obj, "nGraph's Softmax v1 needs \"softmax_axis\", an integer >= 0");
    if (member(obj, "softmax_axes") || member(obj, "axes"))
      fail(axis, "nGraph's Softmax v1 takes \"softmax_axis\" only (no axes)");
    Value axes = Value::array();
    axes.push_back(Value::integer(a));
    erase(obj, "softmax_axis");
    obj.set("softmax_axes", std::move(axes));
  } else if (version != 0) {
    fail(at, "version " + std::to_string(version) + " of nGraph's " + op +
                 " is not supported (ngraph's ops are nGraph's v0 ops" +
                 std::string(op == "Softmax" ? ", and Softmax v1" : "") + ")");
  }
  erase(obj, "op_version");
  erase(obj, "type_info");
}

// Where a shape has a dynamic rank (null) or dimension (null): nGraph's PartialShape.
void static_shape(const std::string& op, const Value& obj, const Value& shape, const Fail& fail) {
  const Value* name = obj.find("name");
  std::string who = (op == "Parameter" ? "parameter '" : op + " '") +
                    (name && name->is(Kind::string) ? name->text() : std::string()) + "'";
  if (shape.is(Kind::null))
    fail(&shape, who + " has a dynamic shape (null: nGraph's dynamic rank); ngraph's shapes are "
                       "static: give it a shape");
  if (!shape.is(Kind::array)) return;  // the attribute reader names the error
  for (size_t i = 0; i < shape.items().size(); ++i)
    if (shape.items()[i].is(Kind::null))
      fail(&shape.items()[i], who + " has a dynamic shape: dimension " + std::to_string(i) +
                                  " is null (nGraph's dynamic dimension); ngraph's shapes are "
                                  "static: give it a shape");
}

// The type of an op's output as nGraph's writers of 2017-2018 record it: "value_type"
// {"element_type", "shape"}, or "element_type" on ops that have no such attribute. A
// Parameter's or a Constant's is its type (when it has no "element_type" of its own);
// other ops' are the type of their output, which nGraph's readers ignore and infer.
void tensor_type(const std::string& op, Value& obj, const std::vector<std::string>& visited,
                 const Fail& fail) {
  bool typed = visits(visited, "element_type") && visits(visited, "shape");
  if (Value* vt = member(obj, "value_type")) {
    if (typed && !member(obj, "element_type")) {
      if (!vt->is(Kind::object) || !vt->find("element_type") || !vt->find("shape"))
        fail(vt, "\"value_type\": expected {\"element_type\": t, \"shape\": [...]}");
      Value type = *vt->find("element_type");
      Value shape = *vt->find("shape");
      erase(obj, "value_type");
      erase(obj, "shape");
      obj.set("element_type", std::move(type));
      obj.set("shape", std::move(shape));
    } else {
      erase(obj, "value_type");
    }
  }
  if (!visits(visited, "element_type")) erase(obj, "element_type");
  if (visits(visited, "shape"))
    if (const Value* shape = member(obj, "shape")) static_shape(op, obj, *shape, fail);
}
}  // namespace

namespace {
const std::vector<std::pair<std::string, std::string>>& op_names() {  // (ours, nGraph's)
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"LogicalAnd", "And"}, {"LogicalOr", "Or"}, {"LogicalNot", "Not"}};
  return names;
}
}  // namespace

std::string ngraph_op_name(const std::string& ours) {
  for (const auto& [o, t] : op_names())
    if (o == ours) return t;
  return ours;
}

std::string our_op_name(const std::string& theirs) {
  for (const auto& [o, t] : op_names())
    if (t == theirs) return o;
  return theirs;
}

bool swaps_outputs(const std::string& op) { return op == "TopK"; }

void to_ngraph(const std::string& op, json::Value& obj) {
  for (const auto& [ours, theirs] : renames(op)) rename(obj, ours, theirs);
  if (Value* ab = member(obj, "auto_broadcast")) {
    // nGraph writes "autob" only when it is not NONE.
    bool numpy = ab->text() == "numpy";
    erase(obj, "auto_broadcast");
    if (numpy) {
      // v0.20-v0.25 read "autob", v0.26 "auto_broadcast"; each ignores the other's key.
      Value spec = Value::object();
      spec.set("type", Value::integer(1));
      spec.set("axis", Value::integer(0));
      obj.set("autob", spec);
      obj.set("auto_broadcast", std::move(spec));
    }
  }
  if (Value* mode = member(obj, "pad_mode")) {
    const auto& modes = pad_modes();
    auto it = std::find(modes.begin(), modes.end(), mode->text());
    if (it != modes.end()) *mode = Value::integer(it - modes.begin());
  }
}

namespace {
// nGraph's readers took "image_dilation_strides" (its first name) when "data_dilation_strides"
// was missing, and ignored it otherwise.
void image_dilation(const std::string& op, Value& obj) {
  if (op != "Convolution" || !member(obj, "image_dilation_strides")) return;
  if (member(obj, "data_dilation_strides") || member(obj, "data_dilations"))
    erase(obj, "image_dilation_strides");
  else
    rename(obj, "image_dilation_strides", "data_dilation_strides");
}

// nGraph's keys renamed to ours; whether there were any.
bool rename_keys(const std::string& op, Value& obj, const Fail& fail) {
  bool theirs_used = false;
  for (const auto& [ours, theirs] : renames(op)) {
    if (!member(obj, theirs)) continue;
    if (member(obj, ours))
      fail(member(obj, theirs), "both \"" + ours + "\" (ngraph's key) and \"" + theirs +
                                    "\" (nGraph's) are given");
    rename(obj, theirs, ours);
    theirs_used = true;
  }
  return theirs_used;
}

// nGraph v0.20-v0.25 write {"type": t, "axis": a} as "autob", v0.26 as "auto_broadcast"
// (ours is a string there); ngraph writes both, equal, so that either version reads it.
void auto_broadcast(Value& obj, const Fail& fail) {
  Value* ab = member(obj, "auto_broadcast");
  if (ab && !ab->is(Kind::object)) ab = nullptr;
  if (Value* autob = member(obj, "autob")) {
    if (Value* other = member(obj, "auto_broadcast")) {
      if (!other->is(Kind::object) || json::write(*other) != json::write(*autob))
        fail(autob, "\"autob\" and \"auto_broadcast\" (nGraph's two keys) differ");
      erase(obj, "auto_broadcast");
      autob = member(obj, "autob");
    }
    ab = autob;
  }
  if (!ab) return;
  std::string key = member(obj, "autob") ? "autob" : "auto_broadcast";
  if (!ab->is(Kind::object) || !ab->find("type"))
    fail(ab, "\"" + key + "\": expected an object {\"type\": 0 or 1, \"axis\": n}, got " +
                 std::string(ab->kind_name()));
  Value type = *ab->find("type");
  enum_from_number(type, broadcast_types(), key + ".type", fail);
  if (!type.is(Kind::string))
    fail(ab->find("type"), "\"" + key + "\": \"type\" must be a number (0: none, 1: numpy)");
  rename(obj, key, "auto_broadcast");
  *member(obj, "auto_broadcast") = type;
}

bool any_value(const Value&) { return true; }
bool is_zero(const Value& v) {
  int64_t i = -1;
  return v.to_int64(i) && i == 0;
}
bool all_zero(const Value& v) {
  if (!v.is(Kind::array)) return false;
  for (const auto& x : v.items())
    if (!is_zero(x)) return false;
  return true;
}
bool empty_array(const Value& v) { return v.is(Kind::array) && v.items().empty(); }

// A key nGraph writes that the op does not visit: dropped when harmless here, else refused.
void drop(Value& obj, const std::vector<std::string>& visited, const std::string& key,
          bool (*harmless)(const Value&), const std::string& why, const Fail& fail) {
  Value* v = member(obj, key);
  if (!v || visits(visited, key)) return;
  if (!harmless(*v)) fail(v, "\"" + key + "\": " + why);
  erase(obj, key);
}

// nGraph's op::PadType: 0 explicit, 1 SAME_LOWER, 2 SAME_UPPER, 3 VALID. Its Convolution,
// AvgPool and MaxPool computed the padding of SAME_* from the shapes (the reader does, from
// the inputs, and takes "pad_type" out); they ignored VALID (the padding given is used), and
// its other ops have no pad type.
void pad_type(const std::string& op, Value& obj, const std::vector<std::string>& visited,
              const Fail& fail) {
  Value* pad_type = member(obj, "pad_type");
  if (!pad_type || visits(visited, "pad_type")) return;
  int64_t t = -1;
  if (!pad_type->to_int64(t) || t < 0 || t > 3)
    fail(pad_type, "\"pad_type\": expected nGraph's op::PadType, 0 (explicit), 1 (SAME_LOWER), "
                   "2 (SAME_UPPER) or 3 (VALID), got " + pad_type->text());
  if (!((t == 1 || t == 2) && (op == "Convolution" || op == "AvgPool" || op == "MaxPool")))
    erase(obj, "pad_type");
}

// Keys nGraph writes that change nothing here, or that we cannot honour.
void drop_ignored_keys(const std::string& op, Value& obj, const std::vector<std::string>& visited,
                       const Fail& fail) {
  drop(obj, visited, "cacheable", any_value, "", fail);
  drop(obj, visited, "needs_default_layout", any_value, "", fail);
  drop(obj, visited, "provenance_tags", any_value, "", fail);
  drop(obj, visited, "output_shapes", any_value, "", fail);
  pad_type(op, obj, visited, fail);
  drop(obj, visited, "padding_interior", all_zero, "interior padding is not supported (only zeros)",
       fail);
  drop(obj, visited, "control_deps", empty_array, "control dependencies are not supported", fail);
}

// nGraph's BatchNorm of early 2018 had a "training" flag; its readers since split the op
// (BatchNormTraining, BatchNormInference) and ignore it.
void batch_norm_training(const std::string& op, Value& obj,
                         const std::vector<std::string>& visited, const Fail& fail) {
  if (op.rfind("BatchNorm", 0) != 0 || visits(visited, "training")) return;
  Value* training = member(obj, "training");
  if (!training) return;
  bool expected = op != "BatchNormInference";
  if (!training->is(Kind::boolean) || training->as_bool() != expected)
    fail(training, "\"training\": " + op + " takes " + (expected ? "true" : "false") +
                       " (or no \"training\"), got " +
                       (training->is(Kind::boolean) ? (training->as_bool() ? "true" : "false")
                                                    : std::string(training->kind_name())));
  erase(obj, "training");
}

// nGraph's LayerNorm (v0.26) says whether it has scale and bias ("use_affine": they are its
// inputs 1 and 2 here too) and whether it outputs the statistics ("keep_stats"; ours always
// does: the reader lets the document name output 0 only); LayerNormBackprop says whether it
// is given them ("use_stats"; ours needs them).
void layer_norm_flags(const std::string& op, Value& obj, const std::vector<std::string>& visited,
                      const Fail& fail) {
  if (op != "LayerNorm" && op != "LayerNormBackprop") return;
  for (const char* key : {"use_affine", "keep_stats", "use_stats"}) {
    Value* v = member(obj, key);
    if (!v || visits(visited, key)) continue;
    if (!v->is(Kind::boolean))
      fail(v, "\"" + std::string(key) + "\": expected a boolean, got " + v->kind_name());
    if (std::string(key) == "use_stats" && !v->as_bool())
      fail(v, "LayerNormBackprop without the forward's statistics (\"use_stats\": false) is "
              "not supported: give it the mean and variance");
  }
}

// nGraph's MaxPool: padding may be left out (both or neither): zeros.
void max_pool_padding(const std::string& op, Value& obj, const Fail& fail) {
  if (op != "MaxPool") return;
  Value* below = member(obj, "padding_below");
  Value* above = member(obj, "padding_above");
  if (below && !above) fail(below, "\"padding_below\" is given but \"padding_above\" is not");
  if (above && !below) fail(above, "\"padding_above\" is given but \"padding_below\" is not");
  const Value* window = member(obj, "window_shape");
  if (below || above || !window || !window->is(Kind::array)) return;
  Value zeros = Value::array();
  for (size_t i = 0; i < window->items().size(); ++i) zeros.push_back(Value::integer(0));
  obj.set("padding_below", zeros);
  obj.set("padding_above", zeros);
}
}  // namespace

bool from_ngraph(const std::string& op, json::Value& obj, const std::vector<std::string>& visited,
                 const Fail& fail) {
  op_version(op, obj, fail);
  tensor_type(op, obj, visited, fail);
  image_dilation(op, obj);
  bool theirs_used = rename_keys(op, obj, fail);
  auto_broadcast(obj, fail);
  if (Value* mode = member(obj, "pad_mode")) enum_from_number(*mode, pad_modes(), "pad_mode", fail);
  drop_ignored_keys(op, obj, visited, fail);
  batch_norm_training(op, obj, visited, fail);
  layer_norm_flags(op, obj, visited, fail);
  max_pool_padding(op, obj, fail);
  for (const auto& [name, value] : defaults())
    if (visits(visited, name) && !member(obj, name)) obj.set(name, value);
  return theirs_used;
}

}  // namespace serializer_spelling
}  // namespace ngraph
