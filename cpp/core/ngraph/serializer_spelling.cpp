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

}  // namespace

bool swaps_outputs(const std::string& op) { return op == "TopK"; }

void to_ngraph(const std::string& op, json::Value& obj) {
  for (const auto& [ours, theirs] : renames(op)) rename(obj, ours, theirs);
  if (Value* ab = member(obj, "auto_broadcast")) {
    // nGraph writes "autob" only when it is not NONE.
    bool numpy = ab->text() == "numpy";
    erase(obj, "auto_broadcast");
    if (numpy) {
      Value spec = Value::object();
      spec.set("type", Value::integer(1));
      spec.set("axis", Value::integer(0));
      obj.set("autob", std::move(spec));
    }
  }
  if (Value* mode = member(obj, "pad_mode")) {
    const auto& modes = pad_modes();
    auto it = std::find(modes.begin(), modes.end(), mode->text());
    if (it != modes.end()) *mode = Value::integer(it - modes.begin());
  }
}

bool from_ngraph(const std::string& op, json::Value& obj, const std::vector<std::string>& visited,
                 const Fail& fail) {
  bool theirs_used = false;
  for (const auto& [ours, theirs] : renames(op)) {
    if (!member(obj, theirs)) continue;
    if (member(obj, ours))
      fail(member(obj, theirs), "both \"" + ours + "\" (ngraph's key) and \"" + theirs +
                                    "\" (nGraph's) are given");
    rename(obj, theirs, ours);
    theirs_used = true;
  }
  if (Value* autob = member(obj, "autob")) {
    if (member(obj, "auto_broadcast"))
      fail(autob, "both \"auto_broadcast\" (ngraph's key) and \"autob\" (nGraph's) are given");
    if (!autob->is(Kind::object) || !autob->find("type"))
      fail(autob, "\"autob\": expected an object {\"type\": 0 or 1, \"axis\": n}, got " +
                      std::string(autob->kind_name()));
    Value type = *autob->find("type");
    enum_from_number(type, broadcast_types(), "autob.type", fail);
    if (!type.is(Kind::string))
      fail(autob->find("type"), "\"autob\": \"type\" must be a number (0: none, 1: numpy)");
    rename(obj, "autob", "auto_broadcast");
    *member(obj, "auto_broadcast") = type;
  }
  if (Value* mode = member(obj, "pad_mode")) enum_from_number(*mode, pad_modes(), "pad_mode", fail);

  // Keys nGraph writes that change nothing here, or that we cannot honour.
  auto drop = [&](const std::string& key, const std::function<bool(const Value&)>& harmless,
                  const std::string& why) {
    Value* v = member(obj, key);
    if (!v || visits(visited, key)) return;
    if (!harmless(*v)) fail(v, "\"" + key + "\": " + why);
    erase(obj, key);
  };
  auto any = [](const Value&) { return true; };
  auto is_zero = [](const Value& v) {
    int64_t i = -1;
    return v.to_int64(i) && i == 0;
  };
  auto all_zero = [&](const Value& v) {
    if (!v.is(Kind::array)) return false;
    for (const auto& x : v.items())
      if (!is_zero(x)) return false;
    return true;
  };
  drop("cacheable", any, "");
  drop("needs_default_layout", any, "");
  drop("provenance_tags", any, "");
  drop("output_shapes", any, "");
  drop("pad_type", is_zero,
       "only explicit padding (pad_type 0) is supported; SAME_LOWER, SAME_UPPER and VALID "
       "are not");
  drop("padding_interior", all_zero, "interior padding is not supported (only zeros)");
  drop("control_deps", [](const Value& v) { return v.is(Kind::array) && v.items().empty(); },
       "control dependencies are not supported");

  for (const auto& [name, value] : defaults())
    if (visits(visited, name) && !member(obj, name)) obj.set(name, value);
  return theirs_used;
}

}  // namespace serializer_spelling
}  // namespace ngraph
