//! Descheduled time: each thread's run delay (runnable, waiting for a core) from
//! `/proc/self/task/TID/schedstat`, sampled twice (the rules are in the
//! [module docs](super)).
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

/// One thread's scheduler counters at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ThreadStat {
    name: String,
    on_cpu_ns: u64,
    run_delay_ns: u64,
}

/// Every thread's scheduler counters at one moment.
#[derive(Clone, Debug)]
pub(crate) struct SchedSample {
    at: Instant,
    threads: BTreeMap<u32, ThreadStat>,
}

/// One thread's descheduled time over a window.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ThreadDelay {
    /// Its name (`cpu0-w1`), for display.
    pub thread: String,
    /// Milliseconds it ran on a core.
    pub on_cpu_ms: f64,
    /// Milliseconds it was runnable but waited for a core.
    pub run_delay_ms: f64,
    /// `run_delay / window`.
    pub share: f64,
}

/// The process's descheduled time over a window.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Descheduled {
    /// The window, in milliseconds.
    pub window_ms: f64,
    /// Threads that ran in the window.
    pub threads: usize,
    /// Cores this process may use.
    pub cores: usize,
    /// Their summed run delay over their summed window time.
    pub share: f64,
    /// Per thread that ran, the most descheduled first.
    pub per_thread: Vec<ThreadDelay>,
}

impl Descheduled {
    /// The threads wanting a core on average over the window: their time on a core and
    /// their run delay, summed, over the window (more than [`cores`](Self::cores): the
    /// process alone oversubscribes the machine).
    pub fn demand(&self) -> f64 {
        let wanting: f64 = (self.per_thread.iter())
            .map(|thread| thread.on_cpu_ms + thread.run_delay_ms)
            .sum();
        wanting / self.window_ms.max(f64::MIN_POSITIVE)
    }
}

impl SchedSample {
    /// Every thread of this process now; `None` where the kernel keeps no schedstat
    /// (not Linux, or built without `CONFIG_SCHED_INFO`).
    pub(crate) fn now() -> Option<SchedSample> {
        let at = Instant::now();
        let tasks = std::fs::read_dir("/proc/self/task").ok()?;
        let mut threads = BTreeMap::new();
        for task in tasks.flatten() {
            let Some(tid) = task.file_name().to_str().and_then(|tid| tid.parse().ok()) else {
                continue;
            };
            // A thread may exit between the listing and the read: skip it.
            if let Some(stat) = read_thread(&task.path()) {
                threads.insert(tid, stat);
            }
        }
        (!threads.is_empty()).then_some(SchedSample { at, threads })
    }

    /// The descheduled time between `self` and the later sample `end`, over the threads
    /// that ran between them.
    pub(crate) fn until(&self, end: &SchedSample) -> Descheduled {
        let window = end.at.saturating_duration_since(self.at);
        let window_ns = window.as_nanos().max(1) as f64;
        let mut per_thread: Vec<ThreadDelay> = end
            .threads
            .iter()
            .filter_map(|(tid, last)| {
                let first = self.threads.get(tid);
                let on_cpu = last
                    .on_cpu_ns
                    .saturating_sub(first.map_or(0, |first| first.on_cpu_ns));
                let delay =
                    (last.run_delay_ns).saturating_sub(first.map_or(0, |first| first.run_delay_ns));
                (on_cpu > 0).then(|| ThreadDelay {
                    thread: last.name.clone(),
                    on_cpu_ms: on_cpu as f64 / 1e6,
                    run_delay_ms: delay as f64 / 1e6,
                    share: (delay as f64 / window_ns).min(1.0),
                })
            })
            .collect();
        per_thread.sort_by(|a, b| b.share.total_cmp(&a.share));
        let delay_ms: f64 = per_thread.iter().map(|thread| thread.run_delay_ms).sum();
        let window_ms = window_ns / 1e6;
        let threads = per_thread.len();
        Descheduled {
            window_ms,
            threads,
            cores: std::thread::available_parallelism().map_or(1, |cores| cores.get()),
            share: if threads == 0 {
                0.0
            } else {
                (delay_ms / (window_ms * threads as f64)).min(1.0)
            },
            per_thread,
        }
    }
}

/// `dir`'s (`/proc/self/task/TID`) name and schedstat counters.
fn read_thread(dir: &Path) -> Option<ThreadStat> {
    let schedstat = std::fs::read_to_string(dir.join("schedstat")).ok()?;
    let (on_cpu_ns, run_delay_ns) = parse_schedstat(&schedstat)?;
    let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
    Some(ThreadStat {
        name: name.trim_end().to_string(),
        on_cpu_ns,
        run_delay_ns,
    })
}

/// The first two fields of a schedstat line: time on a core and run delay, in ns.
fn parse_schedstat(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_ascii_whitespace().map(str::parse::<u64>);
    Some((fields.next()?.ok()?, fields.next()?.ok()?))
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{thread, Arc, AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn schedstat_lines_give_cpu_time_and_run_delay() {
        assert_eq!(parse_schedstat("123 456 7\n"), Some((123, 456)));
        assert_eq!(parse_schedstat("123"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    /// Spins until `stop` is set (a thread that always wants a core).
    fn spin(stop: &AtomicBool) {
        let mut x = 0u64;
        while !stop.load(Ordering::Relaxed) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
    }

    #[test]
    fn more_busy_threads_than_cores_are_descheduled() {
        let Some(start) = SchedSample::now() else {
            eprintln!("skipped: /proc/self/task/TID/schedstat is absent on this kernel");
            return;
        };
        let cores = std::thread::available_parallelism().map_or(1, |cores| cores.get());
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..cores * 3)
            .map(|_| {
                let stop = Arc::clone(&stop);
                thread::spawn(move || spin(&stop))
            })
            .collect();
        // Wait (bounded) until some thread of the process has waited for a core.
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = start.until(&start);
        while Instant::now() < deadline {
            std::thread::yield_now();
            if let Some(now) = SchedSample::now() {
                seen = start.until(&now);
                if seen.share > 0.0 && seen.window_ms > 50.0 {
                    break;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        spinners
            .into_iter()
            .for_each(|spinner| spinner.join().unwrap());
        assert!(seen.share > 0.0, "{seen:?}");
        assert!(seen.threads >= cores * 3, "{seen:?}");
        assert!(seen.per_thread[0].run_delay_ms > 0.0);
    }
}
