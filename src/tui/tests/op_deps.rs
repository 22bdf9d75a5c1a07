//! The op detail's graph, live and from a replay of the same run's recording: a real run of
//! the `pipeline` workload (its buffer slots are reused, so its ops wait on each other for
//! all three reasons) under the live source, its graph told to a `RunLog` that forwards it to
//! a recorder; then the recording replayed to its end. In both, the detail of a known op of
//! the second iteration lists what it read and wrote and the ops it waited on, by the ids its
//! spans carry, the iteration before's included; a GPU op shows its stream.

use crate::sync::Arc;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::config::RuntimeConfig;
use crate::device::discover::GpuSelection;
use crate::profiler::spans::OpSpan;
use crate::profiler::{EngineProbe, Profiler, ProfilerOptions, StreamProbe};
use crate::record::{Recorder, RecordingInfo, Replay};
use crate::tui::deps::{RunLog, DEFAULT_CAPACITY};
use crate::tui::replay::ReplayControl;
use crate::tui::view::{op_detail, Ctx};
use crate::tui::{
    App, Control, DashboardData, DashboardSource, LiveInfo, LiveRun, ReplaySource, Theme,
};
use crate::workload::run::{Driver, RunHooks, RunLength, ITERATION_END};
use crate::workload::{load_spec, Overrides};

/// The last frame of a live run and of its recording's replay, at the end.
struct Frames {
    live: DashboardData,
    replayed: DashboardData,
}

/// Runs `pipeline` with `sets` for 3 iterations under the live source, recorded; replays it.
fn run_and_replay(name: &str, sets: &[&str], config: RuntimeConfig) -> Frames {
    let small = ["batches=4", "slots=2", "rows=8", "features=16", "hidden=16"];
    let overrides = small.iter().chain(sets).copied();
    let graph = load_spec("pipeline", &Overrides::from_args(overrides).unwrap()).unwrap();
    let path = scratch(name);
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let recorder = Recorder::start(&path, &profiler, RecordingInfo::default()).unwrap();
    let log = Arc::new(RunLog::new(
        DEFAULT_CAPACITY,
        Some(recorder.graph_observer()),
    ));
    let hooks = RunHooks {
        engine_observer: Some(Arc::new(EngineProbe::new(&profiler))),
        stream_observer: Some(Arc::new(StreamProbe::new(&profiler))),
        graph: Some(log.clone()),
        ..RunHooks::default()
    };
    let driver = Driver::new(graph, &config, &hooks).unwrap();
    let info = LiveInfo {
        engine: config.engine_kind,
        cpu_devices: vec![0],
        graph: Some(log),
        ..LiveInfo::default()
    };
    let length = RunLength::Iterations(3);
    let (run, mut source) = LiveRun::start(driver, length, &profiler, None, info).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !source.snapshot().facts.finished {
        assert!(
            Instant::now() < deadline,
            "the run did not end in two minutes"
        );
        std::thread::yield_now();
    }
    run.finish().unwrap();
    profiler.flush();
    let live = source.snapshot();
    recorder.finish(&profiler, None).unwrap();
    let mut replay = ReplaySource::new(Replay::open(&path).unwrap(), true);
    // To the end, back to the start (the graph's runs are let go), and to the end again.
    for to in ["1000", "0", "1000"] {
        replay
            .control(Control::Replay(ReplayControl::JumpTo(to.into())))
            .unwrap();
        replay.snapshot();
    }
    let replayed = replay.snapshot();
    std::fs::remove_file(&path).unwrap();
    Frames { live, replayed }
}

fn scratch(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "enginetop-op-deps-{name}-{}.etrec",
        std::process::id()
    ))
}

fn config(gpus: GpuSelection) -> RuntimeConfig {
    RuntimeConfig {
        inter_op_threads: 2,
        intra_op_threads: 1,
        gpus,
        ..RuntimeConfig::default()
    }
}

/// The frame's spans by iteration: the ops between one `iteration_end` and the next, in
/// push (op id) order, each iteration's marker last (the setup ops before the first marker
/// are left out by name where asked).
fn iterations(data: &DashboardData) -> Vec<Vec<OpSpan>> {
    let mut spans: Vec<OpSpan> = data.spans.iter().copied().collect();
    spans.sort_by_key(|span| span.op);
    let mut iterations = vec![Vec::new()];
    for span in spans {
        iterations.last_mut().unwrap().push(span);
        if span.name.as_str() == ITERATION_END {
            iterations.push(Vec::new());
        }
    }
    iterations
}

/// The op named `name` in iteration `iteration`.
fn op(data: &DashboardData, iteration: usize, name: &str) -> OpSpan {
    let iterations = iterations(data);
    *iterations[iteration]
        .iter()
        .find(|span| span.name.as_str() == name)
        .unwrap_or_else(|| panic!("no {name} in iteration {iteration}: {:?}", iterations))
}

/// The detail's rows of `span`, as drawn (labels and values, trailing spaces cut).
fn detail(data: &DashboardData, span: &OpSpan) -> Vec<String> {
    let mut app = App::new();
    app.observe(data.clone());
    let ctx = Ctx::new(&app, Theme::plain());
    op_detail::lines(&ctx, span, 120)
        .iter()
        .map(|line| {
            let text: String = line.spans.iter().map(|s| s.content.as_ref()).collect();
            text.trim_end().to_string()
        })
        .collect()
}

/// The rows from `reads` on.
fn graph_rows(data: &DashboardData, span: &OpSpan) -> Vec<String> {
    let rows = detail(data, span);
    let from = rows
        .iter()
        .position(|row| row.starts_with(" reads"))
        .unwrap();
    rows[from..].to_vec()
}

/// The detail of iteration 1's `read0`: it overwrites slot `host0`, which iteration 0's
/// `read2` wrote last (WAW), `prep2` and the iteration's marker read since (WAR).
fn check_read0_of_iteration_1(data: &DashboardData, what: &str) {
    let read0 = op(data, 1, "read0");
    let read2 = op(data, 0, "read2");
    let prep2 = op(data, 0, "prep2");
    let marker = op(data, 0, ITERATION_END);
    let expected = [
        " reads       none".to_string(),
        " writes      host0".to_string(),
        format!(" waited on   op {} read2 (WAW on host0)", read2.op),
        format!("             op {} prep2 (WAR on host0)", prep2.op),
        format!("             op {} iteration_end (WAR on host0)", marker.op),
    ];
    assert_eq!(graph_rows(data, &read0), expected, "{what}");
    // Its `prep0` reads what it wrote (RAW), and the slot it writes, `feat0`, was read by
    // iteration 0's `fc1_2` since `prep2` wrote it.
    let prep0 = op(data, 1, "prep0");
    let rows = graph_rows(data, &prep0);
    assert_eq!(rows[0], " reads       host0", "{what}");
    assert_eq!(rows[1], " writes      feat0", "{what}");
    let fc1_2 = op(data, 0, "fc1_2");
    let expected = format!(" waited on   op {} read0 (RAW on host0)", read0.op);
    assert_eq!(rows[2], expected, "{what}: {rows:#?}");
    let war = format!("op {} fc1_2 (WAR on feat0)", fc1_2.op);
    assert!(
        rows.iter().any(|row| row.ends_with(&war)),
        "{what}: {rows:#?}"
    );
}

#[test]
fn the_detail_lists_reads_writes_and_the_ops_waited_on_live_and_in_replay() {
    let frames = run_and_replay(
        "cpu",
        &["device=cpu", "read_us=0"],
        config(GpuSelection::None),
    );
    check_read0_of_iteration_1(&frames.live, "live");
    check_read0_of_iteration_1(&frames.replayed, "replayed");
    // The first op of the run waited on nothing; the last marker waited on the last writers.
    let read0 = op(&frames.live, 0, "read0");
    let rows = graph_rows(&frames.live, &read0);
    assert_eq!(rows[2], " waited on   none (ready at once)", "{rows:#?}");
    let marker = op(&frames.replayed, 2, ITERATION_END);
    let rows = graph_rows(&frames.replayed, &marker);
    assert!(rows[0].starts_with(" reads       host0, "), "{rows:#?}");
    let fc2_3 = op(&frames.replayed, 2, "fc2_3");
    let raw = format!("op {} fc2_3 (RAW on out1)", fc2_3.op);
    assert!(rows.iter().any(|row| row.ends_with(&raw)), "{rows:#?}");
}

#[test]
fn a_gpu_ops_detail_shows_its_stream_and_its_graph_live_and_in_replay() {
    let sets = ["device=gpu:0", "read_us=0"];
    let frames = run_and_replay("gpu", &sets, config(GpuSelection::Sim(1)));
    for (data, what) in [(&frames.live, "live"), (&frames.replayed, "replayed")] {
        let h2d1 = op(data, 1, "h2d1");
        assert!(h2d1.stream.is_some(), "{what}: {h2d1:?}");
        let rows = detail(data, &h2d1);
        let stream = rows.iter().find(|row| row.starts_with(" stream")).unwrap();
        assert!(
            stream.starts_with(" stream      stream h2d"),
            "{what}: {rows:#?}"
        );
        let graph = graph_rows(data, &h2d1);
        assert_eq!(
            graph[..2],
            [" reads       host1", " writes      in1"],
            "{what}"
        );
        let read1 = op(data, 1, "read1");
        let raw = format!(" waited on   op {} read1 (RAW on host1)", read1.op);
        assert_eq!(graph[2], raw, "{what}: {graph:#?}");
        let fc1 = op(data, 1, "fc1_1");
        let compute = detail(data, &fc1);
        let stream = compute
            .iter()
            .find(|row| row.starts_with(" stream"))
            .unwrap();
        assert!(
            stream.starts_with(" stream      stream compute"),
            "{what}: {stream}"
        );
    }
}
