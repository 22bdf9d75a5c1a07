//! [`WorkloadError`]: what went wrong, where (file, line, column) and what was expected.
//!
//! Every problem the loader finds becomes one of these; its `Display` reads like a compiler
//! diagnostic, `file:line:column: problem: expected ...; fix`, so a user can jump to it.
#![forbid(unsafe_code)]

use std::fmt;
use std::ops::Range;

use super::expr::ExprError;

/// A workload that cannot be loaded, with the place in the file that is wrong.
///
/// ```
/// use enginetop::workload::{load_str, Overrides};
///
/// let err = load_str("description = 3\n", "x.toml", &Overrides::default()).unwrap_err();
/// assert_eq!(err.position.map(|p| (p.line, p.column)), Some((1, 15)));
/// assert!(err.to_string().starts_with("x.toml:1:15: "));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct WorkloadError {
    /// The file as the user named it (a path or a shipped workload's name).
    pub file: String,
    /// Where in the file, when the problem has a place (a `--set` problem has none).
    pub position: Option<Position>,
    /// What is wrong (boxed to keep `Result<_, WorkloadError>` small).
    pub problem: Box<Problem>,
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some(Position { line, column }) => {
                write!(f, "{}:{line}:{column}: {}", self.file, self.problem)
            }
            None => write!(f, "{}: {}", self.file, self.problem),
        }
    }
}

/// A 1-based line and column (in characters, not bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` in `text` (clamped to the text, and back to a character
    /// boundary).
    pub(crate) fn of_offset(text: &str, offset: usize) -> Self {
        let mut offset = offset.min(text.len());
        while !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        Position {
            line: before.matches('\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// What is wrong with a workload. Each message names the thing, the bad value, what is
/// expected and, where there is one, the fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// Not TOML, or TOML of the wrong shape (the `toml` crate's message).
    #[error("{0}")]
    Toml(String),
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Io(String),
    /// Neither a shipped workload nor a file.
    #[error(
        "no workload named {name:?}{guess}: expected one of the shipped workloads ({known}) or \
         the path of a .toml file"
    )]
    NotAWorkload {
        /// What the user passed.
        name: String,
        /// ` (did you mean resnet-like?)` when a shipped name is close, else empty.
        guess: String,
        /// The shipped names.
        known: String,
    },
    /// A file with nothing in it but comments and blank lines.
    #[error(
        "the file is empty: expected at least a description and one op, e.g. these three \
         lines:\n{example}(workloads/FORMAT.md describes the format)"
    )]
    Empty {
        /// A minimal workload, one indented line per TOML line.
        example: &'static str,
    },
    /// A `--set` argument without `=`.
    #[error("--set {0:?} is not name=value: expected e.g. --set batch=16")]
    BadSetArgument(String),
    /// A parameter name that `[params]` does not declare.
    #[error(
        "unknown parameter {name:?}: expected one of the [params] this file declares ({known})"
    )]
    UnknownParam {
        /// The name used.
        name: String,
        /// The declared names.
        known: String,
    },
    /// A `--set` value of the wrong type.
    #[error("--set {name}={value} {mismatch} (the file has {name} = {default})")]
    BadParamValue {
        /// Parameter name.
        name: String,
        /// What was passed.
        value: String,
        /// The type expected and its accepted spellings: `is not a boolean: expected ...`.
        mismatch: &'static str,
        /// The value in the file.
        default: String,
    },
    /// An expression that does not parse or evaluate.
    #[error("bad expression {text:?}: {reason}")]
    Expression {
        /// The expression.
        text: String,
        /// Why, and what is expected (boxed: it is larger than the other problems).
        reason: Box<ExprError>,
    },
    /// A value of the wrong kind where a number, name or flag is needed.
    #[error("{what} is {found}: expected {expected}")]
    WrongValue {
        /// The field.
        what: String,
        /// What it held.
        found: String,
        /// What it must hold.
        expected: String,
    },
    /// A `use` of a template that does not exist.
    #[error("unknown template {name:?}: expected one of the [templates] ({known})")]
    UnknownTemplate {
        /// The name used.
        name: String,
        /// The declared templates.
        known: String,
    },
    /// A template used with missing or unknown arguments.
    #[error("template {template:?} {detail}")]
    TemplateArgs {
        /// The template.
        template: String,
        /// What is missing or extra, and what is expected.
        detail: String,
    },
    /// Templates nested deeper than the limit (a template that uses itself).
    #[error(
        "template {template:?} is nested more than {max} deep: expected at most {max} levels \
         of templates using templates, and no template that uses itself"
    )]
    TemplateDepth {
        /// The template being expanded.
        template: String,
        /// The limit.
        max: usize,
    },
    /// An op names a kernel we do not have.
    #[error("op {op:?} uses unknown kernel {kernel:?}: expected one of {known}")]
    UnknownKernel {
        /// The op.
        op: String,
        /// The kernel name written.
        kernel: String,
        /// Every kernel name.
        known: String,
    },
    /// A device context that does not parse.
    #[error("{value:?} is not a device: expected cpu, cpu:N or gpu:N (N a device number)")]
    BadDevice {
        /// The text.
        value: String,
    },
    /// An unknown FnProperty.
    #[error("op {op:?} has unknown property {value:?}: expected one of {known}")]
    BadProperty {
        /// The op.
        op: String,
        /// The property written.
        value: String,
        /// The property names.
        known: String,
    },
    /// An unknown dtype.
    #[error("tensor {tensor:?} has unknown dtype {value:?}: expected one of {known}")]
    BadDtype {
        /// The tensor.
        tensor: String,
        /// The dtype written.
        value: String,
        /// The dtype names.
        known: String,
    },
    /// A name used twice.
    #[error(
        "duplicate {kind} name {name:?}: first declared at {first}{hint}; expected unique {kind} \
         names: rename one of them"
    )]
    DuplicateName {
        /// `tensor` or `op`.
        kind: &'static str,
        /// The name.
        name: String,
        /// Where the first one is.
        first: Position,
        /// Why it may have happened, or empty.
        hint: &'static str,
    },
    /// An op names a tensor nobody declared.
    #[error("op {op:?} {list} unknown tensor {tensor:?}: expected a declared tensor{suggestion}")]
    UnknownTensor {
        /// The op.
        op: String,
        /// `reads`, `writes`, `also_reads` or `also_writes`.
        list: &'static str,
        /// The name.
        tensor: String,
        /// ` (did you mean ...?)` or empty.
        suggestion: String,
    },
    /// An op with the wrong number of operands for its kernel.
    #[error("op {op:?} ({kernel}) has {found} {list}: expected {expected}")]
    Arity {
        /// The op.
        op: String,
        /// Its kernel.
        kernel: &'static str,
        /// `reads` or `writes`.
        list: &'static str,
        /// How many it has.
        found: usize,
        /// The kernel's operands, in words.
        expected: String,
    },
    /// Operand shapes that break the kernel's shape rule.
    #[error("op {op:?} ({kernel}) shape mismatch: {detail}; expected {rule}")]
    ShapeMismatch {
        /// The op.
        op: String,
        /// Its kernel.
        kernel: &'static str,
        /// The tensors, their shapes, and what disagrees.
        detail: String,
        /// The kernel's shape rule.
        rule: &'static str,
    },
    /// A tensor shape that cannot be allocated.
    #[error("tensor {tensor:?} has shape {shape}: {detail}")]
    BadShape {
        /// The tensor.
        tensor: String,
        /// The shape as evaluated.
        shape: String,
        /// What is wrong and what is expected.
        detail: String,
    },
    /// A kernel parameter that is unknown, missing or out of range.
    #[error("op {op:?} ({kernel}): {detail}")]
    KernelParam {
        /// The op.
        op: String,
        /// Its kernel.
        kernel: &'static str,
        /// What is wrong and what is expected.
        detail: String,
    },
    /// An op and its tensors (or property) on devices that do not fit together.
    #[error("op {op:?} {detail}")]
    DeviceMismatch {
        /// The op.
        op: String,
        /// What is where, what is expected, and the fix.
        detail: String,
    },
    /// Operands of different dtypes.
    #[error("op {op:?} ({kernel}) mixes dtypes: {detail}; expected one dtype for all its tensors")]
    DtypeMismatch {
        /// The op.
        op: String,
        /// Its kernel.
        kernel: &'static str,
        /// The tensors and their dtypes.
        detail: String,
    },
    /// An op that writes one tensor twice.
    #[error(
        "op {op:?} writes tensor {tensor:?} twice: expected each written tensor once; drop the \
         repeat (it may also appear in also_writes only once)"
    )]
    DuplicateWrite {
        /// The op.
        op: String,
        /// The tensor.
        tensor: String,
    },
    /// Blocks, or the TOML tables and arrays that hold them, nested past a limit.
    #[error("{what} nest {depth} deep here: expected at most {max} levels; {fix}")]
    TooDeep {
        /// What nests, in words.
        what: String,
        /// How deep, as far as known.
        depth: String,
        /// The limit.
        max: usize,
        /// What to do instead.
        fix: &'static str,
    },
    /// The file is larger than a workload file may be.
    #[error(
        "the file is larger than {max_bytes} bytes: expected a workload file under that; \
         repeat ops with [[block]] repeat and [templates] instead of writing each one out"
    )]
    FileTooLarge {
        /// The limit.
        max_bytes: usize,
    },
    /// An expansion or size limit was passed.
    #[error("{what} exceeds the limit: expected at most {max}; {fix}")]
    Limit {
        /// What grew too big, with its size.
        what: String,
        /// The limit.
        max: u64,
        /// How to shrink the workload.
        fix: String,
    },
    /// A name that is empty or has characters we do not allow.
    #[error("{kind} name {:?} {reason}", crate::error_chain::Cut(.name))]
    BadName {
        /// `tensor`, `op`, `param`, ...
        kind: &'static str,
        /// The name.
        name: String,
        /// What is wrong, what is expected.
        reason: &'static str,
    },
    /// A file with nothing to run.
    #[error(
        "the workload has no ops in its iteration: expected at least one op outside setup blocks"
    )]
    NoOps,
}

/// The smallest useful workload file, indented for an error message: a description, a
/// tensor and one op.
pub(crate) const MINIMAL_WORKLOAD: &str = "    description = \"one op\"
    tensor = [{ name = \"x\", shape = [4], init = \"ones\" }]
    op = [{ name = \"step\", kernel = \"fold\", writes = [\"x\"] }]
";

/// A problem and the byte range it is about, before it is turned into a [`WorkloadError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Located {
    pub(crate) span: Option<Range<usize>>,
    pub(crate) problem: Problem,
}

impl Located {
    pub(super) fn at(span: Range<usize>, problem: Problem) -> Self {
        Located {
            span: Some(span),
            problem,
        }
    }

    pub(super) fn nowhere(problem: Problem) -> Self {
        Located {
            span: None,
            problem,
        }
    }

    pub(crate) fn into_error(self, file: &str, text: &str) -> WorkloadError {
        WorkloadError {
            file: file.to_string(),
            position: self.span.map(|span| Position::of_offset(text, span.start)),
            problem: Box::new(self.problem),
        }
    }
}

/// Results inside the loader.
pub(crate) type LoadResult<T> = Result<T, Located>;

/// `a, b, c` for messages.
pub(crate) fn comma_list<T: fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|item| item.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
