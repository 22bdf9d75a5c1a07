//! One verdict per device: the bound and the figure behind it (the rules, in order, are in
//! the [module docs](super)).
#![forbid(unsafe_code)]

use std::fmt;

use super::schedstat::Descheduled;
use super::span::{DeviceScaling, Scaling};
use crate::device::identity::Lane;

/// The descheduled share from which a CPU device is oversubscribed: a tenth of the threads'
/// time spent runnable but waiting for a core.
pub(crate) const OVERSUBSCRIBED_SHARE: f64 = 0.10;

/// Achieved parallelism under this fraction of `min(parallelism, workers)` is overhead.
const OVERHEAD_FRACTION: f64 = 0.5;

/// A device whose ops are under this share of the iteration's work is light.
const LIGHT_SHARE: f64 = 0.05;

/// Critical-path ops and reused vars a verdict names, at most.
const NAMED: usize = 3;

/// What bounds a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Threads wait for cores.
    Oversubscribed,
    /// The critical path runs through reused vars (false edges).
    Starved,
    /// The critical path's true dependencies.
    CriticalPath,
    /// The device's ops are a small share of the iteration's work: it does not bound it.
    Light,
    /// Its ops wait on other devices' ops: the whole graph's span keeps its workers from
    /// being busy, whatever their count.
    Upstream,
    /// Workers run no op though ready work exists.
    Overhead,
    /// Workers are busy and the graph has parallelism to spare.
    Busy,
}

impl Bound {
    /// `critical path`.
    pub fn label(self) -> &'static str {
        match self {
            Bound::Oversubscribed => "oversubscribed",
            Bound::Starved => "starved",
            Bound::CriticalPath => "critical path",
            Bound::Light => "light",
            Bound::Upstream => "upstream",
            Bound::Overhead => "overhead",
            Bound::Busy => "busy",
        }
    }
}

/// What bounds one device, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    /// The worker pool (`cpu0` in JSON, as [`Lane::verdict_name`] gives it).
    #[serde(serialize_with = "verdict_name")]
    pub device: Lane,
    /// The bound: the first rule that holds.
    pub bound: Bound,
    /// What the graph and the workers alone say (the rules after oversubscription): the
    /// same as `bound` unless the threads are oversubscribed.
    pub graph_bound: Bound,
    /// The bound and the figures behind it: `critical path: span 41 ms of a 43 ms step ...`.
    pub text: String,
    /// The items the graph's rule names: critical-path ops or reused vars.
    pub named: Vec<String>,
}

impl fmt::Display for Verdict {
    /// `cpu0: critical path: span 41 ms of a 43 ms step (parallelism 1.0); ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.device.verdict_name(), self.text)
    }
}

/// What the verdicts know of one device besides its [`DeviceScaling`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceFacts {
    /// The worker pool.
    pub lane: Lane,
    /// Its workers (inter-op threads for a CPU).
    pub workers: usize,
}

fn verdict_name<S: serde::Serializer>(lane: &Lane, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&lane.verdict_name())
}

/// One verdict per device of `scaling` (`facts` in the same order), with the process's
/// descheduled time when measured and `threads` describing the thread counts
/// (`3 inter x 3 intra`).
pub fn verdicts(
    scaling: &Scaling,
    facts: &[DeviceFacts],
    descheduled: Option<&Descheduled>,
    threads: &str,
) -> Vec<Verdict> {
    scaling
        .devices
        .iter()
        .zip(facts)
        .map(|(device, facts)| verdict(scaling, device, facts, descheduled, threads))
        .collect()
}

fn verdict(
    scaling: &Scaling,
    device: &DeviceScaling,
    facts: &DeviceFacts,
    descheduled: Option<&Descheduled>,
    threads: &str,
) -> Verdict {
    let (graph_bound, detail, named) = graph_verdict(scaling, device, facts);
    let graph_text = format!("{}: {detail}", graph_bound.label());
    let oversubscribed =
        descheduled.filter(|d| facts.lane.is_cpu() && d.share >= OVERSUBSCRIBED_SHARE);
    let (bound, text) = match oversubscribed {
        Some(d) => {
            let most: Vec<&str> = d
                .per_thread
                .iter()
                .take(NAMED)
                .map(|t| t.thread.as_str())
                .collect();
            let demand = d.demand();
            let on = format!(
                "{demand:.1} threads wanting a core on average, {} core{}",
                d.cores,
                if d.cores == 1 { "" } else { "s" }
            );
            let cause = if demand > d.cores as f64 {
                format!("{on}: fewer threads would help")
            } else {
                format!("{on}: other processes hold the cores")
            };
            let text = format!(
                "{}: threads runnable but descheduled {:.0}% of their time ({threads}; most: \
                 {}); {cause}; then {graph_text}",
                Bound::Oversubscribed.label(),
                d.share * 100.0,
                most.join(", ")
            );
            (Bound::Oversubscribed, text)
        }
        None => (graph_bound, graph_text),
    };
    Verdict {
        device: facts.lane,
        bound,
        graph_bound,
        text,
        named,
    }
}

/// The graph's and the workers' rules (2 to 5): the bound, its figures, the items named.
fn graph_verdict(
    scaling: &Scaling,
    device: &DeviceScaling,
    facts: &DeviceFacts,
) -> (Bound, String, Vec<String>) {
    let workers = facts.workers.max(1) as f64;
    let plural = if facts.workers == 1 { "" } else { "s" };
    let idle = (1.0 - device.achieved_parallelism / workers).clamp(0.0, 1.0);
    if device.work_ms < LIGHT_SHARE * scaling.work_ms {
        let detail = format!(
            "its ops are {:.1}% of the iteration's work: it does not bound the step",
            100.0 * device.work_ms / scaling.work_ms
        );
        return (Bound::Light, detail, Vec::new());
    }
    if device.parallelism < workers + 1.0 {
        if !scaling.false_edges.is_empty() {
            let kinds = scaling.false_edges[0].kind.label();
            let named: Vec<String> = scaling
                .false_edges
                .iter()
                .take(NAMED)
                .map(|edge| edge.var.clone())
                .collect();
            let lead = match one_more_worker_gain(device.parallelism, workers) {
                Some(gain) => format!(
                    "{:.0}% of worker time in ops, parallelism {:.1} on {} worker{plural}: one \
                     more worker could shorten the step by {:.0}% at most",
                    (1.0 - idle) * 100.0,
                    device.parallelism,
                    facts.workers,
                    gain * 100.0
                ),
                None => format!(
                    "{:.0}% of worker time not in ops (parallelism {:.1} on {} \
                     worker{plural})",
                    idle * 100.0,
                    device.parallelism,
                    facts.workers
                ),
            };
            let detail = format!(
                "{lead}; the critical path runs through {kinds} on {}; more buffers would let \
                 more ops run at once",
                named.join(", ")
            );
            return (Bound::Starved, detail, named);
        }
        let named: Vec<String> = scaling
            .critical_path
            .iter()
            .take(NAMED)
            .map(|op| op.name.clone())
            .collect();
        let path: Vec<String> = scaling
            .critical_path
            .iter()
            .take(NAMED)
            .map(|op| format!("{} ({:.0}%)", op.name, op.share * 100.0))
            .collect();
        let workers_help = match one_more_worker_gain(device.parallelism, workers) {
            Some(gain) => format!(
                "one more inter-op worker could shorten the step by {:.0}% at most, more \
                 cannot",
                gain * 100.0
            ),
            None => "more inter-op workers cannot help".to_string(),
        };
        let detail = format!(
            "span {} of a {} step (parallelism {:.1}); {workers_help}; the path is {} op{}, \
             longest {}; shorter ops on it (more intra-op threads) can",
            show_ms(device.span_ms),
            show_ms(scaling.wall_ms),
            device.parallelism,
            scaling.critical_path_ops,
            if scaling.critical_path_ops == 1 {
                ""
            } else {
                "s"
            },
            path.join(", ")
        );
        return (Bound::CriticalPath, detail, named);
    }
    let busy_at_most = device.work_ms / scaling.span_ms.max(f64::MIN_POSITIVE);
    if busy_at_most < workers {
        let detail = format!(
            "its ops wait on ops of {}: over the graph's span of {} its {} of work keeps at \
             most {busy_at_most:.1} of its {} worker{plural} busy on average (achieved {:.1}); more \
             workers here cannot help",
            upstream_of(scaling, device),
            show_ms(scaling.span_ms),
            show_ms(device.work_ms),
            facts.workers,
            device.achieved_parallelism,
        );
        return (Bound::Upstream, detail, Vec::new());
    }
    let reachable = device.parallelism.min(workers);
    if device.achieved_parallelism < OVERHEAD_FRACTION * reachable {
        let detail = format!(
            "{:.0}% of worker time not in ops though the graph keeps {:.1} busy \
             (achieved {:.1} of {} worker{plural}); the time goes between ops",
            idle * 100.0,
            reachable,
            device.achieved_parallelism,
            facts.workers,
        );
        return (Bound::Overhead, detail, Vec::new());
    }
    let detail = format!(
        "{:.0}% of worker time in ops (achieved {:.1} of {} worker{plural}) and parallelism \
         {:.1}: more workers, on cores of their own, would help",
        (1.0 - idle) * 100.0,
        device.achieved_parallelism,
        facts.workers,
        device.parallelism
    );
    (Bound::Busy, detail, Vec::new())
}

/// The other devices of `scaling`, the most work first (`cpu0 workers, gpu0 workers`).
fn upstream_of(scaling: &Scaling, device: &DeviceScaling) -> String {
    let mut others: Vec<&DeviceScaling> = scaling
        .devices
        .iter()
        .filter(|other| other.device != device.device)
        .collect();
    others.sort_by(|a, b| b.work_ms.total_cmp(&a.work_ms));
    let names: Vec<String> = others
        .iter()
        .take(NAMED)
        .map(|other| other.device.to_string())
        .collect();
    match names.is_empty() {
        true => "other devices".to_string(),
        false => names.join(", "),
    }
}

/// The largest share of the step one more worker could save, where the graph's parallelism
/// lies between the workers and one more (rules 3 and 4): the step is at least work over
/// `min(parallelism, workers)`, so going from `workers` to `parallelism` saves at most
/// `1 - workers / parallelism`. `None` where the parallelism does not exceed the workers.
fn one_more_worker_gain(parallelism: f64, workers: f64) -> Option<f64> {
    (parallelism > workers).then(|| 1.0 - workers / parallelism.min(workers + 1.0))
}

/// `412 ms`, `41.2 ms`, `4.12 ms`.
fn show_ms(ms: f64) -> String {
    match ms {
        ms if ms >= 100.0 => format!("{ms:.0} ms"),
        ms if ms >= 10.0 => format!("{ms:.1} ms"),
        ms => format!("{ms:.2} ms"),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::analysis::span::tests::op;
    use crate::analysis::{analyze, RanGraph, RanOp, ThreadDelay};

    const MS: Duration = Duration::from_millis(1);

    fn judge(ops: Vec<RanOp>, vars: usize, wall: Duration, workers: usize) -> Verdict {
        judge_with(ops, vars, wall, workers, None)
    }

    fn judge_with(
        ops: Vec<RanOp>,
        vars: usize,
        wall: Duration,
        workers: usize,
        descheduled: Option<&Descheduled>,
    ) -> Verdict {
        let graph = RanGraph {
            ops,
            vars: (0..vars).map(|var| format!("buf{var}")).collect(),
            devices: vec![Lane::CpuWorkers(0)],
            wall,
        };
        let facts = DeviceFacts {
            lane: Lane::CpuWorkers(0),
            workers,
        };
        let scaling = analyze(&graph);
        verdicts(&scaling, &[facts], descheduled, "2 inter x 1 intra").remove(0)
    }

    fn chain() -> Vec<RanOp> {
        (0..10)
            .map(|i| op(&format!("s{i}"), &[0], &[0], MS))
            .collect()
    }

    /// A priority pool's updates, each ready as the chain on cpu0 computes its gradient:
    /// their own parallelism is ten, but the chain spreads them over the whole step.
    #[test]
    fn a_pool_fed_by_another_devices_chain_is_upstream_bound() {
        let mut ops: Vec<RanOp> = Vec::new();
        for i in 0..10 {
            ops.push(op(&format!("grad{i}"), &[0], &[0, 1 + i], 10 * MS));
            let mut update = op(&format!("update{i}"), &[1 + i], &[11 + i], MS);
            update.device = 1;
            ops.push(update);
        }
        let graph = RanGraph {
            ops,
            vars: (0..21).map(|var| format!("v{var}")).collect(),
            devices: vec![Lane::CpuWorkers(0), Lane::Priority],
            wall: 102 * MS,
        };
        let facts = [
            DeviceFacts {
                lane: Lane::CpuWorkers(0),
                workers: 2,
            },
            DeviceFacts {
                lane: Lane::Priority,
                workers: 4,
            },
        ];
        let scaling = analyze(&graph);
        let verdicts = verdicts(&scaling, &facts, None, "2 inter x 1 intra");
        assert_eq!(verdicts[0].bound, Bound::CriticalPath, "{}", verdicts[0]);
        let prio = &verdicts[1];
        assert_eq!(prio.bound, Bound::Upstream, "{prio}");
        assert!(prio.text.contains("wait on ops of cpu0 workers"), "{prio}");
        assert!(prio.text.contains("at most 0.1 of its 4 workers"), "{prio}");
        // Alone, the same updates keep every worker busy: no upstream to wait on.
        let alone: Vec<RanOp> = (0..10)
            .map(|i| op(&format!("update{i}"), &[i], &[10 + i], MS))
            .collect();
        let verdict = judge(alone, 20, 3 * MS, 4);
        assert_ne!(verdict.bound, Bound::Upstream, "{verdict}");
    }

    #[test]
    fn a_chain_is_bound_by_its_critical_path() {
        let verdict = judge(chain(), 1, 11 * MS, 2);
        assert_eq!(verdict.bound, Bound::CriticalPath, "{verdict}");
        assert!(
            verdict.text.contains("span 10.0 ms of a 11.0 ms step"),
            "{verdict}"
        );
        assert_eq!(verdict.named.len(), 3);
        assert!(verdict.to_string().starts_with("cpu0: critical path: "));
    }

    #[test]
    fn reused_buffers_starve_the_workers_and_are_named() {
        let mut ops = Vec::new();
        for b in 0..8 {
            ops.push(op(&format!("read{b}"), &[], &[b % 2], 4 * MS));
            ops.push(op(&format!("prep{b}"), &[b % 2], &[2 + b], MS));
        }
        let verdict = judge(ops, 10, 21 * MS, 4);
        assert_eq!(verdict.bound, Bound::Starved, "{verdict}");
        assert!(
            verdict.text.contains("write-after-read on buf"),
            "{verdict}"
        );
        assert!(verdict
            .named
            .iter()
            .all(|var| var == "buf0" || var == "buf1"));
    }

    #[test]
    fn parallelism_between_the_workers_and_one_more_bounds_what_a_worker_can_gain() {
        // Two reader chains through two reused buffers (span 10 ms) and one free op: work
        // 25 ms, parallelism 2.5; on 2 workers a third saves at most 1 - 2 / 2.5 = 20%.
        let ops = || {
            let mut ops: Vec<RanOp> = (0..4)
                .flat_map(|b| {
                    [
                        op(&format!("read{b}"), &[], &[b % 2], 4 * MS),
                        op(&format!("use{b}"), &[b % 2], &[2 + b], MS),
                    ]
                })
                .collect();
            ops.push(op("free", &[], &[6], 5 * MS));
            ops
        };
        let scaling = analyze(&RanGraph {
            ops: ops(),
            vars: (0..7).map(|var| format!("buf{var}")).collect(),
            devices: vec![Lane::CpuWorkers(0)],
            wall: 13 * MS,
        });
        let parallelism = scaling.devices[0].parallelism;
        assert!((parallelism - 2.5).abs() < 1e-9, "{parallelism}");
        let verdict = judge(ops(), 7, 13 * MS, 2);
        assert_eq!(verdict.bound, Bound::Starved, "{verdict}");
        assert!(
            verdict
                .text
                .contains("one more worker could shorten the step by 20% at most"),
            "{verdict}"
        );
        assert!(!verdict.text.contains("not in ops"), "{verdict}");
        let with_three = judge(ops(), 7, 13 * MS, 3);
        assert_eq!(with_three.bound, Bound::Starved, "{with_three}");
        assert!(
            with_three.text.contains("not in ops") && !with_three.text.contains("one more"),
            "parallelism under the workers: {with_three}"
        );
    }

    #[test]
    fn parallel_work_on_busy_workers_is_busy_or_overhead_by_how_busy() {
        let ops: Vec<RanOp> = (0..16)
            .map(|i| op(&format!("t{i}"), &[], &[i], MS))
            .collect();
        assert_eq!(judge(ops.clone(), 16, 8 * MS, 2).bound, Bound::Busy);
        let verdict = judge(ops, 16, 40 * MS, 2);
        assert_eq!(verdict.bound, Bound::Overhead, "{verdict}");
    }

    #[test]
    fn a_descheduled_share_over_the_threshold_is_oversubscription() {
        let delay = |share: f64| Descheduled {
            window_ms: 100.0,
            threads: 1,
            cores: 2,
            share,
            per_thread: vec![ThreadDelay {
                thread: "cpu0-w1".to_string(),
                on_cpu_ms: 50.0,
                run_delay_ms: share * 100.0,
                share,
            }],
        };
        let high = delay(OVERSUBSCRIBED_SHARE + 0.2);
        let verdict = judge_with(chain(), 1, 11 * MS, 2, Some(&high));
        assert_eq!(verdict.bound, Bound::Oversubscribed, "{verdict}");
        assert_eq!(verdict.graph_bound, Bound::CriticalPath, "{verdict}");
        assert!(verdict.text.contains("30%") && verdict.text.contains("most: cpu0-w1"));
        assert!(verdict
            .text
            .contains("0.8 threads wanting a core on average, 2 cores: other"));
        assert!(
            verdict.text.contains("; then critical path: span"),
            "{verdict}"
        );
        let low = delay(OVERSUBSCRIBED_SHARE / 2.0);
        assert_eq!(
            judge_with(chain(), 1, 11 * MS, 2, Some(&low)).bound,
            Bound::CriticalPath
        );
        let facts = DeviceFacts {
            lane: Lane::Gpu(0),
            workers: 2,
        };
        let graph = RanGraph {
            ops: chain(),
            vars: vec!["x".into()],
            devices: vec![Lane::Gpu(0)],
            wall: 11 * MS,
        };
        let on_gpu = verdicts(&analyze(&graph), &[facts], Some(&high), "");
        assert_eq!(
            on_gpu[0].bound,
            Bound::CriticalPath,
            "CPU waits do not judge a GPU"
        );
    }

    #[test]
    fn a_device_with_a_sliver_of_the_work_is_light() {
        let mut ops = chain();
        ops.push(op("update", &[], &[1], Duration::from_micros(100)));
        ops[10].device = 1;
        let graph = RanGraph {
            ops,
            vars: vec!["x".into(), "w".into()],
            devices: vec![Lane::CpuWorkers(0), Lane::Priority],
            wall: 11 * MS,
        };
        let facts = |lane| DeviceFacts { lane, workers: 2 };
        let lines = verdicts(
            &analyze(&graph),
            &[facts(Lane::CpuWorkers(0)), facts(Lane::Priority)],
            None,
            "",
        );
        assert_eq!(lines[0].bound, Bound::CriticalPath, "{}", lines[0]);
        assert_eq!(lines[1].bound, Bound::Light, "{}", lines[1]);
    }
}
