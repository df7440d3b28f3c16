// fdl libtorch verify --cmake: build a module, run a forward and backward pass, and on a
// GPU run the same on every visible device. Prints one "fdl-smoke ..." line per result.
#include <torch/torch.h>
#include <torch/version.h>

#include <exception>
#include <iostream>
#include <string>

namespace {

double step(const torch::Device& device) {
  torch::manual_seed(0);
  torch::nn::Linear linear(4, 2);
  linear->to(device);
  auto x = torch::ones({3, 4}, torch::TensorOptions().device(device));
  auto loss = linear->forward(x).pow(2).sum();
  loss.backward();
  return linear->weight.grad().abs().sum().item<double>();
}

}  // namespace

int main() {
  std::cout << "fdl-smoke torch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "."
            << TORCH_VERSION_PATCH << std::endl;
  std::cout << "fdl-smoke cpu " << (step(torch::kCPU) > 0 ? "ok" : "zero-gradient") << std::endl;
  bool failed = false;
  const bool cuda = torch::cuda::is_available();
  const auto devices = cuda ? torch::cuda::device_count() : 0;
  std::cout << "fdl-smoke cuda-devices " << devices << std::endl;
  for (size_t index = 0; index < devices; ++index) {
    const torch::Device device(torch::kCUDA, static_cast<torch::DeviceIndex>(index));
    try {
      std::cout << "fdl-smoke cuda:" << index << " "
                << (step(device) > 0 ? "ok" : "zero-gradient") << std::endl;
    } catch (const std::exception& error) {
      // "no kernel image is available for execution on the device": the arch is missing
      std::string text = error.what();
      std::cout << "fdl-smoke cuda:" << index << " error " << text.substr(0, text.find('\n'))
                << std::endl;
      failed = true;
    }
  }
  return failed ? 1 : 0;
}
