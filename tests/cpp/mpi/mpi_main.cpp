// main for ngraph_mpi_tests: initialises MPI, runs the GoogleTest suites on every rank, and
// makes every rank exit non-zero when any rank had a failure. Rank 0 prints GoogleTest's
// usual output; the other ranks print only their failures, prefixed with their rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "mpi_test_utils.hpp"
#include "ngraph/runtime/cpu/cpu_backend.hpp"

namespace ngraph {
namespace mpitest {

namespace {
std::shared_ptr<distributed::MPICommunicator> g_world;
}

std::shared_ptr<distributed::MPICommunicator> world() {
  return g_world;
}
int rank() {
  return g_world->rank();
}
int size() {
  return g_world->size();
}

std::shared_ptr<runtime::Executable> compile(const std::shared_ptr<Function>& f) {
  static auto backend = runtime::Backend::create("CPU");
  return backend->compile(f);
}

std::vector<Host> run(const std::shared_ptr<runtime::Executable>& exe,
                      const std::vector<Host>& inputs) {
  std::vector<std::shared_ptr<runtime::Tensor>> in, out;
  for (const auto& h : inputs) {
    auto t = std::make_shared<runtime::Tensor>(h.type, h.shape);
    t->write(h.bytes.data(), h.bytes.size());
    in.push_back(t);
  }
  for (const auto& r : exe->get_results())
    out.push_back(std::make_shared<runtime::Tensor>(r->get_element_type(), r->get_shape()));
  exe->call(out, in);
  std::vector<Host> values;
  for (const auto& t : out) {
    Host h{t->get_element_type(), t->get_shape(), std::vector<char>(t->get_size_in_bytes())};
    t->read(h.bytes.data(), h.bytes.size());
    values.push_back(std::move(h));
  }
  return values;
}

namespace {

// For ranks other than 0: failures only, each line prefixed with the rank.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int r) : m_rank(r) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", m_rank,
                 result.file_name() ? result.file_name() : "unknown", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", m_rank, info.test_suite_name(),
                 info.name());
    std::fflush(stderr);
  }

 private:
  int m_rank;
};

}  // namespace
}  // namespace mpitest
}  // namespace ngraph

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "MPI_Init_thread failed\n");
    return 2;
  }
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  ::testing::InitGoogleTest(&argc, argv);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (world_rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new ngraph::mpitest::RankFailurePrinter(world_rank));
  }

  int failed = 0;
  try {
    ngraph::mpitest::g_world =
        std::make_shared<ngraph::distributed::MPICommunicator>(MPI_COMM_WORLD, "MPI_COMM_WORLD");
    failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] error outside a test: %s\n", world_rank, e.what());
    failed = 1;
  }

  // Every rank learns how many ranks failed; all exit non-zero if any did. Rank 0 names them
  // (their failures are printed on stderr, prefixed with the rank).
  int failed_ranks = 0;
  MPI_Allreduce(&failed, &failed_ranks, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::vector<int> per_rank(static_cast<size_t>(world_size), 0);
  MPI_Gather(&failed, 1, MPI_INT, per_rank.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (world_rank == 0) {
    if (failed_ranks == 0) {
      std::printf("[MPI] PASSED on all %d ranks\n", world_size);
    } else {
      std::printf("[MPI] FAILED on %d of %d ranks:", failed_ranks, world_size);
      for (int k = 0; k < world_size; ++k)
        if (per_rank[static_cast<size_t>(k)]) std::printf(" %d", k);
      std::printf(" (see the [rank N] lines)\n");
    }
    std::fflush(stdout);
  }

  ngraph::distributed::set_default_communicator(nullptr);
  ngraph::mpitest::g_world.reset();
  MPI_Finalize();
  return failed_ranks ? 1 : 0;
}
