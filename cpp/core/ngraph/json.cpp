#include "ngraph/json.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

namespace ngraph {
namespace json {

Value Value::boolean(bool b) {
  Value v(Kind::boolean);
  v.m_bool = b;
  return v;
}

Value Value::integer(int64_t i) { return Value(Kind::number, std::to_string(i)); }

Value Value::real(double d) {
  if (!std::isfinite(d)) throw Error("JSON numbers are finite; cannot write " + std::to_string(d));
  char buf[64];
  // The shortest text that reads back as the same double.
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  return Value(Kind::number, std::string(buf, r.ptr));
}

Value Value::string(std::string s) { return Value(Kind::string, std::move(s)); }

Value Value::array(Array items) {
  Value v(Kind::array);
  v.m_array = std::move(items);
  return v;
}

Value Value::object(Object members) {
  Value v(Kind::object);
  v.m_object = std::move(members);
  return v;
}

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::null: return "null";
    case Kind::boolean: return "a boolean";
    case Kind::number: return "a number";
    case Kind::string: return "a string";
    case Kind::array: return "an array";
    case Kind::object: return "an object";
  }
  return "?";
}

const Value* Value::find(std::string_view key) const {
  for (const auto& [k, v] : m_object)
    if (k == key) return &v;
  return nullptr;
}

bool Value::to_int64(int64_t& out) const {
  if (m_kind != Kind::number || m_text.find_first_of(".eE") != std::string::npos) return false;
  auto r = std::from_chars(m_text.data(), m_text.data() + m_text.size(), out);
  return r.ec == std::errc() && r.ptr == m_text.data() + m_text.size();
}

bool Value::to_double(double& out) const {
  if (m_kind != Kind::number) return false;
  auto r = std::from_chars(m_text.data(), m_text.data() + m_text.size(), out);
  if (r.ec == std::errc::result_out_of_range) {
    // from_chars leaves `out` alone here: 1e999 is infinite, 1e-999 is zero.
    out = std::strtod(m_text.c_str(), nullptr);
    return true;
  }
  return r.ec == std::errc() && r.ptr == m_text.data() + m_text.size();
}

std::string position(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

// ------------------------------------------------------------------------------ reading

class Parser {
 public:
  Parser(std::string_view text, const Limits& limits) : m_text(text), m_limits(limits) {}

  Value parse_document() {
    if (m_text.size() > m_limits.max_bytes)
      throw Error("JSON document of " + std::to_string(m_text.size()) +
                  " bytes exceeds the limit of " + std::to_string(m_limits.max_bytes) + " bytes");
    skip_space();
    Value v = parse_value(0);
    skip_space();
    if (m_pos != m_text.size()) fail("unexpected " + describe_here() + " after the document");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { fail_at(m_pos, what); }
  [[noreturn]] void fail_at(size_t pos, const std::string& what) const {
    throw Error("JSON " + position(m_text, pos) + ": " + what);
  }

  std::string describe_here() const {
    if (m_pos >= m_text.size()) return "end of document";
    unsigned char c = static_cast<unsigned char>(m_text[m_pos]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
  }

  void skip_space() {
    while (m_pos < m_text.size()) {
      char c = m_text[m_pos];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++m_pos;
    }
  }

  bool at(char c) const { return m_pos < m_text.size() && m_text[m_pos] == c; }

  Value parse_value(size_t depth) {
    if (m_pos >= m_text.size()) fail("expected a value, found end of document");
    size_t start = m_pos;
    Value v;
    switch (m_text[m_pos]) {
      case '{': v = parse_object(depth + 1); break;
      case '[': v = parse_array(depth + 1); break;
      case '"': v = Value::string(parse_string()); break;
      case 't': v = literal("true", Value::boolean(true)); break;
      case 'f': v = literal("false", Value::boolean(false)); break;
      case 'n': v = literal("null", Value()); break;
      default:
        if (m_text[m_pos] == '-' || (m_text[m_pos] >= '0' && m_text[m_pos] <= '9')) {
          v = parse_number();
        } else {
          fail("expected a value, found " + describe_here());
        }
    }
    v.m_offset = start;
    return v;
  }

  Value literal(std::string_view word, Value v) {
    if (m_text.substr(m_pos, word.size()) != word)
      fail("expected a value, found " + describe_here());
    m_pos += word.size();
    return v;
  }

  void check_depth(size_t depth) const {
    if (depth > m_limits.max_depth)
      fail("nesting deeper than " + std::to_string(m_limits.max_depth) + " levels");
  }

  // At an opening bracket: true when the container is empty (its closing bracket read).
  bool open(char close, size_t depth) {
    check_depth(depth);
    ++m_pos;
    skip_space();
    if (!at(close)) return false;
    ++m_pos;
    return true;
  }

  // After an item: true at ',' (another item follows), false at `close` (read).
  bool more(char close, const char* after) {
    skip_space();
    if (at(',') || at(close)) return m_text[m_pos++] == ',';
    fail(std::string("expected ',' or '") + close + "' after " + after + ", found " +
         describe_here());
  }

  Value parse_array(size_t depth) {
    Value v = Value::array();
    if (open(']', depth)) return v;
    do {
      skip_space();
      v.m_array.push_back(parse_value(depth));
    } while (more(']', "an array item"));
    return v;
  }

  Value parse_object(size_t depth) {
    Value v = Value::object();
    if (open('}', depth)) return v;
    std::unordered_set<std::string> keys;  // duplicates in linear time, whatever the size
    do {
      skip_space();
      size_t key_pos = m_pos;
      if (!at('"')) fail("expected a string key, found " + describe_here());
      std::string key = parse_string();
      if (!keys.insert(key).second) fail_at(key_pos, "duplicate key \"" + key + "\"");
      skip_space();
      if (!at(':')) fail("expected ':' after the key \"" + key + "\", found " + describe_here());
      ++m_pos;
      skip_space();
      Value item = parse_value(depth);
      v.m_object.emplace_back(std::move(key), std::move(item));
    } while (more('}', "an object member"));
    return v;
  }

  Value parse_number() {
    size_t start = m_pos;
    auto digits = [&] {
      size_t n = 0;
      while (m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9') ++m_pos, ++n;
      return n;
    };
    if (at('-')) ++m_pos;
    if (at('0')) {
      ++m_pos;
      if (m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9')
        fail("a number may not have leading zeros");
    } else if (digits() == 0) {
      fail("expected a digit, found " + describe_here());
    }
    if (at('.')) {
      ++m_pos;
      if (digits() == 0) fail("expected a digit after '.', found " + describe_here());
    }
    if (at('e') || at('E')) {
      ++m_pos;
      if (at('+') || at('-')) ++m_pos;
      if (digits() == 0) fail("expected a digit in the exponent, found " + describe_here());
    }
    return Value(Value::Kind::number, std::string(m_text.substr(start, m_pos - start)));
  }

  unsigned hex4() {
    if (m_pos + 4 > m_text.size()) fail("a \\u escape needs 4 hex digits");
    unsigned code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = m_text[m_pos++];
      code <<= 4;
      if (c >= '0' && c <= '9') code |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') code |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') code |= static_cast<unsigned>(c - 'A' + 10);
      else fail_at(m_pos - 1, "a \\u escape needs 4 hex digits");
    }
    return code;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    size_t start = m_pos;
    ++m_pos;  // "
    std::string out;
    while (true) {
      if (m_pos >= m_text.size()) fail_at(start, "unterminated string");
      unsigned char c = static_cast<unsigned char>(m_text[m_pos]);
      if (c == '"') {
        ++m_pos;
        return out;
      }
      if (c < 0x20) fail("control character in a string (escape it)");
      if (c == '\\') {
        ++m_pos;
        if (m_pos >= m_text.size()) fail_at(start, "unterminated string");
        char e = m_text[m_pos++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            unsigned cp = hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) fail_at(m_pos - 6, "unpaired low surrogate");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (m_text.substr(m_pos, 2) != "\\u") fail_at(m_pos - 6, "unpaired high surrogate");
              m_pos += 2;
              unsigned low = hex4();
              if (low < 0xDC00 || low > 0xDFFF) fail_at(m_pos - 6, "unpaired high surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            append_utf8(out, cp);
            break;
          }
          default: fail_at(m_pos - 1, "invalid escape '\\" + std::string(1, e) + "'");
        }
        continue;
      }
      size_t n = utf8_length(m_text, m_pos);
      if (n == 0) fail("invalid UTF-8 in a string");
      out.append(m_text.substr(m_pos, n));
      m_pos += n;
    }
  }

 public:
  // The length of the UTF-8 sequence at `pos` (1 to 4), or 0 when it is not valid UTF-8
  // (overlong forms, surrogates and code points above U+10FFFF are invalid).
  static size_t utf8_length(std::string_view s, size_t pos) {
    auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
    unsigned char c = byte(pos);
    if (c < 0x80) return 1;
    size_t n;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) n = 2, cp = c & 0x1Fu;
    else if (c >= 0xE0 && c <= 0xEF) n = 3, cp = c & 0x0Fu;
    else if (c >= 0xF0 && c <= 0xF4) n = 4, cp = c & 0x07u;
    else return 0;
    if (pos + n > s.size()) return 0;
    for (size_t i = 1; i < n; ++i) {
      if ((byte(pos + i) & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (byte(pos + i) & 0x3Fu);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return 0;
    return n;
  }

 private:
  std::string_view m_text;
  Limits m_limits;
  size_t m_pos = 0;
};

Value parse(std::string_view text, const Limits& limits) {
  return Parser(text, limits).parse_document();
}

// ------------------------------------------------------------------------------ writing

namespace {

void write_string(std::ostream& out, const std::string& s) {
  out << '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\b': out << "\\b"; break;
      case '\f': out << "\\f"; break;
      case '\n': out << "\\n"; break;
      case '\r': out << "\\r"; break;
      case '\t': out << "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out << buf;
        } else {
          size_t n = Parser::utf8_length(s, i);
          if (n == 0) throw Error("cannot write a string that is not valid UTF-8: \"" + s + "\"");
          out.write(s.data() + i, static_cast<std::streamsize>(n));
          i += n;
          continue;
        }
    }
    ++i;
  }
  out << '"';
}

void write_value(std::ostream& out, const Value& v, size_t indent, size_t level) {
  auto newline = [&](size_t lvl) {
    if (indent) out << '\n' << std::string(indent * lvl, ' ');
  };
  switch (v.kind()) {
    case Value::Kind::null: out << "null"; return;
    case Value::Kind::boolean: out << (v.as_bool() ? "true" : "false"); return;
    case Value::Kind::number: out << v.text(); return;
    case Value::Kind::string: write_string(out, v.text()); return;
    case Value::Kind::array:
    case Value::Kind::object: {
      bool is_array = v.is(Value::Kind::array);
      size_t n = is_array ? v.items().size() : v.members().size();
      out << (is_array ? '[' : '{');
      for (size_t i = 0; i < n; ++i) {
        if (i) out << ',';
        newline(level + 1);
        if (!is_array) {
          write_string(out, v.members()[i].first);
          out << (indent ? ": " : ":");
        }
        write_value(out, is_array ? v.items()[i] : v.members()[i].second, indent, level + 1);
      }
      if (n) newline(level);
      out << (is_array ? ']' : '}');
      return;
    }
  }
}

}  // namespace

void write(std::ostream& out, const Value& v, size_t indent) { write_value(out, v, indent, 0); }

std::string write(const Value& v, size_t indent) {
  std::ostringstream os;
  write(os, v, indent);
  return os.str();
}

}  // namespace json
}  // namespace ngraph
