//! The device work a workload op on a GPU context puts on its stream.
//!
//! A workload's tensors live on the host and every op's kernel runs there (so a run's
//! checksum is the same on every engine and device). An op on a GPU context also launches
//! the work its kernel stands for on the stream the engine gave it: on the simulated GPU
//! that takes the cost model's device time, which is what the streams' occupancy (and the
//! trace's stream tracks) show. Without it a stream would only carry the engine's fence
//! units, which take no time, and read 0% busy however hard the GPU ops work.
//!
//! - `gemm`: the GEMM of the same shape.
//! - `copy_h2d` / `copy_d2h` (and any copy): a copy of the written tensor's bytes, in the
//!   direction of the op's property (host to device unless it is `copy_from_gpu`).
//! - any other kernel with more than a few FLOPs per output element (`conv2d`): a GEMM of
//!   the same FLOPs and output size (an implicit-GEMM convolution).
//! - the rest (elementwise, norms, pooling): an elementwise kernel over the output.
#![forbid(unsafe_code)]

use crate::device::work::{CopyDir, ElementwiseOp, GpuWork};
use crate::engine::FnProperty;

use super::call::KernelCall;

/// FLOPs per output element above which a kernel is modelled as a GEMM.
const GEMM_LIKE_FLOPS_PER_ELEMENT: f64 = 8.0;

/// The device work of one op, decided once when the op is prepared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DeviceWork {
    /// `C[m x n] = A[m x k] B[k x n]`.
    Gemm { m: u32, n: u32, k: u32 },
    /// A host/device copy of `bytes`.
    Copy { to_device: bool, bytes: u64 },
    /// An elementwise kernel reading `inputs` arrays of `len` elements.
    Elementwise { two_inputs: bool, len: u32 },
}

impl DeviceWork {
    /// The work of an op calling `call` with property `prop`, writing `output_len` f32s,
    /// reading `inputs` tensors, doing about `flops` FLOPs.
    pub(super) fn of(
        call: &KernelCall,
        prop: FnProperty,
        output_len: u64,
        inputs: usize,
        flops: f64,
    ) -> DeviceWork {
        let clamp = |n: u64| u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        match call {
            KernelCall::Gemm(spec) => DeviceWork::Gemm {
                m: clamp(spec.shape.m as u64),
                n: clamp(spec.shape.n as u64),
                k: clamp(spec.shape.k as u64),
            },
            KernelCall::Copy => DeviceWork::Copy {
                to_device: prop != FnProperty::CopyFromGpu,
                bytes: output_len.saturating_mul(4),
            },
            _ if flops > GEMM_LIKE_FLOPS_PER_ELEMENT * output_len.max(1) as f64 => {
                // m x n = the output, split squarely; k carries the FLOPs.
                let len = output_len.max(1);
                let m = len.isqrt().max(1);
                let n = len.div_ceil(m);
                let k = (flops / (2.0 * (m * n) as f64)).round() as u64;
                DeviceWork::Gemm {
                    m: clamp(m),
                    n: clamp(n),
                    k: clamp(k),
                }
            }
            _ => DeviceWork::Elementwise {
                two_inputs: inputs >= 2,
                len: clamp(output_len),
            },
        }
    }

    /// The unit to launch.
    pub(super) fn gpu_work(self) -> GpuWork {
        match self {
            DeviceWork::Gemm { m, n, k } => GpuWork::gemm(m, n, k),
            DeviceWork::Copy { to_device, bytes } => {
                let dir = if to_device {
                    CopyDir::HostToDevice
                } else {
                    CopyDir::DeviceToHost
                };
                GpuWork::copy(dir, bytes)
            }
            DeviceWork::Elementwise { two_inputs, len } => {
                let op = if two_inputs {
                    ElementwiseOp::Add
                } else {
                    ElementwiseOp::Relu
                };
                GpuWork::elementwise(op, len)
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::kernels::GemmSpec;

    #[test]
    fn each_kernel_maps_to_the_device_work_it_stands_for() {
        let normal = FnProperty::Normal;
        let gemm = KernelCall::Gemm(GemmSpec::new(128, 256, 64));
        assert_eq!(
            DeviceWork::of(&gemm, normal, 128 * 256, 2, 0.0),
            DeviceWork::Gemm {
                m: 128,
                n: 256,
                k: 64
            }
        );
        let back = DeviceWork::of(&KernelCall::Copy, FnProperty::CopyFromGpu, 1000, 1, 0.0);
        assert_eq!(
            back,
            DeviceWork::Copy {
                to_device: false,
                bytes: 4000
            }
        );
        let to = DeviceWork::of(&KernelCall::Copy, FnProperty::CopyToGpu, 10, 1, 0.0);
        assert_eq!(
            to,
            DeviceWork::Copy {
                to_device: true,
                bytes: 40
            }
        );
        // A convolution: 2 * 100 * 100 * 576 FLOPs over 100 x 100 outputs.
        let conv = KernelCall::Conv2d(crate::kernels::Conv2dParams {
            stride: 1,
            padding: 1,
        });
        let work = DeviceWork::of(&conv, normal, 10_000, 2, 2.0 * 10_000.0 * 576.0);
        assert_eq!(
            work,
            DeviceWork::Gemm {
                m: 100,
                n: 100,
                k: 576
            }
        );
        let relu = DeviceWork::of(&KernelCall::Relu, normal, 512, 1, 512.0);
        assert_eq!(
            relu,
            DeviceWork::Elementwise {
                two_inputs: false,
                len: 512
            }
        );
        // The fused batch norms cost what their parts do: the forward (6 FLOPs a value, 2
        // reads) an elementwise kernel as batch_norm, the backward (12) a GEMM-like kernel as
        // batch_norm_grad.
        let fused = DeviceWork::of(&KernelCall::BatchNormRelu, normal, 512, 2, 6.0 * 512.0);
        assert_eq!(
            fused,
            DeviceWork::Elementwise {
                two_inputs: true,
                len: 512
            }
        );
        let fused_grad = DeviceWork::of(&KernelCall::BatchNormReluGrad, normal, 400, 4, 4800.0);
        assert_eq!(fused_grad, DeviceWork::Gemm { m: 20, n: 20, k: 6 });
        let add = DeviceWork::of(&KernelCall::Add, normal, 0, 2, 0.0);
        assert_eq!(
            add,
            DeviceWork::Elementwise {
                two_inputs: true,
                len: 1
            }
        );
    }

    /// On a simulated GPU the workload's GEMMs occupy the compute streams for their modelled
    /// time: the trace's stream slices of the `fc1` ops add up to at least their device time
    /// (a 1024^3 GEMM is 3.2 ms on the default model), where the engine's fence units alone
    /// would take microseconds.
    #[test]
    fn gpu_ops_occupy_their_streams_for_the_modelled_time() {
        use crate::config::RuntimeConfig;
        use crate::device::discover::GpuSelection;
        use crate::profiler::{Profiler, ProfilerOptions, StreamProbe};
        use crate::workload::run::{run_workload, RunHooks, RunLength, RunOptions};
        use crate::workload::{load_spec, Overrides};

        let sizes = ["rows=1024", "features=1024", "hidden=1024", "batches=2"];
        let overrides = Overrides::from_args(sizes.into_iter().chain(["device=gpu:0"])).unwrap();
        let graph = load_spec("pipeline", &overrides).unwrap();
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let hooks = RunHooks {
            stream_observer: Some(std::sync::Arc::new(StreamProbe::new(&profiler))),
            ..RunHooks::default()
        };
        let config = RuntimeConfig {
            inter_op_threads: 1,
            intra_op_threads: 1,
            gpus: GpuSelection::Sim(1),
            ..RuntimeConfig::default()
        };
        let options = RunOptions::new(config, RunLength::Iterations(1));
        run_workload(graph, &options, hooks).unwrap();
        profiler.flush();
        let path =
            std::env::temp_dir().join(format!("enginetop-device-work-{}.json", std::process::id()));
        profiler.export_chrome_file(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
        let events = trace["traceEvents"].as_array().unwrap();
        let fc1_on_streams_us: f64 = events
            .iter()
            .filter(|e| e["ph"] == "X" && e["args"]["stream"].is_u64())
            .filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with("fc1_")))
            .filter_map(|e| e["dur"].as_f64())
            .sum();
        // Two fc1 GEMMs of 2 x 1024^3 FLOPs at 670 GFLOP/s: 3.2 ms each.
        assert!(
            fc1_on_streams_us >= 2.0 * 3_000.0,
            "fc1's device time on the streams: {fc1_on_streams_us} us"
        );
    }
}
