//! The small vocabularies of a workload file: device contexts and MXNet's `FnProperty` (the
//! engine's [`Context`] and [`FnProperty`], spelled the file's way), dtypes and tensor
//! initialisers. Each parses from the exact lowercase name and prints it back.
#![forbid(unsafe_code)]

use std::fmt;

use strum::{Display, EnumString, IntoStaticStr, VariantArray};

use crate::engine::{Context, DeviceType, FnProperty};

use super::error::{comma_list, Problem};

/// Device numbers above this are refused (a typo rather than a machine).
pub(crate) const MAX_DEVICE_ID: u32 = 1023;

/// Parses a workload file's device: `cpu`, `cpu:N`, `gpu`, `gpu:N` (N at most
/// `MAX_DEVICE_ID`, 1023; `cpu` is `cpu:0`).
pub(crate) fn parse_context(text: &str) -> Result<Context, Problem> {
    parse_context_exact(text).ok_or_else(|| Problem::BadDevice {
        value: text.to_string(),
    })
}

fn parse_context_exact(text: &str) -> Option<Context> {
    let (kind, id) = match text.split_once(':') {
        Some((kind, digits))
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            (kind, digits.parse::<u32>().ok()?)
        }
        Some(_) => return None,
        None => (text, 0),
    };
    if id > MAX_DEVICE_ID {
        return None;
    }
    match kind {
        "cpu" => Some(Context::cpu(id)),
        "gpu" => Some(Context::gpu(id)),
        _ => None,
    }
}

/// Whether a context is a GPU.
pub(crate) fn is_gpu(context: Context) -> bool {
    context.device == DeviceType::Gpu
}

/// A context the way a workload file writes it (`cpu:0`, `gpu:1`), for messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ContextText(pub(crate) Context);

impl fmt::Display for ContextText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.device {
            DeviceType::Cpu => write!(f, "cpu:{}", self.0.id),
            DeviceType::Gpu => write!(f, "gpu:{}", self.0.id),
        }
    }
}

/// The properties a workload file may name, by name, in the order of MXNet's
/// `FnProperty` (`DeleteVar` is engine-internal and not accepted in files). Files may also
/// write `prioritized`, which becomes `cpu_prioritized` or `gpu_prioritized` by the op's
/// device.
const PROPERTIES: [(FnProperty, &str); 7] = [
    (FnProperty::Normal, "normal"),
    (FnProperty::CopyFromGpu, "copy_from_gpu"),
    (FnProperty::CopyToGpu, "copy_to_gpu"),
    (FnProperty::CpuPrioritized, "cpu_prioritized"),
    (FnProperty::GpuPrioritized, "gpu_prioritized"),
    (FnProperty::Async, "async"),
    (FnProperty::NoSkip, "no_skip"),
];

/// The property of exactly this name, if a file may name it.
pub(crate) fn parse_property(text: &str) -> Option<FnProperty> {
    PROPERTIES
        .iter()
        .find(|(_, name)| *name == text)
        .map(|(property, _)| *property)
}

/// A property's name as a file writes it (`delete_var` for the one files may not name).
pub(crate) fn property_name(property: FnProperty) -> &'static str {
    PROPERTIES
        .iter()
        .find(|(known, _)| *known == property)
        .map_or("delete_var", |(_, name)| name)
}

/// Every property a file may name, comma-separated, for messages.
pub(crate) fn property_names() -> String {
    comma_list(PROPERTIES.iter().map(|(_, name)| name))
}

/// The device kind a property needs: `Some(true)` a GPU, `Some(false)` a CPU.
pub(crate) fn needs_gpu(property: FnProperty) -> Option<bool> {
    match property {
        FnProperty::CopyFromGpu | FnProperty::CopyToGpu | FnProperty::GpuPrioritized => Some(true),
        FnProperty::CpuPrioritized => Some(false),
        FnProperty::Normal | FnProperty::Async | FnProperty::NoSkip | FnProperty::DeleteVar => None,
    }
}

/// Element type of a tensor, by the name a workload file gives it (`f32`, `bf16`, ...).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// IEEE half.
    F16,
    /// bfloat16.
    Bf16,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
    /// Byte.
    U8,
}

impl Dtype {
    /// The name a workload file uses.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every name, comma-separated, for messages.
    pub fn names() -> String {
        comma_list(Self::VARIANTS)
    }

    /// Bytes per element.
    pub(crate) fn size_bytes(self) -> u64 {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::U8 => 1,
        }
    }
}

/// A tensor's contents before the first op, by the name a workload file gives it.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantArray,
)]
#[strum(serialize_all = "snake_case")]
pub enum Init {
    /// All zero.
    Zeros,
    /// All one (RandSumExpr starts from 1.0).
    Ones,
    /// Deterministic pseudo-random values in [-1, 1).
    Random,
}

impl Init {
    /// The name a workload file uses.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Every name, comma-separated, for messages.
    pub fn names() -> String {
        comma_list(Self::VARIANTS)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn contexts_parse_strictly() {
        assert_eq!(parse_context("gpu").ok(), Some(Context::gpu(0)));
        assert_eq!(parse_context("cpu:3").ok(), Some(Context::cpu(3)));
        for bad in [
            "",
            "cpu:",
            "gpu:-1",
            "gpu:x",
            "GPU:0",
            "gpu:99999999999",
            "gpu:1024",
            "cpu:0:1",
            "cpu(0)",
        ] {
            assert!(parse_context(bad).is_err(), "{bad}");
        }
        assert_eq!(ContextText(Context::gpu(2)).to_string(), "gpu:2");
        assert_eq!(ContextText(Context::cpu(0)).to_string(), "cpu:0");
        assert!(is_gpu(Context::gpu(0)) && !is_gpu(Context::cpu(1)));
    }

    #[test]
    fn vocabularies_round_trip() {
        for (property, name) in PROPERTIES {
            assert_eq!(parse_property(name), Some(property));
            assert_eq!(property_name(property), name);
        }
        assert_eq!(parse_property("delete_var"), None);
        assert_eq!(property_name(FnProperty::DeleteVar), "delete_var");
        assert_eq!(
            property_names(),
            "normal, copy_from_gpu, copy_to_gpu, cpu_prioritized, gpu_prioritized, async, no_skip"
        );
        assert_eq!(needs_gpu(FnProperty::CopyToGpu), Some(true));
        assert_eq!(needs_gpu(FnProperty::CpuPrioritized), Some(false));
        assert_eq!(needs_gpu(FnProperty::NoSkip), None);
        assert_eq!("bf16".parse::<Dtype>(), Ok(Dtype::Bf16));
        assert_eq!(Init::names(), "zeros, ones, random");
    }
}
