//! The library's top-level modules form layers that point one way: a module may import only
//! the modules below it in [`LAYERS`]. This test reads every file of `src/` with `syn`, takes
//! each `crate::<module>` path of shipped code (test and loom modules aside: a test may drive
//! a layer from above), and fails on any import that points up, unless the edge is one of the
//! [`KNOWN_UPWARD`] imports still being removed; a known edge that is gone must leave that list
//! too, so it only shrinks. A new top-level module must be given its place in [`LAYERS`].
//!
//! `cargo test --test module_layers -- --nocapture` prints the module graph.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::sources::rust_files;
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
    "record",
    "analysis",
    "workload",
    "tune",
    "tui",
    "bench", // measures every layer, the dashboard's frames included
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
    let files = rust_files(&src);
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
    check_known(
        &upward,
        KNOWN_UPWARD,
        "KNOWN_UPWARD",
        "imports that point up a layer (move the shared piece down, or report through a trait \
         the lower layer owns)",
    );
}

/// Fails on an edge of `found` that `known` does not list (a new debt, `problem`), and on an
/// edge of `known` no longer found (a paid debt, to take off the list `name`).
fn check_known(found: &[(&str, &str)], known: &[(&str, &str)], name: &str, problem: &str) {
    let new: Vec<_> = found.iter().filter(|edge| !known.contains(edge)).collect();
    assert!(new.is_empty(), "{problem}: {new:?}");
    let gone: Vec<_> = known.iter().filter(|edge| !found.contains(edge)).collect();
    assert!(gone.is_empty(), "remove these from {name}: {gone:?}");
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

/// The engine's files, bottom first, in the order a reader follows them: names and value
/// types, the settings and errors, the var state, the op, the queues, the core, the bulk
/// batches, the GPU path, the dispatchers and the handle; `mod` is `engine/mod.rs` and `gpu`
/// is `engine/gpu/` as a whole. A file may import only the files before it, unless the edge
/// is in [`ENGINE_KNOWN_BACKWARD`].
const ENGINE_FILES: &[&str] = &[
    "name", "types", "event", "settings", "error", "var", "var_list", "block", "current", "opr",
    "spec", "ready", "recycle", "core", "bulk", "gpu", "threaded", "naive", "handle", "mod",
];

/// Engine imports that point back up the order: one cycle of types on the per-op path. A var
/// queues waiters that point to op blocks, and an op block holds its vars (var -> block); the
/// block's types and the op's data refer to each other, the block holding its body and its
/// body taking the op's completion, which owns the block (block -> opr); an op block holds its
/// engine core, whose fields hold op blocks (opr -> core). `engine/mod.rs` ("Files") says, edge
/// by edge, why each stays and what cutting it takes. The GPU hub is outside the cycle: the
/// core holds it as a `GpuPath` trait object of its own, called only in an engine with GPUs.
/// None is a way to pass the test; the list only shrinks.
const ENGINE_KNOWN_BACKWARD: &[(&str, &str)] = &[
    // A var queues `Waiter`s (pointers to op blocks, which hold their vars).
    ("var", "block"),
    // The op block and its body/handle types refer to each other.
    ("block", "opr"),
    // An op's completion calls into the core.
    ("opr", "core"),
];

/// The engine file that `engine::<name>` means: a file's own name, or the file an item of
/// `engine/mod.rs` is re-exported from (`mod` for items defined there).
fn engine_file_of(name: &str, reexports: &BTreeMap<String, String>) -> Option<String> {
    if ENGINE_FILES.contains(&name) {
        return Some(name.to_string());
    }
    reexports.get(name).cloned()
}

/// Which file of `engine/` each item `engine/mod.rs` makes visible comes from.
fn engine_reexports(mod_rs: &syn::File) -> BTreeMap<String, String> {
    fn walk(tree: &syn::UseTree, file: Option<&str>, out: &mut BTreeMap<String, String>) {
        match tree {
            syn::UseTree::Path(path) => {
                let name = path.ident.to_string();
                let file = match file {
                    None if name == "self" => None,
                    None => Some(name.as_str()),
                    Some(file) => Some(file),
                };
                walk(&path.tree, file, out);
            }
            syn::UseTree::Name(name) => {
                if let Some(file) = file {
                    out.insert(name.ident.to_string(), file.to_string());
                }
            }
            syn::UseTree::Rename(rename) => {
                if let Some(file) = file {
                    out.insert(rename.rename.to_string(), file.to_string());
                }
            }
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    walk(tree, file, out);
                }
            }
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = BTreeMap::new();
    for item in &mod_rs.items {
        match item {
            syn::Item::Use(item) => walk(&item.tree, None, &mut out),
            syn::Item::Enum(item) => drop(out.insert(item.ident.to_string(), "mod".into())),
            syn::Item::Struct(item) => drop(out.insert(item.ident.to_string(), "mod".into())),
            syn::Item::Trait(item) => drop(out.insert(item.ident.to_string(), "mod".into())),
            _ => {}
        }
    }
    // Items re-exported from other top-level modules (`crate::config`) are not engine files.
    out.retain(|_, file| ENGINE_FILES.contains(&file.as_str()));
    out
}

/// The engine names a file's shipped code refers to: the segment after `super` (or after
/// `super::super` / `crate::engine` in `gpu/`), in paths and `use` trees.
#[derive(Default)]
struct EngineRefs {
    /// How many `super`s lead to `engine/` from this file.
    depth: usize,
    names: BTreeSet<String>,
}

impl EngineRefs {
    fn segments(&mut self, segments: &[String]) {
        let rest = if segments.first().map(String::as_str) == Some("crate") {
            match segments.get(1).map(String::as_str) {
                Some("engine") => &segments[2..],
                _ => return,
            }
        } else {
            let supers = segments.iter().take_while(|s| *s == "super").count();
            if supers != self.depth {
                return;
            }
            &segments[supers..]
        };
        if let Some(first) = rest.first() {
            self.names.insert(first.clone());
        }
    }

    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(&path.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.segments(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.segments(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.segments(prefix),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.use_tree(tree, prefix);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for EngineRefs {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let mut refs = CrateRefs::default();
        let attrs = match item {
            syn::Item::Mod(item) => &item.attrs,
            syn::Item::Fn(item) => &item.attrs,
            syn::Item::Impl(item) => &item.attrs,
            syn::Item::Use(item) => &item.attrs,
            _ => {
                refs.visit_item(item);
                return syn::visit::visit_item(self, item);
            }
        };
        if !test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&item.tree, &mut Vec::new());
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.segments(&segments);
        syn::visit::visit_path(self, path);
    }
}

/// Each engine file's imports of other engine files, from shipped code.
fn engine_graph() -> BTreeMap<String, BTreeSet<String>> {
    let engine = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
    let parse = |path: &Path| {
        let text = std::fs::read_to_string(path).unwrap();
        syn::parse_file(&text).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
    };
    let reexports = engine_reexports(&parse(&engine.join("mod.rs")));
    let files = rust_files(&engine);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(&engine).unwrap();
        let in_gpu = relative.starts_with("gpu");
        let own = if in_gpu {
            "gpu".to_string()
        } else {
            relative.file_stem().unwrap().to_string_lossy().into_owned()
        };
        // `gpu/mod.rs` reaches `engine/` with one `super`, the other `gpu/` files with two.
        let depth = match (in_gpu, relative.file_name().unwrap() == "mod.rs") {
            (false, true) => 0,
            (false, false) | (true, true) => 1,
            (true, false) => 2,
        };
        let mut refs = EngineRefs {
            depth,
            ..EngineRefs::default()
        };
        refs.visit_file(&parse(&file));
        let imports = graph.entry(own.clone()).or_default();
        for name in refs.names {
            if let Some(target) = engine_file_of(&name, &reexports) {
                if target != own {
                    imports.insert(target);
                }
            }
        }
    }
    graph
}

#[test]
fn engine_files_import_only_the_files_before_them() {
    let graph = engine_graph();
    let place = |file: &str| ENGINE_FILES.iter().position(|name| *name == file);
    let unplaced: Vec<&String> = graph.keys().filter(|f| place(f).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "give each new engine file its place in ENGINE_FILES: {unplaced:?}"
    );
    let mut backward = Vec::new();
    for (file, imports) in &graph {
        println!(
            "engine/{file} -> {}",
            Vec::from_iter(imports.iter().cloned()).join(" ")
        );
        for import in imports {
            if place(import) > place(file) {
                backward.push((file.as_str(), import.as_str()));
            }
        }
    }
    check_known(
        &backward,
        ENGINE_KNOWN_BACKWARD,
        "ENGINE_KNOWN_BACKWARD",
        "engine imports that point back up ENGINE_FILES (a loop; move the shared piece down)",
    );
}
