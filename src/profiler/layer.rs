//! `tracing` integration: users' spans recorded into the profiler's rings (so their own code
//! shows up in the trace and the summary), and the program's log lines sent to a file while
//! the dashboard owns the terminal.
//!
//! [`ProfilerLayer`] is a `tracing_subscriber` layer: it interns a span's name once, when the
//! span is created (kept in the span's extensions), and records a `SpanEnter` / `SpanExit`
//! event, with the span's id, on every enter and exit. It records nothing for log events;
//! those go to the formatting layer [`init_logging`] installs next to it.
#![forbid(unsafe_code)]

use std::path::PathBuf;

use tracing::span::{Attributes, Id};
use tracing::Subscriber;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use super::event::{Event, EventKind};
use super::names::DeviceId;
use super::{Profiler, ProfilerError};
use crate::engine::OpName;

pub use tracing::level_filters::LevelFilter;

/// Records `tracing` spans into a [`Profiler`].
///
/// ```
/// use enginetop::profiler::{Profiler, ProfilerLayer, ProfilerOptions};
/// use tracing_subscriber::layer::SubscriberExt;
/// let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
/// let subscriber = tracing_subscriber::registry().with(ProfilerLayer::new(&profiler));
/// tracing::subscriber::with_default(subscriber, || {
///     tracing::info_span!("load weights").in_scope(|| ());
/// });
/// profiler.flush();
/// assert_eq!(profiler.snapshot().spans[0].name, "load weights");
/// ```
#[derive(Clone, Debug)]
pub struct ProfilerLayer {
    profiler: Profiler,
}

/// A span's interned name, kept in its extensions.
struct SpanName(OpName);

impl ProfilerLayer {
    /// A layer recording into `profiler`.
    pub fn new(profiler: &Profiler) -> Self {
        ProfilerLayer {
            profiler: profiler.clone(),
        }
    }

    fn record<S>(&self, kind: EventKind, id: &Id, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if !self.profiler.is_enabled() {
            return;
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let name = span
            .extensions()
            .get::<SpanName>()
            .map_or(OpName::UNNAMED, |name| name.0);
        let event = Event::new(kind, DeviceId::HOST, name, 0, id.into_u64());
        self.profiler.record(event);
    }
}

impl<S> Layer<S> for ProfilerLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !self.profiler.is_enabled() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            let name = OpName::new(attrs.metadata().name());
            span.extensions_mut().insert(SpanName(name));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.record(EventKind::SpanEnter, id, &ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        self.record(EventKind::SpanExit, id, &ctx);
    }
}

/// Where the program's own log lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard error (headless runs).
    Stderr,
    /// Appended to a file (while the dashboard owns the terminal).
    File(PathBuf),
    /// Nowhere (spans are still profiled).
    Off,
}

/// Keeps the log file's background writer alive; drop it at exit to flush the last lines.
#[must_use = "dropping the guard stops the log writer"]
pub struct LoggingGuard {
    _writer: Option<tracing_appender::non_blocking::WorkerGuard>,
}

/// Installs the global `tracing` subscriber: [`ProfilerLayer`] for spans plus log lines at
/// `level` and above to `target`. Fails if a global subscriber is already installed.
pub fn init_logging(
    profiler: &Profiler,
    target: LogTarget,
    level: LevelFilter,
) -> Result<LoggingGuard, ProfilerError> {
    let spans = ProfilerLayer::new(profiler);
    let registry = tracing_subscriber::registry().with(spans);
    let fmt = tracing_subscriber::fmt::layer().with_target(true);
    let (installed, writer) = match target {
        LogTarget::Off => (registry.try_init(), None),
        LogTarget::Stderr => {
            let logs = fmt.with_writer(std::io::stderr).with_filter(level);
            (registry.with(logs).try_init(), None)
        }
        LogTarget::File(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|source| ProfilerError::LogFile {
                    path: path.display().to_string(),
                    source,
                })?;
            let (writer, guard) = tracing_appender::non_blocking(file);
            let logs = fmt.with_writer(writer).with_ansi(false).with_filter(level);
            (registry.with(logs).try_init(), Some(guard))
        }
    };
    installed.map_err(|_| ProfilerError::SubscriberAlreadySet)?;
    Ok(LoggingGuard { _writer: writer })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::profiler::ProfilerOptions;

    #[test]
    fn nested_spans_are_timed_once_each() {
        let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
        let subscriber = tracing_subscriber::registry().with(ProfilerLayer::new(&profiler));
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..3 {
                let outer = tracing::info_span!("layer-test-outer");
                let _entered = outer.enter();
                tracing::debug_span!("layer-test-inner").in_scope(|| ());
            }
        });
        profiler.flush();
        let snapshot = profiler.snapshot();
        let count = |name: &str| {
            snapshot
                .spans
                .iter()
                .find(|s| s.name == name)
                .map(|s| s.count)
        };
        assert_eq!(count("layer-test-outer"), Some(3));
        assert_eq!(count("layer-test-inner"), Some(3));
    }

    #[test]
    fn a_disabled_profiler_records_no_spans() {
        let profiler = Profiler::disabled();
        let subscriber = tracing_subscriber::registry().with(ProfilerLayer::new(&profiler));
        tracing::subscriber::with_default(subscriber, || {
            tracing::info_span!("layer-test-off").in_scope(|| ());
        });
        assert!(profiler.snapshot().spans.is_empty());
    }

    #[test]
    fn an_unwritable_log_file_names_the_path() {
        let profiler = Profiler::disabled();
        let target = LogTarget::File("/nonexistent-dir/enginetop.log".into());
        let message = init_logging(&profiler, target, LevelFilter::INFO)
            .err()
            .unwrap()
            .to_string();
        assert!(
            message.contains("/nonexistent-dir/enginetop.log"),
            "{message}"
        );
    }
}
