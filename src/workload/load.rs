//! Loading: text -> TOML (with spans) -> parameters -> expansion -> resolution -> [`Graph`].
//! Every failure is a [`WorkloadError`] with the file, line and column; nothing panics.
#![forbid(unsafe_code)]

use std::io::Read;
use std::path::Path;

use super::error::{LoadResult, Located, Problem, WorkloadError, MINIMAL_WORKLOAD};
use super::graph::Graph;
use super::params::{self, Overrides};
use super::resolve::{build_graph, Header};
use super::schema::WorkloadFile;
use super::shipped;

/// Files larger than this are refused (blocks and templates keep real ones far smaller).
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// Loads a workload from its text; `file` names it in errors (a path or a shipped name) and
/// gives the graph its name when the file has no `name`.
pub fn load_str(text: &str, file: &str, overrides: &Overrides) -> Result<Graph, WorkloadError> {
    build(text, file, overrides).map_err(|located| located.into_error(file, text))
}

/// Loads a workload file.
pub fn load_path(path: &Path, overrides: &Overrides) -> Result<Graph, WorkloadError> {
    let file = path.display().to_string();
    let nowhere = |problem| Located::nowhere(problem).into_error(&file, "");
    let text = read_text(path).map_err(nowhere)?;
    load_str(&text, &file, overrides)
}

/// Loads a shipped workload by name (`resnet-like`), or else the file at that path.
///
/// ```
/// use enginetop::workload::{load_spec, Overrides};
///
/// let graph = load_spec("resnet-like", &Overrides::default()).unwrap();
/// assert!(graph.iteration_ops().len() > 300);
/// let err = load_spec("resnet", &Overrides::default()).unwrap_err();
/// assert!(err.to_string().contains("resnet-like"));
/// ```
pub fn load_spec(spec: &str, overrides: &Overrides) -> Result<Graph, WorkloadError> {
    if let Some(workload) = shipped::find(spec) {
        return load_str(workload.source, workload.name, overrides);
    }
    let path = Path::new(spec);
    if path.exists() || spec.ends_with(".toml") || spec.contains(std::path::MAIN_SEPARATOR) {
        return load_path(path, overrides);
    }
    let guess = shipped::closest_shipped(spec)
        .map_or(String::new(), |name| format!(" (did you mean {name}?)"));
    Err(Located::nowhere(Problem::NotAWorkload {
        name: spec.to_string(),
        guess,
        known: shipped::names(),
    })
    .into_error(spec, ""))
}

fn read_text(path: &Path) -> Result<String, Problem> {
    // Before opening: opening a named pipe waits for a writer, possibly for ever.
    let metadata = std::fs::metadata(path).map_err(|err| Problem::Io(err.to_string()))?;
    if !metadata.is_file() {
        let what = if metadata.is_dir() {
            "a directory"
        } else {
            "not a regular file (a pipe, socket or device)"
        };
        return Err(Problem::Io(format!("it is {what}: expected a TOML file")));
    }
    let file = std::fs::File::open(path).map_err(|err| Problem::Io(err.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| Problem::Io(err.to_string()))?;
    if bytes.len() > MAX_FILE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|err| {
        Problem::Io(format!(
            "byte {} is not UTF-8: expected a UTF-8 TOML file",
            err.utf8_error().valid_up_to()
        ))
    })
}

fn too_large() -> Problem {
    Problem::FileTooLarge {
        max_bytes: MAX_FILE_BYTES,
    }
}

fn build(text: &str, file: &str, overrides: &Overrides) -> LoadResult<Graph> {
    if text.len() > MAX_FILE_BYTES {
        return Err(Located::nowhere(too_large()));
    }
    let parsed: WorkloadFile = toml::from_str(text).map_err(|err| match is_empty(text) {
        true => Located::nowhere(Problem::Empty {
            example: MINIMAL_WORKLOAD,
        }),
        false => toml_error(&err, text),
    })?;
    let params = params::resolve(&parsed.params, overrides)?;
    let expanded = super::expand::expand(&parsed, &params)?;
    let header = Header {
        name: match &parsed.name {
            Some(name) => name.get_ref().clone(),
            None => default_name(file),
        },
        description: parsed.description.get_ref().trim().to_string(),
        params: params.into_iter().collect(),
    };
    build_graph(expanded, header, text)
}

/// Whether `text` holds no TOML key at all (only blank lines and comments).
fn is_empty(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|table| table.is_empty())
}

/// The TOML parser's limit: tables in one dotted key or header, and inline arrays and tables
/// inside each other.
const TOML_MAX_NESTING: usize = 80;

/// A TOML error as a [`Located`] problem; the parser's two nesting limits become
/// [`Problem::TooDeep`] with a place and a fix.
fn toml_error(err: &toml::de::Error, text: &str) -> Located {
    let message = err.message().trim();
    match err.span() {
        _ if message == "recursion limit" => deepest_key(text),
        Some(span) if message.starts_with("cannot recurse further") => Located::at(
            span,
            Problem::TooDeep {
                what: "inline arrays and tables".to_string(),
                depth: (TOML_MAX_NESTING + 1).to_string(),
                max: TOML_MAX_NESTING,
                fix: "flatten them (each inline `block = [{ ... }]` takes two levels); write \
                      nested blocks as [[block.block]] tables",
            },
        ),
        span => Located {
            span,
            problem: Problem::Toml(message.to_string()),
        },
    }
}

/// The first dotted key (a `[table]` header, or a `key.key = value`) with more parts than the
/// TOML parser takes, as a problem at that key. A chain of `block`s reports the blocks'
/// depth against [`MAX_BLOCK_DEPTH`](super::expand::MAX_BLOCK_DEPTH).
fn deepest_key(text: &str) -> Located {
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if let Some((start, parts)) = long_dotted_key(line) {
            let blocks = parts.iter().filter(|part| **part == "block").count();
            let problem = if blocks > super::expand::MAX_BLOCK_DEPTH {
                super::expand::blocks_too_deep(blocks)
            } else {
                key_too_deep(parts.len().to_string())
            };
            return Located::at(line_start + start..line_start + start + 1, problem);
        }
        line_start += line.len();
    }
    Located::nowhere(key_too_deep(format!("more than {TOML_MAX_NESTING}")))
}

fn key_too_deep(depth: String) -> Problem {
    Problem::TooDeep {
        what: "the tables of a dotted key".to_string(),
        depth,
        max: TOML_MAX_NESTING,
        fix: "the TOML parser takes no more; use fewer dotted parts",
    }
}

/// The first run of dotted key parts in `line` (`a.b."c".d`) with more parts than
/// [`TOML_MAX_NESTING`]: its byte offset in the line and its parts (unquoted). A quoted part
/// counts as one, so dots inside strings do not count; a comment ends the line.
fn long_dotted_key(line: &str) -> Option<(usize, Vec<&str>)> {
    let mut chain: Vec<&str> = Vec::new();
    let mut chain_start = 0;
    let mut after_dot = false;
    let mut at = 0;
    while let Some(first) = line[at..].chars().next() {
        let rest = &line[at..];
        if let Some((part, len)) = key_part(rest) {
            if !after_dot {
                if chain.len() > TOML_MAX_NESTING {
                    break;
                }
                chain.clear();
                chain_start = at;
            }
            chain.push(part);
            after_dot = false;
            at += len;
            continue;
        }
        if first == '#' {
            break;
        }
        if first == '.' {
            after_dot = true;
        } else if !first.is_whitespace() {
            if chain.len() > TOML_MAX_NESTING {
                break;
            }
            chain.clear();
            after_dot = false;
        }
        at += first.len_utf8();
    }
    (chain.len() > TOML_MAX_NESTING).then_some((chain_start, chain))
}

/// A key part at the start of `text`, unquoted, and the bytes it takes: a bare key
/// (`A-Za-z0-9_-`) or a quoted one.
fn key_part(text: &str) -> Option<(&str, usize)> {
    let first = text.chars().next()?;
    if first == '"' || first == '\'' {
        let end = text[1..].find(first)?;
        return Some((&text[1..1 + end], end + 2));
    }
    let bare = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let len = text.find(|c: char| !bare(c)).unwrap_or(text.len());
    (len > 0).then(|| (&text[..len], len))
}

fn default_name(file: &str) -> String {
    Path::new(file).file_stem().map_or_else(
        || file.to_string(),
        |stem| stem.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Graph, WorkloadError> {
        load_str(text, "t.toml", &Overrides::default())
    }

    /// A file whose blocks nest `depth` deep, as `[[block.block...]]` tables.
    fn nested_blocks(depth: usize) -> String {
        let mut text = String::from(
            "description = \"deep\"\ntensor = [{ name = \"x\", shape = [1] }]\n\
             op = [{ name = \"o\", kernel = \"fold\", writes = [\"x\"] }]\n",
        );
        for level in 1..=depth {
            text += &format!("[[{}]]\n", vec!["block"; level].join("."));
        }
        text
    }

    #[test]
    fn the_empty_file_message_shows_a_workload_that_loads() {
        let err = load("# nothing yet\n\n").unwrap_err();
        assert_eq!(
            *err.problem,
            Problem::Empty {
                example: MINIMAL_WORKLOAD
            }
        );
        let example: String = MINIMAL_WORKLOAD
            .lines()
            .map(|line| format!("{}\n", line.trim_start()))
            .collect();
        let graph = load(&example).expect("the example in the message loads");
        assert_eq!(graph.iteration_ops().len(), 1);
        assert!(err.to_string().contains(MINIMAL_WORKLOAD));
    }

    #[test]
    fn blocks_nest_up_to_the_limit() {
        assert!(load(&nested_blocks(super::super::expand::MAX_BLOCK_DEPTH)).is_ok());
        let err = load(&nested_blocks(65)).unwrap_err();
        assert_eq!(err.position.map(|p| p.line), Some(68));
        assert!(err
            .to_string()
            .contains("blocks nest 65 deep here: expected at most 64 levels"));
    }

    #[test]
    fn a_key_past_the_toml_limit_is_found_and_named() {
        let parts = vec!["a"; 81].join(" . ");
        let text = format!("description = \"x\"\n\n  [tensor.\"q.r\".{parts}]\n");
        let err = load(&text).unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.toml:3:4: the tables of a dotted key nest 83 deep here: expected at most 80 \
             levels; the TOML parser takes no more; use fewer dotted parts"
        );
    }

    #[test]
    fn dotted_keys_count_quoted_parts_once_and_skip_strings() {
        let long = vec!["block"; 81].join(".");
        assert_eq!(long_dotted_key(&format!("x = \"{long}\" # {long}")), None);
        let line = format!("x = 'a.b' {long}");
        assert_eq!(long_dotted_key(&line).map(|(at, _)| at), Some(10));
        let quoted = format!("[[ {} ]]", vec!["'b.c'"; 81].join(" ."));
        let (at, parts) = long_dotted_key(&quoted).expect("81 quoted parts");
        assert_eq!((at, parts.len(), parts[0]), (3, 81, "b.c"));
        assert_eq!(long_dotted_key(&vec!["b"; 80].join(".")), None);
    }
}
