//! The program's own `tracing` log lines go to a file (while the dashboard owns the terminal),
//! and spans still reach the profiler through the same global subscriber. Its own test binary:
//! a global subscriber can be installed once per process.

use enginetop::profiler::{init_logging, LevelFilter, LogTarget};
use enginetop::profiler::{Profiler, ProfilerError, ProfilerOptions};

#[test]
fn logs_go_to_the_file_and_spans_to_the_profiler() {
    let path = std::env::temp_dir().join(format!("enginetop-log-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let profiler = Profiler::new(ProfilerOptions::default()).unwrap();
    let guard = init_logging(&profiler, LogTarget::File(path.clone()), LevelFilter::INFO).unwrap();
    tracing::info_span!("logging-test-span").in_scope(|| {
        tracing::info!(pool = "cpu0", "resized to {} workers", 4);
        tracing::debug!("below the level: not written");
    });
    drop(guard); // flushes the background writer
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("resized to 4 workers"), "{written}");
    assert!(written.contains("pool=\"cpu0\""), "{written}");
    assert!(!written.contains("not written"), "{written}");
    assert!(
        !written.contains('\u{1b}'),
        "no colour codes in a file: {written}"
    );
    profiler.flush();
    let spans = profiler.snapshot().spans;
    assert_eq!(spans.len(), 1);
    assert_eq!(
        (spans[0].name.as_str(), spans[0].count),
        ("logging-test-span", 1)
    );

    let again = init_logging(&profiler, LogTarget::Off, LevelFilter::INFO);
    assert!(matches!(again, Err(ProfilerError::SubscriberAlreadySet)));
    let _ = std::fs::remove_file(&path);
}
