// Exceptions. User mistakes derive from std::invalid_argument (Python: ValueError, or
// TypeError for element-type errors); backend failures from std::runtime_error.
#pragma once

#include <stdexcept>
#include <string>

namespace ngraph {

// A node whose inputs or attributes break its op's rule; message starts with "[OpName] ".
class NodeValidationFailure : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Like NodeValidationFailure, for element-type mismatches (Python maps it to TypeError).
class ElementTypeError : public NodeValidationFailure {
 public:
  using NodeValidationFailure::NodeValidationFailure;
};

// Failures while compiling or running a function on a backend.
class ngraph_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ngraph
