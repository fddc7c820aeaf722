// One door for ngraph's settings. Every NGRAPH_* environment variable is registered here with
// its type, default, when it is read, whether the ranks of a job must agree on it, and a line
// of documentation (docs/settings.md is generated from this table: python -m ngraph.settings
// --markdown). The typed getters below are the only code that reads the process
// environment: C++ through them, Python through ngraph.settings (a binding of this module).
//
// Values are read from the environment at each call, so a setting read "each compile" sees
// the environment of that compile; settings read once per process are cached by their
// owners. Unset and empty mean the default. Parsing, per type:
//   flag     "0" is off, anything else is on
//   integer  the leading decimal integer (strtoll); no digits: the default
//   real     the leading number (strtod); no number: the default
//   text     the value as it is
//   choice   text documented to take one of `choices`; the reader decides what another
//            value does (an error, or the default), as its message says
// An integer or real marked `positive` reads a value that is not above 0 as the default.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ngraph {
namespace settings {

enum class Type { flag, integer, real, text, choice };
// Which side reads it: the C++ library, the Python package, or both.
enum class Owner { cpp, python, both };

struct Setting {
  std::string name;
  Type type;
  std::string default_value;         // as it would be written in the environment
  std::vector<std::string> choices;  // a choice's documented values
  std::string read;                  // when it is read ("each compile", ...)
  bool agree;                        // ranks must agree: compared when a communicator is made
  std::string doc;                   // one line
  Owner owner = Owner::cpp;
  bool positive = false;             // integer, real: a value <= 0 means the default
  std::string label;                 // what the agreement check calls it ("" : the name)
};

// Every registered setting, in the order of docs/settings.md (and of the agreement check).
const std::vector<Setting>& all();
// The registered setting `name`; std::logic_error naming it when there is none.
const Setting& find(const std::string& name);

// The typed value of a registered setting (std::logic_error for a name that is not
// registered or a getter that does not match its type; text() takes text and choice).
bool flag(const std::string& name);
long long integer(const std::string& name);
double real(const std::string& name);
std::string text(const std::string& name);

// The environment's text of a registered setting, as it is; nullopt when unset.
std::optional<std::string> value(const std::string& name);

// A variable that is not ngraph's (a launcher's: OMPI_COMM_WORLD_LOCAL_SIZE, OMP_NUM_THREADS,
// FI_PROVIDER, ...); nullopt when unset. NGRAPH_* names are settings: std::logic_error.
std::optional<std::string> environment(const std::string& name);

// The value in effect, as text: "on" or "0 (off)" for a flag, the parsed number, the text;
// for a setting a program can also set (the check mode: ngraph.distributed.init(check=...)),
// what its owner reports (see set_effective). The agreement check compares these.
std::string effective(const std::string& name);
// The owner of a setting whose value in effect may differ from the environment's tells the
// registry how to read it.
void set_effective(const std::string& name, std::function<std::string()> reader);

const char* to_string(Type type);
const char* to_string(Owner owner);

}  // namespace settings
}  // namespace ngraph
