// Fault injection for tests only. The communicators' set-up passes named points where a test
// can make this process stall or stop, to check that the other ranks fail cleanly (a
// timeout naming the rank, the watchdog ending the job, nothing left in /dev/shm). Nothing
// happens at a point unless a test installed a hook there: from C++ with set_hook, from
// Python with ngraph._ngraph._testing (tests/python/test_distributed_faults.py).
#pragma once

#include <functional>
#include <string>

namespace ngraph {
namespace distributed {
namespace testing {

enum class Point {
  topology_barrier,    // a communicator's node topology, before the barrier every rank passes
  topology_split,      // the same, after that barrier and before the (blocking) node split
  shared_object_made,  // local rank 0 made a shared-memory object; nobody has mapped it yet
  sharded_update_gather,  // a sharded update across nodes: this rank updated its share, before
                          // the shares are gathered between the nodes
  sharded_update_reduce_scatter,  // the same: this rank summed its piece within the node, before
                                  // the reduce-scatter between the nodes (16-bit or f32)
};

// Installs `hook` at `point` (an empty function removes it); it runs every time the point is
// passed, in the thread that passes it, until removed.
void set_hook(Point point, std::function<void()> hook);
void clear_hooks();
// Runs the hook installed at `point`, if any (production code calls only this).
void at(Point point);

// "topology_barrier", ...: the names the Python binding takes; std::invalid_argument naming
// the known ones for another.
Point point_named(const std::string& name);

}  // namespace testing
}  // namespace distributed
}  // namespace ngraph
