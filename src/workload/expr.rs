//! Values, `${...}` templates and the small expression language of workload files.
//!
//! An expression is integer arithmetic (`+ - * / %`, parentheses, unary `-`), comparisons
//! (`== != < <= > >=`, not chained), logic (`&& || !`), a choice (`cond ? a : b`),
//! single-quoted strings (`'host'`; `+` joins a string with anything), variables (parameters,
//! template arguments, block indices) and a few functions: `min(a, b)`, `max(a, b)`,
//! `rand(lo, hi)` (a deterministic pseudo-random integer in `lo..=hi`, seeded by the `seed`
//! parameter), `is_gpu(device)`, `is_cpu(device)`. Names and other strings embed expressions
//! as `${...}`; numeric fields take an expression directly (`"batch * 2"`) or wrapped
//! (`"${batch * 2}"`).
//!
//! Precedence, lowest first, as in C and Rust: `?:` (right-associative), `||`, `&&`,
//! comparisons, `+ -`, `* / %`, unary `- !`. `&&`, `||` and `?:` short-circuit: the side not
//! taken is parsed and its names are checked (an unknown variable or function, or a wrong
//! argument count, is an error there too), but nothing in it is computed, so
//! `n == 0 || 100 / n > 2` does not divide by zero and a skipped `rand()` draws nothing.
//!
//! Evaluation never panics: overflow, division by zero and nesting deeper than
//! [`MAX_NESTING`] are errors.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;

use super::device::{is_gpu, parse_context};

/// Why an expression or a `${...}` template cannot be evaluated; each message names the
/// problem and what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// `${` with no `}` after it.
    #[error("a `${{` without its closing `}}`: expected `${{expression}}`")]
    UnclosedTemplate,
    /// A numeric field's value is neither an integer nor a boolean.
    #[error("it is {kind} ({value}): expected an integer")]
    NotAnInteger {
        /// The value's kind (`a string`, ...).
        kind: &'static str,
        /// The value, as written in messages.
        value: String,
    },
    /// A token after a complete expression.
    #[error("unexpected {0} after a complete expression: expected an operator or the end")]
    Trailing(String),
    /// An integer literal beyond `i64`.
    #[error("`{0}` does not fit a 64-bit integer: expected at most {max}", max = i64::MAX)]
    IntegerTooLarge(String),
    /// `'` with no closing `'`.
    #[error("a string without its closing `'`: expected 'text'")]
    UnclosedString,
    /// A character that starts no token.
    #[error(
        "unexpected character {0:?}: expected numbers, 'strings', names, \
         + - * / % ( ) , comparisons, && || ! ? :"
    )]
    BadCharacter(char),
    /// An empty expression.
    #[error("it is empty: expected an expression such as `batch * 2`")]
    Empty,
    /// A token other than the operator the grammar needs here.
    #[error("expected `{expected}`, found {found}")]
    ExpectedOperator {
        /// The operator needed.
        expected: &'static str,
        /// The token found, as written.
        found: String,
    },
    /// The expression ends where the grammar needs more.
    #[error("it ends early: expected {expected}")]
    EndsEarly {
        /// What was needed, in words.
        expected: String,
    },
    /// Nesting deeper than `MAX_NESTING`.
    #[error(
        "it nests deeper than {max} levels of parentheses, unary operators and \
         `?:`: expected at most {max}",
        max = MAX_NESTING
    )]
    TooDeep,
    /// `a < b < c`.
    #[error(
        "comparisons do not chain (`a {first} b {second} c`): expected one comparison, \
         e.g. `a {first} b && b {second} c`"
    )]
    ChainedComparison {
        /// The first comparison's operator.
        first: &'static str,
        /// The second's.
        second: &'static str,
    },
    /// A token that cannot start an operand.
    #[error("unexpected {0}: expected a number, a name or `(`")]
    UnexpectedToken(String),
    /// A name that is no variable in scope.
    #[error(
        "unknown variable `{name}`: expected a parameter, template argument or block \
         index ({known})"
    )]
    UnknownVariable {
        /// The name.
        name: String,
        /// The names in scope, comma-separated.
        known: String,
    },
    /// A condition that is neither a boolean nor an integer.
    #[error("{kind} ({value}) is not a condition: expected a boolean or an integer")]
    NotACondition {
        /// The value's kind.
        kind: &'static str,
        /// The value, as written in messages.
        value: String,
    },
    /// Arithmetic on something other than two integers.
    #[error("`{a} {op} {b}` needs two integers: expected integers, found {a_kind} and {b_kind}")]
    NotIntegers {
        /// The left operand, as written in messages.
        a: String,
        /// The operator (`,` for a function's arguments).
        op: String,
        /// The right operand, as written in messages.
        b: String,
        /// The left operand's kind.
        a_kind: &'static str,
        /// The right operand's kind.
        b_kind: &'static str,
    },
    /// Integer overflow.
    #[error("`{a} {op} {b}` overflows a 64-bit integer: expected smaller values")]
    Overflow {
        /// The left operand.
        a: i64,
        /// The operator.
        op: String,
        /// The right operand.
        b: i64,
    },
    /// Division or remainder by zero.
    #[error("`{a} {op} {b}` divides by zero: expected a non-zero divisor")]
    DivideByZero {
        /// The dividend.
        a: i64,
        /// `/` or `%`.
        op: String,
        /// The divisor.
        b: i64,
    },
    /// A comparison of values it does not order.
    #[error(
        "cannot compare {a_kind} with {b_kind} using `{op}`: expected two integers (or two \
         strings or booleans for == and !=)"
    )]
    Incomparable {
        /// The operator.
        op: String,
        /// The left operand's kind.
        a_kind: &'static str,
        /// The right operand's kind.
        b_kind: &'static str,
    },
    /// A call of no known function.
    #[error("unknown function `{0}`: expected one of {functions}", functions = FUNCTIONS)]
    UnknownFunction(String),
    /// A call with the wrong number of arguments.
    #[error(
        "{name}() takes {count} argument{plural}, found {found}: expected {what}",
        plural = if *.count == 1 { "" } else { "s" }
    )]
    ArgumentCount {
        /// The function.
        name: &'static str,
        /// The arguments it takes.
        count: usize,
        /// The arguments given.
        found: usize,
        /// What they are, in words.
        what: &'static str,
    },
    /// `rand(lo, hi)` with `lo > hi`.
    #[error("rand({lo}, {hi}) has lo > hi: expected lo <= hi")]
    EmptyRange {
        /// The low end.
        lo: i64,
        /// The high end.
        hi: i64,
    },
    /// `is_gpu` / `is_cpu` of a string that names no device.
    #[error("{name}({text:?}): expected a device such as cpu, cpu:0 or gpu:0")]
    NotADevice {
        /// The function.
        name: &'static str,
        /// The string given.
        text: String,
    },
    /// A call with arguments of the wrong kinds.
    #[error("{name}() cannot take {kinds}: expected {what}")]
    ArgumentKinds {
        /// The function.
        name: &'static str,
        /// The arguments' kinds (`an integer and a string`).
        kinds: String,
        /// What it takes, in words.
        what: &'static str,
    },
}

/// Parentheses, unary operators and `?:` nested deeper than this are refused.
pub(crate) const MAX_NESTING: usize = 64;

/// A value an expression can hold.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A 64-bit integer.
    Int(i64),
    /// A float (parameters only; expressions do not compute with floats).
    Float(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Text(String),
}

impl Value {
    /// The kind of value, in words, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Bool(_) => "a boolean",
            Value::Text(_) => "a string",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(value) => write!(f, "{value}"),
            Value::Float(value) => write!(f, "{value:?}"),
            Value::Bool(value) => write!(f, "{value}"),
            Value::Text(value) => f.write_str(value),
        }
    }
}

/// The variables an expression can see: the parameters, then local bindings (template
/// arguments, block indices; later bindings shadow earlier ones), and the random stream.
pub(crate) struct Vars<'g> {
    globals: &'g BTreeMap<String, Value>,
    locals: Vec<(String, Value)>,
}

impl<'g> Vars<'g> {
    /// Only the parameters.
    pub(crate) fn new(globals: &'g BTreeMap<String, Value>) -> Self {
        Vars {
            globals,
            locals: Vec::new(),
        }
    }

    /// Binds `name` until the matching [`Vars::pop`].
    pub(crate) fn push(&mut self, name: &str, value: Value) {
        self.locals.push((name.to_string(), value));
    }

    /// Drops the latest binding.
    pub(crate) fn pop(&mut self) {
        self.locals.pop();
    }

    /// A fresh scope with the same parameters and no locals (a template's).
    pub(crate) fn fresh(&self) -> Vars<'g> {
        Vars::new(self.globals)
    }

    fn get(&self, name: &str) -> Option<&Value> {
        self.locals
            .iter()
            .rev()
            .find(|(local, _)| local == name)
            .map(|(_, value)| value)
            .or_else(|| self.globals.get(name))
    }

    fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.globals.keys().map(String::as_str).collect();
        names.extend(self.locals.iter().map(|(name, _)| name.as_str()));
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// SplitMix64: the deterministic stream behind `rand(lo, hi)`.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A stream from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (`lo <= hi`).
    fn in_range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = hi.abs_diff(lo);
        let offset = match span.checked_add(1) {
            Some(count) => self.next_u64() % count,
            None => self.next_u64(),
        };
        lo.wrapping_add(offset as i64)
    }
}

/// Evaluates `text`: a string with `${expr}` parts. A string that is exactly one `${expr}`
/// keeps the expression's type; anything else becomes a string.
pub(crate) fn interpolate(text: &str, vars: &Vars, rng: &mut Rng) -> Result<Value, ExprError> {
    let mut pieces: Vec<Value> = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        literal.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or(ExprError::UnclosedTemplate)?;
        if !literal.is_empty() {
            pieces.push(Value::Text(std::mem::take(&mut literal)));
        }
        pieces.push(evaluate(&after[..end], vars, rng)?);
        rest = &after[end + 1..];
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        pieces.push(Value::Text(literal));
    }
    if pieces.len() == 1 {
        return Ok(pieces.remove(0));
    }
    Ok(Value::Text(pieces.iter().map(Value::to_string).collect()))
}

/// Evaluates a numeric field's expression (`"batch * 2"` or `"${batch * 2}"`) to an integer
/// (a boolean counts as 0 or 1, so `repeat = "i > 0"` includes a body conditionally).
pub(crate) fn evaluate_int(text: &str, vars: &Vars, rng: &mut Rng) -> Result<i64, ExprError> {
    match evaluate(unwrap_braces(text), vars, rng)? {
        Value::Int(value) => Ok(value),
        Value::Bool(truth) => Ok(i64::from(truth)),
        other => Err(ExprError::NotAnInteger {
            kind: other.kind(),
            value: other.to_string(),
        }),
    }
}

/// Evaluates a condition (`"is_gpu(device)"` or `"${r > 0}"`): a boolean, or an integer
/// (non-zero is true).
pub(crate) fn evaluate_condition(
    text: &str,
    vars: &Vars,
    rng: &mut Rng,
) -> Result<bool, ExprError> {
    truthy(&evaluate(unwrap_braces(text), vars, rng)?)
}

/// `expr` from `${expr}`; other text as it is.
fn unwrap_braces(text: &str) -> &str {
    let trimmed = text.trim();
    trimmed
        .strip_prefix("${")
        .and_then(|body| body.strip_suffix('}'))
        .unwrap_or(trimmed)
}

/// Evaluates one expression (no `${}`).
pub(crate) fn evaluate(text: &str, vars: &Vars, rng: &mut Rng) -> Result<Value, ExprError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
        depth: 0,
        skipping: false,
        vars,
        rng,
    };
    let value = parser.choice()?;
    match parser.tokens.get(parser.at) {
        None => Ok(value),
        Some(token) => Err(ExprError::Trailing(token.to_string())),
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Token {
    Int(i64),
    Text(String),
    Name(String),
    Op(&'static str),
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Int(value) => write!(f, "`{value}`"),
            Token::Text(text) => write!(f, "'{text}'"),
            Token::Name(name) => write!(f, "`{name}`"),
            Token::Op(op) => write!(f, "`{op}`"),
        }
    }
}

const OPERATORS: [&str; 19] = [
    "==", "!=", "<=", ">=", "&&", "||", "+", "-", "*", "/", "%", "(", ")", ",", "<", ">", "!", "?",
    ":",
];

const COMPARISONS: [&str; 6] = ["==", "!=", "<", "<=", ">", ">="];

fn tokenize(text: &str) -> Result<Vec<Token>, ExprError> {
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    while let Some(first) = rest.chars().next() {
        let (token, len) = if first.is_ascii_digit() {
            let len = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let value = rest[..len]
                .parse::<i64>()
                .map_err(|_| ExprError::IntegerTooLarge(rest[..len].to_string()))?;
            (Token::Int(value), len)
        } else if first.is_ascii_alphabetic() || first == '_' {
            let len = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            (Token::Name(rest[..len].to_string()), len)
        } else if first == '\'' {
            let end = rest[1..].find('\'').ok_or(ExprError::UnclosedString)?;
            (Token::Text(rest[1..1 + end].to_string()), end + 2)
        } else if let Some(op) = OPERATORS.iter().find(|op| rest.starts_with(**op)) {
            (Token::Op(op), op.len())
        } else {
            return Err(ExprError::BadCharacter(first));
        };
        tokens.push(token);
        rest = rest[len..].trim_start();
    }
    if tokens.is_empty() {
        return Err(ExprError::Empty);
    }
    Ok(tokens)
}

/// A recursive-descent parser that evaluates as it parses, one function per precedence level
/// (lowest first: [`Parser::choice`], [`Parser::either`], [`Parser::both`],
/// [`Parser::comparison`], [`Parser::sum`], [`Parser::product`], [`Parser::unary`]).
///
/// Short-circuiting: the side of `&&`, `||` or `?:` that is not taken is still parsed, and
/// its names (variables, functions and their argument counts) are still checked, but with
/// `skipping` set nothing in it is computed: no overflow, division or type error, no
/// `rand()` draw.
struct Parser<'t, 'v, 'g, 'r> {
    tokens: &'t [Token],
    at: usize,
    depth: usize,
    skipping: bool,
    vars: &'v Vars<'g>,
    rng: &'r mut Rng,
}

type Binary = fn(&Value, &Value) -> Result<Value, ExprError>;
type Level<'t, 'v, 'g, 'r> = fn(&mut Parser<'t, 'v, 'g, 'r>) -> Result<Value, ExprError>;

/// What a skipped operand stands for; never computed with.
const SKIPPED: Value = Value::Int(0);

impl<'t, 'v, 'g, 'r> Parser<'t, 'v, 'g, 'r> {
    fn peek_op(&self, ops: &[&'static str]) -> Option<&'static str> {
        match self.tokens.get(self.at) {
            Some(Token::Op(op)) if ops.contains(op) => Some(op),
            _ => None,
        }
    }

    fn expect_op(&mut self, op: &'static str) -> Result<(), ExprError> {
        match self.tokens.get(self.at) {
            Some(Token::Op(found)) if *found == op => {
                self.at += 1;
                Ok(())
            }
            Some(token) => Err(ExprError::ExpectedOperator {
                expected: op,
                found: token.to_string(),
            }),
            None => Err(ExprError::EndsEarly {
                expected: format!("`{op}`"),
            }),
        }
    }

    /// One level deeper (parentheses, unary operators, `?:`), refused past [`MAX_NESTING`].
    fn descend(&mut self) -> Result<(), ExprError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return Err(ExprError::TooDeep);
        }
        Ok(())
    }

    /// `compute()`, or [`SKIPPED`] on a side that is not taken.
    fn computed(
        &self,
        compute: impl FnOnce() -> Result<Value, ExprError>,
    ) -> Result<Value, ExprError> {
        if self.skipping {
            Ok(SKIPPED)
        } else {
            compute()
        }
    }

    /// Parses with `level`, skipping evaluation when `skip` (or when already skipping).
    fn parse_side(&mut self, skip: bool, level: Level<'t, 'v, 'g, 'r>) -> Result<Value, ExprError> {
        let outer = self.skipping;
        self.skipping = outer || skip;
        let value = level(self);
        self.skipping = outer;
        value
    }

    fn binary_level(
        &mut self,
        ops: &[&'static str],
        next: Level<'t, 'v, 'g, 'r>,
        op_of: fn(&'static str) -> Binary,
    ) -> Result<Value, ExprError> {
        let mut left = next(self)?;
        while let Some(op) = self.peek_op(ops) {
            self.at += 1;
            let right = next(self)?;
            let combined = self.computed(|| op_of(op)(&left, &right))?;
            left = combined;
        }
        Ok(left)
    }

    /// `cond ? a : b`: the lowest level, right-associative; only the branch taken is
    /// evaluated.
    fn choice(&mut self) -> Result<Value, ExprError> {
        let condition = self.either()?;
        if self.peek_op(&["?"]).is_none() {
            return Ok(condition);
        }
        self.at += 1;
        self.descend()?;
        let take_first = !self.skipping && truthy(&condition)?;
        let first = self.parse_side(!take_first, Self::choice)?;
        self.expect_op(":")?;
        let second = self.parse_side(take_first, Self::choice)?;
        self.depth -= 1;
        Ok(if take_first { first } else { second })
    }

    /// `a || b`: below `&&`; `b` is evaluated only when `a` is false.
    fn either(&mut self) -> Result<Value, ExprError> {
        let mut value = self.both()?;
        while self.peek_op(&["||"]).is_some() {
            self.at += 1;
            let left_true = !self.skipping && truthy(&value)?;
            let right = self.parse_side(left_true, Self::both)?;
            let combined = self.computed(|| Ok(Value::Bool(left_true || truthy(&right)?)))?;
            value = combined;
        }
        Ok(value)
    }

    /// `a && b`: above `||`; `b` is evaluated only when `a` is true.
    fn both(&mut self) -> Result<Value, ExprError> {
        let mut value = self.comparison()?;
        while self.peek_op(&["&&"]).is_some() {
            self.at += 1;
            let left_false = !self.skipping && !truthy(&value)?;
            let right = self.parse_side(left_false, Self::comparison)?;
            let combined = self.computed(|| Ok(Value::Bool(!left_false && truthy(&right)?)))?;
            value = combined;
        }
        Ok(value)
    }

    /// `a < b`: one comparison; `a < b < c` is refused, as in Rust.
    fn comparison(&mut self) -> Result<Value, ExprError> {
        let left = self.sum()?;
        let Some(op) = self.peek_op(&COMPARISONS) else {
            return Ok(left);
        };
        self.at += 1;
        let right = self.sum()?;
        if let Some(next) = self.peek_op(&COMPARISONS) {
            return Err(ExprError::ChainedComparison {
                first: op,
                second: next,
            });
        }
        self.computed(|| compare(op, &left, &right))
    }

    fn sum(&mut self) -> Result<Value, ExprError> {
        self.binary_level(&["+", "-"], Self::product, |op| match op {
            "+" => add,
            _ => |a, b| arithmetic(a, b, "-", i64::checked_sub),
        })
    }

    fn product(&mut self) -> Result<Value, ExprError> {
        self.binary_level(&["*", "/", "%"], Self::unary, |op| match op {
            "*" => |a, b| arithmetic(a, b, "*", i64::checked_mul),
            "/" => |a, b| divide(a, b, "/", i64::checked_div),
            _ => |a, b| divide(a, b, "%", i64::checked_rem),
        })
    }

    fn unary(&mut self) -> Result<Value, ExprError> {
        self.descend()?;
        let value = match self.peek_op(&["-", "!"]) {
            Some("-") => {
                self.at += 1;
                let value = self.unary()?;
                self.computed(|| arithmetic(&Value::Int(0), &value, "-", i64::checked_sub))
            }
            Some(_) => {
                self.at += 1;
                let value = self.unary()?;
                self.computed(|| truthy(&value).map(|truth| Value::Bool(!truth)))
            }
            None => self.atom(),
        };
        self.depth -= 1;
        value
    }

    fn atom(&mut self) -> Result<Value, ExprError> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        match token {
            Some(Token::Int(value)) => Ok(Value::Int(value)),
            Some(Token::Text(text)) => Ok(Value::Text(text)),
            Some(Token::Op("(")) => {
                let value = self.choice()?;
                self.expect_op(")")?;
                Ok(value)
            }
            Some(Token::Name(name)) if self.peek_op(&["("]).is_some() => self.call(&name),
            Some(Token::Name(name)) => self.variable(&name),
            Some(token) => Err(ExprError::UnexpectedToken(token.to_string())),
            None => Err(ExprError::EndsEarly {
                expected: "a number, a name or `(`".to_string(),
            }),
        }
    }

    /// A variable's value; an unknown name is an error on a skipped side too.
    fn variable(&self, name: &str) -> Result<Value, ExprError> {
        self.vars
            .get(name)
            .cloned()
            .ok_or_else(|| ExprError::UnknownVariable {
                name: name.to_string(),
                known: self.vars.names().join(", "),
            })
    }

    /// A call; an unknown function or a wrong argument count is an error on a skipped side
    /// too.
    fn call(&mut self, name: &str) -> Result<Value, ExprError> {
        let function = Function::named(name)?;
        self.expect_op("(")?;
        let mut args = Vec::new();
        if self.peek_op(&[")"]).is_none() {
            args.push(self.choice()?);
            while self.peek_op(&[","]).is_some() {
                self.at += 1;
                args.push(self.choice()?);
            }
        }
        self.expect_op(")")?;
        function.check_count(args.len())?;
        if self.skipping {
            return Ok(SKIPPED);
        }
        function.apply(&args, self.rng)
    }
}

/// Whether a value counts as true: a boolean, or a non-zero integer.
pub(crate) fn truthy(value: &Value) -> Result<bool, ExprError> {
    match value {
        Value::Bool(truth) => Ok(*truth),
        Value::Int(number) => Ok(*number != 0),
        other => Err(ExprError::NotACondition {
            kind: other.kind(),
            value: other.to_string(),
        }),
    }
}

fn ints(a: &Value, b: &Value, op: &str) -> Result<(i64, i64), ExprError> {
    match (a, b) {
        (Value::Int(a), Value::Int(b)) => Ok((*a, *b)),
        _ => Err(ExprError::NotIntegers {
            a: a.to_string(),
            op: op.to_string(),
            b: b.to_string(),
            a_kind: a.kind(),
            b_kind: b.kind(),
        }),
    }
}

fn arithmetic(
    a: &Value,
    b: &Value,
    op: &str,
    f: fn(i64, i64) -> Option<i64>,
) -> Result<Value, ExprError> {
    let (x, y) = ints(a, b, op)?;
    f(x, y).map(Value::Int).ok_or_else(|| ExprError::Overflow {
        a: x,
        op: op.to_string(),
        b: y,
    })
}

/// `+`: integer sum, or string join when either side is a string.
fn add(a: &Value, b: &Value) -> Result<Value, ExprError> {
    match (a, b) {
        (Value::Text(_), _) | (_, Value::Text(_)) => Ok(Value::Text(format!("{a}{b}"))),
        _ => arithmetic(a, b, "+", i64::checked_add),
    }
}

fn divide(
    a: &Value,
    b: &Value,
    op: &str,
    f: fn(i64, i64) -> Option<i64>,
) -> Result<Value, ExprError> {
    let (x, y) = ints(a, b, op)?;
    if y == 0 {
        return Err(ExprError::DivideByZero {
            a: x,
            op: op.to_string(),
            b: y,
        });
    }
    arithmetic(a, b, op, f)
}

fn compare(op: &str, a: &Value, b: &Value) -> Result<Value, ExprError> {
    let ordering = match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Text(x), Value::Text(y)) if matches!(op, "==" | "!=") => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) if matches!(op, "==" | "!=") => x.cmp(y),
        _ => {
            return Err(ExprError::Incomparable {
                op: op.to_string(),
                a_kind: a.kind(),
                b_kind: b.kind(),
            })
        }
    };
    let truth = match op {
        "==" => ordering.is_eq(),
        "!=" => ordering.is_ne(),
        "<" => ordering.is_lt(),
        "<=" => ordering.is_le(),
        ">" => ordering.is_gt(),
        _ => ordering.is_ge(),
    };
    Ok(Value::Bool(truth))
}

/// The functions an expression can call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Function {
    Min,
    Max,
    Rand,
    IsGpu,
    IsCpu,
}

const FUNCTIONS: &str = "min(a, b), max(a, b), rand(lo, hi), is_gpu(device), is_cpu(device)";

impl Function {
    fn named(name: &str) -> Result<Function, ExprError> {
        match name {
            "min" => Ok(Function::Min),
            "max" => Ok(Function::Max),
            "rand" => Ok(Function::Rand),
            "is_gpu" => Ok(Function::IsGpu),
            "is_cpu" => Ok(Function::IsCpu),
            _ => Err(ExprError::UnknownFunction(name.to_string())),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Function::Min => "min",
            Function::Max => "max",
            Function::Rand => "rand",
            Function::IsGpu => "is_gpu",
            Function::IsCpu => "is_cpu",
        }
    }

    /// How many arguments it takes and what they are, in words.
    fn signature(self) -> (usize, &'static str) {
        match self {
            Function::Min | Function::Max => (2, "2 integers"),
            Function::Rand => (2, "2 integers lo <= hi"),
            Function::IsGpu | Function::IsCpu => (1, "one device string such as 'gpu:0'"),
        }
    }

    fn check_count(self, found: usize) -> Result<(), ExprError> {
        let (count, what) = self.signature();
        if found == count {
            return Ok(());
        }
        Err(ExprError::ArgumentCount {
            name: self.name(),
            count,
            found,
            what,
        })
    }

    fn apply(self, args: &[Value], rng: &mut Rng) -> Result<Value, ExprError> {
        let name = self.name();
        match (self, args) {
            (Function::Min, [a, b]) => ints(a, b, ",").map(|(a, b)| Value::Int(a.min(b))),
            (Function::Max, [a, b]) => ints(a, b, ",").map(|(a, b)| Value::Int(a.max(b))),
            (Function::Rand, [a, b]) => {
                let (lo, hi) = ints(a, b, ",")?;
                if lo > hi {
                    return Err(ExprError::EmptyRange { lo, hi });
                }
                Ok(Value::Int(rng.in_range(lo, hi)))
            }
            (Function::IsGpu | Function::IsCpu, [Value::Text(text)]) => {
                let context = parse_context(text).map_err(|_| ExprError::NotADevice {
                    name,
                    text: text.clone(),
                })?;
                Ok(Value::Bool(is_gpu(context) == (self == Function::IsGpu)))
            }
            _ => Err(ExprError::ArgumentKinds {
                name,
                kinds: comma_list_of_kinds(args),
                what: self.signature().1,
            }),
        }
    }
}

/// `an integer and a string` for messages.
fn comma_list_of_kinds(args: &[Value]) -> String {
    args.iter()
        .map(Value::kind)
        .collect::<Vec<_>>()
        .join(" and ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> Result<Value, String> {
        let mut globals = BTreeMap::new();
        globals.insert("batch".to_string(), Value::Int(8));
        globals.insert("device".to_string(), Value::Text("gpu:1".to_string()));
        interpolate(text, &Vars::new(&globals), &mut Rng::new(1)).map_err(|error| error.to_string())
    }

    #[test]
    fn arithmetic_follows_precedence() {
        assert_eq!(eval("${1 + 2 * batch - (6 / 4) % 2}"), Ok(Value::Int(16)));
        assert_eq!(eval("${-batch}"), Ok(Value::Int(-8)));
        assert_eq!(eval("${min(batch, 3) + max(1, 2)}"), Ok(Value::Int(5)));
    }

    #[test]
    fn strings_interpolate_and_single_expressions_keep_their_type() {
        assert_eq!(eval("act_${batch}_x"), Ok(Value::Text("act_8_x".into())));
        assert_eq!(
            eval("${batch > 4 && is_gpu(device)}"),
            Ok(Value::Bool(true))
        );
        assert_eq!(eval("plain"), Ok(Value::Text("plain".into())));
        assert_eq!(eval("${device}"), Ok(Value::Text("gpu:1".into())));
        assert_eq!(
            eval("${is_gpu(device) ? 'dev' : 'host'}0"),
            Ok(Value::Text("dev0".into()))
        );
        assert_eq!(
            eval("${batch < 2 ? 1 : batch > 4 ? 2 : 3}"),
            Ok(Value::Int(2))
        );
        assert_eq!(eval("${'x' + batch * 2}"), Ok(Value::Text("x16".into())));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let cases = [
            ("${1 / 0}", "divides by zero"),
            ("${9223372036854775807 + 1}", "overflows"),
            ("${nope}", "unknown variable `nope`"),
            ("${1 +}", "ends early"),
            ("${1 2}", "unexpected `2`"),
            ("${foo(1)}", "unknown function"),
            ("${rand(3, 1)}", "lo > hi"),
            ("x${1", "without its closing"),
            ("${}", "empty"),
            ("${device * 1}", "needs two integers"),
            ("${'open}", "closing `'`"),
            ("${1 ? 2}", "expected `:`"),
            ("${1 < 2 < 3}", "comparisons do not chain (`a < b < c`)"),
            ("${batch == 8 != 0}", "e.g. `a == b && b != c`"),
            ("${(1 < 2) < 3}", "cannot compare a boolean with an integer"),
            (
                "${min(1)}",
                "min() takes 2 arguments, found 1: expected 2 integers",
            ),
            ("${is_gpu()}", "is_gpu() takes 1 argument, found 0"),
            ("${is_gpu(1)}", "is_gpu() cannot take an integer"),
        ];
        for (text, expected) in cases {
            let err = eval(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_stack_overflow() {
        let deep = format!("${{{}1{}}}", "(".repeat(10_000), ")".repeat(10_000));
        assert_eq!(
            eval(&deep).unwrap_err(),
            "it nests deeper than 64 levels of parentheses, unary operators and `?:`: expected \
             at most 64"
        );
        let negations = format!("${{{}1}}", "-".repeat(10_000));
        assert!(eval(&negations).unwrap_err().contains("nests deeper"));
        let choices = format!("${{{}1}}", "1 ? ".repeat(10_000));
        assert!(eval(&choices).unwrap_err().contains("nests deeper"));
    }

    #[test]
    fn and_binds_tighter_than_or() {
        // Were `&&` and `||` one left-to-right level, each would give the other answer.
        assert_eq!(eval("${1 || 0 && 0}"), Ok(Value::Bool(true)));
        assert_eq!(eval("${0 && 0 || 1}"), Ok(Value::Bool(true)));
        assert_eq!(eval("${(1 || 0) && 0}"), Ok(Value::Bool(false)));
        assert_eq!(eval("${0 || 1 && 0 || 0}"), Ok(Value::Bool(false)));
        assert_eq!(eval("${!0 && batch > 4}"), Ok(Value::Bool(true)));
        // A lone operand keeps its type; `&&` and `||` give booleans.
        assert_eq!(eval("${batch}"), Ok(Value::Int(8)));
        assert_eq!(eval("${batch && 2}"), Ok(Value::Bool(true)));
    }

    #[test]
    fn comparisons_bind_tighter_than_logic_and_arithmetic_tighter_than_comparisons() {
        assert_eq!(eval("${1 + 1 == 2 && 3 * 2 > 5}"), Ok(Value::Bool(true)));
        assert_eq!(
            eval("${batch - 8 == 0 || 1 / 0 == 0}"),
            Ok(Value::Bool(true))
        );
    }

    #[test]
    fn choice_is_lowest_and_right_associative() {
        // `||` inside the condition: `(0 || 1) ? 'a' : 'b'`, not `0 || (1 ? 'a' : 'b')`.
        assert_eq!(eval("${0 || 1 ? 'a' : 'b'}"), Ok(Value::Text("a".into())));
        // `1 ? 2 : (0 ? 3 : 4)`; left-associative would be `(1 ? 2 : 0) ? 3 : 4` = 3.
        assert_eq!(eval("${1 ? 2 : 0 ? 3 : 4}"), Ok(Value::Int(2)));
        assert_eq!(eval("${0 ? 2 : 0 ? 3 : 4}"), Ok(Value::Int(4)));
        // A choice in the middle needs no parentheses.
        assert_eq!(eval("${1 ? 0 ? 5 : 6 : 7}"), Ok(Value::Int(6)));
        assert_eq!(eval("${batch > 4 ? batch + 1 : 0}"), Ok(Value::Int(9)));
    }

    #[test]
    fn the_side_not_taken_is_not_evaluated() {
        let cases = [
            ("${0 && 1 / 0 == 1}", Value::Bool(false)),
            ("${1 || 1 / 0 == 1}", Value::Bool(true)),
            ("${batch == 0 || 100 / batch > 2}", Value::Bool(true)),
            ("${0 && 9223372036854775807 + 1}", Value::Bool(false)),
            ("${1 || rand(3, 1)}", Value::Bool(true)),
            ("${0 && 'text'}", Value::Bool(false)),
            ("${0 && is_gpu('nowhere')}", Value::Bool(false)),
            ("${1 ? 7 : 1 / 0}", Value::Int(7)),
            ("${0 ? 1 / 0 : 7}", Value::Int(7)),
            ("${0 && (1 ? 1 / 0 : 2)}", Value::Bool(false)),
            ("${0 ? (1 || 1 / 0) : -batch}", Value::Int(-8)),
            ("${1 || 0 && 1 / 0}", Value::Bool(true)),
        ];
        for (text, expected) in cases {
            assert_eq!(eval(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn the_side_taken_still_reports_its_errors() {
        let cases = [
            ("${1 && 1 / 0 == 1}", "divides by zero"),
            ("${0 || 1 / 0 == 1}", "divides by zero"),
            ("${0 ? 1 : 1 / 0}", "divides by zero"),
            ("${1 && 'text'}", "not a condition"),
            ("${'text' || 1}", "not a condition"),
        ];
        for (text, expected) in cases {
            let err = eval(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn names_and_syntax_are_checked_on_the_side_not_taken() {
        let cases = [
            ("${0 && nope}", "unknown variable `nope`"),
            ("${1 || nope}", "unknown variable `nope`"),
            ("${1 ? 2 : nope}", "unknown variable `nope`"),
            ("${0 && foo(1)}", "unknown function `foo`"),
            ("${1 || min(1, 2, 3)}", "min() takes 2 arguments, found 3"),
            ("${0 && (1 +}", "expected a number"),
            ("${1 || 1 < 2 < 3}", "comparisons do not chain"),
        ];
        for (text, expected) in cases {
            let err = eval(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn a_skipped_rand_draws_nothing() {
        let globals = BTreeMap::new();
        let vars = Vars::new(&globals);
        let draws = |text: &str| {
            let mut rng = Rng::new(5);
            let first = evaluate_int(text, &vars, &mut rng).unwrap();
            (
                first,
                evaluate_int("rand(0, 1000000)", &vars, &mut rng).unwrap(),
            )
        };
        let (_, after_plain) = draws("1");
        assert_eq!(draws("0 && rand(0, 9) > 0"), (0, after_plain));
        assert_eq!(draws("1 ? 4 : rand(0, 9)"), (4, after_plain));
        assert_ne!(draws("1 && rand(0, 9) >= 0").1, after_plain);
    }

    #[test]
    fn rand_is_deterministic_and_in_range() {
        let globals = BTreeMap::new();
        let vars = Vars::new(&globals);
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            (0..100)
                .map(|_| evaluate_int("rand(2, 19)", &vars, &mut rng).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        assert!(draw(7).iter().all(|n| (2..=19).contains(n)));
        let mut rng = Rng::new(0);
        let full = evaluate_int(
            "rand(-9223372036854775807 - 1, 9223372036854775807)",
            &vars,
            &mut rng,
        );
        assert!(full.is_ok());
    }
}
