// The model and its data: a small MLP fitted to a synthetic regression target.
// Replace synthetic_data() with your data and Net with your model; train.cpp and
// tests/model_test.cpp only use what this header declares.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace model {

struct NetImpl : torch::nn::Module {
  NetImpl(int64_t inputs, int64_t hidden)
      : fc1(register_module("fc1", torch::nn::Linear(inputs, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, hidden))),
        out(register_module("out", torch::nn::Linear(hidden, 1))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = torch::gelu(fc1->forward(x));
    x = torch::gelu(fc2->forward(x));
    return out->forward(x);
  }

  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  torch::nn::Linear out;
};
TORCH_MODULE(Net);

struct Data {
  torch::Tensor inputs;
  torch::Tensor targets;
};

// y = sin(x . w) + noise, with x and w drawn from a fixed seed: the same data every run.
inline Data synthetic_data(int64_t samples, int64_t features, uint64_t seed) {
  torch::manual_seed(seed);
  auto inputs = torch::randn({samples, features});
  auto weights = torch::randn({features, 1}) / static_cast<double>(features);
  auto targets = torch::sin(inputs.matmul(weights) * 3.0) + 0.05 * torch::randn({samples, 1});
  return {inputs, targets};
}

// One optimisation step on the whole data set; returns the loss before the update.
inline double train_step(Net& net, torch::optim::Optimizer& optimizer, const Data& data) {
  net->train();
  optimizer.zero_grad();
  auto loss = torch::mse_loss(net->forward(data.inputs), data.targets);
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

}  // namespace model
