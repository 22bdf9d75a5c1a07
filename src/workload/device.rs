//! The small vocabularies of a workload file: device contexts, MXNet's `FnProperty`, dtypes
//! and tensor initialisers. Each parses from the exact lowercase name and prints it back.
#![forbid(unsafe_code)]

use std::fmt;

use super::error::Problem;

/// Where a tensor lives and an op runs: `cpu`, `cpu:N`, `gpu`, `gpu:N`.
///
/// ```
/// use enginetop::workload::Context;
///
/// assert_eq!(Context::parse("gpu:1"), Ok(Context::Gpu(1)));
/// assert_eq!(Context::parse("cpu"), Ok(Context::Cpu(0)));
/// assert!(Context::parse("tpu:0").is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Context {
    /// A CPU device (MXNet numbers CPU contexts too; `cpu` is `cpu:0`).
    Cpu(u32),
    /// A GPU device.
    Gpu(u32),
}

/// Device numbers above this are refused (a typo rather than a machine).
pub const MAX_DEVICE_ID: u32 = 1023;

impl Context {
    /// Parses `cpu`, `cpu:N`, `gpu`, `gpu:N` (N at most `MAX_DEVICE_ID`, 1023).
    pub fn parse(text: &str) -> Result<Self, Problem> {
        Self::parse_exact(text).map_err(|()| Problem::BadDevice {
            value: text.to_string(),
        })
    }

    fn parse_exact(text: &str) -> Result<Self, ()> {
        let (kind, id) = match text.split_once(':') {
            Some((kind, digits))
                if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
            {
                (kind, digits.parse::<u32>().map_err(|_| ())?)
            }
            Some(_) => return Err(()),
            None => (text, 0),
        };
        if id > MAX_DEVICE_ID {
            return Err(());
        }
        match kind {
            "cpu" => Ok(Context::Cpu(id)),
            "gpu" => Ok(Context::Gpu(id)),
            _ => Err(()),
        }
    }

    /// Whether this is a GPU.
    pub fn is_gpu(self) -> bool {
        matches!(self, Context::Gpu(_))
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Context::Cpu(id) => write!(f, "cpu:{id}"),
            Context::Gpu(id) => write!(f, "gpu:{id}"),
        }
    }
}

/// Generates a closed vocabulary: the enum, its names, `ALL`, `name()` and `FromStr`.
macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The name a workload file uses.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// Every name, comma-separated, for messages.
            pub fn names() -> String {
                super::error::comma_list(Self::ALL.iter().map(|value| value.name()))
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = ();
            fn from_str(text: &str) -> Result<Self, ()> {
                Self::ALL.iter().copied().find(|value| value.name() == text).ok_or(())
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

vocabulary! {
    /// MXNet's `FnProperty`: which queue an op goes to (`DeleteVar` is engine-internal and not
    /// accepted in files). Files may also write `prioritized`, which becomes
    /// `cpu_prioritized` or `gpu_prioritized` by the op's device.
    FnProperty {
        /// An ordinary op on its device's normal queue.
        Normal = "normal",
        /// A copy from a GPU to the host (GPU copy queue).
        CopyFromGpu = "copy_from_gpu",
        /// A copy from the host to a GPU (GPU copy queue).
        CopyToGpu = "copy_to_gpu",
        /// CPU priority queue (MXNet runs parameter updates there).
        CpuPrioritized = "cpu_prioritized",
        /// GPU priority queue.
        GpuPrioritized = "gpu_prioritized",
        /// Completes asynchronously; run inline on the pushing thread when ready.
        Async = "async",
        /// Runs even when an input carries an error.
        NoSkip = "no_skip",
    }
}

impl FnProperty {
    /// The device kind this property needs: `Some(true)` a GPU, `Some(false)` a CPU.
    pub fn needs_gpu(self) -> Option<bool> {
        match self {
            FnProperty::CopyFromGpu | FnProperty::CopyToGpu | FnProperty::GpuPrioritized => {
                Some(true)
            }
            FnProperty::CpuPrioritized => Some(false),
            FnProperty::Normal | FnProperty::Async | FnProperty::NoSkip => None,
        }
    }
}

vocabulary! {
    /// Element type of a tensor.
    Dtype {
        /// 32-bit float.
        F32 = "f32",
        /// 64-bit float.
        F64 = "f64",
        /// IEEE half.
        F16 = "f16",
        /// bfloat16.
        Bf16 = "bf16",
        /// 32-bit signed integer.
        I32 = "i32",
        /// 64-bit signed integer.
        I64 = "i64",
        /// Byte.
        U8 = "u8",
    }
}

impl Dtype {
    /// Bytes per element.
    pub fn size_bytes(self) -> u64 {
        match self {
            Dtype::F64 | Dtype::I64 => 8,
            Dtype::F32 | Dtype::I32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::U8 => 1,
        }
    }
}

vocabulary! {
    /// A tensor's contents before the first op.
    Init {
        /// All zero.
        Zeros = "zeros",
        /// All one (RandSumExpr starts from 1.0).
        Ones = "ones",
        /// Deterministic pseudo-random values in [-1, 1).
        Random = "random",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_parse_strictly() {
        assert_eq!(Context::parse("gpu"), Ok(Context::Gpu(0)));
        assert_eq!(Context::parse("cpu:3"), Ok(Context::Cpu(3)));
        for bad in [
            "",
            "cpu:",
            "gpu:-1",
            "gpu:x",
            "GPU:0",
            "gpu:99999999999",
            "gpu:1024",
            "cpu:0:1",
        ] {
            assert!(Context::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Context::Gpu(2).to_string(), "gpu:2");
    }

    #[test]
    fn vocabularies_round_trip() {
        for property in FnProperty::ALL {
            assert_eq!(property.name().parse::<FnProperty>(), Ok(*property));
        }
        assert_eq!("bf16".parse::<Dtype>(), Ok(Dtype::Bf16));
        assert!("delete_var".parse::<FnProperty>().is_err());
        assert_eq!(Init::names(), "zeros, ones, random");
    }
}
