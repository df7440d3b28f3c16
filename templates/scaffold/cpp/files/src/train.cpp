// Trains the model of model.h on its synthetic data and prints the loss.
//
//   train [--steps N] [--lr RATE] [--log-every N] [--seed N] [--out DIR]
//
// With --out, the trained model is saved to DIR/model.pt and the loss of every
// step to DIR/loss.txt.
#include "model.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

struct Options {
  int steps = 200;
  double lr = 0.01;
  int log_every = 10;
  uint64_t seed = 0;
  std::string out;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "train: " << problem << "\n"
            << "usage: train [--steps N] [--lr RATE] [--log-every N] [--seed N] [--out DIR]\n";
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") usage("trains a small model on synthetic data");
    if (i + 1 >= argc) usage("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--steps") {
      options.steps = std::atoi(value.c_str());
    } else if (arg == "--lr") {
      options.lr = std::atof(value.c_str());
    } else if (arg == "--log-every") {
      options.log_every = std::atoi(value.c_str());
    } else if (arg == "--seed") {
      options.seed = std::strtoull(value.c_str(), nullptr, 10);
    } else if (arg == "--out") {
      options.out = value;
    } else {
      usage("unknown option " + arg);
    }
  }
  if (options.steps < 1 || options.log_every < 1 || options.lr <= 0) {
    usage("--steps, --log-every and --lr must be positive");
  }
  return options;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const auto data = model::synthetic_data(512, 16, options.seed);
  model::Net net(16, 64);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(options.lr));

  std::vector<double> losses;
  for (int step = 1; step <= options.steps; ++step) {
    losses.push_back(model::train_step(net, optimizer, data));
    if (step == 1 || step == options.steps || step % options.log_every == 0) {
      std::cout << "step " << step << " loss " << losses.back() << std::endl;
    }
  }
  std::cout << "trained " << options.steps << " steps: loss " << losses.front() << " -> "
            << losses.back() << std::endl;

  if (!options.out.empty()) {
    const std::filesystem::path out(options.out);
    std::filesystem::create_directories(out);
    torch::save(net, (out / "model.pt").string());
    std::ofstream file(out / "loss.txt");
    for (double value : losses) file << value << "\n";
    std::cout << "saved " << (out / "model.pt").string() << std::endl;
  }
  return 0;
}
