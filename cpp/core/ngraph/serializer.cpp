#include "ngraph/serializer.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "ngraph/json.hpp"
#include "ngraph/ops/collective.hpp"
#include "ngraph/ops/dot.hpp"
#include "ngraph/ops/get_output_element.hpp"
#include "ngraph/ops/parameter.hpp"
#include "ngraph/ops/variable.hpp"
#include "ngraph/serializer_spelling.hpp"

namespace ngraph {

namespace {

namespace spelling = serializer_spelling;
using json::Value;
using Kind = json::Value::Kind;

// Keys of an op's object that are not attributes; an op may not name an attribute so.
const std::set<std::string>& structural_keys() {
  static const std::set<std::string> keys = {"name",  "friendly_name", "op",
                                             "inputs", "outputs",      "value",
                                             "variable_id"};
  return keys;
}

// ------------------------------------------------------------------- element types, sizes

// Written as nGraph's C type names ("float", "int32_t", "char" for boolean); read in those
// and in every spelling element::Type accepts ("f32", "float32").
element::Type element_type_from_text(const std::string& text) {
  if (text == "char") return element::boolean;
  if (text == "dynamic")
    throw std::invalid_argument("element type 'dynamic' (nGraph's dynamic type): ngraph's element "
                                "types are static: give it a type");
  try {
    return element::Type::from_name(text);
  } catch (const std::invalid_argument&) {
    if (text.size() > 2 && text.compare(text.size() - 2, 2, "_t") == 0)
      return element::Type::from_name(text.substr(0, text.size() - 2));
    throw;
  }
}


// ------------------------------------------------------------------------ tensor values

template <typename S>
std::string value_text(S v) {
  if constexpr (std::is_floating_point_v<S>) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  } else {
    return std::to_string(+v);
  }
}

// nGraph writes constant data as an array of strings, one string when all are equal.
Value write_values(element::Type type, size_t count, const void* data) {
  Value out = Value::array();
  if (count == 0) return out;
  bool all_equal = true;
  size_t esize = type.size();
  const char* bytes = static_cast<const char*>(data);
  for (size_t i = 1; i < count && all_equal; ++i)
    all_equal = std::memcmp(bytes, bytes + i * esize, esize) == 0;
  size_t written = all_equal ? 1 : count;
  element::dispatch_storage(type, [&](auto tag) {
    using S = decltype(tag);
    if constexpr (is_low_precision_v<S>) {  // as the float it equals exactly
      const S* p = static_cast<const S*>(data);
      for (size_t i = 0; i < written; ++i) out.push_back(Value::string(value_text<float>(p[i].to_float())));
    } else if constexpr (std::is_arithmetic_v<S>) {
      const S* p = static_cast<const S*>(data);
      for (size_t i = 0; i < written; ++i) out.push_back(Value::string(value_text<S>(p[i])));
    } else {
      throw SerializationError("serialize: element type " + type.get_type_name() +
                               " has no JSON value format");
    }
  });
  return out;
}

// ------------------------------------------------------------------------------- errors

// Where a reader is: the field path ("ops[3] 'Add_3' (Add)") and the document, to add the
// line and column of the value at fault.
struct Where {
  const std::string* text;
  std::string path;
  [[noreturn]] void fail(const Value* at, const std::string& message) const {
    std::string msg = "deserialize: " + path + (path.empty() ? "" : ": ") + message;
    if (at) msg += " (" + json::position(*text, at->offset()) + ")";
    throw SerializationError(msg);
  }
};

// Runs `read`, turning any error but a SerializationError (an op's rule, an enum's name, a
// negative size) into one that names the field.
template <typename F>
auto guarded(const Where& w, const Value& at, F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const SerializationError&) {
    throw;
  } catch (const std::exception& e) {
    w.fail(&at, e.what());
  }
}

std::string got(const Value& v) {
  if (v.is(Kind::number) || v.is(Kind::boolean)) {
    std::string t = v.is(Kind::number) ? v.text() : (v.as_bool() ? "true" : "false");
    if (t.size() > 40) t = t.substr(0, 40) + "...";
    return std::string(v.kind_name()) + " (" + t + ")";
  }
  return v.kind_name();
}

const Value& expect(const Where& w, const Value& v, Kind kind, const std::string& what) {
  if (!v.is(kind))
    w.fail(&v, what + ": expected " + Value::kind_name(kind) + ", got " + got(v));
  return v;
}

const Value& member(const Where& w, const Value& obj, const std::string& key, Kind kind) {
  const Value* v = obj.find(key);
  if (!v) w.fail(&obj, "missing \"" + key + "\"");
  return expect(w, *v, kind, "\"" + key + "\"");
}

void check_keys(const Where& w, const Value& obj, const std::set<std::string>& allowed,
                const std::set<std::string>& used = {}) {
  for (const auto& [key, value] : obj.members())
    if (!allowed.count(key) && !used.count(key)) {
      std::string known;
      for (const auto* set : {&allowed, &used})
        for (const auto& k : *set) known += (known.empty() ? "" : ", ") + k;
      w.fail(&value, "unknown key \"" + key + "\" (expected: " + known + ")");
    }
}

template <typename S>
bool parse_scalar(const std::string& text, S& out) {
  if constexpr (std::is_floating_point_v<S>) {
    if (text == "nan" || text == "-nan") return out = std::numeric_limits<S>::quiet_NaN(), true;
    if (text == "inf") return out = std::numeric_limits<S>::infinity(), true;
    if (text == "-inf") return out = -std::numeric_limits<S>::infinity(), true;
    auto r = std::from_chars(text.data(), text.data() + text.size(), out);
    return r.ec == std::errc() && r.ptr == text.data() + text.size();
  } else {
    using Wide = std::conditional_t<std::is_signed_v<S>, int64_t, uint64_t>;
    Wide w{};
    auto r = std::from_chars(text.data(), text.data() + text.size(), w);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return false;
    if (w < static_cast<Wide>(std::numeric_limits<S>::min()) ||
        w > static_cast<Wide>(std::numeric_limits<S>::max()))
      return false;
    out = static_cast<S>(w);
    return true;
  }
}

// Fills `data` (count elements of `type`) from a JSON array of `count` values or of one
// value for all; values are strings (nGraph) or numbers, booleans true/false or 0/1.
void read_values(const Where& w, const Value& v, element::Type type, size_t count, void* data) {
  expect(w, v, Kind::array, "\"value\"");
  size_t given = v.items().size();
  if (given != count && !(given == 1 && count > 0))
    w.fail(&v, "\"value\" has " + std::to_string(given) + " elements for " +
                   std::to_string(count) + " (give all, or one for all)");
  element::dispatch_storage(type, [&](auto tag) {
    using S = decltype(tag);
    // f16 and bf16 values are read as doubles and rounded once to nearest even.
    using Read = std::conditional_t<is_low_precision_v<S>, double, S>;
    if constexpr (std::is_arithmetic_v<Read>) {
      S* out = static_cast<S*>(data);
      for (size_t i = 0; i < given; ++i) {
        const Value& item = v.items()[i];
        Read x{};
        bool ok = false;
        if (type == element::boolean) {
          const std::string& t = item.text();
          if (item.is(Kind::boolean)) x = item.as_bool(), ok = true;
          else if (item.is(Kind::string) || item.is(Kind::number))
            ok = t == "0" || t == "1" || t == "true" || t == "false",
            x = static_cast<Read>(t == "1" || t == "true");
        } else if (item.is(Kind::string) || item.is(Kind::number)) {
          ok = parse_scalar<Read>(item.text(), x);
          if (ok && item.is(Kind::number) && std::is_floating_point_v<Read> && std::isinf(x))
            ok = false;  // 1e999 as a number is an error; write "inf"
        }
        if (!ok)
          w.fail(&item, "\"value\"[" + std::to_string(i) + "]: " + got(item) +
                            (item.is(Kind::string) ? " '" + item.text().substr(0, 40) + "'" : "") +
                            " is not a " + type.get_type_name() + " value");
        out[i] = static_cast<S>(x);
      }
      for (size_t i = given; i < count; ++i) out[i] = out[0];
    } else {
      w.fail(&v, "element type " + type.get_type_name() + " has no JSON value format");
    }
  });
}

// --------------------------------------------------------------------- attribute visitors

// Writes the attributes a node visits as members of its object.
class AttributeWriter : public AttributeVisitor {
 public:
  AttributeWriter(Value& obj, const Node& node) : m_obj(obj), m_node(node) {}
  using AttributeVisitor::on;
  void on(const std::string& name, bool& v) override { add(name, Value::boolean(v)); }
  void on(const std::string& name, int64_t& v) override { add(name, Value::integer(v)); }
  void on(const std::string& name, double& v) override {
    // JSON numbers are finite: NaN and infinities are written as the strings "nan", "inf".
    add(name, std::isfinite(v) ? Value::real(v) : Value::string(value_text(v)));
  }
  void on(const std::string& name, std::string& v) override { add(name, Value::string(v)); }
  void on(const std::string& name, element::Type& v) override {
    add(name, Value::string(v.c_type_string()));
  }
  void on(const std::string& name, std::vector<int64_t>& v) override {
    Value a = Value::array();
    for (auto x : v) a.push_back(Value::integer(x));
    add(name, std::move(a));
  }

 private:
  void add(const std::string& name, Value v) {
    if (structural_keys().count(name) || m_obj.find(name))
      throw SerializationError("serialize: op " + m_node.get_type_name() + " has an attribute '" +
                               name + "' that clashes with another member of its object");
    m_obj.set(name, std::move(v));
  }
  Value& m_obj;
  const Node& m_node;
};

// Loads the attributes a node visits from its object; every attribute must be there.
class AttributeReader : public AttributeVisitor {
 public:
  AttributeReader(const Where& w, const Value& obj) : m_where(w), m_obj(obj) {}
  using AttributeVisitor::on;

  void on(const std::string& name, bool& v) override {
    v = get(name, Kind::boolean).as_bool();
  }
  void on(const std::string& name, int64_t& v) override { v = integer(name, get(name), ""); }
  void on(const std::string& name, double& v) override {
    const Value* item = find(name);
    if (item->is(Kind::string) && parse_scalar<double>(item->text(), v)) return;
    if (item->is(Kind::number) && item->to_double(v) && std::isfinite(v)) return;
    fail(item, name, "expected a finite number or \"nan\", \"inf\", \"-inf\", got " + got(*item));
  }
  void on(const std::string& name, std::string& v) override {
    v = get(name, Kind::string).text();
  }
  void on(const std::string& name, element::Type& v) override {
    const Value* item = find(name);
    if (item->is(Kind::object)) {
      // nGraph's writers before 2018-10: {"bitwidth": 32, "c_type_string": "float", ...}.
      const Value* c = item->find("c_type_string");
      if (!c || !c->is(Kind::string))
        fail(item, name, "expected a type name, or an object with \"c_type_string\"");
      element_type(name, *c, v);
      const Value* bits = item->find("bitwidth");
      int64_t b = 0;
      if (bits && (!bits->to_int64(b) || b != static_cast<int64_t>(v.size() * 8)))
        fail(bits, name, "\"bitwidth\" " + bits->text() + " does not match '" + c->text() + "'");
      return;
    }
    if (!item->is(Kind::string))
      fail(item, name, "expected a string, got " + got(*item));
    element_type(name, *item, v);
  }
  void on(const std::string& name, std::vector<int64_t>& v) override {
    const Value& item = get(name, Kind::array);
    v.clear();
    for (size_t i = 0; i < item.items().size(); ++i)
      v.push_back(integer(name, item.items()[i], "[" + std::to_string(i) + "]"));
  }

  const std::set<std::string>& used() const { return m_used; }

 private:
  void element_type(const std::string& name, const Value& text, element::Type& v) const {
    try {
      v = element_type_from_text(text.text());
    } catch (const std::invalid_argument& e) {
      fail(&text, name, e.what());
    }
  }
  [[noreturn]] void fail(const Value* at, const std::string& name, const std::string& msg) const {
    m_where.fail(at, "attribute '" + name + "': " + msg);
  }
  const Value* find(const std::string& name) {
    const Value* item = m_obj.find(name);
    if (!item) m_where.fail(&m_obj, "missing attribute '" + name + "'");
    m_used.insert(name);
    return item;
  }
  const Value& get(const std::string& name) { return *find(name); }
  const Value& get(const std::string& name, Kind kind) {
    const Value* item = find(name);
    if (!item->is(kind))
      fail(item, name, std::string("expected ") + Value::kind_name(kind) + ", got " + got(*item));
    return *item;
  }
  int64_t integer(const std::string& name, const Value& item, const std::string& index) {
    int64_t x = 0;
    if (!item.to_int64(x))
      fail(&item, name + index, "expected an integer in the int64 range, got " + got(item));
    return x;
  }

  const Where& m_where;
  const Value& m_obj;
  std::set<std::string> m_used;
};

// The element type and shape of a Constant or a variable, visited as Parameter's are.
struct TensorHeader {
  element::Type type = element::f32;
  Shape shape;
  void visit(AttributeVisitor& v) {
    v.on("element_type", type);
    v.on("shape", shape);
  }
};

// The names of the attributes an op visits, in order.
class AttributeNames : public AttributeVisitor {
 public:
  using AttributeVisitor::on;
  void on(const std::string& name, bool&) override { names.push_back(name); }
  void on(const std::string& name, int64_t&) override { names.push_back(name); }
  void on(const std::string& name, double&) override { names.push_back(name); }
  void on(const std::string& name, std::string&) override { names.push_back(name); }
  void on(const std::string& name, element::Type&) override { names.push_back(name); }
  void on(const std::string& name, std::vector<int64_t>&) override { names.push_back(name); }
  std::vector<std::string> names;
};

// ----------------------------------------------------------------------------- writing

class Writer {
 public:
  Value function(const Function& f) {
    NodeVector ops = f.get_ordered_ops();
    for (const auto& node : ops) name_node(*node);
    for (const auto& node : ops) {
      if (auto* v = dynamic_cast<const op::Variable*>(node.get())) name_state(v->get_state());
      if (auto* a = dynamic_cast<const op::Assign*>(node.get())) name_state(a->get_state());
    }

    Value fn = Value::object();
    fn.set("name", Value::string(f.get_name()));
    fn.set("parameters", names(NodeVector(f.get_parameters().begin(), f.get_parameters().end())));
    fn.set("result", names(NodeVector(f.get_results().begin(), f.get_results().end())));
    if (!f.get_sinks().empty()) fn.set("sinks", names(f.get_sinks()));
    if (!m_states.empty()) {
      Value vars = Value::array();
      for (const auto& [state, id] : m_states) {
        Value v = Value::object();
        v.set("variable_id", Value::string(id));
        TensorHeader h{state->get_element_type(), state->get_shape()};
        AttributeWriter aw(v, *ops.front());
        h.visit(aw);
        std::vector<char> plain(state->byte_size());
        state->get(plain.data());  // row-major, whatever layout a backend keeps it in
        v.set("value", write_values(h.type, shape_size(h.shape), plain.data()));
        vars.push_back(std::move(v));
      }
      fn.set("variables", std::move(vars));
    }
    Value arr = Value::array();
    for (const auto& node : ops) arr.push_back(op(*node));
    fn.set("ops", std::move(arr));
    return fn;
  }

 private:
  // The node's name, or "<name>_<k>" when an earlier node has it (friendly names need not be
  // unique). Deterministic, so that a document read back writes the same names.
  void name_node(const Node& n) {
    std::string name = n.get_name();
    for (size_t k = 1; m_used.count(name); ++k) name = n.get_name() + "_" + std::to_string(k);
    m_used.insert(name);
    m_names[&n] = name;
  }

  void name_state(const std::shared_ptr<VariableState>& s) {
    for (const auto& entry : m_states)
      if (entry.first == s) return;
    std::string id = s->get_name().empty() ? "variable" : s->get_name();
    if (s->get_name().empty() || m_state_ids.count(id)) {
      std::string base = id;
      for (size_t k = m_states.size(); m_state_ids.count(id = base + "_" + std::to_string(k));) ++k;
    }
    m_state_ids.insert(id);
    m_states.emplace_back(s, id);
  }

  const std::string& state_id(const std::shared_ptr<VariableState>& s) const {
    for (const auto& entry : m_states)
      if (entry.first == s) return entry.second;
    throw SerializationError("serialize: a variable's state is not in the function");
  }

  Value names(const NodeVector& nodes) const {
    Value a = Value::array();
    for (const auto& n : nodes) a.push_back(Value::string(m_names.at(n.get())));
    return a;
  }

  Value op(const Node& n) {
    const std::string& name = m_names.at(&n);
    Value obj = Value::object();
    obj.set("name", Value::string(name));
    if (!n.get_friendly_name().empty() && n.get_friendly_name() != name)
      obj.set("friendly_name", Value::string(n.get_friendly_name()));
    obj.set("op", Value::string(spelling::ngraph_op_name(n.get_type_name())));
    if (n.get_input_size()) {
      Value inputs = Value::array();
      for (const auto& in : n.input_values()) {
        const std::string& producer = m_names.at(in.get_node());
        size_t index = ngraph_index(in);
        if (index == 0) {
          inputs.push_back(Value::string(producer));
        } else {
          Value ref = Value::object();
          ref.set("node", Value::string(producer));
          ref.set("index", Value::integer(static_cast<int64_t>(index)));
          inputs.push_back(std::move(ref));
        }
      }
      obj.set("inputs", std::move(inputs));
    }
    if (n.get_output_size()) {
      Value outputs = Value::array();
      for (size_t i = 0; i < n.get_output_size(); ++i)
        outputs.push_back(Value::string(name + "_" + std::to_string(i)));
      obj.set("outputs", std::move(outputs));
    }
    AttributeWriter aw(obj, n);
    const_cast<Node&>(n).visit_attributes(aw);
    // GetOutputElement's "n" numbers its input's outputs as that input's "index" does.
    if (auto* goe = dynamic_cast<const op::GetOutputElement*>(&n))
      for (auto& [key, value] : obj.members())
        if (key == "n")
          value = Value::integer(static_cast<int64_t>(ngraph_index(goe->input_value(0))));
    // Dot's default count (-1) is written as the count it stands for, as nGraph writes it.
    if (auto* dot = dynamic_cast<const op::Dot*>(&n))
      for (auto& [key, value] : obj.members())
        if (key == "reduction_axes_count")
          value = Value::integer(static_cast<int64_t>(dot->get_reduction_axes_count()));
    spelling::to_ngraph(n.get_type_name(), obj);
    if (auto* c = dynamic_cast<const op::Constant*>(&n))
      obj.set("value", write_values(c->get_element_type(), shape_size(c->get_shape()),
                                    c->get_data_ptr()));
    if (auto* v = dynamic_cast<const op::Variable*>(&n))
      obj.set("variable_id", Value::string(state_id(v->get_state())));
    if (auto* a = dynamic_cast<const op::Assign*>(&n))
      obj.set("variable_id", Value::string(state_id(a->get_state())));
    return obj;
  }

  // The output's number in nGraph's numbering (nGraph v0's TopK has its indices first).
  static size_t ngraph_index(const Output& out) {
    return spelling::swaps_outputs(out.get_node()->get_type_name())
               ? spelling::swapped_output(out.get_index())
               : out.get_index();
  }

  std::unordered_map<const Node*, std::string> m_names;
  std::set<std::string> m_used;
  std::vector<std::pair<std::shared_ptr<VariableState>, std::string>> m_states;
  std::set<std::string> m_state_ids;
};

// ----------------------------------------------------------------------------- reading

// nGraph's binary container (its deserialize(istream) reads it; serialize with binary
// constant data writes it): old-style binary cpio records in either byte order, each a
// 26-byte header (magic 070707, ..., name size, data size), the name and the data, both padded
// to even sizes. The first record holds the JSON text, the next ones the data of each
// Constant whose object has no "value" (row-major, native little-endian), named by the
// constant's name; "TRAILER!!!" ends the archive.
bool is_cpio(const std::string& bytes) {
  if (bytes.size() < 2) return false;
  auto b0 = static_cast<unsigned char>(bytes[0]), b1 = static_cast<unsigned char>(bytes[1]);
  return (b0 == 0xC7 && b1 == 0x71) || (b0 == 0x71 && b1 == 0xC7);
}

struct Cpio {
  std::string json;                                   // the first record
  std::map<std::string, std::string_view> constants;  // the others, by name
};

Cpio read_cpio(const std::string& bytes) {
  auto fail = [](const std::string& m) -> void {
    throw SerializationError("deserialize: nGraph's cpio container: " + m);
  };
  bool big = static_cast<unsigned char>(bytes[0]) == 0x71;
  size_t pos = 0;
  auto u16 = [&](size_t at) {
    auto a = static_cast<unsigned char>(bytes[at]), b = static_cast<unsigned char>(bytes[at + 1]);
    return static_cast<uint32_t>(big ? (a << 8) | b : (b << 8) | a);
  };
  Cpio out;
  for (size_t record = 0;; ++record) {
    std::string where = "record " + std::to_string(record) + " at byte " + std::to_string(pos);
    if (bytes.size() - pos < 26) fail(where + ": truncated header (no \"TRAILER!!!\" record)");
    if (!is_cpio(bytes.substr(pos, 2))) fail(where + ": not a binary cpio header");
    uint32_t namesize = u16(pos + 20);
    uint64_t filesize = (uint64_t(u16(pos + 22)) << 16) | u16(pos + 24);
    pos += 26;
    if (namesize == 0 || bytes.size() - pos < namesize + namesize % 2)
      fail(where + ": truncated name");
    std::string name = bytes.substr(pos, namesize - 1);
    pos += namesize + namesize % 2;
    if (name == "TRAILER!!!") break;
    if (bytes.size() - pos < filesize) fail(where + " '" + name + "': truncated data");
    std::string_view data(bytes.data() + pos, filesize);
    pos += filesize + filesize % 2;
    if (record == 0) out.json = std::string(data);
    else if (!out.constants.emplace(name, data).second)
      fail(where + ": a second record named '" + name + "'");
  }
  return out;
}

class Reader {
 public:
  Reader(const std::string& text, const DeserializeOptions& options,
         const std::map<std::string, std::string_view>* binary = nullptr)
      : m_text(text), m_options(options), m_binary(binary) {}

  std::shared_ptr<Function> document() {
    Value doc;
    try {
      doc = json::parse(m_text, json::Limits{m_options.max_document_bytes, m_options.max_depth});
    } catch (const json::Error& e) {
      throw SerializationError(std::string("deserialize: ") + e.what());
    }
    Where top{&m_text, ""};
    expect(top, doc, Kind::array, "the document (an array of functions)");
    if (doc.items().empty())
      top.fail(&doc, "the document is an empty array (expected an array of functions)");
    // nGraph wrote the functions an op calls (its "function") before the function itself and
    // read them all, returning the last. Each is read (its errors are the document's); no op
    // here calls a function, so the last one is the function.
    std::shared_ptr<Function> last;
    for (const auto& fn : doc.items()) {
      m_nodes.clear();
      m_states.clear();
      m_swapped.clear();
      last = function(fn);
    }
    return last;
  }

 private:
  std::shared_ptr<Function> function(const Value& fn) {
    Where w{&m_text, "function"};
    expect(w, fn, Kind::object, "the function");
    // nGraph's writers of 2017-2018 also recorded the results' types ("result_shape",
    // "result_type", "value_type"); its readers ignored them, and so do we (they are inferred).
    check_keys(w, fn, {"name", "parameters", "result", "sinks", "variables", "ops", "result_shape",
                       "result_type", "value_type"});
    std::string name = member(w, fn, "name", Kind::string).text();
    w.path = "function '" + name + "'";
    if (const Value* vars = fn.find("variables")) variables(w, *vars);
    const Value& ops = member(w, fn, "ops", Kind::array);
    for (size_t i = 0; i < ops.items().size(); ++i) op(i, ops.items()[i]);

    ParameterVector params;
    for (const auto& [ref, node] : references(w, fn, "parameters", true)) {
      auto p = std::dynamic_pointer_cast<op::Parameter>(node);
      if (!p) w.fail(ref, "\"parameters\": '" + ref->text() + "' is a " + node->get_type_name() +
                              ", not a Parameter");
      params.push_back(p);
    }
    OutputVector results;
    const Value& rs = member(w, fn, "result", Kind::array);
    for (size_t i = 0; i < rs.items().size(); ++i)
      results.push_back(output(w, rs.items()[i], "\"result\"[" + std::to_string(i) + "]"));
    NodeVector sinks;
    if (fn.find("sinks"))
      for (const auto& [ref, node] : references(w, fn, "sinks", false)) sinks.push_back(node);
    return guarded(w, fn, [&] { return std::make_shared<Function>(results, sinks, params, name); });
  }

  std::vector<std::pair<const Value*, std::shared_ptr<Node>>> references(const Where& w,
                                                                         const Value& fn,
                                                                         const std::string& key,
                                                                         bool required) {
    std::vector<std::pair<const Value*, std::shared_ptr<Node>>> out;
    const Value* list = fn.find(key);
    if (!list && !required) return out;
    if (!list) w.fail(&fn, "missing \"" + key + "\"");
    expect(w, *list, Kind::array, "\"" + key + "\"");
    for (size_t i = 0; i < list->items().size(); ++i) {
      const Value& ref = list->items()[i];
      std::string what = "\"" + key + "\"[" + std::to_string(i) + "]";
      expect(w, ref, Kind::string, what);
      out.emplace_back(&ref, node(w, ref, what));
    }
    return out;
  }

  std::shared_ptr<Node> node(const Where& w, const Value& ref, const std::string& what) {
    auto it = m_nodes.find(ref.text());
    if (it == m_nodes.end())
      w.fail(&ref, what + " refers to '" + ref.text() +
                       "', which no earlier op defines (ops are listed inputs first)");
    return it->second;
  }

  // A producer: "name" (output 0) or {"node": "name", "index": i}.
  Output output(const Where& w, const Value& ref, const std::string& what) {
    if (ref.is(Kind::string)) {
      auto producer = node(w, ref, what);
      // Checked here, to name the document's field (a node refuses a missing output too).
      if (producer->get_output_size() == 0)
        w.fail(&ref, what + ": '" + ref.text() + "' (" + producer->get_type_name() +
                         ") has no outputs");
      return Output(producer, numbered(*producer, 0));
    }
    if (!ref.is(Kind::object))
      w.fail(&ref, what + ": expected a node name or {\"node\": name, \"index\": i}, got " +
                       got(ref));
    check_keys(w, ref, {"node", "index"});
    auto producer = node(w, member(w, ref, "node", Kind::string), what);
    const Value& index = member(w, ref, "index", Kind::number);
    int64_t i = -1;
    if (!index.to_int64(i) || i < 0 || static_cast<uint64_t>(i) >= producer->get_output_size())
      w.fail(&index, what + ": output index " + index.text() + " is out of range for '" +
                         ref.find("node")->text() + "' (" + producer->get_type_name() +
                         "), which has " + std::to_string(producer->get_output_size()) +
                         " outputs");
    return Output(producer, numbered(*producer, static_cast<size_t>(i)));
  }

  // Output `index` of `producer` as the document numbers it, in our numbering.
  size_t numbered(const Node& producer, size_t index) const {
    return m_swapped.count(&producer) ? spelling::swapped_output(index) : index;
  }

  TensorHeader header(const Where& w, const Value& obj, AttributeReader& r) {
    TensorHeader h;
    h.visit(r);
    size_t bytes = 0;
    if (!checked_byte_size(h.shape, h.type.size(), bytes) || bytes > m_options.max_tensor_bytes)
      w.fail(obj.find("shape"), "shape " + to_braces(h.shape) + " of " + h.type.get_type_name() +
                                    " exceeds the limit of " +
                                    std::to_string(m_options.max_tensor_bytes) + " bytes");
    if (h.type == element::undefined) w.fail(obj.find("element_type"), "element type is undefined");
    return h;
  }

  void variables(const Where& fw, const Value& vars) {
    expect(fw, vars, Kind::array, "\"variables\"");
    for (size_t i = 0; i < vars.items().size(); ++i) {
      const Value& v = vars.items()[i];
      Where w{&m_text, fw.path + ": variables[" + std::to_string(i) + "]"};
      expect(w, v, Kind::object, "the variable");
      const std::string& id = member(w, v, "variable_id", Kind::string).text();
      w.path += " '" + id + "'";
      if (m_states.count(id)) w.fail(v.find("variable_id"), "variable_id is listed twice");
      m_states[id] = guarded(w, v, [&] {
        AttributeReader r(w, v);
        TensorHeader h = header(w, v, r);
        check_keys(w, v, {"variable_id", "value"}, r.used());
        auto state = std::make_shared<VariableState>(h.type, h.shape);
        read_values(w, member(w, v, "value", Kind::array), h.type, shape_size(h.shape),
                    state->read_buffer());
        state->set_name(id);
        return state;
      });
    }
  }

  std::shared_ptr<VariableState> state(const Where& w, const Value& obj) {
    const Value& id = member(w, obj, "variable_id", Kind::string);
    auto it = m_states.find(id.text());
    if (it == m_states.end())
      w.fail(&id, "variable_id '" + id.text() + "' is not among the function's \"variables\"");
    return it->second;
  }

  void op(size_t index, const Value& obj) {
    Where w{&m_text, "ops[" + std::to_string(index) + "]"};
    expect(w, obj, Kind::object, "the op");
    const std::string& name = member(w, obj, "name", Kind::string).text();
    const Value& type_value = member(w, obj, "op", Kind::string);
    w.path += " '" + name + "' (" + type_value.text() + ")";
    if (m_nodes.count(name)) w.fail(obj.find("name"), "the name '" + name + "' is used twice");
    // Our name of the op (nGraph's And is our LogicalAnd).
    const std::string type = spelling::our_op_name(type_value.text());
    if (!OpRegistry::get().contains(type))
      w.fail(&type_value, "unknown op '" + type_value.text() + "': ngraph has no op of that name");

    // The object in our spelling; `theirs`: it used nGraph's keys, so the numbering of its
    // outputs is nGraph's too.
    Value spelled = obj;
    AttributeNames visited;
    OpRegistry::get().create(type)->visit_attributes(visited);
    bool theirs = spelling::from_ngraph(type, spelled, visited.names,
                                        [&](const Value* at, const std::string& message) {
                                          w.fail(at, message);
                                        });

    OutputVector inputs = op_inputs(w, obj);
    renumber_output_element(type, spelled, inputs);
    m_tile_repeats = Value();
    drop_attribute_inputs(w, type, spelled, inputs);
    auto_padding(w, type, spelled, inputs);
    if (!m_tile_repeats.is(Kind::null)) spelled.set("repeats", m_tile_repeats);
    drop_layer_norm_keys(type, spelled, visited.names);
    // Errors of the op's own rule ("[Add] element types ... must match") name the op.
    std::shared_ptr<Node> node = guarded(w, obj, [&] { return build(w, type, spelled, inputs); });
    if (theirs && spelling::swaps_outputs(type)) m_swapped.insert(node.get());
    check_outputs(w, obj, type, *node);
    if (const Value* friendly = obj.find("friendly_name"))
      node->set_friendly_name(expect(w, *friendly, Kind::string, "\"friendly_name\"").text());
    else
      node->set_friendly_name(name);
    m_nodes[name] = node;
  }

  OutputVector op_inputs(const Where& w, const Value& obj) {
    OutputVector inputs;
    if (const Value* ins = obj.find("inputs")) {
      expect(w, *ins, Kind::array, "\"inputs\"");
      for (size_t i = 0; i < ins->items().size(); ++i)
        inputs.push_back(output(w, ins->items()[i], "inputs[" + std::to_string(i) + "]"));
    }
    return inputs;
  }

  // GetOutputElement's "n" is in its input's numbering of outputs, as its "index" is.
  void renumber_output_element(const std::string& type, Value& spelled,
                               const OutputVector& inputs) const {
    if (type != op::GetOutputElement::type_name || inputs.size() != 1 ||
        !m_swapped.count(inputs[0].get_node()))
      return;
    for (auto& [key, value] : spelled.members()) {
      int64_t n = 0;
      if (key == "n" && value.to_int64(n) && n >= 0)
        value = Value::integer(static_cast<int64_t>(spelling::swapped_output(size_t(n))));
    }
  }

  // Keys of nGraph's LayerNorm checked by the spelling; ours has no such attributes.
  static void drop_layer_norm_keys(const std::string& type, Value& spelled,
                                   const std::vector<std::string>& visited) {
    if (type != "LayerNorm" && type != "LayerNormBackprop") return;
    for (const char* key : {"use_affine", "keep_stats", "use_stats"})
      if (!std::count(visited.begin(), visited.end(), key)) {
        auto& m = spelled.members();
        m.erase(std::remove_if(m.begin(), m.end(), [&](const auto& kv) { return kv.first == key; }),
                m.end());
      }
  }

  // Output sizes that overflow are refused by the node itself (Node::set_output_type).
  static void check_outputs(const Where& w, const Value& obj, const std::string& type,
                            const Node& node) {
    const Value* outs = obj.find("outputs");
    if (!outs) return;
    expect(w, *outs, Kind::array, "\"outputs\"");
    for (const auto& o : outs->items()) expect(w, o, Kind::string, "\"outputs\" item");
    // nGraph's LayerNorm with "keep_stats" false has only the normalized output.
    const Value* keep = obj.find("keep_stats");
    bool stats_left_out = type == "LayerNorm" && keep && keep->is(Kind::boolean) &&
                          !keep->as_bool() && outs->items().size() == 1;
    if (outs->items().size() != node.get_output_size() && !stats_left_out)
      w.fail(outs, "\"outputs\" names " + std::to_string(outs->items().size()) +
                       " outputs, but the op has " + std::to_string(node.get_output_size()));
  }

  // nGraph's ops of 2019 hold an attribute also as a Constant input: the reduction axes of Sum,
  // Product, Max and Min, TopK's k, LRN's axes (its readers ignored the first two and used the
  // attribute). MaxPoolBackprop may have the forward result as a third input (a hint). Such
  // inputs are checked against the attribute and dropped; ours hold them as attributes only.
  void drop_attribute_inputs(const Where& w, const std::string& type, const Value& obj,
                             OutputVector& inputs) {
    if (type == "MaxPoolBackprop" && inputs.size() == 3) {
      inputs.pop_back();
      return;
    }
    if (type == "LayerNorm" || type == "LayerNormBackprop") {
      check_use_affine(w, type, obj, inputs.size());
      return;
    }
    if (type == "Recv" && inputs.size() == 1 && !obj.find("shape") && !obj.find("element_type"))
      w.fail(&obj, "nGraph's Recv into its input (a buffer of that shape and type) is not "
                   "supported: ngraph's Recv has no input and gives its \"shape\" and "
                   "\"element_type\"");
    if (type == "Tile" && inputs.size() == 2 && !obj.find("repeats")) {
      // nGraph's Tile takes the repeats as an input; ours as an attribute.
      m_tile_repeats = tile_repeats(w, obj, inputs[1]);
      inputs.pop_back();
      return;
    }
    std::string what = attribute_input_name(type);
    if (what.empty()) return;
    if (inputs.size() != 2) return;  // the op counts its inputs
    check_attribute_input(w, type, what, obj, inputs[1]);
    inputs.pop_back();
  }

  // nGraph's LayerNorm (LayerNormBackprop) with "use_affine" has scale and bias (scale) as
  // inputs after its 1 (4) others.
  static void check_use_affine(const Where& w, const std::string& type, const Value& obj,
                               size_t inputs) {
    const Value* affine = obj.find("use_affine");
    size_t plain = type == "LayerNorm" ? 1 : 4;
    if (affine && affine->is(Kind::boolean) &&
        affine->as_bool() != (inputs == plain + (type == "LayerNorm" ? 2 : 1)))
      w.fail(affine, std::string("\"use_affine\" is ") + (affine->as_bool() ? "true" : "false") +
                         " but the op has " + std::to_string(inputs) + " inputs");
  }

  static Value tile_repeats(const Where& w, const Value& obj, const Output& repeats) {
    auto* c = dynamic_cast<const op::Constant*>(repeats.get_node());
    if (!c || !c->get_element_type().is_integral())
      w.fail(&obj.find("inputs")->items()[1],
             "inputs[1]: nGraph's Tile takes its repeats as an input; ngraph only as an "
             "integer Constant, and '" + repeats.get_node()->get_friendly_name() + "' is a " +
                 repeats.get_node()->get_type_name());
    Value out = Value::array();
    for (int64_t x : integers(*c)) out.push_back(Value::integer(x));
    return out;
  }

  // The attribute an op of nGraph's may also take as its second input ("" for other ops).
  static std::string attribute_input_name(const std::string& type) {
    static const std::set<std::string> reductions = {"Sum", "Product", "Max", "Min"};
    if (reductions.count(type)) return "reduction_axes";
    if (type == "TopK") return "k";
    if (type == "LRN") return "axes";
    return "";
  }

  // The integers of attribute `key` (one or an array; items that are not integers left out).
  static std::vector<int64_t> attribute_integers(const Value& obj, const std::string& key) {
    std::vector<int64_t> out;
    const Value* a = obj.find(key);
    int64_t x = 0;
    if (!a) return out;
    if (a->is(Kind::array)) {
      for (const auto& item : a->items())
        if (item.to_int64(x)) out.push_back(x);
    } else if (a->to_int64(x)) {
      out.push_back(x);
    }
    return out;
  }

  static std::string set_text(const std::set<int64_t>& s) {
    std::string t;
    for (auto x : s) t += (t.empty() ? "" : ",") + std::to_string(x);
    return "{" + t + "}";
  }

  // Input 1 of a reduction, TopK or LRN of nGraph's: an integer Constant holding what
  // attribute `what` holds (LRN: axis 1, the only axis ours normalises across).
  static void check_attribute_input(const Where& w, const std::string& type,
                                    const std::string& what, const Value& obj,
                                    const Output& input) {
    const Value& at = obj.find("inputs")->items()[1];
    auto* c = dynamic_cast<const op::Constant*>(input.get_node());
    bool integral = c && c->get_element_type().is_integral();
    std::vector<int64_t> values = integral ? integers(*c) : std::vector<int64_t>{};
    if (!integral)
      w.fail(&at, "inputs[1]: nGraph's " + type + " takes its " + what +
                      " as a second input only as an integer Constant; '" +
                      input.get_node()->get_friendly_name() + "' is a " +
                      input.get_node()->get_type_name() +
                      (c ? " of " + c->get_element_type().get_type_name() : std::string()));
    std::vector<int64_t> attribute =
        type == "LRN" ? std::vector<int64_t>{1} : attribute_integers(obj, what);
    std::set<int64_t> given(values.begin(), values.end());
    std::set<int64_t> expected(attribute.begin(), attribute.end());
    if (given != expected)
      w.fail(&at, type == "LRN"
                      ? "inputs[1]: LRN over axes " + set_text(given) +
                            " is not supported (ngraph's LRN normalises across axis 1)"
                      : "inputs[1]: the Constant '" + input.get_node()->get_friendly_name() +
                            "' holds " + what + " " + set_text(given) + ", but \"" + what +
                            "\" is " + set_text(expected));
  }

  // nGraph's pad types SAME_LOWER (1) and SAME_UPPER (2) of Convolution, AvgPool and MaxPool
  // (the spelling keeps "pad_type" for those only): the padding its ops computed from the
  // shapes (ngraph::infer_auto_padding, v0.19-v0.26), which replaces the padding given. As
  // nGraph's, it ignores data dilation.
  void auto_padding(const Where& w, const std::string& type, Value& obj,
                    const OutputVector& inputs) {
    const Value* pad_type = obj.find("pad_type");
    if (!pad_type) return;
    int64_t t = 0;
    pad_type->to_int64(t);
    bool conv = type == "Convolution";
    if (inputs.size() != (conv ? 2u : 1u)) return;  // the op counts its inputs
    const Shape& image = inputs[0].get_shape();
    auto ints = [&](const char* key) {
      std::vector<int64_t> out;
      const Value* v = obj.find(key);
      int64_t x = 0;
      if (v && v->is(Kind::array))
        for (const auto& item : v->items())
          if (item.to_int64(x)) out.push_back(x);
      return out;
    };
    std::vector<int64_t> window, strides = ints(conv ? "strides" : "window_movement_strides"),
                                  dilations;
    if (conv) {
      const Shape& filters = inputs[1].get_shape();
      window.assign(filters.begin() + std::min<size_t>(2, filters.size()), filters.end());
      dilations = ints("dilations");
    } else {
      window = ints("window_shape");
    }
    if (dilations.empty()) dilations.assign(window.size(), 1);
    if (image.size() != window.size() + 2 || strides.size() != window.size() ||
        dilations.size() != window.size())
      w.fail(pad_type, "\"pad_type\" " + std::to_string(t) +
                           ": the padding cannot be inferred (the data's rank, the window, its "
                           "strides and dilations do not agree)");
    Value below = Value::array(), above = Value::array();
    for (size_t i = 0; i < window.size(); ++i) {
      int64_t size = static_cast<int64_t>(image[i + 2]);
      int64_t extent = (window[i] - 1) * dilations[i] + 1;
      int64_t stride = std::max<int64_t>(strides[i], 1);
      int64_t out = (size + stride - 1) / stride;
      int64_t needed = std::max<int64_t>(0, (out - 1) * stride + extent - size);
      int64_t lhs = needed / 2, rhs = needed - lhs;
      below.push_back(Value::integer(t == 2 ? lhs : rhs));
      above.push_back(Value::integer(t == 2 ? rhs : lhs));
    }
    auto& m = obj.members();
    m.erase(std::remove_if(m.begin(), m.end(),
                           [](const auto& kv) {
                             return kv.first == "pad_type" || kv.first == "padding_below" ||
                                    kv.first == "padding_above";
                           }),
            m.end());
    obj.set("padding_below", std::move(below));
    obj.set("padding_above", std::move(above));
  }

  static std::vector<int64_t> integers(const op::Constant& c) {
    std::vector<int64_t> values;
    element::dispatch_storage(c.get_element_type(), [&](auto tag) {
      using S = decltype(tag);
      if constexpr (std::is_integral_v<S>) {
        const S* p = static_cast<const S*>(c.get_data_ptr());
        for (size_t i = 0; i < shape_size(c.get_shape()); ++i)
          values.push_back(static_cast<int64_t>(p[i]));
      }
    });
    return values;
  }

  std::shared_ptr<Node> build(const Where& w, const std::string& type, const Value& obj,
                              const OutputVector& inputs) {
    AttributeReader r(w, obj);
    std::set<std::string> keys = {"name", "friendly_name", "op", "inputs", "outputs"};
    auto expect_inputs = [&](size_t n) {
      if (inputs.size() != n)
        w.fail(&obj, "expects " + std::to_string(n) + " inputs, got " +
                         std::to_string(inputs.size()));
    };
    std::shared_ptr<Node> node;
    if (type == op::Constant::type_name) {
      expect_inputs(0);
      TensorHeader h = header(w, obj, r);
      std::vector<char> data(std::max<size_t>(1, shape_size(h.shape) * h.type.size()));
      const std::string& name = obj.find("name")->text();
      if (!obj.find("value") && m_binary && m_binary->count(name)) {
        std::string_view bytes = m_binary->at(name);
        if (bytes.size() != shape_size(h.shape) * h.type.size())
          w.fail(&obj, "the container's record '" + name + "' has " +
                           std::to_string(bytes.size()) + " bytes for " +
                           h.type.get_type_name() + to_braces(h.shape) + " (" +
                           std::to_string(shape_size(h.shape) * h.type.size()) + ")");
        std::memcpy(data.data(), bytes.data(), bytes.size());
      } else {
        read_values(w, member(w, obj, "value", Kind::array), h.type, shape_size(h.shape),
                    data.data());
      }
      keys.insert("value");
      node = std::make_shared<op::Constant>(h.type, h.shape, data.data());
    } else if (type == op::Variable::type_name) {
      expect_inputs(0);
      TensorHeader h = header(w, obj, r);
      auto s = state(w, obj);
      keys.insert("variable_id");
      if (h.type != s->get_element_type() || h.shape != s->get_shape())
        w.fail(&obj, "the op says " + h.type.get_type_name() + to_braces(h.shape) +
                         " but variable '" + s->get_name() + "' holds " +
                         s->get_element_type().get_type_name() + to_braces(s->get_shape()));
      node = std::make_shared<op::Variable>(s);
    } else if (type == op::Assign::type_name) {
      expect_inputs(1);
      keys.insert("variable_id");
      node = std::make_shared<op::Assign>(std::make_shared<op::Variable>(state(w, obj)), inputs[0]);
    } else {
      node = OpRegistry::get().create(type);
      node->set_arguments(inputs);
      node->visit_attributes(r);
      check_keys(w, obj, keys, r.used());
      // Collectives check ranks against their communicator (null: the default one).
      if (auto* c = dynamic_cast<op::Collective*>(node.get()))
        c->set_communicator(m_options.communicator);
      node->validate_and_infer_types();
      return node;
    }
    check_keys(w, obj, keys, r.used());
    return node;
  }

  const std::string& m_text;
  const DeserializeOptions& m_options;
  // Constants' data from nGraph's cpio container, by the constant's name (null: plain JSON).
  const std::map<std::string, std::string_view>* m_binary;
  std::unordered_map<std::string, std::shared_ptr<Node>> m_nodes;
  std::map<std::string, std::shared_ptr<VariableState>> m_states;
  // nGraph's Tile's repeats, taken from its Constant input (null: none).
  Value m_tile_repeats;
  // Nodes read in nGraph's spelling whose first two outputs nGraph numbers the other way.
  std::set<const Node*> m_swapped;
};

}  // namespace

std::string serialize(const std::shared_ptr<Function>& f, size_t indent) {
  std::ostringstream os;
  serialize(os, f, indent);
  return os.str();
}

void serialize(std::ostream& out, const std::shared_ptr<Function>& f, size_t indent) {
  if (!f) throw SerializationError("serialize: the function is null");
  Value doc = Value::array();
  doc.push_back(Writer().function(*f));
  try {
    json::write(out, doc, indent);
  } catch (const json::Error& e) {
    throw SerializationError(std::string("serialize: ") + e.what());
  }
}

std::shared_ptr<Function> deserialize(const std::string& text, const DeserializeOptions& options) {
  try {
    if (is_cpio(text)) {
      if (text.size() > options.max_document_bytes)
        throw SerializationError("deserialize: the document has " + std::to_string(text.size()) +
                                 " bytes, more than the limit of " +
                                 std::to_string(options.max_document_bytes));
      Cpio archive = read_cpio(text);
      return Reader(archive.json, options, &archive.constants).document();
    }
    return Reader(text, options).document();
  } catch (const SerializationError&) {
    throw;
  } catch (const std::exception& e) {
    // A last resort: every error of a document is raised above with its field.
    throw SerializationError(std::string("deserialize: ") + e.what());
  }
}

std::shared_ptr<Function> deserialize(std::istream& in, const DeserializeOptions& options) {
  std::ostringstream ss;
  ss << in.rdbuf();
  return deserialize(ss.str(), options);
}

}  // namespace ngraph
