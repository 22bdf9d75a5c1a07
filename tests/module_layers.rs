//! The library's top-level modules form layers that point one way: a module may import only
//! the modules below it in [`LAYERS`]. This test reads every file of `src/` with `syn`, takes
//! each `crate::<module>` path of shipped code (test and loom modules aside: a test may drive
//! a layer from above), and fails on any import that points up, unless the edge is one of the
//! [`KNOWN_UPWARD`] imports still being removed; a known edge that is gone must leave that list
//! too, so it only shrinks. A new top-level module must be given its place in [`LAYERS`].
//!
//! `cargo test --test module_layers -- --nocapture` prints the module graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The library's top-level modules, bottom first. The binary (`main.rs`, `cli/`) sits above
/// them all and is not listed.
const LAYERS: &[&str] = &[
    "sync",
    "error_chain",
    "config",
    "pool",
    "kernels",
    "device",
    "engine",
    "profiler",
    "analysis",
    "workload",
    "tune",
    "bench",
    "tui",
];

/// Imports that point up today, each to be removed; none are left. An entry here is a debt
/// with a reason, never a way to pass the test.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

/// The top-level module a file of `src/` belongs to (`None` for the crate roots and the
/// binary's files).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let relative = file.strip_prefix(src).ok()?;
    let first = relative.components().next()?.as_os_str().to_str()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(module, "lib" | "main" | "cli")).then(|| module.to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// Whether `attrs` put an item under `cfg(test)` or `cfg(loom)` (in any combination).
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| match &attr.meta {
        syn::Meta::List(list) if list.path.is_ident("cfg") => {
            let condition = list.tokens.to_string();
            condition.contains("test") || condition.contains("loom")
        }
        _ => false,
    })
}

/// Collects the top-level modules named by `crate::<module>` paths and `use crate::{...}`
/// trees, skipping test-only items.
#[derive(Default)]
struct CrateRefs {
    modules: BTreeSet<String>,
}

impl CrateRefs {
    fn use_tree(&mut self, tree: &syn::UseTree, under_crate: bool) {
        match tree {
            syn::UseTree::Path(path) if !under_crate && path.ident == "crate" => {
                self.use_tree(&path.tree, true);
            }
            syn::UseTree::Path(_) if !under_crate => {}
            syn::UseTree::Path(path) => {
                self.modules.insert(path.ident.to_string());
            }
            syn::UseTree::Name(name) if under_crate => {
                self.modules.insert(name.ident.to_string());
            }
            syn::UseTree::Rename(rename) if under_crate => {
                self.modules.insert(rename.ident.to_string());
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(tree, under_crate);
                }
            }
            _ => {}
        }
    }
}

impl<'ast> Visit<'ast> for CrateRefs {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(item) => &item.attrs,
            syn::Item::Fn(item) => &item.attrs,
            syn::Item::Impl(item) => &item.attrs,
            syn::Item::Use(item) => &item.attrs,
            syn::Item::Struct(item) => &item.attrs,
            syn::Item::Enum(item) => &item.attrs,
            syn::Item::Const(item) => &item.attrs,
            syn::Item::Static(item) => &item.attrs,
            syn::Item::Trait(item) => &item.attrs,
            syn::Item::Type(item) => &item.attrs,
            syn::Item::Macro(item) => &item.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&item.tree, false);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let mut segments = path.segments.iter();
        if let (Some(first), Some(second)) = (segments.next(), segments.next()) {
            if first.ident == "crate" {
                self.modules.insert(second.ident.to_string());
            }
        }
        syn::visit::visit_path(self, path);
    }
}

/// Every top-level module's imports of other top-level modules, from shipped code.
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 50, "found the library's sources");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let Some(module) = module_of(&src, &file) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        let parsed =
            syn::parse_file(&text).unwrap_or_else(|error| panic!("{}: {error}", file.display()));
        let mut refs = CrateRefs::default();
        refs.visit_file(&parsed);
        let imports = graph.entry(module.clone()).or_default();
        imports.extend(refs.modules.into_iter().filter(|name| *name != module));
    }
    graph
}

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|name| *name == module)
}

#[test]
fn top_level_modules_import_only_the_layers_below_them() {
    let graph = module_graph();
    for (module, imports) in &graph {
        println!(
            "{module} -> {}",
            Vec::from_iter(imports.iter().cloned()).join(" ")
        );
    }
    let unplaced: Vec<&String> = graph.keys().filter(|m| layer(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "give each new top-level module its place in LAYERS: {unplaced:?}"
    );
    let mut upward = Vec::new();
    for (module, imports) in &graph {
        for import in imports {
            let Some(target) = layer(import) else {
                continue; // a crate-root item (a macro, a re-export), not a module
            };
            if target > layer(module).unwrap() {
                upward.push((module.as_str(), import.as_str()));
            }
        }
    }
    let new: Vec<_> = upward
        .iter()
        .filter(|edge| !KNOWN_UPWARD.contains(edge))
        .collect();
    assert!(
        new.is_empty(),
        "imports that point up a layer (move the shared piece down, or report through a \
         trait the lower layer owns): {new:?}"
    );
    let gone: Vec<_> = KNOWN_UPWARD
        .iter()
        .filter(|edge| !upward.contains(edge))
        .collect();
    assert!(gone.is_empty(), "remove these from KNOWN_UPWARD: {gone:?}");
}

#[test]
fn the_check_sees_grouped_and_inline_crate_paths() {
    let file = syn::parse_file(
        "use crate::{pool::Pool, engine::{Engine, Var}};\n\
         use crate::profiler as p;\n\
         fn f() { let _ = crate::device::cpu::thing(); }\n\
         #[cfg(test)] mod tests { use crate::tui::App; }\n\
         #[cfg(all(test, not(loom)))] fn g() { crate::workload::load(); }",
    )
    .unwrap();
    let mut refs = CrateRefs::default();
    refs.visit_file(&file);
    let found: Vec<&str> = refs.modules.iter().map(String::as_str).collect();
    assert_eq!(found, ["device", "engine", "pool", "profiler"]);
}
