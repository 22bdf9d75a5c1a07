//! `--record FILE` on a run: start a recording beside the profiler, finish it after the run.
use std::path::Path;
// std's `Arc`: the run's graph observer is a trait object, which loom's `Arc` cannot coerce
// to `dyn`.
use std::sync::Arc;

use anyhow::Result;

use crate::config::RuntimeConfig;
use crate::profiler::Profiler;
use crate::record::{GraphObserver, Recorder, RecordingInfo, Setting};
use crate::workload::Graph;

/// Starts recording `profiler`'s events to `path`, if given. The configuration it records
/// holds the workload's parameters too (`param slots` = 4), so `compare` shows a `--set`.
pub(super) fn start(
    path: Option<&Path>,
    profiler: &Profiler,
    graph: &Graph,
    config: &RuntimeConfig,
) -> Result<Option<Recorder>> {
    let Some(path) = path else {
        return Ok(None);
    };
    super::trace::check_trace_path("--record", path)?;
    let mut info = RecordingInfo::for_run(&graph.name, config);
    let params = graph.params.iter();
    info.settings
        .extend(params.map(|(name, value)| Setting::new(format!("param {name}"), value)));
    Ok(Some(Recorder::start(path, profiler, info)?))
}

/// What the run's driver reports its graph to, when the run is recorded.
pub(super) fn graph_observer(recorder: Option<&Recorder>) -> Option<Arc<dyn GraphObserver>> {
    recorder.map(Recorder::graph_observer)
}

/// Writes the rest of the recording and `summary` (the run's, as JSON), and says where
/// it went and what it holds on stderr.
pub(super) fn finish(
    recorder: Option<Recorder>,
    profiler: &Profiler,
    summary: Option<String>,
) -> Result<()> {
    let Some(recorder) = recorder else {
        return Ok(());
    };
    let report = recorder.finish(profiler, summary)?;
    eprintln!(
        "recording: {} ({} events, {} bytes; `enginetop export {} --to chrome`, `enginetop \
         compare`)",
        report.path.display(),
        report.events,
        report.bytes,
        report.path.display()
    );
    if report.lost > 0 {
        eprintln!(
            "warning: the recording lacks {} events: its writer fell behind the run",
            report.lost
        );
    }
    Ok(())
}
