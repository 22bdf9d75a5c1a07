//! `[params]` and `--set name=value` overrides.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use super::error::{comma_list, LoadResult, Located, Problem};
use super::expand::is_identifier;
use super::expr::Value;
use super::schema::{Literal, SpannedMap};

/// Parameter values from the command line (`--set batch=16`), applied over a file's
/// `[params]`. Each value is parsed as the type the file declares.
///
/// ```
/// use enginetop::workload::{load_spec, Overrides};
///
/// let overrides = Overrides::from_args(["length=7"]).unwrap();
/// let graph = load_spec("chain", &overrides).unwrap();
/// assert_eq!(graph.iteration_ops().len(), 7);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Overrides {
    sets: Vec<(String, String)>,
}

impl Overrides {
    /// Parses `name=value` arguments (the values of repeated `--set` flags).
    pub fn from_args<S: AsRef<str>>(args: impl IntoIterator<Item = S>) -> Result<Self, Problem> {
        let mut overrides = Overrides::default();
        for arg in args {
            let arg = arg.as_ref();
            match arg.split_once('=') {
                Some((name, value)) if !name.trim().is_empty() => {
                    overrides = overrides.set(name.trim(), value.trim());
                }
                _ => return Err(Problem::BadSetArgument(arg.to_string())),
            }
        }
        Ok(overrides)
    }

    /// Adds `name=value`; a later value for the same name wins.
    pub fn set(mut self, name: &str, value: &str) -> Self {
        self.sets.push((name.to_string(), value.to_string()));
        self
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sets.is_empty()
    }
}

/// The file's parameters with `overrides` applied.
pub(crate) fn resolve(
    declared: &SpannedMap,
    overrides: &Overrides,
) -> LoadResult<BTreeMap<String, Value>> {
    let mut params = BTreeMap::new();
    for (name, literal) in declared {
        if !is_identifier(name.get_ref()) {
            return Err(Located::at(
                name.span(),
                Problem::BadName {
                    kind: "parameter",
                    name: name.get_ref().clone(),
                    reason: "is not an identifier: expected letters, digits and _ (not starting with a digit)",
                },
            ));
        }
        params.insert(name.get_ref().clone(), literal_value(literal.get_ref()));
    }
    for (name, text) in &overrides.sets {
        let Some(default) = params.get(name) else {
            let known = comma_list(params.keys());
            return Err(Located::nowhere(Problem::UnknownParam {
                name: name.clone(),
                known: if known.is_empty() {
                    "it declares none".to_string()
                } else {
                    known
                },
            }));
        };
        let value = parse_like(default, text).ok_or_else(|| {
            Located::nowhere(Problem::BadParamValue {
                name: name.clone(),
                value: text.clone(),
                expected: default.kind(),
                default: literal_text(default),
            })
        })?;
        params.insert(name.clone(), value);
    }
    Ok(params)
}

fn literal_value(literal: &Literal) -> Value {
    match literal {
        Literal::Int(value) => Value::Int(*value),
        Literal::Float(value) => Value::Float(*value),
        Literal::Bool(value) => Value::Bool(*value),
        Literal::Text(value) => Value::Text(value.clone()),
    }
}

fn literal_text(value: &Value) -> String {
    match value {
        Value::Text(text) => format!("{text:?}"),
        other => other.to_string(),
    }
}

/// `text` parsed as the same kind of value as `default`.
fn parse_like(default: &Value, text: &str) -> Option<Value> {
    match default {
        Value::Int(_) => text.parse().ok().map(Value::Int),
        Value::Float(_) => text
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Value::Float),
        Value::Bool(_) => text.parse().ok().map(Value::Bool),
        Value::Text(_) => Some(Value::Text(text.to_string())),
    }
}
