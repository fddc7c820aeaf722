// A small, strict JSON reader and writer (RFC 8259) for the serializer: no comments, no
// trailing commas, no duplicate keys, valid UTF-8 only. Reading is bounded (document size,
// nesting depth) so that a hostile document fails with json::Error, naming the line and
// column, instead of exhausting the stack or memory. Numbers keep their text, so integers
// beyond 2^53 (int64 attributes, i64 constants) lose nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ngraph {
namespace json {

// A syntax error ("JSON line 3, column 7: expected ':' after an object key") or a value the
// writer cannot write (a string that is not UTF-8).
class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class Value;
using Array = std::vector<Value>;
// Members in document order (keys are unique).
using Object = std::vector<std::pair<std::string, Value>>;

class Value {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Value() = default;  // null
  static Value boolean(bool b);
  static Value integer(int64_t v);
  // Finite numbers only (JSON has no NaN or infinity): throws json::Error otherwise.
  static Value real(double v);
  static Value string(std::string s);
  static Value array(Array items = {});
  static Value object(Object members = {});

  Kind kind() const { return m_kind; }
  bool is(Kind k) const { return m_kind == k; }
  // "a number", "an array", ...: for messages.
  static const char* kind_name(Kind k);
  const char* kind_name() const { return kind_name(m_kind); }

  // Accessors: the caller checks kind() first (they return an empty value otherwise).
  bool as_bool() const { return m_bool; }
  // A string's text, or a number's text exactly as written.
  const std::string& text() const { return m_text; }
  const Array& items() const { return m_array; }
  const Object& members() const { return m_object; }
  // For rewriting a parsed object in place (the serializer's spellings); offsets stay.
  Object& members() { return m_object; }
  // The member named `key`, or null.
  const Value* find(std::string_view key) const;

  // A number written without fraction or exponent that fits in int64_t.
  bool to_int64(int64_t& out) const;
  // Any number (which may round, or overflow to infinity for 1e999).
  bool to_double(double& out) const;

  // Building.
  void push_back(Value v) { m_array.push_back(std::move(v)); }
  void set(std::string key, Value v) { m_object.emplace_back(std::move(key), std::move(v)); }

  // Byte offset of the value's first character in the document it was parsed from.
  size_t offset() const { return m_offset; }

 private:
  friend class Parser;
  explicit Value(Kind kind, std::string text = {}) : m_kind(kind), m_text(std::move(text)) {}
  Kind m_kind = Kind::null;
  bool m_bool = false;
  std::string m_text;
  Array m_array;
  Object m_object;
  size_t m_offset = 0;
};

struct Limits {
  size_t max_bytes = size_t(1) << 30;  // 1 GiB of text
  size_t max_depth = 64;                // nested arrays and objects
};

// Parses one JSON value (surrounded by optional whitespace); throws json::Error.
Value parse(std::string_view text, const Limits& limits = {});

// "line 3, column 7" for a byte offset of `text` (columns count bytes, from 1).
std::string position(std::string_view text, size_t offset);

// Compact with indent 0 ([1,2]); otherwise one member or item per line, indented by
// `indent` spaces per level ("key": value), as nGraph's serializer (nlohmann's dump) writes.
std::string write(const Value& v, size_t indent = 0);
void write(std::ostream& out, const Value& v, size_t indent = 0);

}  // namespace json
}  // namespace ngraph
