//! [`ReplaySource`]: the dashboard's frames from a recording, at a cursor that plays,
//! pauses, changes speed, steps and jumps.
//!
//! Playing, each frame moves the cursor by the wall time since the last frame times the
//! speed, and stops at the end of the run (space then plays it again from the start). A
//! step moves it by [`STEP`] times the speed. A step or a jump only moves the cursor; each
//! frame moves the statistics toward it through [`Replay::seek_within`] for [`FEED_BUDGET`]
//! at most (from the recording's checkpoint before it), so a far jump shows the nearest
//! state ready and `seeking` until the statistics get there. `o` starts a search for the
//! next op of a name ([`Replay::search_within`]): while it runs, each frame searches for the
//! same budget instead of feeding, the footer says how far it got, Esc cancels it; found,
//! the cursor jumps there.
//!
//! The op detail's graph comes from the recording's graph frames ([`ReplayGraph`]): the
//! shape and op-run frames among the frames the replay has read, fed to a [`RunLog`] as the
//! cursor moves on; a move back refills it from the frames of the spans the replay holds.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use super::{
    parse_time, seconds, speed_text, ReplayControl, ReplayFacts, CANNOT_EXPORT, CANNOT_RESET,
    CANNOT_RESIZE, FEED_BUDGET,
};
use crate::profiler::spans::SpanSnapshot;
use crate::profiler::Snapshot;
use crate::record::graph::{GraphFrame, GraphFrames};
use crate::record::index::{FrameEntry, RecordingIndex};
use crate::record::{OpSearch, Replay, SearchStep, Setting};
use crate::tui::deps::{OpGraph, RunLog, DEFAULT_CAPACITY};
use crate::tui::source::{Control, ControlError, DashboardData, DashboardSource, Facts};
use crate::workload::run::ITERATION_END;

/// The speeds `x` and `X` go through.
pub(super) const SPEEDS: [f64; 7] = [0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0];
/// Where the speed starts ([`SPEEDS`]: 1x).
const NORMAL_SPEED: usize = 2;
/// Run time one step moves at 1x: a frame of the dashboard's default 10 a second.
pub(super) const STEP: Duration = Duration::from_millis(100);

/// A recording shown in the dashboard.
#[derive(Debug)]
pub(crate) struct ReplaySource {
    replay: Replay,
    speed: usize,
    playing: bool,
    /// When the cursor last moved with the clock (playing).
    last_tick: Option<Instant>,
    /// The cursor's target, ns since the recording's epoch.
    cursor_ns: u64,
    /// Whether the statistics are short of the cursor (a jump not yet fed through).
    seeking: bool,
    /// How long a frame feeds the statistics at most ([`FEED_BUDGET`]).
    budget: Duration,
    /// An error reading the file after it opened (a thread could not be named).
    failure: Option<String>,
    /// The op detail's graph, read as the replay goes.
    graph: ReplayGraph,
    /// The search for the next op of a name, while it runs.
    search: Option<OpSearch>,
    /// How the search goes or went, for the footer.
    search_line: Option<String>,
}

impl ReplaySource {
    /// A replay of `replay` from its cursor, playing at 1x (paused, with `paused`).
    pub(crate) fn new(replay: Replay, paused: bool) -> ReplaySource {
        ReplaySource {
            graph: ReplayGraph::open(replay.index()),
            cursor_ns: replay.cursor_ns(),
            replay,
            speed: NORMAL_SPEED,
            playing: !paused,
            last_tick: None,
            seeking: false,
            budget: FEED_BUDGET,
            failure: None,
            search: None,
            search_line: None,
        }
    }

    /// The same, with the cursor moved to `target_ns` (clamped to the run): the first frames
    /// show the state on the way there.
    pub(crate) fn starting_at(mut self, target_ns: u64) -> ReplaySource {
        self.seek(target_ns);
        self
    }

    fn speed(&self) -> f64 {
        SPEEDS[self.speed]
    }

    /// Moves the cursor with the clock while playing; stops at the end.
    fn tick(&mut self) {
        let now = Instant::now();
        let last = self.last_tick.replace(now);
        if !self.playing {
            return;
        }
        if let Some(last) = last {
            let run_ns = (now - last).as_nanos() as f64 * self.speed();
            self.cursor_ns = self.cursor_ns.saturating_add(run_ns as u64);
        }
        if self.cursor_ns >= self.replay.end_ns() {
            self.cursor_ns = self.replay.end_ns();
            self.playing = false;
        }
    }

    /// Moves the cursor; the frames move the statistics after it.
    fn seek(&mut self, target_ns: u64) {
        self.cursor_ns = target_ns.clamp(self.replay.start_ns(), self.replay.end_ns());
    }

    fn at(&self) -> String {
        seconds(Duration::from_nanos(
            self.cursor_ns.saturating_sub(self.replay.start_ns()),
        ))
    }

    fn replay_control(&mut self, control: ReplayControl) -> Result<String, ControlError> {
        let failed = |why: String| Err(ControlError::Failed(why));
        if control != ReplayControl::CancelSearch {
            self.search_line = None;
        }
        match control {
            ReplayControl::Speed(up) => {
                let speed = match up {
                    true => (self.speed + 1).min(SPEEDS.len() - 1),
                    false => self.speed.saturating_sub(1),
                };
                if speed == self.speed {
                    let end = if up { "fastest" } else { "slowest" };
                    return failed(format!("already at the {end} speed ({})", self.speed_now()));
                }
                self.speed = speed;
                Ok(format!("speed {}", self.speed_now()))
            }
            ReplayControl::Step(_) if self.playing => {
                failed("steps move a paused replay: space pauses it first".into())
            }
            ReplayControl::Step(forward) => {
                let step = (STEP.as_nanos() as f64 * self.speed()) as u64;
                let target = match forward {
                    true => self.cursor_ns.saturating_add(step),
                    false => self.cursor_ns.saturating_sub(step),
                };
                self.seek(target);
                Ok(format!("at {}", self.at()))
            }
            ReplayControl::JumpTo(text) => {
                let time = parse_time(&text).map_err(ControlError::Failed)?;
                let start = self.replay.start_ns();
                let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
                self.seek(start.saturating_add(nanos));
                Ok(format!("at {}", self.at()))
            }
            ReplayControl::NextOp(name) => {
                self.search = Some(self.replay.search_op(&name));
                self.search_line = Some(format!("searching `{name}` (Esc cancels)"));
                Ok(format!(
                    "searching for the next `{name}` op after {} (Esc cancels)",
                    self.at()
                ))
            }
            ReplayControl::CancelSearch => match self.search.take() {
                Some(search) => {
                    self.search_line = None;
                    Ok(format!("search for `{}` cancelled", search.query()))
                }
                None => failed("no search for an op runs".into()),
            },
        }
    }

    /// Goes on with the search for a frame's budget; found, moves the cursor there.
    fn search_slice(&mut self) {
        let Some(search) = self.search.as_mut() else {
            return;
        };
        let query = search.query().to_string();
        match self.replay.search_within(search, self.budget) {
            SearchStep::Searching(done) => {
                let percent = (done * 100.0).floor();
                self.search_line = Some(format!("searching `{query}` {percent}% (Esc cancels)"));
                return;
            }
            SearchStep::Found(start) => {
                self.seek(start);
                self.search_line = Some(format!("the next `{query}` op starts at {}", self.at()));
            }
            SearchStep::Missing => {
                self.search_line = Some(format!(
                    "no op named like `{query}` starts after {}",
                    self.at()
                ));
            }
        }
        self.search = None;
    }

    fn speed_now(&self) -> String {
        speed_text(self.speed())
    }

    fn setting(&self, key: &str) -> String {
        let settings: &[Setting] = &self.replay.index().info.settings;
        settings
            .iter()
            .find(|setting| setting.key == key)
            .map_or_else(String::new, |setting| setting.value.clone())
    }

    /// The header's facts at the cursor; `snapshot` is the statistics there, whose
    /// iteration markers count the iterations done (the live run counts the same markers).
    fn facts(&self, snapshot: &Snapshot) -> Facts {
        let start = self.replay.start_ns();
        let mut losses = self.replay.losses();
        if let Some(failure) = &self.failure {
            losses.push(failure.clone());
        }
        let mut notices = vec![format!("recording {}", self.replay.index().path())];
        if !losses.is_empty() {
            notices.push(format!("{} parts lost", losses.len()));
        }
        Facts {
            workload: self.replay.index().info.workload.clone(),
            engine: self.setting("engine"),
            pool_kind: self.setting("pool"),
            elapsed: Duration::from_nanos(self.replay.cursor_ns().saturating_sub(start)),
            intra_op: self.setting("intra").parse().unwrap_or(0),
            iterations: snapshot.op(ITERATION_END).map_or(0, |marker| marker.count),
            notices,
            warnings: losses.clone(),
            replay: Some(ReplayFacts {
                cursor: Duration::from_nanos(self.replay.cursor_ns().saturating_sub(start)),
                total: Duration::from_nanos(self.replay.end_ns().saturating_sub(start)),
                speed: self.speed(),
                playing: self.playing,
                losses,
                seeking: self
                    .seeking
                    .then(|| Duration::from_nanos(self.cursor_ns.saturating_sub(start))),
                searching: self.search.is_some(),
                search: self.search_line.clone(),
            }),
            ..Facts::default()
        }
    }
}

impl DashboardSource for ReplaySource {
    fn snapshot(&mut self) -> DashboardData {
        self.tick();
        if self.search.is_some() {
            self.search_slice();
        } else {
            match self.replay.seek_within(self.cursor_ns, self.budget) {
                Ok(reached) => self.seeking = !reached,
                Err(error) => {
                    self.failure = Some(crate::error_chain::text(&error));
                    (self.playing, self.seeking) = (false, false);
                }
            }
        }
        let spans = self.replay.spans();
        let deps = self
            .graph
            .update(self.replay.index(), self.replay.cursor_ns(), &spans);
        let snapshot = self.replay.snapshot();
        DashboardData {
            facts: self.facts(&snapshot),
            snapshot,
            devices: Vec::new(),
            spans,
            deps,
        }
    }

    fn control(&mut self, control: Control) -> Result<String, ControlError> {
        let refuse = |why: &str| Err(ControlError::Failed(why.to_string()));
        match control {
            Control::Pause(_) if self.playing => {
                self.playing = false;
                Ok(format!("paused at {}", self.at()))
            }
            Control::Pause(_) => {
                if self.cursor_ns >= self.replay.end_ns() {
                    self.seek(self.replay.start_ns());
                }
                self.playing = true;
                self.last_tick = Some(Instant::now());
                Ok(format!(
                    "playing from {} at {}",
                    self.at(),
                    self.speed_now()
                ))
            }
            Control::Replay(control) => self.replay_control(control),
            Control::SetInterOp { .. } | Control::SetIntraOp(_) | Control::Tune(_) => {
                refuse(CANNOT_RESIZE)
            }
            Control::ExportTrace => refuse(CANNOT_EXPORT),
            Control::ResetStats => refuse(CANNOT_RESET),
        }
    }
}

/// The recording's graph frames among those the replay has read (see the module docs).
///
/// The writer puts each chunk's op runs in the frame right after it, so the graph frames
/// read are those among the chunks the replay has read, and the one op-run frame right after
/// the last of them (the runs of the ops at the cursor): the frame after that is the next
/// chunk, left for the replay to read (decoded here only where no op ran between two chunks).
#[derive(Debug)]
struct ReplayGraph {
    /// `None`: the file could not be opened again (the detail says "not recorded").
    frames: Option<GraphFrames>,
    log: RunLog,
    /// Every frame before this one has been looked at.
    next: usize,
    /// A frame after the chunks read that is not a graph frame (a chunk the replay has not
    /// read yet): not read again.
    not_graph: Option<usize>,
    /// The cursor at the last update.
    cursor_ns: u64,
    /// Whether the run's shape frame has been read (it comes before every op-run frame).
    shape_read: bool,
}

impl ReplayGraph {
    fn open(index: &RecordingIndex) -> ReplayGraph {
        ReplayGraph {
            frames: GraphFrames::open(index.path()).ok(),
            log: RunLog::new(DEFAULT_CAPACITY, None),
            next: 1,
            not_graph: None,
            cursor_ns: 0,
            shape_read: false,
        }
    }

    /// Reads the graph frames up to the chunks read by `cursor_ns` (after a move back, or a
    /// jump ahead through a checkpoint, from those of `spans`, the spans held) and returns the
    /// graph. A jump ahead skips the frames between: the chunks there were never decoded (the
    /// replay started from a checkpoint), and reading them to find the op runs among them
    /// would decode the file up to the cursor on the dashboard's thread.
    fn update(&mut self, index: &RecordingIndex, cursor_ns: u64, spans: &SpanSnapshot) -> OpGraph {
        let Some(frames) = self.frames.as_mut() else {
            return OpGraph::default();
        };
        let entries = index.frames();
        if cursor_ns < self.cursor_ns {
            self.log.clear_runs();
            self.next = first_frame_of(entries, spans);
        }
        self.cursor_ns = cursor_ns;
        let held_from = first_frame_of(entries, spans);
        let read = |entry: &FrameEntry| entry.span.is_some_and(|span| span.first_ns <= cursor_ns);
        let reach = entries.iter().rposition(read).map_or(1, |last| last + 1);
        while self.next < entries.len() {
            if self.shape_read {
                self.next = self.next.max(held_from);
            }
            let Some(entry) = entries.get(self.next) else {
                break;
            };
            let frame = self.next;
            if entry.checkpoint {
                self.next += 1;
                continue; // the replay's statistics, no part of the graph
            }
            let ahead = frame >= reach;
            if ahead && (entry.span.is_some() || self.not_graph == Some(frame)) {
                break; // a chunk the replay has not read yet
            }
            let mut stop = false;
            if entry.span.is_none() {
                match frames.read(entry) {
                    Ok(Some(GraphFrame::Shape(shape))) => {
                        self.log.set_shape(&shape);
                        self.shape_read = true;
                    }
                    Ok(Some(GraphFrame::Runs(runs))) => {
                        self.log.add_runs(runs);
                        // The runs written after the last chunk read; next comes a chunk.
                        stop = ahead;
                    }
                    Ok(None) if ahead => {
                        self.not_graph = Some(frame);
                        break;
                    }
                    // The replay reports a damaged frame when it reaches it.
                    Ok(None) | Err(_) => {}
                }
            }
            self.next += 1;
            if stop {
                break;
            }
        }
        self.log.snapshot()
    }
}

/// The frame to read op runs from again for `spans`: the chunk before the first that holds
/// an event at or after the oldest span's start (an op's run can be written a chunk ahead of
/// its events).
fn first_frame_of(entries: &[FrameEntry], spans: &SpanSnapshot) -> usize {
    let Some(oldest) = spans.iter().map(|span| span.start_ns).min() else {
        return 1;
    };
    let holds = |entry: &FrameEntry| entry.span.is_some_and(|span| span.last_ns >= oldest);
    let first = entries.iter().position(holds).unwrap_or(entries.len());
    let chunk = |entry: &FrameEntry| entry.span.is_some();
    entries[..first].iter().rposition(chunk).unwrap_or(1).max(1)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::record::tests::{record_synthetic, scratch, Synthetic};

    fn source(name: &str) -> (ReplaySource, std::path::PathBuf) {
        let path = scratch(name);
        let run = Synthetic {
            worker: "rs-worker",
            ops: &[("rs-gemm", 300), ("rs-relu", 40)],
            rounds: 2_000,
        };
        record_synthetic(&path, &run);
        (ReplaySource::new(Replay::open(&path).unwrap(), true), path)
    }

    /// The frame once the statistics are at the cursor (each frame feeds a chunk at least).
    fn settled(source: &mut ReplaySource) -> DashboardData {
        loop {
            let data = source.snapshot();
            if data.facts.replay.as_ref().unwrap().seeking.is_none() {
                return data;
            }
        }
    }

    fn ops(data: &DashboardData) -> u64 {
        data.snapshot.ops.iter().map(|op| op.count).sum()
    }

    #[test]
    fn steps_jumps_and_speeds_move_the_cursor_and_the_statistics() {
        let (mut source, path) = source("tui-replay-steps");
        let first = source.snapshot();
        let replay = first.facts.replay.clone().unwrap();
        assert_eq!(replay.cursor, Duration::ZERO);
        assert!(!replay.playing);
        assert_eq!(ops(&first), 0);
        let said = source.control(Control::Replay(ReplayControl::Step(true)));
        assert_eq!(said.unwrap(), "at 0.100 s");
        let stepped = settled(&mut source);
        assert_eq!(stepped.facts.replay.clone().unwrap().cursor, STEP);
        // 100 ms hold 293 rounds of 341 us: 586 ops ended.
        assert_eq!(ops(&stepped), 586);
        source
            .control(Control::Replay(ReplayControl::Speed(true)))
            .unwrap();
        source
            .control(Control::Replay(ReplayControl::Step(true)))
            .unwrap();
        let twice = settled(&mut source);
        assert_eq!(twice.facts.replay.clone().unwrap().speed, 2.0);
        assert_eq!(twice.facts.replay.unwrap().cursor, STEP * 3);
        source
            .control(Control::Replay(ReplayControl::Step(false)))
            .unwrap();
        assert_eq!(
            ops(&settled(&mut source)),
            586,
            "back where the first step was"
        );
        let jumped = source.control(Control::Replay(ReplayControl::JumpTo("0.5s".into())));
        assert_eq!(jumped.unwrap(), "at 0.500 s");
        let bad = source.control(Control::Replay(ReplayControl::JumpTo("later".into())));
        assert!(bad.unwrap_err().to_string().contains("not a time"));
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn playing_stops_at_the_end_and_resizes_are_refused() {
        let (mut source, path) = source("tui-replay-play");
        source
            .control(Control::Replay(ReplayControl::JumpTo("100".into())))
            .unwrap();
        let end = settled(&mut source).facts.replay.unwrap();
        assert_eq!(end.cursor, end.total);
        assert!(source
            .control(Control::Pause(false))
            .unwrap()
            .starts_with("playing from 0.000 s"));
        assert!(source.snapshot().facts.replay.unwrap().playing);
        let step = source.control(Control::Replay(ReplayControl::Step(true)));
        assert!(step.unwrap_err().to_string().contains("paused replay"));
        let resize = source.control(Control::SetIntraOp(4)).unwrap_err();
        assert!(
            resize.to_string().starts_with("a replay cannot resize: "),
            "{resize}"
        );
        let inter = Control::SetInterOp {
            device: crate::profiler::DeviceId::of(crate::device::identity::Device::Cpu(0)),
            threads: 3,
        };
        assert!(source.control(inter).is_err());
        std::fs::remove_file(&path).unwrap();
    }

    /// A far jump with no time to feed: the frame answers at once with the state on the way
    /// and says it is seeking; the next frames get there.
    #[test]
    fn a_far_jump_shows_the_state_on_the_way_and_says_it_is_seeking() {
        let path = scratch("tui-replay-seeking");
        crate::record::replay_bench::write_synthetic(&path, 1_500_000).unwrap();
        let replay = Replay::open_from_start(&path).unwrap();
        let mut source = ReplaySource::new(replay, true);
        source.budget = Duration::ZERO;
        let said = source.control(Control::Replay(ReplayControl::JumpTo("0.25".into())));
        assert_eq!(said.unwrap(), "at 0.250 s");
        let first = source.snapshot();
        let facts = first.facts.replay.clone().unwrap();
        assert_eq!(facts.seeking, Some(Duration::from_millis(250)));
        assert!(
            facts.cursor < Duration::from_millis(250),
            "{:?}",
            facts.cursor
        );
        let line = facts.position();
        assert!(line.contains(" · seeking 0.250 s"), "{line}");
        let there = settled(&mut source);
        let facts = there.facts.replay.clone().unwrap();
        assert_eq!(facts.cursor, Duration::from_millis(250));
        assert!(!facts.position().contains("seeking"));
        assert!(ops(&there) > ops(&first), "{} {}", ops(&there), ops(&first));
        std::fs::remove_file(&path).unwrap();
    }
}
