//! The crate's sync rule: atomics, locks, `Arc` and threads come from `crate::sync` (the loom
//! facade), so the loom models beside each concurrent module explore the real protocol. This
//! test reads every file of `src/` except `sync.rs` and lists each line of shipped code (test
//! and loom items aside) that names one of those primitives from `std` directly. A `std` use
//! that loom cannot model stays allowed when a `//` comment in the two lines above says why.

mod common;

use std::path::Path;

use common::sources::rust_files;

/// What the facade provides: `std::sync::<name>` and `std::thread::<name>` spellings that must
/// go through `crate::sync` instead.
const SYNC_NAMES: &[&str] = &[
    "Arc",
    "Weak",
    "Mutex",
    "MutexGuard",
    "RwLock",
    "Condvar",
    "Barrier",
    "atomic",
];
const THREAD_NAMES: &[&str] = &["spawn", "Builder", "scope", "JoinHandle"];

/// Whether a line of code names a facade primitive from `std`.
fn names_std_primitive(code: &str) -> bool {
    let word_after = |prefix: &str, names: &[&str]| {
        code.match_indices(prefix).any(|(at, _)| {
            let rest = &code[at + prefix.len()..];
            let rest = rest.trim_start_matches(['{', ' ']);
            names.iter().any(|name| {
                rest.strip_prefix(name).is_some_and(|tail| {
                    !tail.starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            }) || (rest.starts_with('{') || code[at..].contains('{'))
                && names.iter().any(|name| {
                    code[at..]
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|w| w == *name)
                })
        })
    };
    word_after("std::sync::", SYNC_NAMES)
        || word_after("std::thread::", THREAD_NAMES)
        || code.contains("use std::thread;")
        || code.contains("std::thread::{self")
}

/// Whether an attribute line puts the next item under `cfg(test)` or `cfg(loom)`.
fn test_only_attribute(code: &str) -> bool {
    code.starts_with("#[cfg(") && (code.contains("test") || code.contains("loom"))
}

/// The unexplained lines (numbered from 1) of shipped code that name a `std` primitive.
fn offending_lines(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let code = lines[index].trim_start();
        if test_only_attribute(code) {
            index = end_of_item(&lines, index + 1);
            continue;
        }
        if !code.starts_with("//") && names_std_primitive(code) {
            let explained = lines[index.saturating_sub(2)..index].iter().any(|above| {
                let above = above.trim_start();
                above.starts_with("//") && !above.starts_with("///") && !above.starts_with("//!")
            });
            if !explained {
                found.push(format!("{}: {}", index + 1, code));
            }
        }
        index += 1;
    }
    found
}

/// The line after the item starting at `start` (further attributes included): a one-line item,
/// or the lines up to the brace that closes the item's first `{`.
fn end_of_item(lines: &[&str], mut start: usize) -> usize {
    while start < lines.len() && lines[start].trim_start().starts_with("#[") {
        start += 1;
    }
    let mut depth = 0i64;
    for (offset, line) in lines[start..].iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        if depth <= 0
            && (code.contains('}')
                || code.trim_end().ends_with(';')
                || offset == 0 && !code.contains('{'))
        {
            return start + offset + 1;
        }
    }
    lines.len()
}

#[test]
fn every_module_takes_sync_primitives_from_the_facade() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = rust_files(&src);
    assert!(files.len() > 50, "found the library's sources");
    let mut offenders = Vec::new();
    for file in files {
        if file == src.join("sync.rs") {
            continue;
        }
        let relative = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(&file).unwrap();
        let lines = offending_lines(&text);
        for line in lines {
            offenders.push(format!("{relative}:{line}"));
        }
    }
    assert!(
        offenders.is_empty(),
        "route these through crate::sync, or say in a comment above why loom cannot model them:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_check_catches_bare_uses_and_accepts_explained_and_test_ones() {
    for bare in [
        "use std::sync::Arc;",
        "use std::sync::{mpsc, Arc};",
        "use std::sync::atomic::{AtomicUsize, Ordering};",
        "let counter = std::sync::Arc::new(0);",
        "std::thread::spawn(move || {});",
        "use std::thread;",
        "let builder = std::thread::Builder::new();",
        "/// A doc comment is not a reason.\nuse std::sync::Arc;",
    ] {
        assert_eq!(offending_lines(bare).len(), 1, "{bare}");
    }
    for allowed in [
        "use std::sync::mpsc;",
        "use std::sync::OnceLock;",
        "std::thread::sleep(pause);",
        "let name = std::thread::current();",
        "// loom has no Arc::downgrade here\nuse std::sync::Weak;",
        "#[cfg(test)]\nmod tests {\n    use std::sync::Arc;\n}\nfn shipped() {}",
        "#[cfg(all(test, not(loom)))]\nmod tests {\n    fn f() { std::thread::spawn(|| {}); }\n}",
        "#[cfg(loom)]\nreturn std::sync::Arc::new(0);",
    ] {
        assert!(offending_lines(allowed).is_empty(), "{allowed}");
    }
    let after_tests = "#[cfg(test)]\nmod tests {\n}\nuse std::sync::Arc;\n";
    assert_eq!(
        offending_lines(after_tests).len(),
        1,
        "code after a test module is shipped"
    );
}
