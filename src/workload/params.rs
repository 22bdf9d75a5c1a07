//! `[params]` and `--set name=value` overrides.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use super::error::{comma_list, LoadResult, Located, Problem};
use super::expand::is_identifier;
use super::expr::Value;
use super::schema::{Literal, SpannedMap};

/// The spellings [`parse_flag`] takes, as a literal for `concat!`.
macro_rules! flag_spellings {
    () => {
        "true, false, 1 or 0"
    };
}

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
                mismatch: mismatch(default),
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

/// A value as the file would write it: strings quoted.
pub(crate) fn literal_text(value: &Value) -> String {
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
        Value::Bool(_) => parse_flag(text).map(Value::Bool),
        Value::Text(_) => Some(Value::Text(text.to_string())),
    }
}

/// Why a value [`parse_like`] refuses for a parameter like `default` is wrong, and what it
/// takes.
fn mismatch(default: &Value) -> &'static str {
    match default {
        Value::Int(_) => "is not an integer: expected an integer",
        Value::Float(_) => "is not a float: expected a finite number",
        Value::Bool(_) => concat!("is not a boolean: expected ", flag_spellings!()),
        Value::Text(_) => "is not text: expected any text",
    }
}

/// The spellings [`parse_flag`] takes, for messages.
pub(crate) const FLAG_SPELLINGS: &str = flag_spellings!();

/// A boolean written as `true` / `false` (any case) or `1` / `0`, as a command line or a
/// kernel flag gives it.
pub(crate) fn parse_flag(text: &str) -> Option<bool> {
    match text {
        "1" => Some(true),
        "0" => Some(false),
        _ if text.eq_ignore_ascii_case("true") => Some(true),
        _ if text.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag_file() -> SpannedMap {
        let text = "fused = false\nbatch = 4\nlr = 0.5\nmode = \"a\"\n";
        toml::from_str(text).unwrap()
    }

    fn set(name: &str, value: &str) -> Result<Value, String> {
        let overrides = Overrides::default().set(name, value);
        resolve(&flag_file(), &overrides)
            .map(|params| params[name].clone())
            .map_err(|located| located.problem.to_string())
    }

    #[test]
    fn a_boolean_parameter_takes_true_false_one_and_zero() {
        for (text, truth) in [
            ("1", true),
            ("0", false),
            ("true", true),
            ("false", false),
            ("TRUE", true),
            ("False", false),
        ] {
            assert_eq!(set("fused", text), Ok(Value::Bool(truth)), "{text}");
        }
    }

    #[test]
    fn a_refused_value_names_the_parameter_the_value_and_the_spellings() {
        assert_eq!(
            set("fused", "yes").unwrap_err(),
            "--set fused=yes is not a boolean: expected true, false, 1 or 0 (the file has \
             fused = false)"
        );
        assert_eq!(
            set("fused", "2").unwrap_err(),
            "--set fused=2 is not a boolean: expected true, false, 1 or 0 (the file has \
             fused = false)"
        );
        assert_eq!(
            set("batch", "true").unwrap_err(),
            "--set batch=true is not an integer: expected an integer (the file has batch = 4)"
        );
        assert_eq!(
            set("lr", "inf").unwrap_err(),
            "--set lr=inf is not a float: expected a finite number (the file has lr = 0.5)"
        );
        assert_eq!(set("mode", "1"), Ok(Value::Text("1".to_string())));
    }
}
