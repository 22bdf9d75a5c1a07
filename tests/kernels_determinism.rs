//! Every kernel gives bitwise the same result on every pool kind and thread count.
//!
//! One small ResNet-like training step (conv, batch-norm, relu, residual add, pooling, a fully
//! connected GEMM, softmax cross-entropy, every gradient, an SGD update) plus a layer-norm
//! pass, run on each pool kind with 1, 2 and 4 threads; the checksum of every tensor it makes
//! must match the first run's. Sizes are big enough that the cost model splits each kernel
//! over several threads (checked through the pool's task counters), small enough for seconds.
mod kernels_support;

use enginetop::kernels::BatchStats;
use enginetop::kernels::*;
use enginetop::pool::{PoolKind, ThreadPool};

/// Checksums of every tensor one step makes, in the order it makes them.
type Checksums = Vec<(&'static str, u64)>;

struct Step<'a> {
    pool: &'a dyn ThreadPool,
    checksums: Checksums,
}

impl Step<'_> {
    fn keep(&mut self, name: &'static str, tensor: &Tensor) {
        self.checksums.push((name, tensor.checksum()));
    }
}

const BATCH: usize = 8;
const CLASSES: usize = 10;

fn resnet_like_step(step: &mut Step<'_>) {
    let pool = step.pool;
    let same = Conv2dParams {
        stride: 1,
        padding: 1,
    };
    let input = Tensor::random(&[BATCH, 16, 32, 32], 1);
    let mut conv_weight = Tensor::random(&[32, 16, 3, 3], 2);
    let (gamma, beta) = (Tensor::random(&[32], 3), Tensor::random(&[32], 4));
    let fc_weight = Tensor::random(&[32, CLASSES], 5);
    let bn = NormParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: 1e-5,
    };
    let act_shape = [BATCH, 32, 32, 32];
    let pool_params = PoolParams {
        window: 3,
        stride: 2,
        padding: 1,
    };

    // Forward.
    let mut conv_out = Tensor::zeros(&act_shape);
    conv2d(pool, &input, &conv_weight, same, &mut conv_out).unwrap();
    step.keep("conv2d", &conv_out);
    let (mut bn_out, mut stats) = (Tensor::zeros(&act_shape), BatchStats::zeros(32));
    batch_norm_train(pool, &conv_out, &bn, &mut bn_out, &mut stats).unwrap();
    step.keep("batch_norm_train", &bn_out);
    let mut relu_out = Tensor::zeros(&act_shape);
    relu(pool, &bn_out, &mut relu_out).unwrap();
    step.keep("relu", &relu_out);
    let mut residual = Tensor::zeros(&act_shape);
    add(pool, &relu_out, &conv_out, &mut residual).unwrap();
    step.keep("add", &residual);
    let mut pooled = Tensor::zeros(&[BATCH, 32, 16, 16]);
    max_pool(pool, &residual, pool_params, &mut pooled).unwrap();
    step.keep("max_pool", &pooled);
    let mut features = Tensor::zeros(&[BATCH, 32]);
    global_avg_pool(pool, &pooled, &mut features).unwrap();
    step.keep("avg_pool", &features);
    let mut logits = Tensor::zeros(&[BATCH, CLASSES]);
    matmul(pool, &features, &fc_weight, &mut logits).unwrap();
    step.keep("gemm", &logits);
    let mut probabilities = Tensor::zeros(&[BATCH, CLASSES]);
    softmax(pool, &logits, &mut probabilities).unwrap();
    step.keep("softmax", &probabilities);

    // Backward.
    let labels: Vec<usize> = (0..BATCH).map(|i| (i * 7) % CLASSES).collect();
    let mut grad_logits = Tensor::zeros(&[BATCH, CLASSES]);
    softmax_cross_entropy_backward(pool, &probabilities, &labels, &mut grad_logits).unwrap();
    step.keep("softmax_cross_entropy_backward", &grad_logits);
    let mut grad_features = Tensor::zeros(&[BATCH, 32]);
    let spec = GemmSpec::new(BATCH, 32, CLASSES).transpose_b();
    gemm(
        pool,
        &spec,
        &grad_logits.data,
        &fc_weight.data,
        &mut grad_features.data,
    )
    .unwrap();
    step.keep("gemm backward", &grad_features);
    let mut grad_pooled = Tensor::zeros(&[BATCH, 32, 16, 16]);
    global_avg_pool_backward(pool, &grad_features, &mut grad_pooled).unwrap();
    step.keep("avg_pool_backward", &grad_pooled);
    let mut grad_residual = Tensor::zeros(&act_shape);
    max_pool_backward(
        pool,
        &residual,
        &grad_pooled,
        pool_params,
        &mut grad_residual,
    )
    .unwrap();
    step.keep("max_pool_backward", &grad_residual);
    let mut grad_bn_out = Tensor::zeros(&act_shape);
    relu_backward(pool, &bn_out, &grad_residual, &mut grad_bn_out).unwrap();
    step.keep("relu_backward", &grad_bn_out);
    let mut bn_grads = NormGrads::zeros(&act_shape, 32);
    batch_norm_backward(pool, &conv_out, &grad_bn_out, &bn, &stats, &mut bn_grads).unwrap();
    step.keep("batch_norm_backward", &bn_grads.grad_input);
    step.keep("batch_norm_backward gamma", &bn_grads.grad_gamma);
    let mut grad_input = Tensor::zeros(&input.shape);
    conv2d_backward_data(
        pool,
        &bn_grads.grad_input,
        &conv_weight,
        same,
        &mut grad_input,
    )
    .unwrap();
    step.keep("conv2d_backward_data", &grad_input);
    let mut grad_weight = Tensor::zeros(&conv_weight.shape);
    conv2d_backward_weights(pool, &input, &bn_grads.grad_input, same, &mut grad_weight).unwrap();
    step.keep("conv2d_backward_weights", &grad_weight);

    // Update.
    let mut velocity = Tensor::zeros(&conv_weight.shape);
    let sgd = SgdParams {
        learning_rate: 0.05,
        momentum: 0.9,
        weight_decay: 1e-4,
    };
    sgd_update(
        pool,
        &mut conv_weight,
        &grad_weight,
        sgd,
        Some(&mut velocity),
    )
    .unwrap();
    step.keep("sgd", &conv_weight);
}

fn layer_norm_pass(step: &mut Step<'_>) {
    let (rows, cols) = (1024, 256);
    let input = Tensor::random(&[rows, cols], 10);
    let (gamma, beta) = (Tensor::random(&[cols], 11), Tensor::random(&[cols], 12));
    let params = NormParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: 1e-5,
    };
    let mut output = Tensor::zeros(&[rows, cols]);
    layer_norm(step.pool, &input, &params, &mut output).unwrap();
    step.keep("layer_norm", &output);
    let mut grads = NormGrads::zeros(&[rows, cols], cols);
    layer_norm_backward(step.pool, &input, &output, &params, &mut grads).unwrap();
    step.keep("layer_norm_backward", &grads.grad_input);
    step.keep("layer_norm_backward gamma", &grads.grad_gamma);
    let mut big = Tensor::zeros(&[300, 200]);
    let (a, b) = (
        Tensor::random(&[300, 150], 13),
        Tensor::random(&[150, 200], 14),
    );
    matmul(step.pool, &a, &b, &mut big).unwrap();
    step.keep("gemm 300x200x150", &big);
}

fn checksums_on(kind: PoolKind, threads: usize) -> Checksums {
    let pool = kernels_support::pool(kind, threads);
    let mut step = Step {
        pool: pool.as_dyn(),
        checksums: Vec::new(),
    };
    resnet_like_step(&mut step);
    layer_norm_pass(&mut step);
    let stats = pool.stats();
    if threads > 1 {
        assert!(
            stats.tasks_run() > 0,
            "{kind} x{threads}: no kernel went parallel; grow the sizes"
        );
    }
    step.checksums
}

#[test]
fn every_kernel_is_bitwise_identical_on_every_pool_and_thread_count() {
    let baseline = checksums_on(PoolKind::Simple, 1);
    for kind in PoolKind::ALL {
        for threads in [1, 2, 4] {
            let checksums = checksums_on(kind, threads);
            for (want, got) in baseline.iter().zip(&checksums) {
                assert_eq!(
                    got, want,
                    "{} differs on {kind} with {threads} threads",
                    want.0
                );
            }
            assert_eq!(checksums.len(), baseline.len());
        }
    }
}
