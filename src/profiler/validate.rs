//! A Chrome trace validator: the checks a trace must pass to load cleanly in Perfetto,
//! chrome://tracing and speedscope, read the way they read it.
//!
//! Used by the tests on every exported trace and by `enginetop trace validate FILE` (CI's
//! smoke step). Times are taken as viewers take them: `ts` and `dur` parsed as doubles in
//! microseconds, a slice ending at `ts + dur` computed in doubles, events at equal `ts` in
//! file order. Checks:
//! - it parses, as `{"traceEvents": [...]}` or a bare array;
//! - every event has a known `ph`, integer `pid` and `tid` (`tid` may be missing on
//!   `process_*` metadata), a finite `ts >= 0` (optional on metadata), and a `name` unless it
//!   is an `E`;
//! - `X` has a finite `dur >= 0`;
//! - per (pid, tid): `B`/`E` balance and never go back in time, and no two slices (`X` or
//!   `B`/`E`) partially overlap: a slice that starts inside another ends by its end, and of
//!   two slices starting at the same `ts` the longer (the parent) comes first;
//! - no slice is a marker rather than work: an `X` of at most 1 ns (`dur <= 0.001`) that a
//!   flow starts from at its `ts` is a moment drawn as a slice to anchor the flow, which
//!   splits the track (make it an instant; start the flow inside the work around it);
//! - no `args` key of a slice holds a per-call identifier: speedscope names a frame by
//!   `name` plus `args`, so a key whose value differs on every call of a name on one track
//!   (4 calls or more; booleans are flags, not identifiers) splits the name into one frame
//!   per call;
//! - `C` has a non-empty `args` object of numbers; `i`/`I` scope `s`, if any, is g, p or t;
//! - every (pid, tid) used has `thread_name` metadata (stricter than the viewers, which load
//!   a trace without it but show numbered rows no one can read);
//! - flows (`s`/`t`/`f`) have integer ids, exactly one `s` and one `f` per id with the same
//!   `cat` and `name`, and the `f` not before the `s`; async `b`/`e` pair up per (cat, id).
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::Path;

use serde_json::Value;

const KNOWN_PHASES: [&str; 18] = [
    "X", "B", "E", "i", "I", "C", "M", "s", "t", "f", "b", "e", "n", "O", "N", "D", "P", "R",
];

/// The smallest slice that is work, in microseconds: anything at most this long is a marker.
const MARKER_DUR_US: f64 = 0.001;
/// The fewest calls of a name on a track whose distinct values of an `args` key mark it as a
/// per-call identifier (an op id): with fewer, calls that just differ (three priorities)
/// would count.
const PER_CALL_MIN_CALLS: usize = 4;

/// One thing wrong with a trace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TraceProblem {
    /// Not readable.
    #[error("could not read the trace `{path}`: {reason}")]
    Unreadable {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Not JSON.
    #[error("the trace is not JSON: {0}")]
    NotJson(String),
    /// JSON of the wrong shape.
    #[error("the trace is neither an array of events nor an object with a `traceEvents` array")]
    NoEvents,
    /// An unknown phase.
    #[error(
        "event {index}: `ph` {ph:?} is not a known phase (X, B, E, i, C, M, s, t, f, b, e, ...)"
    )]
    UnknownPhase {
        /// Position in `traceEvents`.
        index: usize,
        /// The phase found.
        ph: String,
    },
    /// `pid`, `tid` or `id` missing or not an integer.
    #[error("event {index}: `{field}` must be an integer")]
    NotInteger {
        /// Position in `traceEvents`.
        index: usize,
        /// Which field.
        field: &'static str,
    },
    /// A bad timestamp.
    #[error("event {index}: `ts` must be a finite number >= 0 (microseconds)")]
    BadTimestamp {
        /// Position in `traceEvents`.
        index: usize,
    },
    /// No name.
    #[error("event {index} (ph {ph}): has no `name`")]
    MissingName {
        /// Position in `traceEvents`.
        index: usize,
        /// Its phase.
        ph: String,
    },
    /// An `X` without a usable duration.
    #[error("event {index}: an X event needs a finite `dur` >= 0")]
    BadDuration {
        /// Position in `traceEvents`.
        index: usize,
    },
    /// An `E` with no open `B`.
    #[error("pid {pid} tid {tid}: E event {index} has no open B")]
    UnmatchedEnd {
        /// Track.
        pid: i64,
        /// Track.
        tid: i64,
        /// Position in `traceEvents`.
        index: usize,
    },
    /// A `B` never closed.
    #[error("pid {pid} tid {tid}: B event {index} is never closed by an E")]
    UnclosedBegin {
        /// Track.
        pid: i64,
        /// Track.
        tid: i64,
        /// Position in `traceEvents`.
        index: usize,
    },
    /// An `E` before its `B`.
    #[error("pid {pid} tid {tid}: E event {index} is earlier than its B")]
    BackwardEnd {
        /// Track.
        pid: i64,
        /// Track.
        tid: i64,
        /// Position in `traceEvents`.
        index: usize,
    },
    /// Two slices on a track overlap without nesting.
    #[error(
        "pid {pid} tid {tid}: the slice of event {index} partially overlaps the slice of event \
         {other} as a viewer reads them (ts + dur in double microseconds; equal starts in file \
         order, the longer first)"
    )]
    PartialOverlap {
        /// Track.
        pid: i64,
        /// Track.
        tid: i64,
        /// The inner slice.
        index: usize,
        /// The slice it overlaps.
        other: usize,
    },
    /// A marker drawn as a slice.
    #[error(
        "event {index} ({name:?}): a slice of {dur} us that a flow starts from is a marker, \
         not work; make it an instant (`ph: i`) and start the flow inside the work around it"
    )]
    MarkerSlice {
        /// Position in `traceEvents`.
        index: usize,
        /// Its name.
        name: String,
        /// Its duration (microseconds).
        dur: String,
    },
    /// An `args` key whose value differs on every call of slice names.
    #[error(
        "`args.{key}` differs on every call of {names} slice name(s) on a track (e.g. \
         {example:?}, {calls} calls), so speedscope shows each call as its own frame; move \
         the per-call value to an instant or a flow"
    )]
    PerCallArg {
        /// The `args` key.
        key: String,
        /// (Track, name) pairs whose calls it splits.
        names: usize,
        /// One such name.
        example: String,
        /// That name's calls on its track.
        calls: usize,
    },
    /// A counter without numeric series.
    #[error("event {index}: a C event needs a non-empty `args` object whose values are numbers")]
    BadCounter {
        /// Position in `traceEvents`.
        index: usize,
    },
    /// An instant with an unknown scope.
    #[error("event {index}: instant scope `s` must be \"g\", \"p\" or \"t\"")]
    BadScope {
        /// Position in `traceEvents`.
        index: usize,
    },
    /// A track with no name.
    #[error("pid {pid} tid {tid} has events but no `thread_name` metadata")]
    UnnamedThread {
        /// Track.
        pid: i64,
        /// Track.
        tid: i64,
    },
    /// A flow without exactly one start and one finish.
    #[error("flow id {id}: {starts} `s` and {finishes} `f` with matching cat and name; a flow needs exactly one of each")]
    UnpairedFlow {
        /// The flow id.
        id: i64,
        /// `s` events.
        starts: usize,
        /// `f` events.
        finishes: usize,
    },
    /// A flow finishing before it starts.
    #[error("flow id {id}: its `f` is earlier than its `s`")]
    BackwardFlow {
        /// The flow id.
        id: i64,
    },
    /// Async begins and ends that do not pair.
    #[error("async id {id} (cat {cat:?}): {begins} `b` and {ends} `e`")]
    UnpairedAsync {
        /// The async id.
        id: i64,
        /// Its category.
        cat: String,
        /// `b` events.
        begins: usize,
        /// `e` events.
        ends: usize,
    },
}

/// Everything wrong with a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceProblems(pub Vec<TraceProblem>);

/// Problems of one kind shown before the rest of that kind is counted.
const SHOWN_PER_KIND: usize = 5;

impl fmt::Display for TraceProblems {
    /// Every kind of problem, each with its first few cases and how many more there are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "the trace has {} problem(s):", self.0.len())?;
        let mut kinds: Vec<(std::mem::Discriminant<TraceProblem>, Vec<&TraceProblem>)> = Vec::new();
        for problem in &self.0 {
            let kind = std::mem::discriminant(problem);
            match kinds.iter_mut().find(|(known, _)| *known == kind) {
                Some((_, cases)) => cases.push(problem),
                None => kinds.push((kind, vec![problem])),
            }
        }
        for (_, cases) in kinds {
            for problem in cases.iter().take(SHOWN_PER_KIND) {
                writeln!(f, "  - {problem}")?;
            }
            if cases.len() > SHOWN_PER_KIND {
                writeln!(
                    f,
                    "    ... and {} more like it",
                    cases.len() - SHOWN_PER_KIND
                )?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for TraceProblems {}

/// What a valid trace holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TraceSummary {
    /// Events in `traceEvents`.
    pub events: usize,
    /// Events per phase.
    pub phases: BTreeMap<String, usize>,
    /// Named (pid, tid) tracks.
    pub tracks: usize,
    /// Slices (`X` and `B`/`E` pairs).
    pub slices: usize,
    /// Complete flows.
    pub flows: usize,
    /// `otherData.dropped_events`, if the trace says: events lost before the trace was made.
    pub dropped_events: Option<u64>,
    /// `otherData.evicted_events`, if the trace says: events its window let go.
    pub evicted_events: Option<u64>,
}

impl TraceSummary {
    /// Events the trace says it lacks (dropped and evicted), if any.
    pub fn lacks_events(&self) -> bool {
        self.dropped_events.unwrap_or(0) + self.evicted_events.unwrap_or(0) > 0
    }
}

/// Validates the trace in the file at `path`.
pub fn validate_file(path: impl AsRef<Path>) -> Result<TraceSummary, TraceProblems> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|err| {
        TraceProblems(vec![TraceProblem::Unreadable {
            path: path.display().to_string(),
            reason: err.to_string(),
        }])
    })?;
    validate_json(&bytes)
}

/// Validates a trace held in memory.
///
/// ```
/// use enginetop::profiler::validate_json;
/// let trace = br#"{"traceEvents":[
///   {"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"main"}},
///   {"name":"work","ph":"X","ts":0,"dur":5,"pid":1,"tid":1}]}"#;
/// assert_eq!(validate_json(trace).unwrap().slices, 1);
/// assert!(validate_json(br#"[{"ph":"X","ts":0,"pid":1,"tid":1}]"#).is_err());
/// ```
pub fn validate_json(bytes: &[u8]) -> Result<TraceSummary, TraceProblems> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|err| TraceProblems(vec![TraceProblem::NotJson(err.to_string())]))?;
    let events = match &value {
        Value::Array(events) => events,
        Value::Object(object) => match object.get("traceEvents") {
            Some(Value::Array(events)) => events,
            _ => return Err(TraceProblems(vec![TraceProblem::NoEvents])),
        },
        _ => return Err(TraceProblems(vec![TraceProblem::NoEvents])),
    };
    let mut checker = Checker::default();
    for (index, event) in events.iter().enumerate() {
        checker.event(index, event);
    }
    let mut summary = checker.finish(events.len())?;
    let other = value.get("otherData");
    let count = |key: &str| {
        other
            .and_then(|other| other.get(key))
            .and_then(Value::as_u64)
    };
    summary.dropped_events = count("dropped_events");
    summary.evicted_events = count("evicted_events");
    Ok(summary)
}

/// A slice on a track, in microseconds as a viewer computes them.
#[derive(Clone, Copy, Debug)]
struct Slice {
    start: f64,
    end: f64,
    index: usize,
}

/// What the slices of one name on one track hold in `args`: how many there are and, per
/// key, the distinct values seen (booleans left out: a flag is not an identifier).
#[derive(Default)]
struct NameArgs {
    calls: usize,
    values: BTreeMap<String, BTreeSet<String>>,
}

type TrackKey = (i64, i64);

#[derive(Default)]
struct Checker {
    problems: Vec<TraceProblem>,
    phases: BTreeMap<String, usize>,
    named: BTreeSet<TrackKey>,
    used: BTreeSet<TrackKey>,
    slices: HashMap<TrackKey, Vec<Slice>>,
    /// B/E events per track, in input order: (ts, is_begin, index).
    begin_ends: HashMap<TrackKey, Vec<(f64, bool, usize)>>,
    /// Flow events per id: (phase, cat, name, ts).
    flows: BTreeMap<i64, Vec<(String, String, String, f64)>>,
    /// Slice `args` per track and slice name.
    slice_args: HashMap<(TrackKey, String), NameArgs>,
    /// Slices of at most 1 ns: (track, ts bits) -> (index, name, dur).
    tiny_slices: Vec<(TrackKey, u64, usize, String, String)>,
    /// Where flows start: (track, ts bits).
    flow_starts: BTreeSet<(TrackKey, u64)>,
    asyncs: BTreeMap<(String, i64), (usize, usize)>,
}

fn integer(value: Option<&Value>) -> Option<i64> {
    value.and_then(|value| value.as_i64().or_else(|| value.as_u64().map(|n| n as i64)))
}

impl Checker {
    fn event(&mut self, index: usize, event: &Value) {
        let ph = event.get("ph").and_then(Value::as_str).unwrap_or("");
        *self.phases.entry(ph.to_string()).or_insert(0) += 1;
        if !KNOWN_PHASES.contains(&ph) {
            let ph = ph.to_string();
            self.problems.push(TraceProblem::UnknownPhase { index, ph });
            return;
        }
        let name = event.get("name").and_then(Value::as_str);
        if name.is_none() && ph != "E" {
            let ph = ph.to_string();
            self.problems.push(TraceProblem::MissingName { index, ph });
        }
        let Some(track) = self.track(index, event, ph, name) else {
            return;
        };
        let Some(ts) = self.timestamp(index, event, ph) else {
            return;
        };
        match ph {
            "M" => {
                if name == Some("thread_name") {
                    self.named.insert(track);
                }
                return;
            }
            "X" => {
                self.complete(index, event, track, ts);
                self.slice_args(event, track, name);
            }
            "B" | "E" => {
                if ph == "B" {
                    self.slice_args(event, track, name);
                }
                self.begin_ends
                    .entry(track)
                    .or_default()
                    .push((ts, ph == "B", index));
            }
            "C" => self.counter(index, event),
            "i" | "I" => self.instant(index, event),
            "s" | "t" | "f" => {
                if ph == "s" {
                    self.flow_starts.insert((track, ts.to_bits()));
                }
                self.flow(index, event, ph, name, ts);
            }
            "b" | "e" => self.asynchronous(index, event, ph),
            _ => {}
        }
        self.used.insert(track);
    }

    fn track(
        &mut self,
        index: usize,
        event: &Value,
        ph: &str,
        name: Option<&str>,
    ) -> Option<TrackKey> {
        let Some(pid) = integer(event.get("pid")) else {
            self.problems.push(TraceProblem::NotInteger {
                index,
                field: "pid",
            });
            return None;
        };
        let process_metadata = ph == "M" && name.is_some_and(|name| name.starts_with("process_"));
        match integer(event.get("tid")) {
            Some(tid) => Some((pid, tid)),
            None if process_metadata && event.get("tid").is_none() => Some((pid, 0)),
            None => {
                self.problems.push(TraceProblem::NotInteger {
                    index,
                    field: "tid",
                });
                None
            }
        }
    }

    fn timestamp(&mut self, index: usize, event: &Value, ph: &str) -> Option<f64> {
        match event.get("ts") {
            None if ph == "M" => Some(0.0),
            Some(ts) => match ts.as_f64() {
                Some(ts) if ts.is_finite() && ts >= 0.0 => Some(ts),
                _ => {
                    self.problems.push(TraceProblem::BadTimestamp { index });
                    None
                }
            },
            None => {
                self.problems.push(TraceProblem::BadTimestamp { index });
                None
            }
        }
    }

    fn complete(&mut self, index: usize, event: &Value, track: TrackKey, ts: f64) {
        match event.get("dur").and_then(Value::as_f64) {
            Some(dur) if dur.is_finite() && dur >= 0.0 => {
                if dur <= MARKER_DUR_US {
                    let tiny = (
                        track,
                        ts.to_bits(),
                        index,
                        event_name(event),
                        dur.to_string(),
                    );
                    self.tiny_slices.push(tiny);
                }
                let slice = Slice {
                    start: ts,
                    end: ts + dur,
                    index,
                };
                self.slices.entry(track).or_default().push(slice);
            }
            _ => self.problems.push(TraceProblem::BadDuration { index }),
        }
    }

    /// Notes a slice's `args` under its track and name, for the per-call identifier check.
    fn slice_args(&mut self, event: &Value, track: TrackKey, name: Option<&str>) {
        let key = (track, name.unwrap_or("").to_string());
        let named = self.slice_args.entry(key).or_default();
        named.calls += 1;
        if let Some(Value::Object(args)) = event.get("args") {
            for (key, value) in args.iter().filter(|(_, value)| !value.is_boolean()) {
                let values = named.values.entry(key.clone()).or_default();
                values.insert(value.to_string());
            }
        }
    }

    fn counter(&mut self, index: usize, event: &Value) {
        let numeric = match event.get("args") {
            Some(Value::Object(args)) => !args.is_empty() && args.values().all(Value::is_number),
            _ => false,
        };
        if !numeric {
            self.problems.push(TraceProblem::BadCounter { index });
        }
    }

    fn instant(&mut self, index: usize, event: &Value) {
        if let Some(scope) = event.get("s") {
            if !matches!(scope.as_str(), Some("g" | "p" | "t")) {
                self.problems.push(TraceProblem::BadScope { index });
            }
        }
    }

    fn flow(&mut self, index: usize, event: &Value, ph: &str, name: Option<&str>, ts: f64) {
        let Some(id) = integer(event.get("id")) else {
            self.problems
                .push(TraceProblem::NotInteger { index, field: "id" });
            return;
        };
        let cat = event.get("cat").and_then(Value::as_str).unwrap_or("");
        let entry = (
            ph.to_string(),
            cat.to_string(),
            name.unwrap_or("").to_string(),
            ts,
        );
        self.flows.entry(id).or_default().push(entry);
    }

    fn asynchronous(&mut self, index: usize, event: &Value, ph: &str) {
        let Some(id) = integer(event.get("id")) else {
            self.problems
                .push(TraceProblem::NotInteger { index, field: "id" });
            return;
        };
        let cat = event
            .get("cat")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let counts = self.asyncs.entry((cat, id)).or_insert((0, 0));
        if ph == "b" {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }

    fn finish(mut self, events: usize) -> Result<TraceSummary, TraceProblems> {
        self.pair_begin_ends();
        let slices = self.check_nesting();
        for &(pid, tid) in self.used.difference(&self.named) {
            self.problems.push(TraceProblem::UnnamedThread { pid, tid });
        }
        let flows = self.check_flows();
        self.check_asyncs();
        self.check_per_call_args();
        self.check_markers();
        if !self.problems.is_empty() {
            return Err(TraceProblems(self.problems));
        }
        Ok(TraceSummary {
            events,
            phases: self.phases,
            tracks: self.named.len(),
            slices,
            flows,
            dropped_events: None,
            evicted_events: None,
        })
    }

    /// Reports the slices of at most 1 ns that a flow starts from.
    fn check_markers(&mut self) {
        for (track, ts, index, name, dur) in std::mem::take(&mut self.tiny_slices) {
            if self.flow_starts.contains(&(track, ts)) {
                self.problems
                    .push(TraceProblem::MarkerSlice { index, name, dur });
            }
        }
    }

    /// Reports, per `args` key, the slice names whose calls on a track (at least
    /// [`PER_CALL_MIN_CALLS`]) each have their own value of it: a per-call identifier.
    /// Fewer calls that just differ (three priorities) say nothing yet.
    fn check_per_call_args(&mut self) {
        let mut found: BTreeMap<&str, (usize, &str, usize)> = BTreeMap::new();
        let mut named: Vec<(&(TrackKey, String), &NameArgs)> = self.slice_args.iter().collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        for ((_, name), args) in named {
            for (key, values) in &args.values {
                if args.calls >= PER_CALL_MIN_CALLS && values.len() == args.calls {
                    let entry = found.entry(key).or_insert((0, name, args.calls));
                    entry.0 += 1;
                }
            }
        }
        for (key, (names, example, calls)) in found {
            self.problems.push(TraceProblem::PerCallArg {
                key: key.to_string(),
                names,
                example: example.to_string(),
                calls,
            });
        }
    }

    /// Turns B/E pairs into slices, reporting unbalanced or backward ones.
    fn pair_begin_ends(&mut self) {
        for (&(pid, tid), events) in &mut self.begin_ends {
            events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.2.cmp(&b.2)));
            let mut open: Vec<(f64, usize)> = Vec::new();
            for &(ts, is_begin, index) in events.iter() {
                if is_begin {
                    open.push((ts, index));
                    continue;
                }
                match open.pop() {
                    Some((start, _)) if ts < start => {
                        self.problems
                            .push(TraceProblem::BackwardEnd { pid, tid, index });
                    }
                    Some((start, begin)) => {
                        let slice = Slice {
                            start,
                            end: ts,
                            index: begin,
                        };
                        self.slices.entry((pid, tid)).or_default().push(slice);
                    }
                    None => self
                        .problems
                        .push(TraceProblem::UnmatchedEnd { pid, tid, index }),
                }
            }
            for (_, index) in open {
                self.problems
                    .push(TraceProblem::UnclosedBegin { pid, tid, index });
            }
        }
    }

    /// Reports partial overlaps, with slices in the order a viewer stacks them (by start,
    /// equal starts in file order); returns the number of slices.
    fn check_nesting(&mut self) -> usize {
        let mut count = 0;
        for (&(pid, tid), slices) in &mut self.slices {
            count += slices.len();
            slices.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.index.cmp(&b.index)));
            let mut open: Vec<Slice> = Vec::new();
            for &slice in slices.iter() {
                while open.last().is_some_and(|parent| parent.end <= slice.start) {
                    open.pop();
                }
                if let Some(parent) = open.last() {
                    if slice.end > parent.end {
                        self.problems.push(TraceProblem::PartialOverlap {
                            pid,
                            tid,
                            index: slice.index,
                            other: parent.index,
                        });
                        continue;
                    }
                }
                open.push(slice);
            }
        }
        count
    }

    /// Reports flows that do not pair up; returns the number of complete flows.
    fn check_flows(&mut self) -> usize {
        let mut complete = 0;
        for (&id, events) in &self.flows {
            let (cat, name) = (&events[0].1, &events[0].2);
            let consistent = events.iter().all(|(_, c, n, _)| c == cat && n == name);
            let starts: Vec<f64> = phase_times(events, "s");
            let finishes: Vec<f64> = phase_times(events, "f");
            if !consistent || starts.len() != 1 || finishes.len() != 1 {
                self.problems.push(TraceProblem::UnpairedFlow {
                    id,
                    starts: starts.len(),
                    finishes: finishes.len(),
                });
            } else if finishes[0] < starts[0] {
                self.problems.push(TraceProblem::BackwardFlow { id });
            } else {
                complete += 1;
            }
        }
        complete
    }

    fn check_asyncs(&mut self) {
        for ((cat, id), &(begins, ends)) in &self.asyncs {
            if begins != ends {
                self.problems.push(TraceProblem::UnpairedAsync {
                    id: *id,
                    cat: cat.clone(),
                    begins,
                    ends,
                });
            }
        }
    }
}

fn event_name(event: &Value) -> String {
    event
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn phase_times(events: &[(String, String, String, f64)], phase: &str) -> Vec<f64> {
    events
        .iter()
        .filter(|(ph, ..)| ph == phase)
        .map(|&(.., ts)| ts)
        .collect()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn problems(trace: &str) -> Vec<TraceProblem> {
        validate_json(trace.as_bytes()).unwrap_err().0
    }

    const NAMED: &str = r#"{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"t"}}"#;

    fn with_named(events: &str) -> String {
        format!("[{NAMED},{events}]")
    }

    #[test]
    fn a_good_trace_passes_with_a_summary() {
        let trace = with_named(
            r#"{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},
               {"name":"b","ph":"X","ts":2,"dur":3,"pid":1,"tid":1},
               {"name":"c","ph":"B","ts":4,"pid":1,"tid":1},{"ph":"E","ts":5,"pid":1,"tid":1},
               {"name":"q","ph":"C","ts":1,"pid":1,"tid":1,"args":{"depth":3}},
               {"name":"st","ph":"i","s":"t","ts":1,"pid":1,"tid":1},
               {"name":"fl","cat":"x","ph":"s","id":7,"ts":1,"pid":1,"tid":1},
               {"name":"fl","cat":"x","ph":"f","bp":"e","id":7,"ts":2,"pid":1,"tid":1},
               {"name":"as","cat":"y","ph":"b","id":1,"ts":1,"pid":1,"tid":1},
               {"name":"as","cat":"y","ph":"e","id":1,"ts":9,"pid":1,"tid":1}"#,
        );
        let summary = validate_json(trace.as_bytes()).unwrap();
        assert_eq!((summary.slices, summary.flows, summary.tracks), (3, 1, 1));
        assert_eq!(summary.phases["X"], 2);
    }

    #[test]
    fn shape_and_field_problems_are_named() {
        assert!(matches!(problems("nope")[0], TraceProblem::NotJson(_)));
        assert_eq!(problems("{}"), [TraceProblem::NoEvents]);
        let bad = with_named(
            r#"{"name":"a","ph":"Z","ts":0,"pid":1,"tid":1},
               {"name":"a","ph":"X","ts":-1,"dur":1,"pid":1,"tid":1},
               {"name":"a","ph":"X","ts":0,"dur":1,"pid":"1","tid":1},
               {"ph":"X","ts":0,"dur":-2,"pid":1,"tid":1},
               {"name":"c","ph":"C","ts":0,"pid":1,"tid":1,"args":{"v":"x"}},
               {"name":"i","ph":"i","s":"q","ts":0,"pid":1,"tid":1}"#,
        );
        let found = problems(&bad);
        assert!(found.contains(&TraceProblem::UnknownPhase {
            index: 1,
            ph: "Z".into()
        }));
        assert!(found.contains(&TraceProblem::BadTimestamp { index: 2 }));
        assert!(found.contains(&TraceProblem::NotInteger {
            index: 3,
            field: "pid"
        }));
        assert!(found.contains(&TraceProblem::MissingName {
            index: 4,
            ph: "X".into()
        }));
        assert!(found.contains(&TraceProblem::BadDuration { index: 4 }));
        assert!(found.contains(&TraceProblem::BadCounter { index: 5 }));
        assert!(found.contains(&TraceProblem::BadScope { index: 6 }));
    }

    #[test]
    fn overlaps_unbalanced_slices_and_unnamed_threads_are_found() {
        let bad = with_named(
            r#"{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},
               {"name":"b","ph":"X","ts":5,"dur":10,"pid":1,"tid":1},
               {"ph":"E","ts":1,"pid":1,"tid":1},
               {"name":"c","ph":"B","ts":20,"pid":1,"tid":1},
               {"name":"d","ph":"X","ts":0,"dur":1,"pid":2,"tid":9}"#,
        );
        let found = problems(&bad);
        assert!(found.contains(&TraceProblem::PartialOverlap {
            pid: 1,
            tid: 1,
            index: 2,
            other: 1
        }));
        assert!(found.contains(&TraceProblem::UnmatchedEnd {
            pid: 1,
            tid: 1,
            index: 3
        }));
        assert!(found.contains(&TraceProblem::UnclosedBegin {
            pid: 1,
            tid: 1,
            index: 4
        }));
        assert!(found.contains(&TraceProblem::UnnamedThread { pid: 2, tid: 9 }));
    }

    #[test]
    fn flows_and_asyncs_must_pair() {
        let bad = with_named(
            r#"{"name":"f","cat":"x","ph":"s","id":1,"ts":5,"pid":1,"tid":1},
               {"name":"f","cat":"x","ph":"f","id":1,"ts":1,"pid":1,"tid":1},
               {"name":"g","cat":"x","ph":"s","id":2,"ts":1,"pid":1,"tid":1},
               {"name":"h","cat":"x","ph":"s","id":"3","ts":1,"pid":1,"tid":1},
               {"name":"a","cat":"y","ph":"b","id":4,"ts":1,"pid":1,"tid":1}"#,
        );
        let found = problems(&bad);
        assert!(found.contains(&TraceProblem::BackwardFlow { id: 1 }));
        assert!(found.contains(&TraceProblem::UnpairedFlow {
            id: 2,
            starts: 1,
            finishes: 0
        }));
        assert!(found.contains(&TraceProblem::NotInteger {
            index: 4,
            field: "id"
        }));
        assert!(found.contains(&TraceProblem::UnpairedAsync {
            id: 4,
            cat: "y".into(),
            begins: 1,
            ends: 0
        }));
    }

    /// The export's old shape: a 1 ns `queue` slice per op starting where the previous op
    /// ends (which `ts + dur` in doubles overshoots), and a per-call `op_id` in slice args.
    #[test]
    fn an_old_style_trace_fails_as_viewers_read_it() {
        let old = with_named(
            r#"{"name":"expr235","cat":"op","ph":"X","ts":36431.557,"dur":6.982,"pid":1,"tid":1,"args":{"op_id":1}},
               {"name":"expr241","cat":"queue","ph":"X","ts":36438.539,"dur":0.001,"pid":1,"tid":1},
               {"name":"queued","cat":"f","ph":"s","id":1,"ts":36438.539,"pid":1,"tid":1},
               {"name":"queued","cat":"f","ph":"f","bp":"e","id":1,"ts":36440.5,"pid":1,"tid":1},
               {"name":"expr235","cat":"op","ph":"X","ts":36440,"dur":1,"pid":1,"tid":1,"args":{"op_id":2}},
               {"name":"short","ph":"X","ts":36450,"dur":1,"pid":1,"tid":1},
               {"name":"long","ph":"X","ts":36450,"dur":5,"pid":1,"tid":1},
               {"name":"expr235","cat":"op","ph":"X","ts":36460,"dur":1,"pid":1,"tid":1,"args":{"op_id":3}},
               {"name":"expr235","cat":"op","ph":"X","ts":36462,"dur":1,"pid":1,"tid":1,"args":{"op_id":4}}"#,
        );
        let found = problems(&old);
        assert!(found.contains(&TraceProblem::PartialOverlap {
            pid: 1,
            tid: 1,
            index: 2,
            other: 1
        }));
        assert!(found.contains(&TraceProblem::MarkerSlice {
            index: 2,
            name: "expr241".into(),
            dur: "0.001".into()
        }));
        assert!(found.contains(&TraceProblem::PerCallArg {
            key: "op_id".into(),
            names: 1,
            example: "expr235".into(),
            calls: 4
        }));
        assert!(
            found.contains(&TraceProblem::PartialOverlap {
                pid: 1,
                tid: 1,
                index: 7,
                other: 6
            }),
            "the shorter of two slices at one ts comes first: {found:?}"
        );
        let fixed = with_named(
            r#"{"name":"expr235","cat":"op","ph":"X","ts":36431.557,"dur":6.981999999996333,"pid":1,"tid":1},
               {"name":"queued","cat":"queue","ph":"i","s":"t","ts":36438.539,"pid":1,"tid":1,"args":{"op_id":2}},
               {"name":"expr235","cat":"op","ph":"X","ts":36438.539,"dur":1,"pid":1,"tid":1,"args":{"error":false}},
               {"name":"expr235","cat":"op","ph":"X","ts":36440,"dur":1,"pid":1,"tid":1,"args":{"error":true}},
               {"name":"long","ph":"X","ts":36450,"dur":5,"pid":1,"tid":1},
               {"name":"short","ph":"X","ts":36450,"dur":1,"pid":1,"tid":1}"#,
        );
        let summary = validate_json(fixed.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary.slices, 5);
        assert!(!summary.lacks_events());
    }

    #[test]
    fn events_a_trace_lacks_are_read_from_its_other_data() {
        let trace = format!(
            r#"{{"traceEvents":[{NAMED}],"otherData":{{"dropped_events":3335,"evicted_events":7}}}}"#
        );
        let summary = validate_json(trace.as_bytes()).unwrap();
        assert_eq!(
            (summary.dropped_events, summary.evicted_events),
            (Some(3335), Some(7))
        );
        assert!(summary.lacks_events());
        let clean = format!(r#"{{"traceEvents":[{NAMED}],"otherData":{{"dropped_events":0}}}}"#);
        assert!(!validate_json(clean.as_bytes()).unwrap().lacks_events());
    }

    #[test]
    fn a_missing_file_is_reported_by_name() {
        let problems = validate_file("/nonexistent/trace.json").unwrap_err();
        assert!(
            problems.to_string().contains("/nonexistent/trace.json"),
            "{problems}"
        );
    }
}
