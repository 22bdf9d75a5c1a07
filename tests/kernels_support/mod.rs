//! Shared by the `kernels_*` tests: naive reference kernels (straight loops in `f64`), a
//! finite-difference gradient, tolerance checks and the pools to run on.
#![allow(dead_code)] // each test file uses a different subset

use enginetop::kernels::Tensor;
use enginetop::pool::{Pool, PoolKind, PoolOptions};

/// A pool of `kind` with `threads` workers.
pub fn pool(kind: PoolKind, threads: usize) -> Pool {
    Pool::new(PoolOptions::new(
        kind,
        threads,
        format!("kernels-{kind}-{threads}"),
    ))
    .unwrap()
}

/// The `f32` values of `tensor` as `f64`.
pub fn f64s(tensor: &Tensor) -> Vec<f64> {
    tensor.data.iter().map(|&v| f64::from(v)).collect()
}

/// Asserts `got` matches `want` within `tolerance * (1 + |want|)` everywhere.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tolerance: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&got, &want)) in got.iter().zip(want).enumerate() {
        let error = (f64::from(got) - want).abs();
        assert!(
            error <= tolerance * (1.0 + want.abs()),
            "{what}: element {i} is {got} but the reference says {want} (error {error:e})"
        );
    }
}

/// `d <f(x), dy> / dx` by central differences: the gradient a backward kernel must produce.
pub fn numeric_grad(f: impl Fn(&[f64]) -> Vec<f64>, x: &[f64], dy: &[f64]) -> Vec<f64> {
    const STEP: f64 = 1e-4;
    let loss = |x: &[f64]| -> f64 { f(x).iter().zip(dy).map(|(y, dy)| y * dy).sum() };
    let mut probe = x.to_vec();
    (0..x.len())
        .map(|i| {
            probe[i] = x[i] + STEP;
            let up = loss(&probe);
            probe[i] = x[i] - STEP;
            let down = loss(&probe);
            probe[i] = x[i];
            (up - down) / (2.0 * STEP)
        })
        .collect()
}

/// `op(A) op(B)` with `A` stored `m x k` (or `k x m` if `trans_a`), `B` `k x n` (or `n x k`).
pub fn gemm(
    a: &[f64],
    b: &[f64],
    (m, n, k): (usize, usize, usize),
    trans: (bool, bool),
) -> Vec<f64> {
    let a_at = |i: usize, p: usize| if trans.0 { a[p * m + i] } else { a[i * k + p] };
    let b_at = |p: usize, j: usize| if trans.1 { b[j * k + p] } else { b[p * n + j] };
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a_at(i, p) * b_at(p, j)).sum();
        }
    }
    c
}

/// Sizes of a naive convolution.
#[derive(Clone, Copy, Debug)]
pub struct Conv {
    pub input: [usize; 4],
    pub out_channels: usize,
    pub kernel: (usize, usize),
    pub stride: usize,
    pub padding: usize,
}

impl Conv {
    pub fn out_hw(&self) -> (usize, usize) {
        let size = |s: usize, k: usize| (s + 2 * self.padding - k) / self.stride + 1;
        (
            size(self.input[2], self.kernel.0),
            size(self.input[3], self.kernel.1),
        )
    }

    pub fn weight_shape(&self) -> [usize; 4] {
        [
            self.out_channels,
            self.input[1],
            self.kernel.0,
            self.kernel.1,
        ]
    }

    pub fn output_shape(&self) -> [usize; 4] {
        let (oh, ow) = self.out_hw();
        [self.input[0], self.out_channels, oh, ow]
    }

    /// Direct convolution: every output pixel sums its window over every input channel.
    pub fn forward(&self, x: &[f64], w: &[f64]) -> Vec<f64> {
        let [n, c, h, wd] = self.input;
        let (kh, kw) = self.kernel;
        let (oh, ow) = self.out_hw();
        let mut y = vec![0.0; n * self.out_channels * oh * ow];
        for img in 0..n {
            for co in 0..self.out_channels {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut sum = 0.0;
                        for ci in 0..c {
                            for ky in 0..kh {
                                for kx in 0..kw {
                                    let iy =
                                        (oy * self.stride + ky) as isize - self.padding as isize;
                                    let ix =
                                        (ox * self.stride + kx) as isize - self.padding as isize;
                                    if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                        continue;
                                    }
                                    let xi = ((img * c + ci) * h + iy as usize) * wd + ix as usize;
                                    let wi = ((co * c + ci) * kh + ky) * kw + kx;
                                    sum += x[xi] * w[wi];
                                }
                            }
                        }
                        y[((img * self.out_channels + co) * oh + oy) * ow + ox] = sum;
                    }
                }
            }
        }
        y
    }
}

/// `(x - mean_c) * inv_std_c * gamma_c + beta_c` over NCHW with the given per-channel stats.
pub fn normalize_channels(
    x: &[f64],
    shape: [usize; 4],
    mean: &[f64],
    var: &[f64],
    gamma: &[f64],
    beta: &[f64],
    eps: f64,
) -> Vec<f64> {
    let [_, c, h, w] = shape;
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let ch = (i / (h * w)) % c;
            (v - mean[ch]) / (var[ch] + eps).sqrt() * gamma[ch] + beta[ch]
        })
        .collect()
}

/// Per-channel mean and biased variance of an NCHW tensor.
pub fn channel_stats(x: &[f64], shape: [usize; 4]) -> (Vec<f64>, Vec<f64>) {
    let [n, c, h, w] = shape;
    let count = (n * h * w) as f64;
    let mut mean = vec![0.0; c];
    let mut var = vec![0.0; c];
    for (i, &v) in x.iter().enumerate() {
        mean[(i / (h * w)) % c] += v / count;
    }
    for (i, &v) in x.iter().enumerate() {
        let ch = (i / (h * w)) % c;
        var[ch] += (v - mean[ch]).powi(2) / count;
    }
    (mean, var)
}

/// Training batch-norm forward.
pub fn batch_norm_train(
    x: &[f64],
    shape: [usize; 4],
    gamma: &[f64],
    beta: &[f64],
    eps: f64,
) -> Vec<f64> {
    let (mean, var) = channel_stats(x, shape);
    normalize_channels(x, shape, &mean, &var, gamma, beta, eps)
}

/// Max over each `window x window` window (padding never wins).
pub fn max_pool(
    x: &[f64],
    shape: [usize; 4],
    window: usize,
    stride: usize,
    padding: usize,
) -> Vec<f64> {
    let [n, c, h, w] = shape;
    let oh = (h + 2 * padding - window) / stride + 1;
    let ow = (w + 2 * padding - window) / stride + 1;
    let mut y = Vec::with_capacity(n * c * oh * ow);
    for plane in 0..n * c {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut max = f64::NEG_INFINITY;
                for ky in 0..window {
                    for kx in 0..window {
                        let iy = (oy * stride + ky) as isize - padding as isize;
                        let ix = (ox * stride + kx) as isize - padding as isize;
                        if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < w {
                            max = max.max(x[plane * h * w + iy as usize * w + ix as usize]);
                        }
                    }
                }
                y.push(max);
            }
        }
    }
    y
}

/// Mean of each plane: NCHW to `N x C`.
pub fn global_avg_pool(x: &[f64], shape: [usize; 4]) -> Vec<f64> {
    let pixels = shape[2] * shape[3];
    x.chunks(pixels)
        .map(|plane| plane.iter().sum::<f64>() / pixels as f64)
        .collect()
}

/// Softmax of each `cols`-long row.
pub fn softmax(x: &[f64], cols: usize) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|v| (v - max).exp()).sum();
            row.iter()
                .map(move |v| (v - max).exp() / sum)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Layer-norm of each `cols`-long row.
pub fn layer_norm(x: &[f64], cols: usize, gamma: &[f64], beta: &[f64], eps: f64) -> Vec<f64> {
    x.chunks(cols)
        .flat_map(|row| {
            let mean = row.iter().sum::<f64>() / cols as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
            row.iter()
                .enumerate()
                .map(|(j, v)| (v - mean) / (var + eps).sqrt() * gamma[j] + beta[j])
                .collect::<Vec<_>>()
        })
        .collect()
}
