// Trains the model of model.h on its synthetic data and prints the loss.
//
//   train [--steps N] [--lr RATE] [--log-every N] [--seed N] [--device auto|cpu|cuda]
//         [--out DIR]
//
// --device auto (the default) trains on the first GPU when libtorch sees one (a CUDA
// variant on a machine with a GPU), else on the CPU.
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
  std::string device = "auto";
  std::string out;
};

[[noreturn]] void usage(const std::string& problem) {
  std::cerr << "train: " << problem << "\n"
            << "usage: train [--steps N] [--lr RATE] [--log-every N] [--seed N]"
               " [--device auto|cpu|cuda] [--out DIR]\n";
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
    } else if (arg == "--device") {
      options.device = value;
    } else if (arg == "--out") {
      options.out = value;
    } else {
      usage("unknown option " + arg);
    }
  }
  if (options.steps < 1 || options.log_every < 1 || options.lr <= 0) {
    usage("--steps, --log-every and --lr must be positive");
  }
  if (options.device != "auto" && options.device != "cpu" && options.device != "cuda") {
    usage("--device must be auto, cpu or cuda");
  }
  return options;
}

torch::Device pick_device(const std::string& wanted) {
  const bool cuda = torch::cuda::is_available();
  if (wanted == "cuda" && !cuda) {
    std::cerr << "train: --device cuda, but libtorch sees no GPU (a CPU variant, or no driver);"
              << " `fdl diagnose` says which\n";
    std::exit(2);
  }
  return (wanted == "cuda" || (wanted == "auto" && cuda)) ? torch::Device(torch::kCUDA, 0)
                                                         : torch::Device(torch::kCPU);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  const torch::Device device = pick_device(options.device);
  std::cout << "training on " << device;
  if (device.is_cuda()) {
    // device_count() is a DeviceIndex (an 8-bit integer): printed as a number, not a char
    std::cout << " (" << static_cast<int>(torch::cuda::device_count()) << " GPU(s) visible)";
  }
  std::cout << std::endl;
  // The data and the initial weights are drawn on the CPU (the same on every device).
  auto data = model::synthetic_data(512, 16, options.seed);
  data = {data.inputs.to(device), data.targets.to(device)};
  model::Net net(16, 64);
  net->to(device);
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
    net->to(torch::kCPU);  // a model file any machine loads
    torch::save(net, (out / "model.pt").string());
    std::ofstream file(out / "loss.txt");
    for (double value : losses) file << value << "\n";
    std::cout << "saved " << (out / "model.pt").string() << std::endl;
  }
  return 0;
}
