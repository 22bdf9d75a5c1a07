//! Golden tests of invalid workload files: every `tests/data/bad_workloads/NAME.toml` must fail
//! to load with exactly the message in `NAME.err`. A first line `# --set name=value ...` passes
//! overrides. `UPDATE_GOLDEN=1 cargo test --test workload_bad_files` rewrites the `.err` files
//! (review the diff before committing).
use std::fs;
use std::path::{Path, PathBuf};

use enginetop::workload::{load_str, Overrides};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad_workloads")
}

fn overrides_in(text: &str) -> Overrides {
    let sets = text
        .lines()
        .next()
        .and_then(|line| line.strip_prefix("# --set "))
        .map(|sets| sets.split_whitespace().collect::<Vec<_>>())
        .unwrap_or_default();
    Overrides::from_args(sets).expect("the test's --set line is name=value")
}

fn bad_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(data_dir())
        .expect("tests/data/bad_workloads exists")
        .map(|entry| entry.expect("a readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_bad_file_fails_with_its_golden_message() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let files = bad_files();
    assert!(files.len() >= 40, "only {} bad files", files.len());
    let mut failures = Vec::new();
    for path in files {
        let text = fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let message = match load_str(&text, &name, &overrides_in(&text)) {
            Ok(graph) => format!("loaded without error ({} ops)", graph.ops.len()),
            Err(err) => err.to_string(),
        };
        let golden = path.with_extension("err");
        if update {
            fs::write(&golden, format!("{message}\n")).unwrap();
            continue;
        }
        let expected = fs::read_to_string(&golden).unwrap_or_default();
        if expected.trim_end() != message {
            failures.push(format!(
                "{name}\n  expected: {}\n  actual:   {message}",
                expected.trim_end()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_golden_message_has_a_bad_file() {
    for entry in fs::read_dir(data_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|ext| ext == "err") {
            assert!(
                path.with_extension("toml").exists(),
                "{} has no .toml",
                path.display()
            );
        }
    }
}

#[test]
fn errors_point_into_the_file_and_say_what_is_expected() {
    for path in bad_files() {
        let text = fs::read_to_string(&path).unwrap();
        let err = load_str(&text, "f.toml", &overrides_in(&text)).unwrap_err();
        let message = err.to_string();
        if let Some(position) = err.position {
            let lines = text.lines().count().max(1);
            assert!(position.line >= 1 && position.line <= lines, "{message}");
            assert!(position.column >= 1, "{message}");
        }
        let is_toml = matches!(*err.problem, enginetop::workload::Problem::Toml(_));
        assert!(
            is_toml || message.contains("expected"),
            "no 'expected' in: {message}"
        );
    }
}
