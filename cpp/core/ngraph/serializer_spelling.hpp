// nGraph's spelling of our ops in its JSON format, as nGraph's own serializer (v0.26,
// src/ngraph/serializer.cpp) writes and reads them: attribute keys that differ from our
// visitor names ("eps" for "epsilon"), enums as nGraph's integers ("autob", "pad_mode"), and
// nGraph v0's TopK, whose output 0 is the indices. (Element types are written as C type
// names, element::Type::c_type_string.) The writer spells every op nGraph's way; the reader
// takes either spelling, one op at a time. Internal to the serializer.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "ngraph/json.hpp"

namespace ngraph {
namespace serializer_spelling {

// nGraph's name of our op (its v0 logical ops are And, Or, Not), and ours of nGraph's.
std::string ngraph_op_name(const std::string& ours);
std::string our_op_name(const std::string& theirs);

// Whether nGraph numbers the first two outputs of `op` the other way round (TopK).
bool swaps_outputs(const std::string& op);
inline size_t swapped_output(size_t index) { return index < 2 ? 1 - index : index; }

// `obj`, an op's object with its attributes under our visitor names, in nGraph's spelling.
void to_ngraph(const std::string& op, json::Value& obj);

using Fail = std::function<void(const json::Value* at, const std::string& message)>;

// `obj`, an op's object in either spelling, in ours: nGraph's keys renamed, its enum numbers
// turned into names, and the attributes nGraph's writer leaves out when they have their
// default value (auto_broadcast "none", ...) added when the op visits them (`visited`).
// Keys nGraph writes that carry nothing for us (Parameter's "cacheable", "pad_type" 0, the
// output types its writers of 2017-18 recorded, "op_version" 0 ...) are dropped, and the
// formats of its earlier versions (a Parameter's "value_type", Softmax v1, BatchNorm's
// "training", MaxPool without padding ...) read as its readers of v0.18-v0.26 read them (see
// docs/cpp.md); values we cannot honour (a dynamic shape, another op version) fail through
// `fail`. Returns whether the object used nGraph's keys (its outputs are then numbered as
// nGraph's).
bool from_ngraph(const std::string& op, json::Value& obj, const std::vector<std::string>& visited,
                 const Fail& fail);

}  // namespace serializer_spelling
}  // namespace ngraph
