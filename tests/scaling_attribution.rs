//! Where the workers' time went, on a real profiled run whose answer is known: a chain of
//! sleeping ops on two inter-op workers runs one op at a time, so the pool's time splits
//! between running ops and waiting with no ready op anywhere; every worker's shares add up
//! to all of its time, and the table summary prints the pool's line. Shares are asserted
//! with wide margins, never times. On the pooled engine, the pools table, the attribution,
//! the verdicts and the thread names all name its shared workers as one pool.
use std::path::PathBuf;
use std::process::Output;

mod common;
use common::cli::{command, text};

/// A chain of `ops` ops each sleeping `us`: every op writes the one tensor.
fn nap_chain(ops: usize, us: u64) -> PathBuf {
    let text = format!(
        "description = \"a chain of naps\"\n\
         [[tensor]]\nname = \"x\"\nshape = [1]\ninit = \"ones\"\n\
         [[block]]\nrepeat = {ops}\n\
         op = [{{ name = \"nap${{i}}\", kernel = \"sleep_us\", writes = [\"x\"], \
         params = {{ us = {us} }} }}]\n"
    );
    let name = format!("enginetop-nap-chain-{}-{ops}x{us}.toml", std::process::id());
    let path = std::env::temp_dir().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn run(path: &std::path::Path, summary: &str) -> Output {
    run_on(path, summary, "per-device")
}

/// [`run`] on `engine`.
fn run_on(path: &std::path::Path, summary: &str, engine: &str) -> Output {
    let cache = std::env::temp_dir().join(format!("enginetop-attr-cache-{}", std::process::id()));
    let output = command()
        .args([
            "--workload",
            path.to_str().unwrap(),
            "--inter",
            "2",
            "--intra",
            "1",
            "--engine",
            engine,
        ])
        .args([
            "--iterations",
            "3",
            "--gemm-peak",
            "1",
            "--summary",
            summary,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("XDG_CACHE_HOME", &cache)
        .env_remove("ENGINETOP_ENGINE")
        .env_remove("MXNET_ENGINE_TYPE")
        .output()
        .expect("the enginetop binary starts");
    assert!(output.status.success(), "{}", text(&output.stderr));
    output
}

fn share(shares: &serde_json::Value, bucket: &str) -> f64 {
    shares[bucket].as_f64().unwrap_or(0.0)
}

#[test]
fn a_chain_on_two_workers_waits_with_no_ready_op() {
    let path = nap_chain(40, 2000);
    let json: serde_json::Value = serde_json::from_slice(&run(&path, "json").stdout).unwrap();
    let attribution = &json["scaling"]["attribution"];
    let pools = attribution["pools"].as_array().expect("pools");
    let pool = pools
        .iter()
        .find(|pool| pool["pool"] == "cpu0 workers")
        .unwrap_or_else(|| panic!("the inter-op pool: {attribution:#}"));
    assert_eq!(pool["workers"], 2, "{attribution:#}");
    let shares = &pool["shares"];
    // One op at a time on two workers: about half their time runs ops, and most of the
    // rest nothing is ready anywhere.
    assert!(share(shares, "op") < 0.75, "{attribution:#}");
    assert!(share(shares, "op") > 0.2, "{attribution:#}");
    assert!(share(shares, "no_ready_op") > 0.25, "{attribution:#}");
    assert!(
        share(shares, "no_ready_op") > share(shares, "wake_up"),
        "{attribution:#}"
    );
    let workers = attribution["workers"].as_array().expect("workers");
    assert!(
        workers.iter().any(|w| w["worker"] == "cpu0-w1"),
        "{attribution:#}"
    );
    for worker in workers {
        let shares = worker["shares"].as_object().unwrap();
        let sum: f64 = shares.values().map(|share| share.as_f64().unwrap()).sum();
        assert!((sum - 1.0).abs() < 1e-6, "{worker:#}");
    }
    let table = text(&run(&path, "table").stdout);
    assert!(table.contains("where the workers' time went"), "{table}");
    assert!(table.contains("cpu0 workers (2 threads): "), "{table}");
    std::fs::remove_file(path).unwrap();
}

/// The pooled engine's shared workers are one pool wherever the summary names them: the
/// pools table's lane, the attribution's pool, the verdicts' subject, and their threads are
/// named after that pool with their index.
#[test]
fn the_pooled_engines_workers_are_named_alike_everywhere() {
    let path = nap_chain(20, 1000);
    let json: serde_json::Value =
        serde_json::from_slice(&run_on(&path, "json", "pooled").stdout).unwrap();
    let lanes: Vec<&str> = json["utilization"]
        .as_array()
        .expect("utilization")
        .iter()
        .map(|lane| lane["lane"].as_str().unwrap())
        .collect();
    assert!(lanes.contains(&"engine workers"), "{lanes:?}");
    let attribution = &json["scaling"]["attribution"];
    let pools: Vec<&str> = attribution["pools"]
        .as_array()
        .expect("pools")
        .iter()
        .map(|pool| pool["pool"].as_str().unwrap())
        .collect();
    assert!(pools.contains(&"engine workers"), "{attribution:#}");
    assert!(!pools.contains(&"cpu0 workers"), "{attribution:#}");
    let shared: Vec<&serde_json::Value> = attribution["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter(|worker| worker["pool"] == "engine workers")
        .collect();
    assert_eq!(shared.len(), 2, "{attribution:#}");
    for worker in shared {
        let index = worker["index"].as_u64().unwrap();
        assert_eq!(worker["thread"], format!("engine-w{index}"), "{worker:#}");
    }
    let verdicts = json["scaling"]["verdicts"].as_array().expect("verdicts");
    assert!(!verdicts.is_empty(), "{:#}", json["scaling"]);
    for verdict in verdicts {
        let subject = verdict["device"].as_str().unwrap();
        assert!(lanes.contains(&subject), "{subject} not in {lanes:?}");
    }
    let table = text(&run_on(&path, "table", "pooled").stdout);
    assert!(table.contains("  engine workers "), "{table}");
    assert!(table.contains("engine workers (2 threads): "), "{table}");
    std::fs::remove_file(path).unwrap();
}
