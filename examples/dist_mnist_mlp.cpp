// nGraph's dist_mnist_mlp, with ngraph's C++ API: a 784-600-10 MLP trained with synchronous
// data-parallel SGD. Gradients come from autodiff::Adjoints, are summed across ranks by
// AllReduce ops injected into the graph, and the updates (W0_next = W0 - lr * grad) are part
// of the same compiled function, as in the nGraph distributed-training documents - with
// the data sharded and the gradient averaged over the global batch, which nGraph's example
// left out.
//
//   mpirun -np 2 dist_mnist_mlp --data-dir /usr/share/datasets/fashion-mnist
//
// Options: --data-dir DIR (MNIST-format IDX files, gzip or raw; a directory with only the
// t10k files is split 8k/2k), --epochs N (5), --batch-size N (global, 128), --lr X (0.1),
// --hidden N (600), --max-train N (0: all), --min-accuracy X (exit 1 if the final test
// accuracy is lower; for tests).
#include <mpi.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ngraph/autodiff/adjoints.hpp"
#include "ngraph/distributed/mpi_communicator.hpp"
#include "ngraph/function.hpp"
#include "ngraph/ops.hpp"
#include "ngraph/runtime/backend.hpp"

using namespace ngraph;

namespace {

struct Options {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int epochs = 5;
  size_t batch_size = 128;
  float lr = 0.1f;
  size_t hidden = 600;
  size_t max_train = 0;
  double min_accuracy = 0.0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--data-dir") o.data_dir = value();
    else if (a == "--epochs") o.epochs = std::stoi(value());
    else if (a == "--batch-size") o.batch_size = std::stoul(value());
    else if (a == "--lr") o.lr = std::stof(value());
    else if (a == "--hidden") o.hidden = std::stoul(value());
    else if (a == "--max-train") o.max_train = std::stoul(value());
    else if (a == "--min-accuracy") o.min_accuracy = std::stod(value());
    else if (a == "--help" || a == "-h") {
      std::cout << "usage: dist_mnist_mlp [--data-dir DIR] [--epochs N] [--batch-size N] [--lr X]\n"
                   "                      [--hidden N] [--max-train N] [--min-accuracy X]\n";
      std::exit(0);
    } else {
      throw std::invalid_argument("unknown option " + a + " (see --help)");
    }
  }
  if (o.epochs <= 0 || o.batch_size == 0 || o.hidden == 0 || !(o.lr > 0))
    throw std::invalid_argument("--epochs, --batch-size, --hidden and --lr must be positive");
  return o;
}

// --------------------------------------------------------------------------- IDX files

std::vector<unsigned char> read_file(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // reads raw files too
  if (!f) throw std::runtime_error(path + ": cannot open");
  std::vector<unsigned char> data;
  unsigned char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) data.insert(data.end(), buf, buf + n);
  int err = 0;
  const char* msg = gzerror(f, &err);
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw std::runtime_error(path + ": corrupt gzip data (" + msg + ")");
  return data;
}

bool exists(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) return false;
  gzclose(f);
  return true;
}

// Returns the IDX file's dimensions and its uint8 data (images or labels).
std::vector<unsigned char> read_idx(const std::string& path, std::vector<size_t>& dims) {
  auto data = read_file(path);
  if (data.size() < 4 || data[0] != 0 || data[1] != 0 || data[2] != 0x08)
    throw std::runtime_error(path + ": not an IDX file of unsigned bytes");
  size_t rank = data[3], header = 4 + 4 * rank, count = 1;
  if (data.size() < header) throw std::runtime_error(path + ": truncated header");
  dims.clear();
  for (size_t i = 0; i < rank; ++i) {
    size_t d = (size_t(data[4 + 4 * i]) << 24) | (size_t(data[5 + 4 * i]) << 16) |
               (size_t(data[6 + 4 * i]) << 8) | size_t(data[7 + 4 * i]);
    dims.push_back(d);
    count *= d;
  }
  if (data.size() - header != count)
    throw std::runtime_error(path + ": " + (data.size() - header < count ? "truncated" : "too long") +
                             ": header says " + std::to_string(count) + " bytes of data, file has " +
                             std::to_string(data.size() - header));
  return std::vector<unsigned char>(data.begin() + static_cast<std::ptrdiff_t>(header), data.end());
}

struct Split {
  std::vector<float> images;  // n x 784, in [0, 1]
  std::vector<int> labels;
  size_t size() const { return labels.size(); }
};

Split load_split(const std::string& dir, const std::string& prefix) {
  auto find = [&](const std::string& stem) {
    for (auto p : {dir + "/" + stem + ".gz", dir + "/" + stem})
      if (exists(p)) return p;
    throw std::runtime_error(dir + "/" + stem + "[.gz]: file not found");
  };
  std::vector<size_t> idims, ldims;
  auto img = read_idx(find(prefix + "-images-idx3-ubyte"), idims);
  auto lbl = read_idx(find(prefix + "-labels-idx1-ubyte"), ldims);
  if (idims.size() != 3 || idims[1] * idims[2] != 784 || ldims.size() != 1 || ldims[0] != idims[0])
    throw std::runtime_error(dir + ": " + prefix + " images and labels do not match (28x28 images, one label each)");
  Split s;
  s.images.resize(img.size());
  for (size_t i = 0; i < img.size(); ++i) s.images[i] = img[i] / 255.0f;
  s.labels.assign(lbl.begin(), lbl.end());
  return s;
}

Split take(const Split& s, size_t begin, size_t end) {
  Split out;
  out.images.assign(s.images.begin() + static_cast<std::ptrdiff_t>(begin * 784),
                    s.images.begin() + static_cast<std::ptrdiff_t>(end * 784));
  out.labels.assign(s.labels.begin() + static_cast<std::ptrdiff_t>(begin),
                    s.labels.begin() + static_cast<std::ptrdiff_t>(end));
  return out;
}

// Rank r's contiguous part of [0, n): sizes differ by at most one.
std::pair<size_t, size_t> shard(size_t n, int rank, int size) {
  return {n * static_cast<size_t>(rank) / static_cast<size_t>(size),
          n * static_cast<size_t>(rank + 1) / static_cast<size_t>(size)};
}

// --------------------------------------------------------------------------- the model

struct Model {
  std::shared_ptr<op::Variable> W0, b0, W1, b1;
};

std::shared_ptr<op::Variable> variable(const Shape& shape, std::mt19937& rng, float scale,
                                       const std::string& name) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(shape_size(shape));
  for (auto& v : values) v = scale == 0.0f ? 0.0f : normal(rng) * scale;
  auto state = std::make_shared<VariableState>(element::f32, shape, values.data());
  state->set_name(name);
  auto v = std::make_shared<op::Variable>(state);
  v->set_friendly_name(name);
  return v;
}

Output logits_of(const Model& m, const Output& x) {
  auto h = std::make_shared<op::Relu>(
      std::make_shared<op::Add>(std::make_shared<op::Dot>(x, m.W0), m.b0, "numpy"));
  return std::make_shared<op::Add>(std::make_shared<op::Dot>(h, m.W1), m.b1, "numpy");
}

// Rows per rank of `n` examples split over `size` ranks: every rank compiles and runs the
// same shapes (a graph is the same computation on every rank, which the agreement check
// compares), the ranks with fewer examples padding theirs with rows of weight 0.
size_t padded_rows(size_t n, int size) { return (n + static_cast<size_t>(size) - 1) / static_cast<size_t>(size); }

// One training step for a local batch of `local` rows (padded: weight 0 in M) out of a global
// batch of `global` examples: loss = sum of this rank's weighted cross-entropies / global, so
// the AllReduce sum of the gradients is the gradient of the global batch's mean loss.
std::shared_ptr<runtime::Executable> make_step(runtime::Backend& backend, const Model& m,
                                               size_t local, size_t global, float lr,
                                               const std::shared_ptr<distributed::Communicator>& comm) {
  auto X = std::make_shared<op::Parameter>(element::f32, Shape{local, 784});
  auto Y = std::make_shared<op::Parameter>(element::f32, Shape{local, 10});  // one-hot
  auto M = std::make_shared<op::Parameter>(element::f32, Shape{local});      // 1: a real row
  Output logits = logits_of(m, X);
  // Stable cross-entropy: logsumexp(l) - sum(y * l), with the maximum subtracted.
  auto mx = std::make_shared<op::Broadcast>(std::make_shared<op::Max>(logits, AxisSet{1}),
                                            Shape{local, 10}, AxisSet{1});
  auto shifted = std::make_shared<op::Subtract>(logits, mx);
  auto lse = std::make_shared<op::Log>(
      std::make_shared<op::Sum>(std::make_shared<op::Exp>(shifted), AxisSet{1}));
  auto picked = std::make_shared<op::Sum>(std::make_shared<op::Multiply>(Y, shifted), AxisSet{1});
  auto total = std::make_shared<op::Sum>(
      std::make_shared<op::Multiply>(std::make_shared<op::Subtract>(lse, picked), M), AxisSet{0});
  auto inv_global = std::make_shared<op::Constant>(element::f32, Shape{},
                                                   std::vector<float>{1.0f / static_cast<float>(global)});
  Output loss = std::make_shared<op::Multiply>(total, inv_global);

  auto one = std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{1.0f});
  autodiff::Adjoints adjoints(OutputVector{loss}, OutputVector{one});
  auto lr_c = std::make_shared<op::Constant>(element::f32, Shape{}, std::vector<float>{lr});
  NodeVector sinks;
  for (const auto& w : {m.W0, m.b0, m.W1, m.b1}) {
    auto grad = adjoints.backprop_node(w);
    // The seeds' AllReduce, injected after backprop.
    auto sum_grad = std::make_shared<op::AllReduce>(grad, distributed::ReduceOp::sum, comm);
    auto next = std::make_shared<op::Subtract>(w, std::make_shared<op::Multiply>(sum_grad, lr_c, "numpy"));
    sinks.push_back(std::make_shared<op::Assign>(w, next));
  }
  auto global_loss = std::make_shared<op::AllReduce>(loss, distributed::ReduceOp::sum, comm);
  auto f = std::make_shared<Function>(OutputVector{global_loss}, sinks, ParameterVector{X, Y, M},
                                      "train_step");
  return backend.compile(f);
}

// What every part of a run needs: the options, this rank among the others, the backend
// (created once the data and the model are ready).
struct Run {
  Options opt;
  std::shared_ptr<distributed::Communicator> comm;
  int rank, size;
  std::shared_ptr<runtime::Backend> backend;
};

// The training and test splits (a directory with only the t10k files: 8k/2k), the training
// split cut to --max-train.
void load_data(const Options& opt, Split& train, Split& test) {
  if (exists(opt.data_dir + "/train-images-idx3-ubyte.gz") ||
      exists(opt.data_dir + "/train-images-idx3-ubyte")) {
    train = load_split(opt.data_dir, "train");
    test = load_split(opt.data_dir, "t10k");
  } else {  // only the 10k test split: 8k/2k
    Split all = load_split(opt.data_dir, "t10k");
    train = take(all, 0, 8000);
    test = take(all, 8000, all.size());
  }
  if (opt.max_train && opt.max_train < train.size()) train = take(train, 0, opt.max_train);
}

// Every rank builds the same initial weights from the same seed (the Python example
// broadcasts them from rank 0 instead).
Model initial_model(size_t hidden) {
  std::mt19937 rng(0);
  return Model{variable({784, hidden}, rng, std::sqrt(2.0f / 784), "W0"),
               variable({hidden}, rng, 0.0f, "b0"),
               variable({hidden, 10}, rng, std::sqrt(2.0f / static_cast<float>(hidden)), "W1"),
               variable({10}, rng, 0.0f, "b1")};
}

// Evaluation: correct predictions on this rank's test shard [t0, t1), summed over ranks. The
// shard is padded to the same rows on every rank with labels -1, which no prediction equals.
struct Evaluation {
  size_t t0, t1, rows;
  std::shared_ptr<runtime::Executable> exe;
  std::vector<float> images;
  std::vector<int64_t> labels;
};

Evaluation make_evaluation(const Run& run, const Model& m, const Split& test) {
  auto [t0, t1] = shard(test.size(), run.rank, run.size);
  size_t nt = padded_rows(test.size(), run.size);
  auto XT = std::make_shared<op::Parameter>(element::f32, Shape{nt, 784});
  auto YT = std::make_shared<op::Parameter>(element::i64, Shape{nt});
  auto hits = std::make_shared<op::Sum>(
      std::make_shared<op::Convert>(
          std::make_shared<op::Equal>(std::make_shared<op::ArgMax>(logits_of(m, XT), 1, element::i64), YT),
          element::i64),
      AxisSet{0});
  auto eval = run.backend->compile(std::make_shared<Function>(
      OutputVector{std::make_shared<op::AllReduce>(hits, distributed::ReduceOp::sum, run.comm)},
      ParameterVector{XT, YT}, "eval"));
  std::vector<float> images(nt * 784, 0.0f);
  std::copy(test.images.begin() + static_cast<std::ptrdiff_t>(t0 * 784),
            test.images.begin() + static_cast<std::ptrdiff_t>(t1 * 784), images.begin());
  std::vector<int64_t> labels(nt, -1);
  for (size_t i = t0; i < t1; ++i) labels[i - t0] = test.labels[i];
  return {t0, t1, nt, eval, std::move(images), std::move(labels)};
}

double accuracy(const Run& run, Evaluation& ev, const Split& test) {
  size_t nt = ev.rows;
  int64_t correct = 0;
  auto tx = run.backend->create_tensor(element::f32, Shape{nt, 784}, ev.images.data());
  auto ty = run.backend->create_tensor(element::i64, Shape{nt}, ev.labels.data());
  auto tc = run.backend->create_tensor(element::i64, Shape{}, &correct);
  ev.exe->call({tc}, {tx, ty});
  return static_cast<double>(correct) / static_cast<double>(test.size());
}

using Steps = std::map<std::pair<size_t, size_t>, std::shared_ptr<runtime::Executable>>;

// One epoch: this rank's shard of each global batch of the shuffled training split. Returns
// the sum over batches of the global batch's mean loss times its size.
double train_epoch(const Run& run, const Model& m, Steps& steps, const Split& train,
                   const std::vector<size_t>& order) {
  const Options& opt = run.opt;
  double loss_sum = 0;
  for (size_t b = 0; b < train.size(); b += opt.batch_size) {
    size_t global = std::min(opt.batch_size, train.size() - b);
    auto [s0, s1] = shard(global, run.rank, run.size);
    size_t local = padded_rows(global, run.size);
    auto& step = steps[{local, global}];
    if (!step) step = make_step(*run.backend, m, local, global, opt.lr, run.comm);
    std::vector<float> x(local * 784, 0.0f), y(local * 10, 0.0f), mask(local, 0.0f);
    for (size_t i = 0; i < s1 - s0; ++i) {
      size_t e = order[b + s0 + i];
      std::memcpy(&x[i * 784], &train.images[e * 784], 784 * sizeof(float));
      y[i * 10 + static_cast<size_t>(train.labels[e])] = 1.0f;
      mask[i] = 1.0f;
    }
    float loss = 0;
    auto tx = run.backend->create_tensor(element::f32, Shape{local, 784}, x.data());
    auto ty = run.backend->create_tensor(element::f32, Shape{local, 10}, y.data());
    auto tm = run.backend->create_tensor(element::f32, Shape{local}, mask.data());
    auto tl = run.backend->create_tensor(element::f32, Shape{}, &loss);
    step->call({tl}, {tx, ty, tm});
    loss_sum += static_cast<double>(loss) * static_cast<double>(global);
  }
  return loss_sum;
}

// Trains and evaluates; the exit status (1: below --min-accuracy).
int train_and_evaluate(Run run) {
  const Options& opt = run.opt;
  bool lead = run.rank == 0;
  Split train, test;
  load_data(opt, train, test);
  if (opt.batch_size < static_cast<size_t>(run.size))
    throw std::invalid_argument("--batch-size is smaller than the number of ranks");
  Model m = initial_model(opt.hidden);
  run.backend = runtime::Backend::create("CPU");
  Steps steps;
  Evaluation ev = make_evaluation(run, m, test);
  if (lead)
    std::cout << "dist_mnist_mlp: " << run.size << " rank(s), 784-" << opt.hidden << "-10, "
              << train.size() << " training / " << test.size() << " test examples, global batch "
              << opt.batch_size << ", lr " << opt.lr << std::endl;
  double acc = 0;
  std::vector<size_t> order(train.size());
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(1000 + static_cast<unsigned>(epoch)));
    auto start = std::chrono::steady_clock::now();
    double loss_sum = train_epoch(run, m, steps, train, order);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    acc = accuracy(run, ev, test);
    if (lead)
      std::cout << "epoch " << epoch + 1 << "/" << opt.epochs << ": loss "
                << loss_sum / static_cast<double>(train.size()) << ", test accuracy "
                << 100.0 * acc << "%, " << seconds << " s, "
                << static_cast<double>(train.size()) / seconds << " samples/s" << std::endl;
  }
  if (acc < opt.min_accuracy) {
    if (lead)
      std::cerr << "dist_mnist_mlp: test accuracy " << acc << " is below --min-accuracy "
                << opt.min_accuracy << std::endl;
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options opt = parse(argc, argv);
    std::shared_ptr<distributed::Communicator> comm = distributed::get_default_communicator();
    int rank = comm->rank(), size = comm->size();
    return train_and_evaluate(Run{opt, comm, rank, size, nullptr});
  } catch (const std::exception& e) {
    std::cerr << "dist_mnist_mlp: error: " << e.what() << std::endl;
    // End every rank: the others may be waiting in a collective for this one.
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
  }
}
