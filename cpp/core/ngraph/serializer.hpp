// Functions as JSON in nGraph's format: an array of functions, each with "name",
// "parameters" and "result" (node names) and "ops" in topological order; an op has "name",
// "op" (the type name), "inputs" (a producer's name, or {"node": name, "index": i} for
// output i > 0), "outputs" (names of its outputs) and its attributes under their visitor
// names. The serializer knows no op: it builds ops by name from the OpRegistry and moves
// attributes through visit_attributes, so a new op needs no change here. Only ops that hold
// data or state have an entry of their own: Constant ("value"), Variable and Assign
// ("variable_id", with the values under the function's "variables"). docs/cpp.md lists the
// format and where it differs from nGraph's.
#pragma once

#include <cstddef>
#include <istream>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <string>

#include "ngraph/function.hpp"

namespace ngraph {

namespace distributed {
class Communicator;
}

// A document that is not a valid function (syntax, wrong types, unknown ops or names, bad
// attributes, limits), or a function that cannot be written. The message names the field:
// "deserialize: ops[3] 'Add_3' (Add): attribute 'auto_broadcast': expected a string, got a
// number". Python: ngraph.SerializationError, a ValueError.
class SerializationError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// JSON text of `f` (and of the current values of its variables). indent 0 writes one line;
// otherwise each member on its own line, indented by `indent` spaces per level.
std::string serialize(const std::shared_ptr<Function>& f, size_t indent = 0);
void serialize(std::ostream& out, const std::shared_ptr<Function>& f, size_t indent = 0);

struct DeserializeOptions {
  // Bound to every collective op; null: the default communicator (as for ops built without
  // one). Collectives check their ranks (root, dest, src) against it.
  std::shared_ptr<distributed::Communicator> communicator;
  size_t max_document_bytes = size_t(1) << 30;
  size_t max_depth = 64;  // JSON nesting (nGraph's documents need 5)
  // Bytes of one constant or variable value (one value may fill a whole shape).
  size_t max_tensor_bytes = size_t(1) << 30;
};

// The function a document describes; throws SerializationError (never anything else for
// bad input) naming the field.
std::shared_ptr<Function> deserialize(const std::string& text,
                                      const DeserializeOptions& options = {});
std::shared_ptr<Function> deserialize(std::istream& in, const DeserializeOptions& options = {});

}  // namespace ngraph
