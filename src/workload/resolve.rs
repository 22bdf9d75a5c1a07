//! Resolution: expanded tensors and ops checked and turned into a [`Graph`]: names resolved
//! and unique, devices, properties, dtypes, kernel parameters and shapes validated.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::ops::Range;

use super::device::{
    is_gpu, needs_gpu, parse_property, property_name, property_names, ContextText, Dtype, Init,
};
use super::error::{comma_list, LoadResult, Located, Position, Problem};
use super::expand::{Expanded, RawOp, RawTensor, SpannedText, LIST_NAMES};
use super::expr::Value;
use super::graph::{bytes_text, held_bytes, Graph, OpDecl, TensorDecl, TensorId};
use super::params::{literal_text, parse_flag, FLAG_SPELLINGS};
use crate::engine::{Context, FnProperty};
use crate::kernels::{
    numel, shape_text, KernelKind, KernelParams, Operand, Operands, ParamKind, ParamValue,
};

/// Elements in one tensor.
pub(super) const MAX_TENSOR_ELEMENTS: u64 = 1 << 32;
/// Bytes of all tensors together, as a run holds them (`f32`, 4 bytes an element, whatever
/// the declared dtype).
pub(super) const MAX_TOTAL_BYTES: u64 = 64 << 30;

/// What the graph is called and the parameters it was built with.
pub(crate) struct Header {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) params: Vec<(String, Value)>,
}

/// Checks `expanded` and builds the graph; `text` turns spans into positions for messages
/// that point at a second place.
pub(crate) fn build_graph(expanded: Expanded, header: Header, text: &str) -> LoadResult<Graph> {
    let default_device = match &expanded.default_device {
        Some(device) => parse_context(device)?,
        None => Context::cpu(0),
    };
    let mut resolver = Resolver {
        text,
        tensors: Vec::with_capacity(expanded.tensors.len()),
        by_name: HashMap::with_capacity(expanded.tensors.len()),
        default_device,
        total_bytes: 0,
    };
    for tensor in &expanded.tensors {
        resolver.tensor(tensor)?;
    }
    let mut op_names: HashMap<&str, Range<usize>> = HashMap::with_capacity(expanded.ops.len());
    let (mut setup, mut iteration) = (Vec::new(), Vec::new());
    for raw in &expanded.ops {
        check_unique(&mut op_names, &raw.name, "op", text)?;
        let op = resolver.op(raw)?;
        if raw.setup {
            setup.push(op)
        } else {
            iteration.push(op)
        }
    }
    if iteration.is_empty() {
        return Err(Located::nowhere(Problem::NoOps));
    }
    let setup_len = setup.len();
    setup.extend(iteration);
    Ok(Graph {
        name: header.name,
        description: header.description,
        params: header.params,
        tensors: resolver.tensors,
        iteration: setup_len..setup.len(),
        setup: 0..setup_len,
        ops: setup,
    })
}

fn check_unique<'a>(
    seen: &mut HashMap<&'a str, Range<usize>>,
    name: &'a SpannedText,
    kind: &'static str,
    text: &str,
) -> LoadResult<()> {
    if let Some(first) = seen.get(name.0.as_str()) {
        return Err(Located::at(
            name.1.clone(),
            Problem::DuplicateName {
                kind,
                name: name.0.clone(),
                first: Position::of_offset(text, first.start),
                hint: repeated_hint(first, &name.1),
            },
        ));
    }
    seen.insert(&name.0, name.1.clone());
    Ok(())
}

/// A hint when both names come from the same place: a block or template expanded it twice.
fn repeated_hint(first: &Range<usize>, again: &Range<usize>) -> &'static str {
    if first == again {
        " (the same place, expanded twice by a block or template: put the block index such as \
         ${i} or a template argument in the name)"
    } else {
        ""
    }
}

fn parse_context((text, span): &SpannedText) -> LoadResult<Context> {
    super::device::parse_context(text).map_err(|problem| Located::at(span.clone(), problem))
}

struct Resolver<'t> {
    text: &'t str,
    tensors: Vec<TensorDecl>,
    by_name: HashMap<String, (TensorId, Range<usize>)>,
    default_device: Context,
    total_bytes: u64,
}

impl Resolver<'_> {
    fn tensor(&mut self, raw: &RawTensor) -> LoadResult<()> {
        let (name, span) = &raw.name;
        if let Some((_, first)) = self.by_name.get(name) {
            return Err(Located::at(
                span.clone(),
                Problem::DuplicateName {
                    kind: "tensor",
                    name: name.clone(),
                    first: Position::of_offset(self.text, first.start),
                    hint: repeated_hint(first, span),
                },
            ));
        }
        let dtype = match &raw.dtype {
            Some((value, span)) => value.parse::<Dtype>().map_err(|_| {
                Located::at(
                    span.clone(),
                    Problem::BadDtype {
                        tensor: name.clone(),
                        value: value.clone(),
                        known: Dtype::names(),
                    },
                )
            })?,
            None => Dtype::F32,
        };
        let init = match &raw.init {
            Some((value, span)) => value.parse::<Init>().map_err(|_| {
                Located::at(
                    span.clone(),
                    Problem::WrongValue {
                        what: format!("tensor {name:?} init"),
                        found: format!("{value:?}"),
                        expected: format!("one of {}", Init::names()),
                    },
                )
            })?,
            None => Init::Zeros,
        };
        let device = match &raw.device {
            Some(device) => parse_context(device)?,
            None => self.default_device,
        };
        self.check_size(raw)?;
        let id = TensorId(self.tensors.len() as u32);
        self.by_name.insert(name.clone(), (id, span.clone()));
        self.tensors.push(TensorDecl {
            name: name.clone(),
            shape: raw.shape.clone(),
            dtype,
            device,
            init,
        });
        Ok(())
    }

    /// Refuses a tensor past [`MAX_TENSOR_ELEMENTS`], or one that takes the memory a run
    /// holds for all tensors so far past [`MAX_TOTAL_BYTES`].
    fn check_size(&mut self, raw: &RawTensor) -> LoadResult<()> {
        let shape_text = shape_text(&raw.shape);
        let elements = numel(&raw.shape)
            .filter(|n| *n <= MAX_TENSOR_ELEMENTS)
            .ok_or_else(|| {
                Located::at(
                    raw.shape_span.clone(),
                    Problem::BadShape {
                        tensor: raw.name.0.clone(),
                        shape: shape_text.clone(),
                        detail: format!(
                            "too many elements: expected at most {MAX_TENSOR_ELEMENTS}"
                        ),
                    },
                )
            })?;
        self.total_bytes = self.total_bytes.saturating_add(held_bytes(elements));
        if self.total_bytes > MAX_TOTAL_BYTES {
            return Err(Located::at(
                raw.shape_span.clone(),
                Problem::BadShape {
                    tensor: raw.name.0.clone(),
                    shape: shape_text,
                    detail: format!(
                        "the tensors reach {} here, held as f32 (4 bytes an element, whatever \
                         the dtype): expected at most {}; make the workload smaller with --set \
                         (e.g. a smaller size or batch)",
                        bytes_text(self.total_bytes),
                        bytes_text(MAX_TOTAL_BYTES)
                    ),
                },
            ));
        }
        Ok(())
    }

    fn op(&self, raw: &RawOp) -> LoadResult<OpDecl> {
        let name = &raw.name.0;
        let kernel = raw.kernel.0.parse::<KernelKind>().map_err(|_| {
            Located::at(
                raw.kernel.1.clone(),
                Problem::UnknownKernel {
                    op: name.clone(),
                    kernel: raw.kernel.0.clone(),
                    known: KernelKind::names(),
                },
            )
        })?;
        let [reads, writes, also_reads, also_writes] = self.lists(raw)?;
        check_arity(raw, kernel, "reads", kernel.reads(), reads.len())?;
        check_arity(raw, kernel, "writes", kernel.writes(), writes.len())?;
        self.check_distinct_writes(raw, &writes, &also_writes)?;
        let device = match &raw.device {
            Some(device) => parse_context(device)?,
            None => self.inferred_device(kernel, &reads, &writes),
        };
        self.check_devices(raw, kernel, device, &reads, &writes)?;
        let property = property(raw, kernel, device)?;
        self.check_dtypes(raw, kernel, &reads, &writes)?;
        let params = kernel_params(raw, kernel)?;
        self.check_shapes(raw, kernel, &reads, &writes, &params)?;
        let priority = i32::try_from(raw.priority.0).map_err(|_| {
            Located::at(
                raw.priority.1.clone(),
                Problem::WrongValue {
                    what: format!("op {name:?} priority"),
                    found: raw.priority.0.to_string(),
                    expected: format!("an integer from {} to {}", i32::MIN, i32::MAX),
                },
            )
        })?;
        Ok(OpDecl {
            name: name.clone(),
            kernel,
            reads,
            writes,
            also_reads,
            also_writes,
            device,
            property,
            priority,
            params,
        })
    }

    fn lists(&self, raw: &RawOp) -> LoadResult<[Vec<TensorId>; 4]> {
        let mut resolved: [Vec<TensorId>; 4] = Default::default();
        for ((names, ids), list) in raw.lists.iter().zip(resolved.iter_mut()).zip(LIST_NAMES) {
            for (tensor, span) in names {
                let (id, _) = self.by_name.get(tensor).ok_or_else(|| {
                    Located::at(
                        span.clone(),
                        Problem::UnknownTensor {
                            op: raw.name.0.clone(),
                            list,
                            tensor: tensor.clone(),
                            suggestion: self.suggest(tensor),
                        },
                    )
                })?;
                ids.push(*id);
            }
        }
        Ok(resolved)
    }

    /// ` (did you mean "a" or "b"?)`, or the few names there are.
    fn suggest(&self, unknown: &str) -> String {
        let limit = (unknown.chars().count() / 3).max(1);
        let mut close: Vec<(usize, &str)> = self
            .tensors
            .iter()
            .map(|tensor| {
                (
                    strsim::levenshtein(unknown, &tensor.name),
                    tensor.name.as_str(),
                )
            })
            .filter(|(distance, _)| *distance <= limit)
            .collect();
        close.sort();
        let quoted: Vec<String> = close
            .iter()
            .take(3)
            .map(|(_, name)| format!("{name:?}"))
            .collect();
        match quoted.as_slice() {
            [] if self.tensors.len() <= 8 && !self.tensors.is_empty() => {
                format!(
                    " (one of {})",
                    comma_list(self.tensors.iter().map(|t| &t.name))
                )
            }
            [] if self.tensors.is_empty() => " (none is declared)".to_string(),
            [] => String::new(),
            [one] => format!(" (did you mean {one}?)"),
            [init @ .., last] => format!(" (did you mean {} or {last}?)", init.join(", ")),
        }
    }

    fn check_distinct_writes(
        &self,
        raw: &RawOp,
        writes: &[TensorId],
        also: &[TensorId],
    ) -> LoadResult<()> {
        let all: Vec<TensorId> = writes.iter().chain(also).copied().collect();
        for (index, id) in all.iter().enumerate() {
            if all[..index].contains(id) {
                let span = raw.lists[1]
                    .iter()
                    .chain(&raw.lists[3])
                    .nth(index)
                    .map(|(_, span)| span.clone());
                return Err(Located {
                    span,
                    problem: Problem::DuplicateWrite {
                        op: raw.name.0.clone(),
                        tensor: self.tensors[id.index()].name.clone(),
                    },
                });
            }
        }
        Ok(())
    }

    /// Copies run on their GPU side; other ops where their first output (else input) lives.
    fn inferred_device(
        &self,
        kernel: KernelKind,
        reads: &[TensorId],
        writes: &[TensorId],
    ) -> Context {
        let device_of = |ids: &[TensorId]| ids.first().map(|id| self.tensors[id.index()].device);
        let found = match kernel {
            KernelKind::CopyD2h => device_of(reads),
            _ => device_of(writes).or_else(|| device_of(reads)),
        };
        found.unwrap_or(self.default_device)
    }

    fn check_devices(
        &self,
        raw: &RawOp,
        kernel: KernelKind,
        device: Context,
        reads: &[TensorId],
        writes: &[TensorId],
    ) -> LoadResult<()> {
        let mismatch = |detail: String| {
            Located::at(
                raw.name.1.clone(),
                Problem::DeviceMismatch {
                    op: raw.name.0.clone(),
                    detail,
                },
            )
        };
        let tensor = |id: &TensorId| &self.tensors[id.index()];
        if kernel.is_copy() {
            let (source, target) = (tensor(&reads[0]), tensor(&writes[0]));
            let (host, gpu) = if kernel == KernelKind::CopyH2d {
                (source, target)
            } else {
                (target, source)
            };
            if is_gpu(host.device) || !is_gpu(gpu.device) {
                return Err(mismatch(format!(
                    "({kernel}) copies {:?} on {} to {:?} on {}: expected a {} copy; use {} for the other direction",
                    source.name, ContextText(source.device), target.name, ContextText(target.device),
                    if kernel == KernelKind::CopyH2d { "cpu -> gpu" } else { "gpu -> cpu" },
                    if kernel == KernelKind::CopyH2d { "copy_d2h" } else { "copy_h2d" },
                )));
            }
            if device != gpu.device {
                let device = ContextText(device);
                return Err(mismatch(format!(
                    "({kernel}) runs on {device} but copies to/from {:?} on {}: expected device = \"{}\" (copies run on their GPU), or leave device out",
                    gpu.name, ContextText(gpu.device), ContextText(gpu.device)
                )));
            }
            return Ok(());
        }
        for (verb, ids) in [("reads", reads), ("writes", writes)] {
            if let Some(other) = ids.iter().map(tensor).find(|t| t.device != device) {
                let device = ContextText(device);
                return Err(mismatch(format!(
                    "runs on {device} but {verb} tensor {:?} on {}: expected every tensor it reads and writes on {device}; move the tensor or add a copy_h2d / copy_d2h op",
                    other.name, ContextText(other.device)
                )));
            }
        }
        Ok(())
    }

    fn check_dtypes(
        &self,
        raw: &RawOp,
        kernel: KernelKind,
        reads: &[TensorId],
        writes: &[TensorId],
    ) -> LoadResult<()> {
        if !kernel.needs_one_dtype() {
            return Ok(());
        }
        let tensors: Vec<&TensorDecl> = reads
            .iter()
            .chain(writes)
            .map(|id| &self.tensors[id.index()])
            .collect();
        let Some(first) = tensors.first() else {
            return Ok(());
        };
        if let Some(other) = tensors.iter().find(|t| t.dtype != first.dtype) {
            return Err(Located::at(
                raw.name.1.clone(),
                Problem::DtypeMismatch {
                    op: raw.name.0.clone(),
                    kernel: kernel.name(),
                    detail: format!(
                        "{:?} is {} but {:?} is {}",
                        first.name, first.dtype, other.name, other.dtype
                    ),
                },
            ));
        }
        Ok(())
    }

    fn check_shapes(
        &self,
        raw: &RawOp,
        kernel: KernelKind,
        reads: &[TensorId],
        writes: &[TensorId],
        params: &KernelParams,
    ) -> LoadResult<()> {
        let operands = |ids: &[TensorId]| -> Vec<Operand> {
            ids.iter()
                .map(|id| {
                    let tensor = &self.tensors[id.index()];
                    Operand {
                        name: &tensor.name,
                        shape: &tensor.shape,
                    }
                })
                .collect()
        };
        kernel
            .check_shapes(&operands(reads), &operands(writes), params)
            .map_err(|detail| {
                Located::at(
                    raw.name.1.clone(),
                    Problem::ShapeMismatch {
                        op: raw.name.0.clone(),
                        kernel: kernel.name(),
                        detail,
                        rule: kernel.shape_rule(),
                    },
                )
            })
    }
}

fn check_arity(
    raw: &RawOp,
    kernel: KernelKind,
    list: &'static str,
    operands: Operands,
    found: usize,
) -> LoadResult<()> {
    if operands.accepts(found) {
        return Ok(());
    }
    Err(Located::at(
        raw.name.1.clone(),
        Problem::Arity {
            op: raw.name.0.clone(),
            kernel: kernel.name(),
            list,
            found,
            expected: operands.describe(),
        },
    ))
}

/// The op's property: as written (`prioritized` resolved by device), else the kernel's
/// default; checked against the device and kernel.
fn property(raw: &RawOp, kernel: KernelKind, device: Context) -> LoadResult<FnProperty> {
    let property = match &raw.property {
        None if kernel == KernelKind::CopyH2d => FnProperty::CopyToGpu,
        None if kernel == KernelKind::CopyD2h => FnProperty::CopyFromGpu,
        None => FnProperty::Normal,
        Some((text, _)) if text == "prioritized" && is_gpu(device) => FnProperty::GpuPrioritized,
        Some((text, _)) if text == "prioritized" => FnProperty::CpuPrioritized,
        Some((text, span)) => parse_property(text).ok_or_else(|| {
            Located::at(
                span.clone(),
                Problem::BadProperty {
                    op: raw.name.0.clone(),
                    value: text.clone(),
                    known: format!(
                        "{}, or prioritized (cpu_ or gpu_ by the op's device)",
                        property_names()
                    ),
                },
            )
        })?,
    };
    let span = raw
        .property
        .as_ref()
        .map_or(raw.name.1.clone(), |(_, span)| span.clone());
    if let Some(needs_gpu) = needs_gpu(property) {
        if needs_gpu != is_gpu(device) {
            let (device, name) = (ContextText(device), property_name(property));
            return Err(Located::at(
                span,
                Problem::DeviceMismatch {
                    op: raw.name.0.clone(),
                    detail: format!(
                        "has property {name} but runs on {device}: expected {name} only on {} devices{}",
                        if needs_gpu { "gpu" } else { "cpu" },
                        if matches!(property, FnProperty::CpuPrioritized | FnProperty::GpuPrioritized) {
                            "; write property = \"prioritized\" to follow the device"
                        } else {
                            ""
                        }
                    ),
                },
            ));
        }
    }
    let copy_property = match property {
        FnProperty::CopyToGpu => Some(KernelKind::CopyH2d),
        FnProperty::CopyFromGpu => Some(KernelKind::CopyD2h),
        _ => None,
    };
    match copy_property {
        Some(copy) if copy != kernel => Err(Located::at(
            span,
            Problem::WrongValue {
                what: format!("op {:?} ({kernel}) property", raw.name.0),
                found: property_name(property).to_string(),
                expected: format!(
                    "{} only on {copy} ops; use normal or a prioritized property",
                    property_name(property)
                ),
            },
        )),
        _ => Ok(property),
    }
}

/// The op's kernel parameters checked against the kernel's, defaults filled in.
fn kernel_params(raw: &RawOp, kernel: KernelKind) -> LoadResult<KernelParams> {
    let specs = kernel.params();
    let error = |span: &Range<usize>, detail: String| {
        Located::at(
            span.clone(),
            Problem::KernelParam {
                op: raw.name.0.clone(),
                kernel: kernel.name(),
                detail,
            },
        )
    };
    for (name, _, span) in &raw.params {
        if !specs.iter().any(|spec| spec.name == name) {
            let known = comma_list(specs.iter().map(|spec| spec.name));
            let mut expected = if known.is_empty() {
                "no parameters".to_string()
            } else {
                format!("one of {known}")
            };
            if let Some(fused) = kernel.fused_instead(name) {
                expected += &format!(" (for a fused {name} use kernel \"{fused}\")");
            }
            return Err(error(
                span,
                format!("unknown parameter {name:?}: expected {expected}"),
            ));
        }
    }
    let mut params = Vec::with_capacity(specs.len());
    for spec in specs {
        let given = raw.params.iter().find(|(name, _, _)| name == spec.name);
        let value = match given {
            Some((name, value, span)) => param_value(spec.kind, value).ok_or_else(|| {
                let expected = match spec.kind {
                    ParamKind::Int { min, max: i64::MAX } => format!("an integer >= {min}"),
                    ParamKind::Int { min, max } => format!("an integer from {min} to {max}"),
                    ParamKind::PositiveFloat => "a number > 0".to_string(),
                    ParamKind::Flag => FLAG_SPELLINGS.to_string(),
                };
                error(
                    span,
                    format!(
                        "parameter {name} = {}: expected {expected}",
                        literal_text(value)
                    ),
                )
            })?,
            None => match (spec.default, spec.name) {
                (Some(default), _) => default,
                (None, "stride") => ParamValue::Int(params_int(&params, "size")),
                (None, name) => {
                    return Err(error(
                        &raw.name.1,
                        format!("needs parameter {name:?}: expected params = {{ {name} = ... }}"),
                    ))
                }
            },
        };
        params.push((spec.name, value));
    }
    Ok(KernelParams(params))
}

fn params_int(params: &[(&'static str, ParamValue)], name: &str) -> i64 {
    KernelParams(params.to_vec()).int(name, 1)
}

fn param_value(kind: ParamKind, value: &Value) -> Option<ParamValue> {
    match (kind, value) {
        (ParamKind::Int { min, max }, Value::Int(n)) if (min..=max).contains(n) => {
            Some(ParamValue::Int(*n))
        }
        (ParamKind::Flag, Value::Int(n)) if matches!(n, 0 | 1) => Some(ParamValue::Int(*n)),
        (ParamKind::Flag, Value::Bool(truth)) => Some(ParamValue::Int(i64::from(*truth))),
        (ParamKind::Flag, Value::Text(text)) => {
            parse_flag(text).map(|truth| ParamValue::Int(i64::from(truth)))
        }
        (ParamKind::PositiveFloat, Value::Int(n)) if *n > 0 => Some(ParamValue::Float(*n as f64)),
        (ParamKind::PositiveFloat, Value::Float(f)) if f.is_finite() && *f > 0.0 => {
            Some(ParamValue::Float(*f))
        }
        (ParamKind::PositiveFloat, Value::Text(text)) => text
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f > 0.0)
            .map(ParamValue::Float),
        (ParamKind::Int { min, max }, Value::Text(text)) => text
            .parse::<i64>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .map(ParamValue::Int),
        _ => None,
    }
}
