#include "ngraph/runtime/cpu/shared_memory.hpp"

#include <algorithm>
#include <cstring>

#include "ngraph/distributed/testing.hpp"

namespace ngraph {
namespace runtime {
namespace cpu {

namespace {
std::string name_of(const VariableState& state) {
  return state.get_name().empty() ? std::string("(unnamed)") : state.get_name();
}
}  // namespace

NodeSharing::NodeSharing(const ExecutionPlan& plan) {
  for (const auto& placement : plan.shared) {
    Region r;
    r.comm = placement.comm;
    r.bytes = placement.bytes;
    r.binding = placement.binding;
    r.node_shared = placement.node_shared;
    r.common = placement.common;
    m_regions.push_back(std::move(r));
  }
  for (const auto& u : plan.sharded) {
    Region& r = m_regions[u.placement];
    r.updates.push_back(u);
    size_t lo = u.planes_at + u.weight_planes * u.plane_bytes, hi = u.planes_at + u.planes * u.plane_bytes;
    for (const auto& [state, off] : r.node_shared)
      if (off >= lo && off < hi) r.state.emplace_back(state, off);
  }
}

NodeSharing::~NodeSharing() {
  for (auto& r : m_regions) {
    lose_state(r, "the computation whose sharded update held the other shares is gone");
    unshare_from(r);
  }
}

void NodeSharing::set_up() {
  if (m_set_up) return;
  m_set_up = true;
  for (auto& r : m_regions) {
    auto* memory = distributed::node_memory(*r.comm);
    r.region = memory ? memory->create_shared_region(r.bytes, r.common) : nullptr;  // collective
    if (!r.region) continue;
    RegionBinding& b = *r.binding;
    b.slots.clear();
    for (int l = 0; l < r.region->local_size(); ++l) b.slots.push_back(r.region->slot(l));
    b.local_rank = r.region->local_rank();
    b.local_size = r.region->local_size();
    b.node = r.region->node();
    b.nodes = r.region->nodes();
    b.base = r.region->local();
    b.region = r.region.get();
  }
}

void NodeSharing::drop() {
  for (auto& r : m_regions) {
    lose_state(r, "a call of the computation whose sharded update held the other shares failed");
    unshare_from(r);  // the values stay (as far as the update got), privately
    *r.binding = RegionBinding{};
    r.region.reset();
  }
  m_sharded = false;
}

bool NodeSharing::shared_in(const Region& r, const VariableState& state, size_t offset) {
  return r.region && r.region->common() && state.is_shared() && state.read_buffer() == r.region->common() + offset;
}

void NodeSharing::unshare_from(Region& r) {
  for (const auto& [state, off] : r.node_shared)
    if (shared_in(r, *state, off)) state->unshare();
}

bool NodeSharing::node_shared_here(const VariableState* state) const {
  for (const auto& r : m_regions)
    for (const auto& [s, off] : r.node_shared)
      if (s == state) return true;
  return false;
}

// Per call, for each region with a sharded update: every rank says (through
// SharedRegion::max_over_node) whether its variables are still the node's shared ones (nothing
// wrote one privately: set_value, another executable, the numerics check's call). All yes:
// this call runs sharded. Otherwise every rank takes private copies and, when some rank's
// values changed since they were last compared (a checkpoint loaded, set_value on every
// rank), the ranks compare them again and share them when they match. A call runs sharded
// when every region with a sharded update does (one communicator has one region: in practice
// the decision is that region's).
bool NodeSharing::decide(bool checking, const std::string& where) {
  bool any = false, all = true;
  for (auto& r : m_regions) {
    if (r.node_shared.empty()) continue;
    any = true;
    // The same on every rank: the ranks made the region together.
    if (!r.region || !r.region->common() || (!r.region->single_node() && !across_nodes(r))) all = false;
    else all = decide_one(r, checking, where) && all;
  }
  m_sharded = any && all;
  return m_sharded;
}



bool NodeSharing::decide_one(Region& r, bool checking, const std::string& where) {
  bool attached = true;
  uint64_t versions = 0;
  for (const auto& [state, off] : r.node_shared) {
    attached = attached && shared_in(r, *state, off);
    versions += state->version();
  }
  // Through the region, not MPI: a rank that stopped using it (after a failure) is named
  // after the timeout instead of meeting a collective it never calls.
  int64_t all[3] = {attached && !checking ? 0 : 1, !attached && versions != r.compared_versions ? 1 : 0,
                    checking ? 1 : 0};
  r.region->max_over_all(all, 3, "[AllReduce] sharded update of " + where + ": deciding");
  if (all[0] == 0) return true;
  gather(r, where);  // a call that goes unsharded needs the whole optimizer state
  unshare_from(r);
  return all[1] && !all[2] && share_values(r, where);
}

// Collective over the region's ranks: local rank 0 writes its values into the common memory,
// every rank compares its own with them, and all share them if all match. Across nodes the
// nodes' copies are compared too, by a hash of the values (each node's ranks found theirs
// equal to it): the maximum of the hash and of its negation over all ranks agree only when
// every node holds the same.
bool NodeSharing::share_values(Region& r, const std::string& where) {
  auto& region = *r.region;
  char* common = region.common();
  const std::string what = "[AllReduce] sharded update of " + where + ": sharing the variables";
  // Every rank has taken its private copies (unshare_from) before the common memory changes.
  region.arrive(what, "before local rank 0 writes its values");
  if (region.local_rank() == 0)
    for (const auto& [state, off] : r.node_shared) std::memcpy(common + off, state->read_buffer(), state->byte_size());
  region.arrive(what, "after local rank 0 wrote its values");
  int64_t differ[3] = {0, 0, 0};
  uint64_t versions = 0, hash = 1469598103934665603ull;  // FNV-1a
  for (const auto& [state, off] : r.node_shared) {
    differ[0] = differ[0] || std::memcmp(common + off, state->read_buffer(), state->byte_size()) != 0;
    versions += state->version();
    if (region.nodes() > 1)
      for (size_t i = 0; i < state->byte_size(); ++i)
        hash = (hash ^ static_cast<unsigned char>(common[off + i])) * 1099511628211ull;
  }
  differ[1] = static_cast<int64_t>(hash >> 1);
  differ[2] = -differ[1];
  region.max_over_all(differ, 3, what);
  if (differ[1] != -differ[2]) differ[0] = 1;
  r.compared_versions = versions;
  if (differ[0]) return false;
  for (const auto& [state, off] : r.node_shared) state->share(common + off, r.region);
  return true;
}

void NodeSharing::arrive_after_update(const std::string& where) {
  if (!m_sharded) return;
  for (auto& r : m_regions) {
    if (r.node_shared.empty()) continue;
    const std::string what = "[AllReduce] sharded update of " + where;
    // Each rank updated its share of every plane: the planes are gathered between the nodes
    // (each rank its piece of the node's), then every rank of the node has arrived.
    if (r.region->nodes() > 1)  // a test: this rank lost mid-update
      distributed::testing::at(distributed::testing::Point::sharded_update_gather);
    if (r.region->nodes() > 1)
      for (const auto& u : r.updates)
        for (size_t k = 0; k < u.weight_planes; ++k)  // the weights; the state stays with its owners
          for (size_t j = 0; j < u.sharded_ranges.size(); ++j)
            r.region->allgather_common(u.planes_at + k * u.plane_bytes + u.plane_at[j],
                                       u.sharded_ranges[j].second / sizeof(float),
                                       what + ": gathering the updated weights");
    r.region->arrive(what, "after the update");
    for (const auto& [state, off] : r.state) state->release_private();  // the common memory holds it
    if (r.region->nodes() > 1) scatter_state(r, static_cast<size_t>(&r - m_regions.data()), where);
  }
}

// After a sharded call across nodes: this node's common memory is current only in its own
// shares of the optimizer state. The first time since the state was whole, each rank gives
// back the pages of its piece that other nodes own (ZeRO's saving: per node, 1/nodes of the
// state stays resident), and the state variables refuse to be read until gathered.
void NodeSharing::scatter_state(Region& r, size_t index, const std::string& where) {
  if (r.scattered || r.state.empty()) return;
  r.scattered = true;
  const auto& b = *r.binding;
  for (const auto& u : r.updates)
    for (size_t j = 0; j < u.sharded_ranges.size(); ++j) {
      size_t count = u.sharded_ranges[j].second / sizeof(float);
      auto piece = distributed::SharedRegion::piece(count, sizeof(float), b.local_rank, b.local_size);
      auto mine = distributed::SharedRegion::share(count, sizeof(float), b.local_rank, b.local_size, b.node, b.nodes);
      for (size_t k = u.weight_planes; k < u.planes; ++k) {
        size_t at = u.planes_at + k * u.plane_bytes + u.plane_at[j];
        r.region->discard_common(at + piece.lo * sizeof(float), (mine.lo - piece.lo) * sizeof(float));
        r.region->discard_common(at + mine.hi * sizeof(float), (piece.hi - mine.hi) * sizeof(float));
      }
    }
  const std::string rank = std::to_string(r.comm->rank()), ranks = std::to_string(r.comm->size());
  for (const auto& [state, off] : r.state)
    state->scatter("[Variable] " + name_of(*state) + ": rank " + rank + " of " + ranks +
                       " holds only its share of this optimizer state (the sharded update across nodes of " +
                       where + " keeps each share with its owner). Gather it first, on every rank: "
                       "ng.checkpoint.consolidate(variables, optimizer), or ng.save(..., collective=True); "
                       "or set or load its value on every rank",
                   [this, index, where] { gather(m_regions.at(index), where); });
}

// Collective (the same on every rank: r.scattered is): every plane of optimizer state is
// gathered between the nodes, so every node's common memory holds it whole again.
void NodeSharing::gather(Region& r, const std::string& where) {
  if (!r.scattered) return;
  const std::string what = "[AllReduce] sharded update of " + where + ": gathering the optimizer state";
  for (const auto& u : r.updates)
    for (size_t k = u.weight_planes; k < u.planes; ++k)
      for (size_t j = 0; j < u.sharded_ranges.size(); ++j)
        r.region->allgather_common(u.planes_at + k * u.plane_bytes + u.plane_at[j],
                                   u.sharded_ranges[j].second / sizeof(float), what);
  r.region->arrive(what, "after gathering the optimizer state");
  r.scattered = false;
  for (const auto& [state, off] : r.state)
    if (shared_in(r, *state, off)) state->gathered();
}

// The shares other nodes held cannot be gathered any more: the variables keep refusing reads,
// saying why, until set or loaded.
void NodeSharing::lose_state(Region& r, const std::string& why) {
  if (!r.scattered) return;
  r.scattered = false;
  for (const auto& [state, off] : r.state)
    if (state->is_scattered())
      state->scatter("[Variable] " + name_of(*state) + ": this rank holds only its share of this optimizer "
                     "state, and " + why + "; set or load (ng.load) its value on every rank",
                     nullptr);
}

bool NodeSharing::holds_shares_of(const VariableState* state) const {
  for (const auto& r : m_regions)
    for (const auto& [s, off] : r.state)
      if (s == state && shared_in(r, *s, off)) return true;
  return false;
}

size_t NodeSharing::optimizer_state_bytes() const {
  size_t n = 0;
  for (const auto& r : m_regions) {
    if (!r.region || !r.region->common()) continue;
    const auto& b = *r.binding;
    for (const auto& [state, off] : r.state) n += state->private_bytes();
    for (const auto& u : r.updates)
      for (size_t j = 0; j < u.sharded_ranges.size(); ++j) {
        auto piece = distributed::SharedRegion::piece(u.sharded_ranges[j].second / sizeof(float), sizeof(float),
                                                      b.local_rank, b.local_size);
        for (size_t k = u.weight_planes; k < u.planes; ++k)
          n += r.region->resident_common(u.planes_at + k * u.plane_bytes + u.plane_at[j] + piece.lo * sizeof(float),
                                         (piece.hi - piece.lo) * sizeof(float));
      }
  }
  return n;
}

bool NodeSharing::across_nodes(const Region& r) {
  for (const auto& u : r.updates)
    if (!u.across_nodes) return false;
  return true;
}

// Per variable: its piece on one node; across nodes the part of it (at its offset in its
// sharded range) inside this rank's share of that range.
size_t NodeSharing::sharded_update_bytes() const {
  size_t n = 0;
  for (const auto& r : m_regions) {
    if (!r.region) continue;
    const auto& b = *r.binding;
    for (const auto& [state, off] : r.node_shared) {
      size_t es = state->get_element_type().size(), total = state->byte_size() / es, at = 0;
      auto mine = distributed::SharedRegion::piece(total, es, b.local_rank, b.local_size);
      for (const auto& u : r.updates)
        if (b.nodes > 1 && off >= u.planes_at && off < u.planes_at + u.planes * u.plane_bytes) {
          size_t in_plane = (off - u.planes_at) % u.plane_bytes, j = u.range_in_plane(in_plane);
          if (j == u.plane_at.size()) continue;
          at = (in_plane - u.plane_at[j]) / es;
          mine = distributed::SharedRegion::share(u.sharded_ranges[j].second / es, es, b.local_rank,
                                                  b.local_size, b.node, b.nodes);
        }
      n += (std::clamp(mine.hi, at, at + total) - std::clamp(mine.lo, at, at + total)) * es;
    }
  }
  return n;
}

size_t NodeSharing::bytes() const {
  size_t n = 0;
  for (const auto& r : m_regions) n += r.bytes;
  return n;
}

size_t NodeSharing::node_shared_variables() const {
  size_t n = 0;
  for (const auto& r : m_regions) n += r.node_shared.size();
  return n;
}

std::vector<std::string> NodeSharing::describe() const {
  std::vector<std::string> out;
  for (const auto& r : m_regions)
    if (r.region) out.push_back(r.region->describe());
  return out;
}

}  // namespace cpu
}  // namespace runtime
}  // namespace ngraph
