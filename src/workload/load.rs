//! Loading: text -> TOML (with spans) -> parameters -> expansion -> resolution -> [`Graph`].
//! Every failure is a [`WorkloadError`] with the file, line and column; nothing panics.
#![forbid(unsafe_code)]

use std::io::Read;
use std::path::Path;

use super::error::{LoadResult, Located, Problem, WorkloadError};
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
    Err(Located::nowhere(Problem::NotAWorkload {
        name: spec.to_string(),
        known: shipped::names(),
    })
    .into_error(spec, ""))
}

fn read_text(path: &Path) -> Result<String, Problem> {
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
    Problem::Limit {
        what: "the file's size".to_string(),
        max: MAX_FILE_BYTES as u64,
    }
}

fn build(text: &str, file: &str, overrides: &Overrides) -> LoadResult<Graph> {
    if text.len() > MAX_FILE_BYTES {
        return Err(Located::nowhere(too_large()));
    }
    let parsed: WorkloadFile = toml::from_str(text).map_err(|err| Located {
        span: err.span(),
        problem: Problem::Toml(err.message().trim().to_string()),
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

fn default_name(file: &str) -> String {
    Path::new(file).file_stem().map_or_else(
        || file.to_string(),
        |stem| stem.to_string_lossy().into_owned(),
    )
}
