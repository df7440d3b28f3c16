//! A small MLP trained on synthetic data with tch-rs: a starting point for your model.
//!
//! The data is a noisy non-linear function of 8 inputs; the model, two hidden layers of
//! 64 units; the loop, Adam over shuffled mini-batches, one line per epoch:
//!
//!     epoch 3/20 loss=0.0412
//!
//! Run it with `fdl train -- --epochs 20 --lr 0.003` (a release build). It trains on the
//! first GPU when the active libtorch is a CUDA build and one is visible, else on the CPU.

use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Reduction, Tensor};

const INPUTS: i64 = 8;
const HIDDEN: i64 = 64;
const SAMPLES: i64 = 2048;
const BATCH: i64 = 64;

/// Command-line options: `--epochs N`, `--lr X`, `--seed N`.
struct Options {
    epochs: usize,
    lr: f64,
    seed: i64,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options { epochs: 10, lr: 3e-3, seed: 42 };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--epochs" => {
                options.epochs = value("--epochs")?.parse().map_err(|e| format!("--epochs: {e}"))?
            }
            "--lr" => options.lr = value("--lr")?.parse().map_err(|e| format!("--lr: {e}"))?,
            "--seed" => options.seed = value("--seed")?.parse().map_err(|e| format!("--seed: {e}"))?,
            "-h" | "--help" => {
                println!("usage: train [--epochs N] [--lr X] [--seed N]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if options.epochs == 0 {
        return Err("--epochs must be at least 1".into());
    }
    Ok(options)
}

/// The model: INPUTS -> HIDDEN -> HIDDEN -> 1, ReLU between.
fn model(root: &nn::Path) -> nn::Sequential {
    nn::seq()
        .add(nn::linear(root / "fc1", INPUTS, HIDDEN, Default::default()))
        .add_fn(|x| x.relu())
        .add(nn::linear(root / "fc2", HIDDEN, HIDDEN, Default::default()))
        .add_fn(|x| x.relu())
        .add(nn::linear(root / "fc3", HIDDEN, 1, Default::default()))
}

/// Synthetic regression data: y = sin(x . w) + 0.1 * x0^2 + noise.
fn dataset(device: Device) -> (Tensor, Tensor) {
    let x = Tensor::randn([SAMPLES, INPUTS], (Kind::Float, device));
    let w = Tensor::linspace(-1.0, 1.0, INPUTS, (Kind::Float, device)).view([INPUTS, 1]);
    let noise = Tensor::randn([SAMPLES, 1], (Kind::Float, device)) * 0.05;
    let y = x.matmul(&w).sin() + x.narrow(1, 0, 1).square() * 0.1 + noise;
    (x, y)
}

/// Train for `epochs`; returns the mean loss of each epoch.
fn train(options: &Options, device: Device, mut report: impl FnMut(usize, f64)) -> Vec<f64> {
    tch::manual_seed(options.seed);
    let (x, y) = dataset(device);
    let vs = nn::VarStore::new(device);
    let net = model(&vs.root());
    let mut opt = nn::Adam::default().build(&vs, options.lr).expect("the optimiser");
    let mut losses = Vec::with_capacity(options.epochs);
    for epoch in 1..=options.epochs {
        let order = Tensor::randperm(SAMPLES, (Kind::Int64, device));
        let (mut total, mut batches) = (0.0, 0usize);
        for start in (0..SAMPLES).step_by(BATCH as usize) {
            let index = order.narrow(0, start, BATCH.min(SAMPLES - start));
            let loss = net
                .forward(&x.index_select(0, &index))
                .mse_loss(&y.index_select(0, &index), Reduction::Mean);
            opt.backward_step(&loss);
            total += loss.double_value(&[]);
            batches += 1;
        }
        let mean = total / batches as f64;
        report(epoch, mean);
        losses.push(mean);
    }
    losses
}

fn main() {
    let options = match parse_options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("error: {message}");
            std::process::exit(2);
        }
    };
    let device = Device::cuda_if_available();
    println!("training on {device:?}");
    let epochs = options.epochs;
    let losses = train(&options, device, |epoch, loss| {
        println!("epoch {epoch}/{epochs} loss={loss:.4}");
    });
    println!(
        "trained {epochs} epochs: loss {:.6} -> {:.6}",
        losses[0],
        losses[losses.len() - 1]
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_lowers_the_loss() {
        let options = Options { epochs: 5, lr: 3e-3, seed: 0 };
        let losses = train(&options, Device::Cpu, |_, _| {});
        assert_eq!(losses.len(), 5);
        assert!(losses[4] < losses[0], "losses: {losses:?}");
    }
}
