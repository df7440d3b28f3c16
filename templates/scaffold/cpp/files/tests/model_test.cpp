// A few training steps must at least halve the loss, and the model must map a batch
// of inputs to one output each. Run with `fdl test` (ctest).
#include "model.h"

#include <iostream>

int main() {
  const auto data = model::synthetic_data(256, 16, 1);
  model::Net net(16, 64);
  torch::optim::Adam optimizer(net->parameters(), torch::optim::AdamOptions(0.01));

  const auto output = net->forward(data.inputs);
  if (output.dim() != 2 || output.size(0) != 256 || output.size(1) != 1) {
    std::cerr << "FAIL: the model's output has shape " << output.sizes() << ", not [256, 1]\n";
    return 1;
  }
  const double first = model::train_step(net, optimizer, data);
  double last = first;
  for (int step = 0; step < 60; ++step) last = model::train_step(net, optimizer, data);
  std::cout << "loss " << first << " -> " << last << "\n";
  if (!(last < 0.5 * first)) {
    std::cerr << "FAIL: 60 steps did not halve the loss\n";
    return 1;
  }
  std::cout << "PASS\n";
  return 0;
}
