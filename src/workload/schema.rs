//! The workload file as written: serde structs that keep every value's byte span, so the
//! loader can point at the line and column of whatever it rejects. Nothing here is checked
//! beyond TOML types and field names; the loader ([`load_str`](super::load_str)) does the
//! rest.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

/// A value and the byte range it came from.
pub(crate) type Sp<T> = toml::Spanned<T>;

/// Named values: `[params]`, a block's `with`, an op's `params`.
pub(crate) type SpannedMap = BTreeMap<Sp<String>, Sp<Literal>>;

/// The whole file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkloadFile {
    /// Display name; the file stem when absent.
    pub(crate) name: Option<Sp<String>>,
    /// One line for `enginetop workloads`.
    pub(crate) description: Sp<String>,
    /// Parameters, overridable with `--set name=value`.
    #[serde(default)]
    pub(crate) params: SpannedMap,
    /// Device of tensors that name none (a template string); `cpu` when absent.
    pub(crate) default_device: Option<Sp<String>>,
    /// Reusable bodies, expanded by blocks that `use` them.
    #[serde(default)]
    pub(crate) templates: BTreeMap<Sp<String>, Sp<TemplateSpec>>,
    /// Top-level tensors.
    #[serde(default)]
    pub(crate) tensor: Vec<Sp<TensorSpec>>,
    /// Top-level ops, pushed in file order together with `block`.
    #[serde(default)]
    pub(crate) op: Vec<Sp<OpSpec>>,
    /// Top-level blocks, expanded in file order together with `op`.
    #[serde(default)]
    pub(crate) block: Vec<Sp<BlockSpec>>,
}

/// Tensors, ops and nested blocks: the content of the file, a block or a template.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Body<'a> {
    /// Tensors declared here.
    pub(crate) tensors: &'a [Sp<TensorSpec>],
    /// Ops, pushed in file order together with `blocks`.
    pub(crate) ops: &'a [Sp<OpSpec>],
    /// Nested blocks, expanded in file order together with `ops`.
    pub(crate) blocks: &'a [Sp<BlockSpec>],
}

impl WorkloadFile {
    /// The top-level body.
    pub(crate) fn body(&self) -> Body<'_> {
        Body {
            tensors: &self.tensor,
            ops: &self.op,
            blocks: &self.block,
        }
    }
}

impl TemplateSpec {
    /// The template's body.
    pub(crate) fn body(&self) -> Body<'_> {
        Body {
            tensors: &self.tensor,
            ops: &self.op,
            blocks: &self.block,
        }
    }
}

impl BlockSpec {
    /// The block's inline body.
    pub(crate) fn body(&self) -> Body<'_> {
        Body {
            tensors: &self.tensor,
            ops: &self.op,
            blocks: &self.block,
        }
    }
}

/// `[templates.NAME]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TemplateSpec {
    /// Variables a block must pass in `with`.
    #[serde(default)]
    pub(crate) args: Vec<Sp<String>>,
    /// Tensors in the template.
    #[serde(default)]
    pub(crate) tensor: Vec<Sp<TensorSpec>>,
    /// Ops in the template.
    #[serde(default)]
    pub(crate) op: Vec<Sp<OpSpec>>,
    /// Nested blocks in the template.
    #[serde(default)]
    pub(crate) block: Vec<Sp<BlockSpec>>,
}

/// `[[tensor]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TensorSpec {
    /// Name template.
    pub(crate) name: Sp<String>,
    /// Dimensions: integers or expressions.
    pub(crate) shape: Sp<Vec<Sp<Number>>>,
    /// Element type; `f32` when absent.
    pub(crate) dtype: Option<Sp<String>>,
    /// Device template; the file's `default_device` when absent.
    pub(crate) device: Option<Sp<String>>,
    /// Initial contents: `zeros` (default), `ones` or `random`.
    pub(crate) init: Option<Sp<String>>,
}

/// `[[op]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpSpec {
    /// Name template.
    pub(crate) name: Sp<String>,
    /// Kernel name.
    pub(crate) kernel: Sp<String>,
    /// Tensors the kernel reads, in the kernel's operand order.
    #[serde(default)]
    pub(crate) reads: Vec<Sp<ListItem>>,
    /// Tensors the kernel writes, in the kernel's operand order.
    #[serde(default)]
    pub(crate) writes: Vec<Sp<ListItem>>,
    /// Read dependencies the kernel does not touch.
    #[serde(default)]
    pub(crate) also_reads: Vec<Sp<ListItem>>,
    /// Write dependencies the kernel does not touch.
    #[serde(default)]
    pub(crate) also_writes: Vec<Sp<ListItem>>,
    /// Device context template; inferred from the tensors when absent.
    pub(crate) device: Option<Sp<String>>,
    /// MXNet FnProperty name.
    pub(crate) property: Option<Sp<String>>,
    /// Scheduling priority (higher runs first in priority queues).
    pub(crate) priority: Option<Sp<Number>>,
    /// Kernel parameters.
    #[serde(default)]
    pub(crate) params: SpannedMap,
}

/// `[[block]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BlockSpec {
    /// A label for the file's readers: accepted, not used by loading.
    #[allow(dead_code)] // read by serde only: `deny_unknown_fields` must accept the key
    pub(crate) name: Option<Sp<String>>,
    /// How many times the body is expanded; 1 when absent, 0 drops it.
    pub(crate) repeat: Option<Sp<Number>>,
    /// The repetition variable, 0-based; `i` when absent.
    pub(crate) index: Option<Sp<String>>,
    /// Expression; the block is expanded only when it is true (non-zero).
    pub(crate) when: Option<Sp<String>>,
    /// `iteration` (default) or `setup` (run once before the iterations); top level only.
    pub(crate) phase: Option<Sp<String>>,
    /// A template to expand instead of an inline body.
    #[serde(rename = "use")]
    pub(crate) use_template: Option<Sp<String>>,
    /// Template arguments.
    #[serde(default)]
    pub(crate) with: SpannedMap,
    /// Inline tensors.
    #[serde(default)]
    pub(crate) tensor: Vec<Sp<TensorSpec>>,
    /// Inline ops.
    #[serde(default)]
    pub(crate) op: Vec<Sp<OpSpec>>,
    /// Nested blocks.
    #[serde(default)]
    pub(crate) block: Vec<Sp<BlockSpec>>,
}

/// A number written as an integer or as an expression string (`"batch * 2"`, `"${c}"`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Number {
    /// An integer literal.
    Int(i64),
    /// An expression to evaluate.
    Expr(String),
}

/// A parameter or argument value as written.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Literal {
    /// Integer.
    Int(i64),
    /// Float.
    Float(f64),
    /// Boolean.
    Bool(bool),
    /// String (a template where templates are allowed).
    Text(String),
}

/// One entry of `reads` / `writes`: a tensor name template, or a generated list
/// `{ repeat = N, index = "j", name = "v${j}" }`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ListItem {
    /// One tensor name template.
    Name(String),
    /// Several names.
    Each(EachSpec),
}

/// `{ repeat = N, index = "j", name = "..." }` inside a tensor list.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EachSpec {
    /// How many names.
    pub(crate) repeat: Number,
    /// The repetition variable; `j` when absent.
    pub(crate) index: Option<String>,
    /// Name template.
    pub(crate) name: String,
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NumberVisitor;
        impl Visitor<'_> for NumberVisitor {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or an expression string such as \"batch * 2\"")
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Number, E> {
                Ok(Number::Int(value))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Number, E> {
                i64::try_from(value)
                    .map(Number::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Number, E> {
                Ok(Number::Expr(value.to_string()))
            }
        }
        deserializer.deserialize_any(NumberVisitor)
    }
}

impl<'de> Deserialize<'de> for Literal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LiteralVisitor;
        impl Visitor<'_> for LiteralVisitor {
            type Value = Literal;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an integer, a float, a boolean or a string (keys written after a [table] \
                     header belong to that table)",
                )
            }
            fn visit_bool<E: de::Error>(self, value: bool) -> Result<Literal, E> {
                Ok(Literal::Bool(value))
            }
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<Literal, E> {
                Ok(Literal::Int(value))
            }
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<Literal, E> {
                i64::try_from(value)
                    .map(Literal::Int)
                    .map_err(|_| E::custom("integer too large"))
            }
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<Literal, E> {
                Ok(Literal::Float(value))
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<Literal, E> {
                Ok(Literal::Text(value.to_string()))
            }
        }
        deserializer.deserialize_any(LiteralVisitor)
    }
}

impl<'de> Deserialize<'de> for ListItem {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListItemVisitor;
        impl<'de> Visitor<'de> for ListItemVisitor {
            type Value = ListItem;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a tensor name or { repeat = N, name = \"...${j}\" }")
            }
            fn visit_str<E: de::Error>(self, value: &str) -> Result<ListItem, E> {
                Ok(ListItem::Name(value.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ListItem, A::Error> {
                EachSpec::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(ListItem::Each)
            }
        }
        deserializer.deserialize_any(ListItemVisitor)
    }
}
