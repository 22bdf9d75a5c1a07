//! The dependency engine: a diamond of ops over vars (reads run side by side, a write waits
//! for them), a failing op reported at the wait, and the engine's worker counts.
//! `cargo run --release --example engine`
use std::sync::{Arc, Mutex};

use enginetop::engine::{Engine, EngineKind, EngineOptions, OpSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Engine::new(EngineOptions::new(EngineKind::PerDevice, 2))?;
    let (input, left, right, output) = (
        engine.new_variable(),
        engine.new_variable(),
        engine.new_variable(),
        engine.new_variable(),
    );
    // The data lives outside the engine; the vars only order the ops that touch it.
    let values = Arc::new(Mutex::new([0i64; 4]));
    let op = |reads: &[usize], write: usize, f: fn(&[i64]) -> i64| {
        let values = values.clone();
        let reads = reads.to_vec();
        move |_: enginetop::engine::RunContext| {
            let mut values = values.lock().expect("no op panics");
            let inputs: Vec<i64> = reads.iter().map(|&i| values[i]).collect();
            values[write] = f(&inputs);
            Ok(())
        }
    };
    // An op's vars: one var, or a slice or array of vars or of `&Var`.
    engine.push_sync(OpSpec::new("load").writes(&input), op(&[], 0, |_| 10))?;
    let spec = OpSpec::new("add_one").reads(&input).writes(&left);
    engine.push_sync(spec, op(&[0], 1, |x| x[0] + 1))?;
    let spec = OpSpec::new("times_two").reads(&input).writes(&right);
    engine.push_sync(spec, op(&[0], 2, |x| x[0] * 2))?;
    let sum = op(&[1, 2], 3, |x| x[0] + x[1]);
    engine.push_sync(
        OpSpec::new("sum").reads(&[&left, &right]).writes(&output),
        sum,
    )?;
    engine.wait_for_var(&output)?;
    println!(
        "(10 + 1) + (10 * 2) = {}",
        values.lock().expect("no op panics")[3]
    );

    // A failing op: its error reaches whoever waits on a var it wrote.
    let failing = OpSpec::new("broken").writes(&output);
    engine.push_sync(failing, |_| Err("the input was empty".into()))?;
    match engine.wait_for_var(&output) {
        Err(error) => println!("wait_for_var reports: {error}"),
        Ok(()) => return Err("the failure was lost".into()),
    }

    let workers = engine.workers();
    println!(
        "workers: {} per CPU device, {} priority",
        workers.cpu, workers.priority
    );
    Ok(())
}
