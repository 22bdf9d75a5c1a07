//! Workloads: TOML files describing tensors and the ops that read and write them, loaded into
//! a flat, validated [`Graph`] that the driver pushes into the engine.
//!
//! # The format
//! A file (a complete one is in the example below) has these top-level keys:
//! - `description` (required), `name`, `default_device`;
//! - `[params]`: integers, floats, booleans or strings; `--set name=value` replaces one,
//!   parsed as the declared type (a boolean takes `true`, `false`, `1` or `0`). A `seed`
//!   parameter seeds `rand()`;
//! - `[[tensor]]`: `name`, `shape`, `dtype` (`f32` default; f64 f16 bf16 i32 i64 u8),
//!   `device` (`cpu`, `cpu:N`, `gpu`, `gpu:N`), `init`;
//! - `[[op]]`: `name`, `kernel` (see [`KernelKind`]), `reads` and `writes` (the kernel's
//!   operands in its order), `also_reads` / `also_writes` (engine dependencies the kernel does
//!   not touch), `device` (inferred from the tensors: a copy's GPU side, else its first
//!   output's device), `property` (MXNet's FnProperty: `normal` (default; copies default to
//!   `copy_to_gpu` / `copy_from_gpu`), `cpu_prioritized`, `gpu_prioritized`, `async`,
//!   `no_skip`, or `prioritized` for the one that suits the op's device), `priority` (an
//!   integer, default 0), `params` (kernel parameters such as `{ stride = 2, pad = 1 }`);
//! - `[[block]]`: `repeat` (default 1; 0 drops the body), `index` (default `i`), `when` (an
//!   expression; false drops the block), `phase` (`iteration` or `setup`, top level only), and
//!   either an inline body (`tensor`, `op`, `block` arrays) or `use = "TEMPLATE"` with
//!   `with = { arg = value, ... }`;
//! - `[templates.NAME]`: `args = [...]` and a body. A template sees the parameters and its
//!   arguments, not its caller's variables.
//!
//! In a body, tensors are declared first, then ops and blocks expand in file order. A tensor
//! may be used anywhere in the file, before or after its declaration.
//!
//! Strings (names, devices, properties, argument values) embed expressions as `${expr}`;
//! numbers (shape dimensions, `repeat`, `priority`) are integers or expression strings, with
//! or without `${}`. Expressions (module `expr`): integers, `+ - * / %`, comparisons, `&& || !`,
//! `cond ? a : b`, `'strings'`, variables, `min`, `max`, `rand(lo, hi)`, `is_gpu(dev)`,
//! `is_cpu(dev)`. A list entry in `reads` / `writes` may be `{ repeat = N, index = "j", name = "v${j}" }`.
//!
//! # Example
//! ```
//! use enginetop::workload::{load_str, KernelKind, Overrides};
//!
//! let text = r#"
//! description = "An MLP: GEMM layers and their SGD updates"
//! [params]
//! batch = 4
//! width = 8
//! layers = 3
//!
//! [[tensor]]
//! name = "act0"
//! shape = ["batch", "width"]
//!
//! [[block]]
//! repeat = "layers"
//! tensor = [
//!   { name = "w${i}", shape = ["width", "width"], init = "random" },
//!   { name = "act${i + 1}", shape = ["batch", "width"] },
//!   { name = "grad${i}", shape = ["width", "width"] },
//! ]
//! op = [
//!   { name = "fc${i}", kernel = "gemm", reads = ["act${i}", "w${i}"], writes = ["act${i + 1}"] },
//!   { name = "sgd${i}", kernel = "sgd", reads = ["grad${i}"], writes = ["w${i}"],
//!     property = "cpu_prioritized", priority = "-i", params = { lr = 0.1 } },
//! ]
//! "#;
//! let graph = load_str(text, "mlp.toml", &Overrides::default().set("layers", "2")).unwrap();
//! assert_eq!(graph.iteration_ops().len(), 4);
//! let fc1 = &graph.ops[2];
//! assert_eq!((fc1.name.as_str(), fc1.kernel), ("fc1", KernelKind::Gemm));
//! assert_eq!(graph.tensor(fc1.writes[0]).name, "act2");
//! assert_eq!(graph.op_flops(fc1), 2 * 4 * 8 * 8);
//!
//! let typo = text.replace("\"w${i}\"], writes", "\"v${i}\"], writes");
//! let err = load_str(&typo, "mlp.toml", &Overrides::default()).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "mlp.toml:20:59: op \"fc0\" reads unknown tensor \"v0\": expected a declared tensor \
//!      (did you mean \"w0\"?)"
//! );
//! ```
//!
//! # For the driver
//! [`load_spec`] (a shipped name or a path, with [`Overrides`] from `--set`) gives a
//! [`Graph`]: allocate one buffer and one engine variable per [`TensorDecl`] (shape, dtype,
//! device, init); push [`Graph::setup_ops`] once, then [`Graph::iteration_ops`] per
//! iteration, each [`OpDecl`] with its `kernel`, `const_vars()` / `mutable_vars()` (operands
//! plus `also_*` dependencies, deduplicated the MXNet way), `device`, `property`, `priority`
//! and `params`; the kernel gets `reads` / `writes` in operand order. [`Graph::op_flops`]
//! and [`Graph::iteration_flops`] estimate the work for GFLOP/s. Kernel names live in
//! [`KernelKind`] alone (the kernels module's registration table).
//!
//! # Errors
//! A bad file gives a [`WorkloadError`]: `file:line:column: problem: expected ...`, for
//! TOML syntax, unknown fields, unknown kernels, templates, parameters, tensors, devices,
//! properties and dtypes, duplicate names, operand counts, shape mismatches (naming the
//! tensors, their shapes and the kernel's rule), device and dtype mismatches, bad kernel
//! parameters, and inputs past the size limits. Loading never panics, whatever the input.
#![forbid(unsafe_code)]

mod device;
mod error;
mod expand;
pub(crate) mod expr;
mod graph;
mod load;
mod params;
mod resolve;
pub mod run;
pub(crate) mod schema;
mod shipped;

pub use crate::engine::{Context, FnProperty};
pub use crate::kernels::{KernelKind, KernelParams, ParamValue};
pub use device::{Dtype, Init};
pub use error::{Position, Problem, WorkloadError};
pub use expr::{ExprError, Value};
pub use graph::{Graph, OpDecl, OpId, TensorDecl, TensorId};
pub use load::{load_path, load_spec, load_str, MAX_FILE_BYTES};
pub use params::Overrides;
pub use shipped::{catalog, closest_shipped, summary, ShippedWorkload, SHIPPED};
