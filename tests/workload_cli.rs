//! CLI golden tests of `enginetop workloads`: the catalog, a summary, and load errors.
//! `UPDATE_GOLDEN=1 cargo test --test workload_cli` rewrites `tests/data/workloads_list.txt`.
mod common;

use std::path::Path;
use std::process::Output;

use common::cli::{command, text};

fn enginetop(args: &[&str]) -> Output {
    command()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the enginetop binary starts")
}

#[test]
fn workloads_lists_every_shipped_workload_on_one_line() {
    let output = enginetop(&["workloads"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/workloads_list.txt");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&golden, &stdout).unwrap();
    }
    assert_eq!(stdout, std::fs::read_to_string(golden).unwrap());
}

#[test]
fn workloads_with_a_name_summarises_it_with_overrides() {
    let output = enginetop(&["workloads", "chain", "--set", "length=5", "--set", "size=4"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        text(&output.stdout),
        "chain: One tensor written by every op: a pure dependency chain (engine overhead)\n\
         params: length = 5, size = 4\n\
         tensors: 1 (0.0 MiB)\n\
         ops: 0 setup, 5 per iteration (fold 5)\n\
         GFLOP per iteration: 0.000\n\
         devices: cpu:0\n"
    );
}

#[test]
fn workloads_accepts_a_path() {
    let output = enginetop(&["workloads", "workloads/tree.toml", "--set", "nodes=3"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("tree: Binary tree"));
}

#[test]
fn an_unknown_workload_names_the_shipped_ones() {
    let output = enginetop(&["workloads", "resnet"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "error: resnet: no workload named \"resnet\" (did you mean resnet-like?): expected one \
         of the shipped workloads (resnet-like, transformer-like, pipeline, wavefront, chain, tree, random-dag, \
         embarrassing) or the path of a .toml file\n"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn a_mistyped_workload_name_gets_the_closest_shipped_one() {
    for (typed, meant) in [
        ("resnet-lke", "resnet-like"),
        ("transformer", "transformer-like"),
    ] {
        for args in [
            &["workloads", typed][..],
            &["--workload", typed, "--headless"],
        ] {
            let output = enginetop(args);
            assert_eq!(output.status.code(), Some(1), "{args:?}");
            let stderr = text(&output.stderr);
            let guess = format!("no workload named \"{typed}\" (did you mean {meant}?): expected");
            assert!(stderr.contains(&guess), "{args:?}: {stderr}");
        }
    }
}

#[test]
fn an_empty_file_is_answered_with_a_minimal_workload() {
    let dir = std::env::temp_dir().join(format!("enginetop-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.toml");
    std::fs::write(&empty, "").unwrap();
    let output = enginetop(&["workloads", empty.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("the file is empty: expected at least a description and one op, e.g."),
        "{stderr}"
    );
    let example: String = stderr
        .lines()
        .filter(|line| line.starts_with("    "))
        .map(|line| format!("{}\n", line.trim_start()))
        .collect();
    let minimal = dir.join("minimal.toml");
    std::fs::write(&minimal, example).unwrap();
    let output = enginetop(&["workloads", minimal.to_str().unwrap()]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_file_is_reported_with_its_line_and_column() {
    let output = enginetop(&["workloads", "tests/data/bad_workloads/unknown_kernel.toml"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "error: tests/data/bad_workloads/unknown_kernel.toml:9:10: op \"conv3\" uses unknown \
         kernel \"conv3d\": expected one of gemm, conv2d, batch_norm, batch_norm_relu, \
         batch_norm_add_relu, relu, add, max_pool, avg_pool, softmax, layer_norm, sgd, \
         conv2d_grad_input, conv2d_grad_weight, batch_norm_grad, batch_norm_relu_grad, relu_grad, \
         relu_grad_add, max_pool_grad, avg_pool_grad, softmax_xent_grad, copy_h2d, copy_d2h, \
         sum_expr, fold, sleep_us\n"
    );
}

#[test]
fn bad_set_arguments_are_refused() {
    let output = enginetop(&["workloads", "chain", "--set", "length"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "error: --set \"length\" is not name=value: expected e.g. --set batch=16\n"
    );
    let output = enginetop(&["workloads", "chain", "--set", "lenght=3"]);
    assert_eq!(
        text(&output.stderr),
        "error: chain: unknown parameter \"lenght\": expected one of the [params] this file \
         declares (length, size)\n"
    );
    let missing = enginetop(&["workloads", "--set", "length=3"]);
    assert_eq!(
        missing.status.code(),
        Some(2),
        "clap refuses --set without a workload"
    );
    let missing_file = enginetop(&["workloads", "no/such/file.toml"]);
    assert_eq!(missing_file.status.code(), Some(1));
    assert!(
        text(&missing_file.stderr).starts_with("error: no/such/file.toml: cannot read the file: ")
    );
}

/// `--gpus` changes nothing `workloads` prints: it is refused, not silently ignored.
#[test]
fn workloads_refuses_gpus() {
    let output = enginetop(&["workloads", "--gpus", "none"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(
        text(&output.stderr).starts_with("error: unexpected argument '--gpus' found"),
        "{}",
        text(&output.stderr)
    );
}

/// A path that is not a regular file is refused before it is opened: opening a named pipe
/// waits for a writer (the command used to hang), and a file over the size limit says so in
/// bytes, with the fix.
#[test]
fn files_that_are_not_workload_files_are_refused_at_once() {
    let dir = std::env::temp_dir().join(format!("enginetop-not-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("pipe.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.is_ok_and(|status| status.success()), "mkfifo");
    let big = dir.join("big.toml");
    std::fs::write(&big, "# padding\n".repeat(200_000)).unwrap();
    let output = within_a_minute(&["workloads", fifo.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        format!(
            "error: {}: cannot read the file: it is not a regular file (a pipe, socket or \
             device): expected a TOML file\n",
            fifo.display()
        )
    );
    let output = enginetop(&["workloads", dir.to_str().unwrap()]);
    assert!(text(&output.stderr).ends_with("it is a directory: expected a TOML file\n"));
    let output = enginetop(&["workloads", big.to_str().unwrap()]);
    assert_eq!(
        text(&output.stderr),
        format!(
            "error: {}: the file is larger than 1048576 bytes: expected a workload file under \
             that; repeat ops with [[block]] repeat and [templates] instead of writing each one \
             out\n",
            big.display()
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `enginetop args`, failing the test (not hanging it) if it runs for a minute: a thread
/// waits for the process and hands its output over a channel the test waits on.
fn within_a_minute(args: &[&str]) -> Output {
    let child = command()
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the enginetop binary starts");
    let pid = child.id();
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    match finished.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(output) => output.expect("enginetop's output is readable"),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .arg(pid.to_string())
                .status();
            panic!("enginetop {args:?} still runs after a minute");
        }
    }
}

/// The lines of the fenced block of `language` that follows `after` in `text`.
fn fenced_block_after<'t>(text: &'t str, after: &str, language: &str) -> Vec<&'t str> {
    let start = text.find(after).expect("the marker is in the text");
    let opening = format!("```{language}\n");
    let body = &text[start..];
    let body = &body[body.find(&opening).expect("a fenced block follows") + opening.len()..];
    body[..body.find("```").expect("the block ends")]
        .lines()
        .collect()
}

/// `workloads/FORMAT.md`'s complete example: its file, then each `$ enginetop workloads ...`
/// command of the text block under it run on that file, printing (stdout, then stderr)
/// exactly the lines the document shows. The runs (`--workload`) print timings, so they are
/// left out.
#[test]
fn the_format_documents_complete_example_prints_what_it_shows() {
    let format =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/FORMAT.md"))
            .unwrap();
    let example = fenced_block_after(&format, "## A complete example", "toml");
    let dir = std::env::temp_dir().join(format!("enginetop-format-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("diamond.toml"), example.join("\n") + "\n").unwrap();
    let session = fenced_block_after(&format, "## A complete example", "text");
    let mut commands = 0;
    for (index, line) in session.iter().enumerate() {
        let Some(args) = line.strip_prefix("$ enginetop workloads ") else {
            continue;
        };
        let shown: Vec<&str> = session[index + 1..]
            .iter()
            .take_while(|line| !line.starts_with("$ "))
            .copied()
            .collect();
        let args: Vec<&str> = ["workloads"].into_iter().chain(args.split(' ')).collect();
        let output = command()
            .args(&args)
            .current_dir(&dir)
            .output()
            .expect("the enginetop binary starts");
        let printed = text(&output.stdout) + &text(&output.stderr);
        assert_eq!(printed.lines().collect::<Vec<_>>(), shown, "{line}");
        commands += 1;
    }
    assert_eq!(commands, 3, "the example's `enginetop workloads` commands");
    let _ = std::fs::remove_dir_all(&dir);
}
