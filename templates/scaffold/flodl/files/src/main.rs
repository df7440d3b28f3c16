//! A floDl training program: a small model with a residual connection, trained with
//! Adam and a cosine learning-rate schedule. Replace the data and the model with yours.
//!
//! `fdl train -- --epochs 20` passes arguments to the program (default 100 epochs).
//!
//! New to Rust?  https://flodl.dev/guide/rust-primer
//! Stuck?        https://flodl.dev/guide/troubleshooting

use flodl::monitor::Monitor;
use flodl::*;

/// The number of epochs: `--epochs N` on the command line, else 100.
fn epochs_from_args() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.windows(2)
        .find(|pair| pair[0] == "--epochs")
        .and_then(|pair| pair[1].parse().ok())
        .unwrap_or(100)
}

fn main() -> Result<()> {
    let num_epochs = epochs_from_args();
    // The same initial weights and data on every run (libtorch's generators): runs compare.
    manual_seed(42);

    // --- Model ---
    let model = FlowBuilder::from(Linear::new(4, 32)?)
        .through(GELU)
        .through(LayerNorm::new(32)?)
        .also(Linear::new(32, 32)?) // residual connection
        .through(Linear::new(32, 1)?)
        .build()?;

    // --- Optimizer ---
    let params = model.parameters();
    let mut optimizer = Adam::new(&params, 0.001);
    let scheduler = CosineScheduler::new(0.001, 1e-6, num_epochs);
    model.train();

    // --- Data: replace with your data loading ---
    let opts = TensorOptions::default();
    let batches: Vec<(Tensor, Tensor)> = (0..32)
        .map(|_| {
            let x = Tensor::randn(&[16, 4], opts).unwrap();
            let y = Tensor::randn(&[16, 1], opts).unwrap();
            (x, y)
        })
        .collect();

    // --- Training loop ---
    let mut monitor = Monitor::new(num_epochs);
    // monitor.serve(3000)?;              // live dashboard
    // monitor.watch(&model);             // the graph as SVG in the dashboard
    // monitor.save_html("report.html");  // an HTML report
    let mut first_loss = None;
    let mut last_loss = 0.0;
    for epoch in 0..num_epochs {
        let started = std::time::Instant::now();
        let mut epoch_loss = 0.0;
        for (input_t, target_t) in &batches {
            let input = Variable::new(input_t.clone(), true);
            let target = Variable::new(target_t.clone(), false);

            optimizer.zero_grad();
            let pred = model.forward(&input)?;
            let loss = mse_loss(&pred, &target)?;
            loss.backward()?;
            clip_grad_norm(&params, 1.0)?;
            optimizer.step()?;

            epoch_loss += loss.item()?;
        }
        let avg_loss = epoch_loss / batches.len() as f64;
        first_loss.get_or_insert(avg_loss);
        last_loss = avg_loss;
        let lr = scheduler.lr(epoch);
        optimizer.set_lr(lr);
        monitor.log(epoch, started.elapsed(), &[("loss", avg_loss), ("lr", lr)]);
    }
    monitor.finish();
    println!(
        "trained {num_epochs} epochs: loss {:.6} -> {:.6}",
        first_loss.unwrap_or(last_loss),
        last_loss
    );
    Ok(())
}
