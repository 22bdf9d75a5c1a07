//! The dashboard follows the crate's sync rule: atomics, locks and threads come from
//! `crate::sync` (the loom facade). A `std::sync` or `std::thread` use in the dashboard's
//! shipped code (tests aside) must sit right under a comment saying why loom cannot model it.

use std::path::Path;

/// Lines using `std::sync` / `std::thread` outside tests, without a `//` comment in the two
/// lines above.
fn unexplained_std_sync(source: &str) -> Vec<String> {
    let shipped = source.split("#[cfg(").next().unwrap_or(source);
    let lines: Vec<&str> = shipped.lines().collect();
    let mut found = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        if !(code.contains("std::sync") || code.contains("std::thread")) {
            continue;
        }
        let explained = lines[index.saturating_sub(2)..index]
            .iter()
            .any(|above| above.trim_start().starts_with("//"));
        if !explained {
            found.push(format!("{}: {}", index + 1, line.trim()));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_dashboard_imports_sync_primitives_through_the_facade() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/tui"), &mut files);
    assert!(files.len() > 10, "found the dashboard's sources");
    let mut offenders = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for line in unexplained_std_sync(&text) {
            offenders.push(format!("{}:{line}", file.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "route through crate::sync or say why not:\n{offenders:#?}"
    );
}

#[test]
fn the_check_catches_a_bare_import_and_accepts_an_explained_one() {
    let bare = "use std::io;\nuse std::sync::Arc;\n";
    assert_eq!(unexplained_std_sync(bare).len(), 1);
    let explained = "// loom has no mpsc\nuse std::sync::mpsc;\n";
    assert!(unexplained_std_sync(explained).is_empty());
    let in_tests = "use crate::sync::Arc;\n#[cfg(test)]\nmod tests { use std::sync::Arc; }\n";
    assert!(unexplained_std_sync(in_tests).is_empty());
}
