//! The fake workload's model: who exists, what each thread does at a step, how fast ops
//! finish. Randomness is a hash of (step, thread), so a step always looks the same.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use super::{FakeOptions, Scenario, MAX_WORKERS};
use crate::device::gpu::GpuRole;
use crate::device::identity::{Device, PoolId, PoolRole};
use crate::device::stream::{StreamId, StreamKind};
use crate::profiler::stats::{
    Activity, DeviceSnapshot, OpSnapshot, QueueSnapshot, Shares, Snapshot, StreamSnapshot,
    WorkerSnapshot,
};
use crate::profiler::DeviceId;
use crate::tui::source::{
    ControlError, DashboardData, DeviceKind, DeviceLayout, Facts, StreamLayout,
};

/// The simulated GPU.
const GPU: Device = Device::Gpu(0);

/// The ops the fake runs: name, share of all ops, mean duration at one intra-op thread.
pub(super) const OPS: [(&str, f64, Duration); 12] = [
    ("conv2d", 0.20, Duration::from_micros(4_200)),
    ("batch_norm", 0.14, Duration::from_micros(900)),
    ("relu", 0.14, Duration::from_micros(300)),
    ("max_pool", 0.04, Duration::from_micros(800)),
    ("add", 0.10, Duration::from_micros(200)),
    ("matmul", 0.06, Duration::from_micros(2_500)),
    ("softmax", 0.02, Duration::from_micros(400)),
    ("cross_entropy", 0.02, Duration::from_micros(500)),
    ("sgd_update", 0.12, Duration::from_micros(600)),
    ("all_reduce", 0.02, Duration::from_micros(3_100)),
    ("copy_h2d", 0.07, Duration::from_micros(1_200)),
    ("copy_d2h", 0.07, Duration::from_micros(1_100)),
];

/// Ops per second one fully busy inter-op worker finishes at one intra-op thread.
const OPS_PER_WORKER: f64 = 150.0;
/// Ops at once the fake graph offers (steady; overloaded offers more than it drains).
const PARALLELISM: f64 = 10.0;
/// Ops in one iteration of the fake graph.
const OPS_PER_ITERATION: u64 = 60;
/// GFLOP per op on average.
const GFLOP_PER_OP: f64 = 0.12;
/// Peak GFLOP/s per core.
const PEAK_PER_CORE: f64 = 40.0;
/// GFLOP/s of one GPU stream busy all the time.
const GPU_GFLOPS_PER_BUSY_STREAM: f64 = 150.0;
/// The GPU's ops per second.
const GPU_OPS_PER_S: f64 = 400.0;
/// Streams of the simulated GPU by slot: compute 0 and 1, then a copy stream each way.
/// Fed as the engine feeds them: a compute worker each, one copy worker for both copies.
const STREAMS: [(u32, StreamId); 4] = [
    (0, gpu0_stream(StreamKind::Compute, 0)),
    (1, gpu0_stream(StreamKind::Compute, 1)),
    (2, gpu0_stream(StreamKind::CopyH2D, 0)),
    (3, gpu0_stream(StreamKind::CopyD2H, 0)),
];

/// The simulated GPU's workers: role, index in their pool, and the slots of the [`STREAMS`]
/// each feeds.
const GPU_WORKERS: [(GpuRole, u32, &[u32]); 3] = [
    (GpuRole::Compute, 0, &[0]),
    (GpuRole::Compute, 1, &[1]),
    (GpuRole::Copy, 0, &[2, 3]),
];

/// How many of [`GPU_WORKERS`] have each role.
fn gpu_worker_roles() -> crate::workload::run::GpuWorkerRoles {
    let count = |role| GPU_WORKERS.iter().filter(|(r, _, _)| *r == role).count();
    crate::workload::run::GpuWorkerRoles {
        compute: count(GpuRole::Compute),
        copy: count(GpuRole::Copy),
        prio: count(GpuRole::Prioritized),
    }
}

/// The streams GPU worker `w` of [`GPU_WORKERS`] feeds.
pub(super) fn streams_fed_by(w: usize) -> Vec<StreamId> {
    let slots = GPU_WORKERS[w].2.iter();
    slots.map(|&slot| STREAMS[slot as usize].1).collect()
}

const fn gpu0_stream(kind: StreamKind, index: u32) -> StreamId {
    StreamId {
        device: 0,
        kind,
        index,
    }
}

/// The 64-bit finalizer of SplitMix64: a well-spread hash of `(a, b, c)`.
pub(super) fn mix(a: u64, b: u64, c: u64) -> u64 {
    let mut z = a
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(b.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        .wrapping_add(c.wrapping_mul(0x94d0_49bb_1331_11eb))
        .wrapping_add(0x2545_f491_4f6c_dd1d);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `mix` as a number in `[0, 1)`.
fn unit(a: u64, b: u64, c: u64) -> f64 {
    (mix(a, b, c) >> 11) as f64 / (1u64 << 53) as f64
}

/// What a thread works for: each is one profiler device of the fake, its counters and its
/// rows in a panel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Role {
    /// The inter-op workers of CPU device `d`.
    Cpu(usize),
    /// The priority pool of CPU device `d`.
    Priority(usize),
    /// The simulated GPU's workers ([`GPU_WORKERS`]).
    Gpu,
    /// The intra-op pool.
    Intra,
}

impl Role {
    /// The profiler device it records on: a CPU's or the GPU's own, the intra-op pool's as
    /// the engine's; each CPU device's priority pool gets one of its own (`cpu1-prio`), as
    /// the fake gives every CPU device a priority pool where the engine has one for all.
    pub(super) fn device(self) -> DeviceId {
        match self {
            Role::Cpu(d) => cpu_device(d),
            Role::Priority(d) => DeviceId::register(&format!("{}-prio", cpu(d))),
            Role::Gpu => DeviceId::of(GPU),
            Role::Intra => DeviceId::of_pool(PoolId::INTRA_OP),
        }
    }

    /// The salt of its jitter and queue depths: the length of its device's name, so the CPU
    /// devices and the GPU share one and a priority pool has its own.
    fn salt(self) -> u64 {
        self.device().name().len() as u64
    }
}

/// One fake thread: what it works for and its index there; its name and its pool are made
/// from these.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct FakeThread {
    pub(crate) tid: u32,
    /// Its index among its [`Role`]'s threads (a GPU worker's in [`GPU_WORKERS`]).
    pub(crate) worker: u32,
    pub(crate) role: Role,
}

impl FakeThread {
    /// Its pool and its index there.
    fn pool(self) -> (PoolId, u32) {
        match self.role {
            Role::Cpu(d) => (PoolId::new(cpu(d), PoolRole::CpuWorker), self.worker),
            Role::Priority(d) => (PoolId::new(cpu(d), PoolRole::CpuPriority), self.worker),
            Role::Gpu => {
                let (role, index, _) = GPU_WORKERS[self.worker as usize];
                (PoolId::new(GPU, role.into()), index)
            }
            Role::Intra => (PoolId::INTRA_OP, self.worker),
        }
    }

    /// The thread's name, made from its pool as the dashboard shows it: `cpu0-w1` and
    /// `gpu0-copy-0` as the engine names them ([`PoolId::thread_name`]); the fake's own
    /// pools, a priority pool per CPU device and its intra-op pool, `cpu1-prio-0` and
    /// `intra-1`.
    fn name(self) -> String {
        let (pool, index) = self.pool();
        match self.role {
            Role::Cpu(_) | Role::Gpu => pool.thread_name(index),
            Role::Priority(_) => format!("{}-{}-{index}", pool.device, pool.role),
            Role::Intra => format!("intra-{index}"),
        }
    }

    /// The GPU worker of [`GPU_WORKERS`] it is, if it is one.
    pub(super) fn gpu_worker(self) -> Option<usize> {
        (self.role == Role::Gpu).then_some(self.worker as usize)
    }
}

/// Per-op counters (reset by `r`).
#[derive(Clone, Debug, Default, PartialEq)]
struct OpCounter {
    /// Ops finished, fractional (shares of a step's ops).
    done: f64,
    total_ns: f64,
}

/// The fake's mutable state.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Model {
    pub(crate) step: u64,
    pub(crate) paused: bool,
    pub(crate) inter_op: Vec<usize>,
    pub(crate) intra_op: usize,
    resizes: Vec<u64>,
    ops: Vec<OpCounter>,
    device_ops: BTreeMap<Role, f64>,
    steals: BTreeMap<u32, u64>,
    stream_ops: BTreeMap<u32, f64>,
    dropped: u64,
    /// Ops finished since the start (not reset: it counts iterations).
    all_ops: f64,
    /// The last step's ops per second by profiler device.
    rates: BTreeMap<Role, f64>,
}

impl Model {
    pub(super) fn new(options: &FakeOptions) -> Self {
        Model {
            step: 0,
            paused: false,
            inter_op: vec![options.inter_op.clamp(1, MAX_WORKERS); options.cpu_devices],
            intra_op: options.intra_op.clamp(1, MAX_WORKERS),
            resizes: vec![1; options.cpu_devices],
            ops: vec![OpCounter::default(); OPS.len()],
            device_ops: BTreeMap::new(),
            steals: BTreeMap::new(),
            stream_ops: BTreeMap::new(),
            dropped: 0,
            all_ops: 0.0,
            rates: BTreeMap::new(),
        }
    }

    pub(crate) fn set_inter_op(
        &mut self,
        device: DeviceId,
        threads: usize,
    ) -> Result<String, ControlError> {
        let device_name = device.name();
        let index = (0..self.inter_op.len())
            .find(|&index| cpu_device(index) == device)
            .ok_or_else(|| ControlError::Failed(format!("{device_name} has no inter-op pool")))?;
        let device = device_name;
        if !(1..=MAX_WORKERS).contains(&threads) {
            let reason = format!("{device} takes 1 to {MAX_WORKERS} inter-op workers");
            return Err(ControlError::Failed(reason));
        }
        self.inter_op[index] = threads;
        self.resizes[index] += 1;
        Ok(format!("inter {threads} on {device}"))
    }

    pub(crate) fn set_intra_op(&mut self, threads: usize) -> Result<String, ControlError> {
        if !(1..=MAX_WORKERS).contains(&threads) {
            let reason = format!("the intra-op pool takes 1 to {MAX_WORKERS} threads");
            return Err(ControlError::Failed(reason));
        }
        self.intra_op = threads;
        Ok(format!("intra {threads}"))
    }

    pub(super) fn reset(&mut self) {
        self.ops = vec![OpCounter::default(); OPS.len()];
        self.device_ops.clear();
        self.steals.clear();
        self.stream_ops.clear();
        self.dropped = 0;
    }

    /// Every thread that exists now.
    pub(super) fn threads(&self, options: &FakeOptions) -> Vec<FakeThread> {
        let mut threads = Vec::new();
        for (d, &workers) in self.inter_op.iter().enumerate() {
            let base = 1000 * (d as u32 + 1);
            threads.extend((0..workers as u32).map(|k| FakeThread {
                tid: base + k,
                worker: k,
                role: Role::Cpu(d),
            }));
            threads.extend((0..options.priority_workers as u32).map(|k| FakeThread {
                tid: base + 500 + k,
                worker: k,
                role: Role::Priority(d),
            }));
        }
        if options.gpu {
            threads.extend((0..GPU_WORKERS.len() as u32).map(|w| FakeThread {
                tid: 9000 + w,
                worker: w,
                role: Role::Gpu,
            }));
        }
        threads.extend((0..self.intra_op as u32).map(|k| FakeThread {
            tid: 8000 + k,
            worker: k,
            role: Role::Intra,
        }));
        threads
    }

    fn total_inter(&self) -> usize {
        self.inter_op.iter().sum()
    }

    /// Ops at once the graph offers.
    fn parallelism(&self, options: &FakeOptions) -> f64 {
        match options.scenario {
            Scenario::Steady => PARALLELISM,
            Scenario::Overloaded => PARALLELISM * 2.0,
        }
    }

    /// How busy an inter-op worker is (before jitter).
    fn cpu_load(&self, options: &FakeOptions) -> f64 {
        (self.parallelism(options) / self.total_inter() as f64).min(1.0) * 0.85
    }

    /// How much faster an op runs with the intra-op threads, less what oversubscription
    /// costs.
    fn speedup(&self, options: &FakeOptions) -> f64 {
        let threads = (self.total_inter() * self.intra_op) as f64;
        let cores = options.cores.max(1) as f64;
        let penalty = if threads > cores {
            (cores / threads).sqrt()
        } else {
            1.0
        };
        (self.intra_op as f64).powf(0.6) * penalty
    }

    /// Ops per second the threads of `role` finish at the current step.
    fn device_rate(&self, options: &FakeOptions, role: Role) -> f64 {
        if self.paused {
            return 0.0;
        }
        let jitter = 0.95 + 0.1 * unit(self.step, 77, role.salt());
        let rate = match role {
            Role::Priority(_) => 0.3 * OPS_PER_WORKER,
            Role::Cpu(d) => {
                let workers = self.inter_op[d] as f64;
                workers * self.cpu_load(options) * OPS_PER_WORKER * self.speedup(options)
            }
            Role::Gpu => GPU_OPS_PER_S,
            Role::Intra => 0.0,
        };
        rate * jitter
    }

    /// One step further: counters grow by what the step finished.
    pub(super) fn advance(&mut self, options: &FakeOptions) {
        self.step += 1;
        let seconds = options.step.as_secs_f64();
        let mut roles: Vec<Role> = (0..self.inter_op.len())
            .flat_map(|d| [Role::Cpu(d), Role::Priority(d)])
            .collect();
        if options.gpu {
            roles.push(Role::Gpu);
        }
        let speedup = self.speedup(options);
        self.rates.clear();
        for role in roles {
            let rate = self.device_rate(options, role);
            let done = rate * seconds;
            *self.device_ops.entry(role).or_default() += done;
            self.all_ops += done;
            self.add_ops(done, speedup);
            self.rates.insert(role, rate);
        }
        self.advance_threads(options);
        if options.scenario == Scenario::Overloaded {
            self.dropped += 37;
        }
    }

    fn add_ops(&mut self, done: f64, speedup: f64) {
        for (counter, &(_, share, mean)) in self.ops.iter_mut().zip(OPS.iter()) {
            counter.done += done * share;
            counter.total_ns += done * share * mean.as_nanos() as f64 / speedup.max(0.1);
        }
    }

    fn advance_threads(&mut self, options: &FakeOptions) {
        if self.paused {
            return;
        }
        for thread in self.threads(options) {
            if matches!(thread.role, Role::Cpu(_)) && unit(self.step, thread.tid as u64, 3) < 0.3 {
                *self.steals.entry(thread.tid).or_default() += 1 + mix(self.step, 4, 0) % 3;
            }
            if let Some(w) = thread.gpu_worker() {
                for &stream in GPU_WORKERS[w].2 {
                    let busy = self.stream_busy(stream);
                    *self.stream_ops.entry(stream).or_default() += busy * GPU_OPS_PER_S / 8.0;
                }
            }
        }
    }

    /// Share of the window GPU worker `w` is busy: as busy as the busiest of its streams.
    fn gpu_worker_busy(&self, w: usize) -> f64 {
        let streams = GPU_WORKERS[w].2.iter();
        streams
            .map(|&stream| self.stream_busy(stream))
            .fold(0.0, f64::max)
    }

    /// Share of the window stream `stream` is busy.
    fn stream_busy(&self, stream: u32) -> f64 {
        if self.paused {
            return 0.0;
        }
        let (low, span) = if stream < 2 {
            (0.55, 0.35)
        } else {
            (0.15, 0.25)
        };
        low + span * unit(self.step / 3, stream as u64, 11)
    }

    /// What `thread` is doing at this step, and its shares of the window.
    fn activity(&self, options: &FakeOptions, thread: &FakeThread) -> (Activity, Shares) {
        let tid = thread.tid as u64;
        let load = match thread.role {
            _ if self.paused => 0.0,
            Role::Cpu(_) => self.cpu_load(options),
            Role::Priority(_) => 0.3,
            Role::Gpu => self.gpu_worker_busy(thread.worker as usize),
            Role::Intra => 0.5 * self.cpu_load(options),
        };
        let spinner = self.is_spinner(options, thread);
        // A thread that spins most of the window runs in what is left of it.
        let most = 1.0 - spinner.filter(|&share| share >= 0.5).unwrap_or(0.0);
        let running = (load * (0.8 + 0.4 * unit(self.step, tid, 1))).clamp(0.0, most);
        let spinning = match spinner {
            Some(share) => share.min(1.0 - running),
            None => 0.0,
        };
        let stealing = (1.0 - running - spinning) * 0.3;
        let shares = Shares {
            running,
            stealing,
            spinning,
            parked: 1.0 - running - spinning - stealing,
            idle: 0.0,
        };
        let draw = unit(self.step, tid, 2);
        let activity = if draw < running {
            Activity::Running
        } else if spinner.is_some() && draw < running + spinning.max(0.2) {
            Activity::Spinning
        } else if draw < running + spinning + stealing {
            Activity::Stealing
        } else {
            Activity::Parked
        };
        (activity, shares)
    }

    /// The share of the window `thread` spins, if it is its pool's spinner now.
    fn is_spinner(&self, options: &FakeOptions, thread: &FakeThread) -> Option<f64> {
        let Role::Cpu(d) = thread.role else {
            return None;
        };
        if options.scenario == Scenario::Overloaded && d == 1 && thread.worker == 3 {
            return Some(0.82);
        }
        let workers = self.inter_op[d] as u64;
        (!self.paused && (self.step / 10 + d as u64) % workers == thread.worker as u64)
            .then_some(0.08)
    }

    /// The frame at the current step.
    pub(super) fn data(&self, options: &FakeOptions) -> DashboardData {
        let threads = self.threads(options);
        let workers = threads
            .iter()
            .map(|thread| {
                let (activity, shares) = self.activity(options, thread);
                self.worker_snapshot(thread, activity, shares)
            })
            .collect();
        let snapshot = Snapshot {
            at_ns: self.elapsed(options).as_nanos() as u64,
            window_ns: 1_000_000_000,
            workers,
            work_states: Vec::new(),
            steals: Vec::new(),
            devices: self.devices(options, &threads),
            ops: self.op_table(),
            spans: Vec::new(),
            streams: self.streams(options),
            events: (self.all_ops * 4.0) as u64,
            dropped_events: self.dropped,
            task_sampling: Default::default(),
        };
        DashboardData {
            facts: self.facts(options, &snapshot),
            devices: self.layout(options),
            snapshot,
            ..DashboardData::default()
        }
    }

    fn elapsed(&self, options: &FakeOptions) -> Duration {
        options.step * u32::try_from(self.step).unwrap_or(u32::MAX)
    }

    /// The op `thread` runs now.
    fn op_of(&self, thread: &FakeThread) -> &'static str {
        let pick = mix(self.step / 2, thread.tid as u64, 5) as usize;
        let names: &[usize] = match thread.role {
            Role::Gpu if GPU_WORKERS[thread.worker as usize].0 == GpuRole::Copy => &[10, 11],
            Role::Gpu => &[0, 5, 1, 2],
            Role::Priority(_) => &[8, 9],
            Role::Cpu(_) | Role::Intra => &[0, 1, 2, 3, 4, 5, 6, 7],
        };
        OPS[names[pick % names.len()]].0
    }

    fn worker_snapshot(
        &self,
        thread: &FakeThread,
        activity: Activity,
        shares: Shares,
    ) -> WorkerSnapshot {
        let ops = (self.step as f64 * shares.running * 9.0) as u64;
        let (pool, index) = thread.pool();
        WorkerSnapshot {
            shares,
            shares_since_start: shares,
            tasks: ops,
            ops,
            steals: self.steals.get(&thread.tid).copied().unwrap_or(0),
            current_op: (activity == Activity::Running).then(|| self.op_of(thread).to_string()),
            role: Some(pool.role),
            ..super::worker_snapshot(
                thread.tid,
                thread.name(),
                thread.role.device(),
                index,
                activity,
            )
        }
    }

    fn devices(&self, options: &FakeOptions, threads: &[FakeThread]) -> Vec<DeviceSnapshot> {
        let mut roles: Vec<Role> = threads.iter().map(|t| t.role).collect();
        roles.dedup();
        roles
            .into_iter()
            .map(|role| {
                let workers: Vec<&FakeThread> = threads.iter().filter(|t| t.role == role).collect();
                self.device(options, role, &workers)
            })
            .collect()
    }

    fn device(&self, options: &FakeOptions, role: Role, workers: &[&FakeThread]) -> DeviceSnapshot {
        let queues = self.queues(options, role, workers);
        let ops = self.device_ops.get(&role).copied().unwrap_or(0.0) as u64;
        let resizes = match role {
            Role::Cpu(d) => self.resizes[d],
            _ => 1,
        };
        let device = role.device();
        DeviceSnapshot {
            id: device.id(),
            name: device.name().to_string(),
            ops_per_s: self.rates.get(&role).copied().unwrap_or(0.0),
            tasks_per_s: self.rates.get(&role).copied().unwrap_or(0.0),
            ops,
            op_errors: 0,
            tasks: ops,
            task_panics: 0,
            queued: ops + queues.iter().map(|q| q.depth).sum::<u64>(),
            queue_depth: queues.iter().map(|q| q.depth).sum(),
            queues,
            workers: Some(workers.len() as u64),
            resizes,
        }
    }

    fn queues(
        &self,
        options: &FakeOptions,
        role: Role,
        workers: &[&FakeThread],
    ) -> Vec<QueueSnapshot> {
        let busy = !self.paused && self.rates.get(&role).is_some_and(|&rate| rate > 0.0);
        let mut queues: Vec<QueueSnapshot> = workers
            .iter()
            .map(|thread| QueueSnapshot {
                label: format!("w{}", thread.worker),
                depth: if busy {
                    mix(self.step / 2, thread.tid as u64, 9) % 4
                } else {
                    0
                },
            })
            .collect();
        let growing = options.scenario == Scenario::Overloaded && role == Role::Cpu(0);
        let shared = match () {
            _ if growing => 16 + 4 * self.step,
            _ if busy => mix(self.step / 3, role.salt(), 10) % 6,
            _ => 0,
        };
        queues.push(QueueSnapshot {
            label: "shared".into(),
            depth: shared,
        });
        queues
    }

    fn op_table(&self) -> Vec<OpSnapshot> {
        OPS.iter()
            .zip(&self.ops)
            .filter(|(_, counter)| counter.done >= 1.0)
            .map(|(&(name, _, _), counter)| {
                let count = counter.done as u64;
                let mean = counter.total_ns / counter.done;
                OpSnapshot {
                    name: name.to_string(),
                    count,
                    errors: 0,
                    total_ns: counter.total_ns as u64,
                    min_ns: (mean * 0.4) as u64,
                    max_ns: (mean * 4.1) as u64,
                    mean_ns: mean,
                    p50_ns: (mean * 0.92) as u64,
                    p99_ns: (mean * 2.6) as u64,
                }
            })
            .collect()
    }

    fn streams(&self, options: &FakeOptions) -> Vec<StreamSnapshot> {
        if !options.gpu {
            return Vec::new();
        }
        STREAMS
            .iter()
            .map(|&(slot, stream)| {
                let ops = self.stream_ops.get(&slot).copied().unwrap_or(0.0) as u64;
                StreamSnapshot {
                    device: Role::Gpu.device(),
                    stream: stream.code(),
                    occupancy: self.stream_busy(slot),
                    ops,
                    submitted: ops + u64::from(!self.paused) * 2,
                }
            })
            .collect()
    }

    fn facts(&self, options: &FakeOptions, snapshot: &Snapshot) -> Facts {
        let ops_per_s: f64 = snapshot.devices.iter().map(|d| d.ops_per_s).sum();
        let mut notices = vec!["synthetic data".to_string()];
        if options.gpu {
            notices.push("simulated GPU".into());
        }
        Facts {
            workload: options.workload.clone(),
            engine: "threaded".into(),
            pool_kind: "eigen".into(),
            elapsed: self.elapsed(options),
            iterations: self.all_ops as u64 / OPS_PER_ITERATION,
            gflops: Some(ops_per_s * GFLOP_PER_OP),
            gpu_gflops: options.gpu.then(|| {
                let busy: f64 = snapshot.streams.iter().map(|s| s.occupancy).sum();
                busy * GPU_GFLOPS_PER_BUSY_STREAM
            }),
            peak_gflops: Some(options.cores as f64 * PEAK_PER_CORE),
            intra_op: self.intra_op,
            cores: options.cores,
            finished: false,
            notices,
            warnings: Vec::new(),
            ..Facts::default()
        }
    }

    fn layout(&self, options: &FakeOptions) -> Vec<DeviceLayout> {
        let mut layout: Vec<DeviceLayout> = self
            .inter_op
            .iter()
            .enumerate()
            .map(|(d, &workers)| DeviceLayout {
                title: cpu(d).to_string(),
                kind: DeviceKind::Cpu,
                workers: Role::Cpu(d).device(),
                priority: (options.priority_workers > 0).then(|| Role::Priority(d).device()),
                streams: Vec::new(),
                inter_op: Some(workers),
                model: None,
                gpu_workers: None,
            })
            .collect();
        if options.gpu {
            layout.push(DeviceLayout {
                title: GPU.to_string(),
                kind: DeviceKind::Gpu,
                workers: Role::Gpu.device(),
                priority: None,
                streams: STREAMS
                    .iter()
                    .map(|&(_, stream)| StreamLayout::of_code(GPU, stream.code()))
                    .collect(),
                inter_op: None,
                model: None,
                gpu_workers: Some(gpu_worker_roles()),
            });
        }
        layout.push(DeviceLayout {
            title: "intra-op".into(),
            kind: DeviceKind::IntraOp,
            workers: Role::Intra.device(),
            ..DeviceLayout::default()
        });
        layout
    }
}

/// Fake CPU device `index`.
fn cpu(index: usize) -> Device {
    Device::Cpu(index as u32)
}

/// The profiler device of fake CPU device `index` (`cpu0`): its panel's workers, the device a
/// resize names.
fn cpu_device(index: usize) -> DeviceId {
    DeviceId::of(cpu(index))
}
