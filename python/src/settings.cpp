// ngraph's settings registry (cpp/core/ngraph/settings.hpp), read by ngraph.settings: the
// typed value of a setting, its raw text, and the table docs/settings.md is generated from.
#include "bindings.hpp"
#include "ngraph/settings.hpp"

namespace py = pybind11;

namespace ngraph {
namespace python {

namespace {

// A name that is not registered is KeyError in Python (std::logic_error in C++).
template <typename F>
auto registered(F f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::logic_error& e) {
    throw py::key_error(e.what());
  }
}

py::object typed_value(const std::string& name) {
  return registered([&]() -> py::object {
    switch (settings::find(name).type) {
      case settings::Type::flag: return py::bool_(settings::flag(name));
      case settings::Type::integer: return py::int_(settings::integer(name));
      case settings::Type::real: return py::float_(settings::real(name));
      case settings::Type::text:
      case settings::Type::choice: break;
    }
    return py::str(settings::text(name));
  });
}

py::list table() {
  py::list out;
  for (const auto& s : settings::all()) {
    py::dict row;
    row["name"] = s.name;
    row["type"] = settings::to_string(s.type);
    row["default"] = s.default_value;
    row["choices"] = s.choices;
    row["read"] = s.read;
    row["agree"] = s.agree;
    row["doc"] = s.doc;
    row["owner"] = settings::to_string(s.owner);
    row["positive"] = s.positive;
    out.append(row);
  }
  return out;
}

}  // namespace

void init_settings(py::module_& m) {
  m.def("settings_get", &typed_value, py::arg("name"),
        "The typed value of a registered setting (bool, int, float or str); KeyError for another name.");
  m.def(
      "settings_raw", [](const std::string& name) { return registered([&] { return settings::value(name); }); },
      py::arg("name"), "The environment's text of a registered setting, or None when unset.");
  m.def(
      "settings_effective",
      [](const std::string& name) { return registered([&] { return settings::effective(name); }); },
      py::arg("name"), "The value in effect, as the agreement check of the ranks compares it.");
  m.def("settings_table", &table, "Every registered setting: a dict of its fields, in the registry's order.");
}

}  // namespace python
}  // namespace ngraph
