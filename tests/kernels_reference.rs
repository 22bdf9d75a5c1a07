//! Every kernel against a naive reference (straight loops in `f64`) on small random inputs;
//! backward kernels against finite differences of the naive forward.
mod kernels_support;

use enginetop::kernels::BatchStats;
use enginetop::kernels::*;
use enginetop::pool::{Pool, PoolKind};
use kernels_support as naive;
use kernels_support::{assert_close, f64s, numeric_grad};

/// Forward kernels: `f32` against `f64` sums of at most a few hundred terms.
const FORWARD_TOLERANCE: f64 = 1e-4;
/// Backward kernels against central differences (step 1e-4 in `f64`).
const GRADIENT_TOLERANCE: f64 = 2e-3;

fn pool() -> Pool {
    naive::pool(PoolKind::Eigen, 2)
}

#[test]
fn gemm_matches_naive_for_every_transpose_and_scale() {
    let pool = pool();
    let shapes = [
        (1, 1, 1),
        (7, 5, 3),
        (130, 33, 17),
        (200, 9, 64),
        (192, 20, 30),
        (3, 150, 2),
    ];
    for (seed, &(m, n, k)) in shapes.iter().enumerate() {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            let a = Tensor::random(&[m * k], seed as u64);
            let b = Tensor::random(&[k * n], seed as u64 + 100);
            let c_old = Tensor::random(&[m * n], seed as u64 + 200);
            let mut spec = GemmSpec::new(m, n, k).alpha(0.5).accumulate();
            if trans_a {
                spec = spec.transpose_a();
            }
            if trans_b {
                spec = spec.transpose_b();
            }
            let mut c = c_old.clone();
            let work = gemm(pool.as_dyn(), &spec, &a.data, &b.data, &mut c.data).unwrap();
            assert_eq!(work.flops, 2.0 * (m * n * k) as f64);
            let product = naive::gemm(&f64s(&a), &f64s(&b), (m, n, k), (trans_a, trans_b));
            let want: Vec<f64> = product
                .iter()
                .zip(f64s(&c_old))
                .map(|(p, c)| 0.5 * p + c)
                .collect();
            assert_close(
                &format!("gemm {m}x{n}x{k} trans {trans_a}/{trans_b}"),
                &c.data,
                &want,
                FORWARD_TOLERANCE,
            );
        }
    }
}

#[test]
fn gemm_without_accumulate_ignores_nan_in_the_output() {
    let pool = pool();
    let a = Tensor::random(&[4, 3], 1);
    let b = Tensor::random(&[3, 2], 2);
    let mut c = Tensor::filled(&[4, 2], f32::NAN);
    matmul(pool.as_dyn(), &a, &b, &mut c).unwrap();
    let want = naive::gemm(&f64s(&a), &f64s(&b), (4, 2, 3), (false, false));
    assert_close("matmul", &c.data, &want, FORWARD_TOLERANCE);
}

#[test]
fn gemm_rejects_wrong_lengths_by_name() {
    let pool = pool();
    let message = gemm(
        pool.as_dyn(),
        &GemmSpec::new(2, 2, 2),
        &[0.0; 4],
        &[0.0; 3],
        &mut [0.0; 4],
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        message,
        "gemm: b holds 3 values but m=2, n=2, k=2 needs 4; pass matching sizes"
    );
}

fn conv_cases() -> Vec<naive::Conv> {
    let conv = |input, out_channels, kernel, stride, padding| naive::Conv {
        input,
        out_channels,
        kernel,
        stride,
        padding,
    };
    vec![
        conv([2, 3, 7, 6], 4, (3, 3), 1, 1),
        conv([1, 2, 9, 9], 5, (3, 3), 2, 0),
        conv([3, 4, 5, 5], 6, (1, 1), 1, 0),
        conv([2, 3, 8, 7], 3, (5, 3), 2, 2),
        // Output planes over BATCHED_MAX_PIXELS with more than one image: the per-image path
        // (the cases above with more than one image take the batched one).
        conv([2, 3, 12, 12], 4, (3, 3), 1, 1),
        conv([2, 5, 12, 12], 3, (1, 1), 1, 0),
        conv([1, 2, 6, 6], 140, (3, 3), 1, 1),
        // Over 512 output pixels per image, strided or pointwise so that the blocked path
        // (stride 1, bigger than 1x1) does not take them: the per-image weight gradient, which
        // splits the images, not their pixels, into parts.
        conv([2, 2, 48, 48], 3, (3, 3), 2, 1),
        conv([2, 3, 25, 25], 2, (1, 1), 1, 0),
    ]
}

fn conv_params(case: &naive::Conv) -> Conv2dParams {
    Conv2dParams {
        stride: case.stride,
        padding: case.padding,
    }
}

#[test]
fn conv2d_matches_direct_convolution() {
    let pool = pool();
    let cases = conv_cases().into_iter().chain(early_stage_conv_cases());
    for (seed, case) in cases.collect::<Vec<_>>().iter().enumerate() {
        let input = Tensor::random(&case.input, seed as u64);
        let weight = Tensor::random(&case.weight_shape(), seed as u64 + 50);
        let mut output = Tensor::filled(&case.output_shape(), f32::NAN);
        conv2d(
            pool.as_dyn(),
            &input,
            &weight,
            conv_params(case),
            &mut output,
        )
        .unwrap();
        let want = case.forward(&f64s(&input), &f64s(&weight));
        assert_close(
            &format!("conv2d {case:?}"),
            &output.data,
            &want,
            FORWARD_TOLERANCE,
        );
    }
}

#[test]
fn conv2d_gradients_match_finite_differences() {
    let pool = pool();
    for (seed, case) in conv_cases().iter().take(6).enumerate() {
        assert_conv_gradients_match(&pool, case, seed as u64);
    }
}

/// Both gradients of `case`'s convolution, on random tensors from `seed`, against finite
/// differences of the naive forward.
fn assert_conv_gradients_match(pool: &Pool, case: &naive::Conv, seed: u64) {
    let input = Tensor::random(&case.input, seed);
    let weight = Tensor::random(&case.weight_shape(), seed + 50);
    let grad_output = Tensor::random(&case.output_shape(), seed + 99);
    let params = conv_params(case);
    let (x, w, dy) = (f64s(&input), f64s(&weight), f64s(&grad_output));

    let mut grad_input = Tensor::filled(&case.input, f32::NAN);
    conv2d_backward_data(
        pool.as_dyn(),
        &grad_output,
        &weight,
        params,
        &mut grad_input,
    )
    .unwrap();
    let want = numeric_grad(|x| case.forward(x, &w), &x, &dy);
    let what = format!("conv2d_backward_data {case:?}");
    assert_close(&what, &grad_input.data, &want, GRADIENT_TOLERANCE);

    let mut grad_weight = Tensor::filled(&case.weight_shape(), f32::NAN);
    conv2d_backward_weights(
        pool.as_dyn(),
        &input,
        &grad_output,
        params,
        &mut grad_weight,
    )
    .unwrap();
    let want = numeric_grad(|w| case.forward(&x, w), &w, &dy);
    let what = format!("conv2d_backward_weights {case:?}");
    assert_close(&what, &grad_weight.data, &want, GRADIENT_TOLERANCE);
}

/// Shapes for the batched path's transposed input gradient (at most 128 pixels, its GEMM cut
/// into column blocks of 40 with a last of 24 for 144 patch rows), its direct weight gradient
/// (more output channels than pixels), 1-pixel planes, and one image.
fn late_stage_conv_cases() -> Vec<naive::Conv> {
    let conv = |input, out_channels| naive::Conv {
        input,
        out_channels,
        kernel: (3, 3),
        stride: 1,
        padding: 1,
    };
    vec![
        conv([2, 16, 4, 4], 8),
        conv([2, 3, 2, 2], 20),
        conv([3, 5, 1, 1], 7),
        conv([1, 3, 6, 6], 9),
    ]
}

#[test]
fn conv2d_gradients_match_finite_differences_on_late_stage_shapes() {
    let pool = pool();
    for (seed, case) in late_stage_conv_cases().iter().enumerate() {
        assert_conv_gradients_match(&pool, case, seed as u64 + 1000);
    }
}

/// Shapes for the blocked path (`conv/blocked.rs`: stride 1, planes of at least 128 pixels):
/// channel counts that no block size divides, one image, no padding (the input gradient then
/// pads by 2), a 5x5 kernel, a 3x1 one (its input gradient takes the `dcols` path), and planes
/// the path declines (169 pixels split into 13-pixel runs at best; 1 pixel).
fn early_stage_conv_cases() -> Vec<naive::Conv> {
    let conv = |input, out_channels, kernel, padding| naive::Conv {
        input,
        out_channels,
        kernel,
        stride: 1,
        padding,
    };
    vec![
        conv([2, 5, 16, 16], 7, (3, 3), 1),
        conv([1, 3, 16, 8], 6, (3, 3), 1),
        conv([2, 3, 14, 14], 4, (3, 3), 0),
        conv([1, 2, 12, 12], 3, (5, 5), 2),
        conv([2, 3, 12, 10], 2, (3, 1), 1),
        conv([1, 2, 13, 13], 3, (3, 3), 1),
        conv([1, 3, 1, 1], 4, (3, 3), 1),
    ]
}

#[test]
fn conv2d_gradients_match_finite_differences_on_early_stage_shapes() {
    let pool = pool();
    for (seed, case) in early_stage_conv_cases().iter().enumerate() {
        assert_conv_gradients_match(&pool, case, seed as u64 + 2000);
    }
}

#[test]
fn conv2d_errors_name_the_mismatch() {
    let pool = pool();
    let input = Tensor::zeros(&[1, 3, 5, 5]);
    let weight = Tensor::zeros(&[2, 4, 3, 3]);
    let mut output = Tensor::zeros(&[1, 2, 3, 3]);
    let error = conv2d(
        pool.as_dyn(),
        &input,
        &weight,
        Conv2dParams::default(),
        &mut output,
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "conv2d: input has 3 channels but the weight expects 4"
    );
    let weight = Tensor::zeros(&[2, 3, 3, 3]);
    let mut output = Tensor::zeros(&[1, 2, 5, 5]);
    let error = conv2d(
        pool.as_dyn(),
        &input,
        &weight,
        Conv2dParams::default(),
        &mut output,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("[1, 2, 5, 5] but must be [1, 2, 3, 3]"),
        "{error}"
    );
    let mut grad_weight = Tensor::zeros(&[2, 3, 3, 3]);
    let error = conv2d_backward_weights(
        pool.as_dyn(),
        &input,
        &output,
        Conv2dParams::default(),
        &mut grad_weight,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("conv2d_backward_weights: grad_output"),
        "{error}"
    );
}

struct BatchNormCase {
    input: Tensor,
    gamma: Tensor,
    beta: Tensor,
}

impl BatchNormCase {
    fn new(shape: [usize; 4], seed: u64) -> Self {
        let input = Tensor::random(&shape, seed);
        // Shift and scale the input so the statistics are not trivially (0, 1/3).
        let input =
            Tensor::from_vec(&shape, input.data.iter().map(|v| 3.0 * v + 0.5).collect()).unwrap();
        BatchNormCase {
            input,
            gamma: Tensor::random(&[shape[1]], seed + 1),
            beta: Tensor::random(&[shape[1]], seed + 2),
        }
    }

    fn params(&self) -> NormParams<'_> {
        NormParams {
            gamma: &self.gamma,
            beta: &self.beta,
            epsilon: 1e-5,
        }
    }

    fn shape(&self) -> [usize; 4] {
        self.input.shape.clone().try_into().unwrap()
    }
}

#[test]
fn batch_norm_inference_uses_the_running_statistics() {
    let pool = pool();
    let case = BatchNormCase::new([2, 3, 4, 5], 7);
    let mean = Tensor::random(&[3], 8);
    let var = Tensor::from_vec(&[3], vec![0.5, 1.0, 2.0]).unwrap();
    let mut output = Tensor::zeros(&case.input.shape);
    batch_norm_inference(
        pool.as_dyn(),
        &case.input,
        &case.params(),
        &mean,
        &var,
        &mut output,
    )
    .unwrap();
    let want = naive::normalize_channels(
        &f64s(&case.input),
        case.shape(),
        &f64s(&mean),
        &f64s(&var),
        &f64s(&case.gamma),
        &f64s(&case.beta),
        1e-5,
    );
    assert_close("batch_norm", &output.data, &want, FORWARD_TOLERANCE);
}

#[test]
fn batch_norm_train_forward_and_backward_match_the_reference() {
    let pool = pool();
    let case = BatchNormCase::new([3, 4, 3, 5], 11);
    let shape = case.shape();
    let mut output = Tensor::zeros(&shape);
    let mut stats = BatchStats::zeros(4);
    batch_norm_train(
        pool.as_dyn(),
        &case.input,
        &case.params(),
        &mut output,
        &mut stats,
    )
    .unwrap();
    let (x, gamma, beta) = (f64s(&case.input), f64s(&case.gamma), f64s(&case.beta));
    let (mean, var) = naive::channel_stats(&x, shape);
    assert_close(
        "batch_norm_train mean",
        &stats.mean.data,
        &mean,
        FORWARD_TOLERANCE,
    );
    let inv_std: Vec<f64> = var.iter().map(|v| 1.0 / (v + 1e-5).sqrt()).collect();
    assert_close(
        "batch_norm_train inv_std",
        &stats.inv_std.data,
        &inv_std,
        FORWARD_TOLERANCE,
    );
    let want = naive::batch_norm_train(&x, shape, &gamma, &beta, 1e-5);
    assert_close("batch_norm_train", &output.data, &want, FORWARD_TOLERANCE);

    let grad_output = Tensor::random(&shape, 12);
    let dy = f64s(&grad_output);
    let mut grads = NormGrads::zeros(&shape, 4);
    batch_norm_backward(
        pool.as_dyn(),
        &case.input,
        &grad_output,
        &case.params(),
        &stats,
        &mut grads,
    )
    .unwrap();
    let want_dx = numeric_grad(
        |x| naive::batch_norm_train(x, shape, &gamma, &beta, 1e-5),
        &x,
        &dy,
    );
    assert_close(
        "batch_norm_backward dx",
        &grads.grad_input.data,
        &want_dx,
        GRADIENT_TOLERANCE,
    );
    let want_dgamma = numeric_grad(
        |g| naive::batch_norm_train(&x, shape, g, &beta, 1e-5),
        &gamma,
        &dy,
    );
    assert_close(
        "batch_norm_backward dgamma",
        &grads.grad_gamma.data,
        &want_dgamma,
        GRADIENT_TOLERANCE,
    );
    let want_dbeta = numeric_grad(
        |b| naive::batch_norm_train(&x, shape, &gamma, b, 1e-5),
        &beta,
        &dy,
    );
    assert_close(
        "batch_norm_backward dbeta",
        &grads.grad_beta.data,
        &want_dbeta,
        GRADIENT_TOLERANCE,
    );
}

#[test]
fn batch_norm_rejects_a_gamma_of_the_wrong_size() {
    let pool = pool();
    let case = BatchNormCase::new([1, 3, 2, 2], 1);
    let gamma = Tensor::zeros(&[4]);
    let params = NormParams {
        gamma: &gamma,
        ..case.params()
    };
    let mut output = Tensor::zeros(&[1, 3, 2, 2]);
    let error = batch_norm_train(
        pool.as_dyn(),
        &case.input,
        &params,
        &mut output,
        &mut BatchStats::zeros(3),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "batch_norm_train: gamma has shape [4] but must be [3]; allocate it with that shape"
    );
}

#[test]
fn relu_add_and_relu_backward_are_exact() {
    let pool = pool();
    let shape = [2, 3, 50, 70]; // > 1 chunk of 16 Ki values
    let x = Tensor::random(&shape, 3);
    let other = Tensor::random(&shape, 4);
    let mut out = Tensor::zeros(&shape);
    relu(pool.as_dyn(), &x, &mut out).unwrap();
    let want: Vec<f64> = f64s(&x).iter().map(|v| v.max(0.0)).collect();
    assert_close("relu", &out.data, &want, 0.0);
    add(pool.as_dyn(), &x, &other, &mut out).unwrap();
    let want: Vec<f64> = x
        .data
        .iter()
        .zip(&other.data)
        .map(|(a, b)| f64::from(a + b))
        .collect();
    assert_close("add", &out.data, &want, 0.0);
    relu_backward(pool.as_dyn(), &x, &other, &mut out).unwrap();
    let want: Vec<f64> = x
        .data
        .iter()
        .zip(&other.data)
        .map(|(&x, &dy)| if x > 0.0 { f64::from(dy) } else { 0.0 })
        .collect();
    assert_close("relu_backward", &out.data, &want, 0.0);
}

#[test]
fn max_pool_forward_and_backward_match_the_reference() {
    let pool = pool();
    for (seed, (shape, window, stride, padding)) in [
        ([2, 3, 7, 6], 3, 2, 1),
        ([1, 2, 8, 8], 2, 2, 0),
        ([2, 2, 5, 5], 3, 1, 0),
    ]
    .into_iter()
    .enumerate()
    {
        let params = PoolParams {
            window,
            stride,
            padding,
        };
        let input = Tensor::random(&shape, seed as u64);
        let x = f64s(&input);
        let want = naive::max_pool(&x, shape, window, stride, padding);
        let geometry = PoolGeometry::new("max_pool", &shape, params).unwrap();
        let mut output = Tensor::zeros(&geometry.output_shape());
        max_pool(pool.as_dyn(), &input, params, &mut output).unwrap();
        assert_close(&format!("max_pool {params:?}"), &output.data, &want, 0.0);

        let grad_output = Tensor::random(&geometry.output_shape(), seed as u64 + 10);
        let mut grad_input = Tensor::filled(&shape, f32::NAN);
        max_pool_backward(pool.as_dyn(), &input, &grad_output, params, &mut grad_input).unwrap();
        let want = numeric_grad(
            |x| naive::max_pool(x, shape, window, stride, padding),
            &x,
            &f64s(&grad_output),
        );
        assert_close(
            &format!("max_pool_backward {params:?}"),
            &grad_input.data,
            &want,
            GRADIENT_TOLERANCE,
        );
    }
}

#[test]
fn global_avg_pool_forward_and_backward_match_the_reference() {
    let pool = pool();
    let shape = [3, 5, 4, 6];
    let input = Tensor::random(&shape, 21);
    let mut output = Tensor::zeros(&[3, 5]);
    global_avg_pool(pool.as_dyn(), &input, &mut output).unwrap();
    let x = f64s(&input);
    assert_close(
        "avg_pool",
        &output.data,
        &naive::global_avg_pool(&x, shape),
        FORWARD_TOLERANCE,
    );
    let grad_output = Tensor::random(&[3, 5], 22);
    let mut grad_input = Tensor::zeros(&shape);
    global_avg_pool_backward(pool.as_dyn(), &grad_output, &mut grad_input).unwrap();
    let want = numeric_grad(
        |x| naive::global_avg_pool(x, shape),
        &x,
        &f64s(&grad_output),
    );
    assert_close(
        "avg_pool_backward",
        &grad_input.data,
        &want,
        GRADIENT_TOLERANCE,
    );
}

#[test]
fn softmax_and_its_cross_entropy_gradient_match_the_reference() {
    let pool = pool();
    let (rows, cols) = (6, 10);
    let logits = Tensor::from_vec(
        &[rows, cols],
        Tensor::random(&[rows * cols], 31)
            .data
            .iter()
            .map(|v| 4.0 * v)
            .collect(),
    )
    .unwrap();
    let mut probabilities = Tensor::zeros(&[rows, cols]);
    softmax(pool.as_dyn(), &logits, &mut probabilities).unwrap();
    let x = f64s(&logits);
    assert_close(
        "softmax",
        &probabilities.data,
        &naive::softmax(&x, cols),
        FORWARD_TOLERANCE,
    );

    let labels = [3, 0, 9, 9, 5, 1];
    let mut grad = Tensor::zeros(&[rows, cols]);
    softmax_cross_entropy_backward(pool.as_dyn(), &probabilities, &labels, &mut grad).unwrap();
    let mean_loss = |x: &[f64]| {
        let p = naive::softmax(x, cols);
        vec![
            -labels
                .iter()
                .enumerate()
                .map(|(r, &l)| p[r * cols + l].ln())
                .sum::<f64>()
                / rows as f64,
        ]
    };
    assert_close(
        "softmax_cross_entropy_backward",
        &grad.data,
        &numeric_grad(mean_loss, &x, &[1.0]),
        GRADIENT_TOLERANCE,
    );

    let error = softmax_cross_entropy_backward(
        pool.as_dyn(),
        &probabilities,
        &[0, 0, 0, 0, 0, 10],
        &mut grad,
    )
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("label 10 of row 5 is not a class: there are 10"),
        "{error}"
    );
}

#[test]
fn layer_norm_forward_and_backward_match_the_reference() {
    let pool = pool();
    let (rows, cols) = (5, 70); // two column blocks in the backward
    let input = Tensor::random(&[rows, cols], 41);
    let (gamma, beta) = (Tensor::random(&[cols], 42), Tensor::random(&[cols], 43));
    let params = NormParams {
        gamma: &gamma,
        beta: &beta,
        epsilon: 1e-5,
    };
    let mut output = Tensor::zeros(&[rows, cols]);
    layer_norm(pool.as_dyn(), &input, &params, &mut output).unwrap();
    let (x, g, b) = (f64s(&input), f64s(&gamma), f64s(&beta));
    assert_close(
        "layer_norm",
        &output.data,
        &naive::layer_norm(&x, cols, &g, &b, 1e-5),
        FORWARD_TOLERANCE,
    );

    let grad_output = Tensor::random(&[rows, cols], 44);
    let dy = f64s(&grad_output);
    let mut grads = NormGrads::zeros(&[rows, cols], cols);
    layer_norm_backward(pool.as_dyn(), &input, &grad_output, &params, &mut grads).unwrap();
    let want_dx = numeric_grad(|x| naive::layer_norm(x, cols, &g, &b, 1e-5), &x, &dy);
    assert_close(
        "layer_norm_backward dx",
        &grads.grad_input.data,
        &want_dx,
        GRADIENT_TOLERANCE,
    );
    let want_dgamma = numeric_grad(|g| naive::layer_norm(&x, cols, g, &b, 1e-5), &g, &dy);
    assert_close(
        "layer_norm_backward dgamma",
        &grads.grad_gamma.data,
        &want_dgamma,
        GRADIENT_TOLERANCE,
    );
    let want_dbeta = numeric_grad(|b| naive::layer_norm(&x, cols, &g, b, 1e-5), &b, &dy);
    assert_close(
        "layer_norm_backward dbeta",
        &grads.grad_beta.data,
        &want_dbeta,
        GRADIENT_TOLERANCE,
    );
}

#[test]
fn sgd_matches_the_update_rule_with_and_without_momentum() {
    let pool = pool();
    let len = 40_000; // > 2 chunks
    let weight = Tensor::random(&[len], 51);
    let grad = Tensor::random(&[len], 52);
    let plain = SgdParams::plain(0.1);
    let mut updated = weight.clone();
    sgd_update(pool.as_dyn(), &mut updated, &grad, plain, None).unwrap();
    let want: Vec<f64> = weight
        .data
        .iter()
        .zip(&grad.data)
        .map(|(&w, &g)| f64::from(w - 0.1 * g))
        .collect();
    assert_close("sgd", &updated.data, &want, 0.0);

    let momentum = SgdParams {
        learning_rate: 0.1,
        momentum: 0.9,
        weight_decay: 0.01,
    };
    let (mut updated, mut velocity) = (weight.clone(), Tensor::random(&[len], 53));
    let velocity_before = velocity.clone();
    sgd_update(
        pool.as_dyn(),
        &mut updated,
        &grad,
        momentum,
        Some(&mut velocity),
    )
    .unwrap();
    for i in (0..len).step_by(997) {
        let (w, g, v) = (weight.data[i], grad.data[i], velocity_before.data[i]);
        let v_new = 0.9 * v + (g + 0.01 * w);
        assert_eq!(velocity.data[i], v_new, "velocity {i}");
        assert_eq!(updated.data[i], w - 0.1 * v_new, "weight {i}");
    }
    let error = sgd_update(pool.as_dyn(), &mut updated, &grad, momentum, None).unwrap_err();
    assert!(error.to_string().contains("no velocity"), "{error}");
}
