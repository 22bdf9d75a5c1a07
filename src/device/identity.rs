//! Typed identities of where work runs: a [`Device`], a pool's [`PoolRole`] on it, the
//! pair as a [`PoolId`], and the [`Lane`] an engine runs an op on.
//!
//! The engine hands a pool's [`PoolId`] to whoever observes it (the profiler), the profiler
//! carries the role and the device through its events and snapshots, and the dashboard groups
//! and orders its rows by them. Names (`cpu0`, `gpu0 copy`) are made from these types for
//! display ([`fmt::Display`]) and never parsed back.
#![forbid(unsafe_code)]

use std::fmt;

use super::gpu::GpuRole;

/// A device: the host (threads of no device), CPU `n` or GPU `n`.
///
/// ```
/// use enginetop::device::identity::Device;
/// assert_eq!(Device::Cpu(1).to_string(), "cpu1");
/// assert_eq!(Device::Gpu(0).to_string(), "gpu0");
/// assert_eq!(Device::Host.to_string(), "host");
/// ```
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    /// No device: the host's own threads (the driver, the intra-op pool).
    #[default]
    Host,
    /// CPU device `n` (the engine's `cpu(n)` context).
    Cpu(u32),
    /// GPU `n` (the engine's `gpu(n)` context).
    Gpu(u32),
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Host => f.write_str("host"),
            Device::Cpu(index) => write!(f, "cpu{index}"),
            Device::Gpu(ordinal) => write!(f, "gpu{ordinal}"),
        }
    }
}

/// What a pool does on its device. The order is the order a device's rows are listed in:
/// a CPU's workers (or the pooled engine's shared workers) before its io and priority pools,
/// a GPU's compute workers, then its copy workers, then its prioritized worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolRole {
    /// A CPU device's inter-op workers (the per-device engine's).
    CpuWorker,
    /// The pooled engine's shared `engine` workers: one pool runs every CPU device's ops,
    /// prioritized or not.
    SharedWorker,
    /// The pooled engine's `io` pool, which runs copy ops.
    CpuIo,
    /// The CPU priority pool (`CpuPrioritized` ops, highest priority first).
    CpuPriority,
    /// The intra-op pool (threads inside one op).
    IntraOp,
    /// A GPU's compute workers.
    GpuCompute,
    /// A GPU's copy workers.
    GpuCopy,
    /// A GPU's prioritized worker.
    GpuPriority,
}

impl PoolRole {
    /// Every role, in row order.
    pub const ALL: [PoolRole; 8] = [
        PoolRole::CpuWorker,
        PoolRole::SharedWorker,
        PoolRole::CpuIo,
        PoolRole::CpuPriority,
        PoolRole::IntraOp,
        PoolRole::GpuCompute,
        PoolRole::GpuCopy,
        PoolRole::GpuPriority,
    ];

    /// The role's code in a profiler event and a recording's snapshots (1 and up; 0 is "no
    /// role"). Each role keeps its code whatever its row order, so a recording reads the
    /// same after a role is added.
    pub const fn code(self) -> u8 {
        match self {
            PoolRole::CpuWorker => 1,
            PoolRole::CpuIo => 2,
            PoolRole::CpuPriority => 3,
            PoolRole::IntraOp => 4,
            PoolRole::GpuCompute => 5,
            PoolRole::GpuCopy => 6,
            PoolRole::GpuPriority => 7,
            PoolRole::SharedWorker => 8,
        }
    }

    /// The role of event code `code` (`None` for 0 or a code this build does not know).
    pub fn from_code(code: u8) -> Option<PoolRole> {
        PoolRole::ALL.into_iter().find(|role| role.code() == code)
    }

    /// Whether its workers are the engine's inter-op workers, the threads `--inter` counts.
    pub(crate) fn is_inter_op(self) -> bool {
        matches!(self, PoolRole::CpuWorker | PoolRole::SharedWorker)
    }
}

impl From<GpuRole> for PoolRole {
    fn from(role: GpuRole) -> Self {
        match role {
            GpuRole::Compute => PoolRole::GpuCompute,
            GpuRole::Copy => PoolRole::GpuCopy,
            GpuRole::Prioritized => PoolRole::GpuPriority,
        }
    }
}

impl fmt::Display for PoolRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PoolRole::CpuWorker => "worker",
            PoolRole::SharedWorker => "engine",
            PoolRole::CpuIo => "io",
            PoolRole::CpuPriority => "prio",
            PoolRole::IntraOp => "intra",
            PoolRole::GpuCompute => "compute",
            PoolRole::GpuCopy => "copy",
            PoolRole::GpuPriority => "prio",
        })
    }
}

/// One pool: its device and its role there.
///
/// ```
/// use enginetop::device::identity::{Device, PoolId, PoolRole};
/// let copy = PoolId::new(Device::Gpu(0), PoolRole::GpuCopy);
/// assert_eq!(copy.to_string(), "gpu0 copy");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct PoolId {
    /// The device it works for.
    pub device: Device,
    /// What it does there.
    pub role: PoolRole,
}

impl PoolId {
    /// The intra-op pool (a host pool).
    pub const INTRA_OP: PoolId = PoolId::new(Device::Host, PoolRole::IntraOp);
    /// The CPU priority pool: one serves every CPU device; it is listed with CPU 0.
    pub const CPU_PRIORITY: PoolId = PoolId::new(Device::Cpu(0), PoolRole::CpuPriority);
    /// The pooled engine's shared workers: one pool serves every CPU device; it is listed
    /// with CPU 0, where its ops record.
    pub const SHARED_WORKERS: PoolId = PoolId::new(Device::Cpu(0), PoolRole::SharedWorker);
    /// The pooled engine's IO worker, listed with CPU 0.
    pub const IO: PoolId = PoolId::new(Device::Cpu(0), PoolRole::CpuIo);

    /// The pool of `role` on `device`.
    pub const fn new(device: Device, role: PoolRole) -> Self {
        PoolId { device, role }
    }

    /// What the pool's threads are named before each one's index: `cpu0`, `engine`, `io`,
    /// `cpu-prio`, `intra`, `gpu0-compute`. The engine names its pools with it.
    pub(crate) fn thread_prefix(self) -> String {
        match self.role {
            PoolRole::CpuWorker => self.device.to_string(),
            PoolRole::SharedWorker | PoolRole::CpuIo | PoolRole::IntraOp => self.role.to_string(),
            PoolRole::CpuPriority => format!("cpu-{}", self.role),
            PoolRole::GpuCompute | PoolRole::GpuCopy | PoolRole::GpuPriority => {
                format!("{}-{}", self.device, self.role)
            }
        }
    }

    /// The thread name of the pool's worker `index`, as the pool names it: a work-stealing
    /// pool's `<prefix>-w<k>` (`cpu0-w1`, `engine-w0`, `io-w0`, `intra-w2`), a priority
    /// pool's and a GPU worker's `<prefix>-<k>` (`cpu-prio-1`, `gpu0-copy-0`). Made for
    /// display only: events carry the pool and the index typed.
    ///
    /// ```
    /// use enginetop::device::identity::{Device, PoolId, PoolRole};
    /// assert_eq!(PoolId::SHARED_WORKERS.thread_name(1), "engine-w1");
    /// let copy = PoolId::new(Device::Gpu(0), PoolRole::GpuCopy);
    /// assert_eq!(copy.thread_name(0), "gpu0-copy-0");
    /// ```
    pub fn thread_name(self, index: u32) -> String {
        let prefix = self.thread_prefix();
        match self.role {
            PoolRole::CpuWorker | PoolRole::SharedWorker | PoolRole::CpuIo | PoolRole::IntraOp => {
                format!("{prefix}-w{index}")
            }
            PoolRole::CpuPriority
            | PoolRole::GpuCompute
            | PoolRole::GpuCopy
            | PoolRole::GpuPriority => format!("{prefix}-{index}"),
        }
    }
}

impl fmt::Display for PoolId {
    /// The pool's name for people, the one the summary's pools table and its attribution
    /// share with [`Lane`]'s: `cpu0 workers`, `engine workers` and `cpu priority` (each one
    /// pool for every CPU device), `io worker`, `intra-op pool`, `gpu0 compute`,
    /// `gpu0 priority`. A role's short form ([`PoolRole`]'s display) is what thread names
    /// use ([`thread_name`](Self::thread_name)).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.role {
            PoolRole::CpuWorker => write!(f, "{} workers", self.device),
            PoolRole::SharedWorker => f.write_str("engine workers"),
            PoolRole::CpuIo => f.write_str("io worker"),
            PoolRole::CpuPriority => f.write_str("cpu priority"),
            PoolRole::IntraOp => f.write_str("intra-op pool"),
            PoolRole::GpuCompute => write!(f, "{} compute", self.device),
            PoolRole::GpuCopy => write!(f, "{} copy", self.device),
            PoolRole::GpuPriority => write!(f, "{} priority", self.device),
        }
    }
}

/// The worker pool an op runs on, for the engine that runs it: the threads its busy time is
/// counted against and the unit the scaling analysis gives a verdict for. Unlike a
/// [`PoolId`], it names the naive engine's driver thread, and it takes a GPU's pools as one.
///
/// ```
/// use enginetop::device::identity::{Device, Lane};
/// assert_eq!(Lane::CpuWorkers(0).to_string(), "cpu0 workers");
/// assert_eq!(Lane::CpuWorkers(0).verdict_name(), "cpu0");
/// assert_eq!(Lane::SharedWorkers.verdict_name(), "engine workers");
/// assert_eq!(Lane::Gpu(1).device(), Some(Device::Gpu(1)));
/// ```
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    /// The pushing thread (the naive engine runs every op there).
    Driver,
    /// The pooled engine's shared workers (every CPU op, prioritized or not).
    SharedWorkers,
    /// A CPU device's own workers (per-device engine).
    CpuWorkers(u32),
    /// The per-device engine's CPU priority pool.
    Priority,
    /// The pooled engine's IO worker (copies).
    Io,
    /// A GPU's workers.
    Gpu(u32),
}

impl Lane {
    /// The device whose dashboard panel holds all of this lane's threads, if one does.
    pub fn device(self) -> Option<Device> {
        match self {
            Lane::CpuWorkers(id) => Some(Device::Cpu(id)),
            Lane::Gpu(id) => Some(Device::Gpu(id)),
            Lane::Driver | Lane::SharedWorkers | Lane::Priority | Lane::Io => None,
        }
    }

    /// The pool that is all of its threads, where one is: the summary's pools table names a
    /// lane as this pool's attribution does ([`PoolId`]'s display). The driver thread is no
    /// pool, and a GPU's lane is its pools together.
    pub(crate) fn pool(self) -> Option<PoolId> {
        match self {
            Lane::SharedWorkers => Some(PoolId::SHARED_WORKERS),
            Lane::CpuWorkers(id) => Some(PoolId::new(Device::Cpu(id), PoolRole::CpuWorker)),
            Lane::Priority => Some(PoolId::CPU_PRIORITY),
            Lane::Io => Some(PoolId::IO),
            Lane::Driver | Lane::Gpu(_) => None,
        }
    }

    /// Whether its threads are CPU threads (the ones the OS's descheduling concerns).
    pub fn is_cpu(self) -> bool {
        !matches!(self, Lane::Gpu(_))
    }

    /// How a verdict names it: its device where one panel has its threads (`cpu0`), itself
    /// otherwise (`engine workers`).
    pub fn verdict_name(self) -> String {
        match self.device() {
            Some(device) => device.to_string(),
            None => self.to_string(),
        }
    }
}

impl fmt::Display for Lane {
    /// A lane that is one pool is named as that pool (`Lane::pool`), so the summary's pools
    /// table and its attribution agree: `cpu0 workers`, `engine workers`, `cpu priority`,
    /// `io worker`; the others `driver thread` and `gpu0 workers`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lane::Driver => f.write_str("driver thread"),
            Lane::Gpu(id) => write!(f, "{} workers", Device::Gpu(*id)),
            Lane::SharedWorkers | Lane::CpuWorkers(_) | Lane::Priority | Lane::Io => {
                self.pool().expect("every lane of these is one pool").fmt(f)
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn role_codes_round_trip_and_zero_is_none() {
        for role in PoolRole::ALL {
            assert_eq!(PoolRole::from_code(role.code()), Some(role));
        }
        assert_eq!(PoolRole::from_code(0), None);
        assert_eq!(PoolRole::from_code(0x7f), None);
    }

    /// Recordings hold the codes: a role's code stays whatever its place in the rows.
    #[test]
    fn role_codes_are_fixed_per_role() {
        let codes: Vec<u8> = PoolRole::ALL.into_iter().map(PoolRole::code).collect();
        assert_eq!(codes, [1, 8, 2, 3, 4, 5, 6, 7]);
    }

    /// A pool's name is its lane's where both name the same threads, so a summary's pools
    /// table and its attribution name a pool alike; the pooled engine's shared workers are
    /// their own pool, not CPU 0's.
    #[test]
    fn pools_and_lanes_name_the_same_threads_alike() {
        let lanes = [
            Lane::Driver,
            Lane::SharedWorkers,
            Lane::CpuWorkers(0),
            Lane::CpuWorkers(3),
            Lane::Priority,
            Lane::Io,
            Lane::Gpu(1),
        ];
        let pooled: Vec<Lane> = lanes
            .into_iter()
            .filter(|lane| lane.pool().is_some())
            .collect();
        assert_eq!(pooled.len(), 5, "{pooled:?}");
        for lane in pooled {
            assert_eq!(
                lane.pool().unwrap().to_string(),
                lane.to_string(),
                "{lane:?}"
            );
        }
        assert_eq!(Lane::SharedWorkers.pool(), Some(PoolId::SHARED_WORKERS));
        assert_eq!(PoolId::SHARED_WORKERS.to_string(), "engine workers");
        assert_ne!(
            PoolId::SHARED_WORKERS.to_string(),
            Lane::CpuWorkers(0).to_string()
        );
        assert_eq!(
            Lane::SharedWorkers.verdict_name(),
            PoolId::SHARED_WORKERS.to_string()
        );
        assert_eq!(PoolId::INTRA_OP.to_string(), "intra-op pool");
        let prio = PoolId::new(Device::Gpu(1), PoolRole::GpuPriority);
        assert_eq!(prio.to_string(), "gpu1 priority");
    }

    /// Thread names as the engine's pools give them (`tests/engine_pool_observers.rs`
    /// checks the engine's threads against these).
    #[test]
    fn thread_names_are_made_from_the_pool_and_the_index() {
        let named = |device, role, index| PoolId::new(device, role).thread_name(index);
        assert_eq!(named(Device::Cpu(1), PoolRole::CpuWorker, 3), "cpu1-w3");
        assert_eq!(PoolId::SHARED_WORKERS.thread_name(0), "engine-w0");
        assert_eq!(PoolId::IO.thread_name(0), "io-w0");
        assert_eq!(PoolId::CPU_PRIORITY.thread_name(1), "cpu-prio-1");
        assert_eq!(PoolId::INTRA_OP.thread_name(2), "intra-w2");
        assert_eq!(
            named(Device::Gpu(0), PoolRole::GpuCompute, 1),
            "gpu0-compute-1"
        );
        assert_eq!(named(Device::Gpu(2), PoolRole::GpuCopy, 0), "gpu2-copy-0");
        assert_eq!(
            named(Device::Gpu(0), PoolRole::GpuPriority, 0),
            "gpu0-prio-0"
        );
    }

    #[test]
    fn gpu_worker_roles_map_to_their_pool_roles() {
        assert_eq!(PoolRole::from(GpuRole::Compute), PoolRole::GpuCompute);
        assert_eq!(PoolRole::from(GpuRole::Copy), PoolRole::GpuCopy);
        assert_eq!(PoolRole::from(GpuRole::Prioritized), PoolRole::GpuPriority);
    }

    #[test]
    fn rows_order_compute_then_copy_then_prio() {
        assert!(PoolRole::GpuCompute < PoolRole::GpuCopy);
        assert!(PoolRole::GpuCopy < PoolRole::GpuPriority);
        assert!(PoolRole::CpuWorker < PoolRole::CpuPriority);
        assert!(PoolRole::SharedWorker < PoolRole::CpuIo);
        let mut sorted = PoolRole::ALL;
        sorted.sort();
        assert_eq!(sorted, PoolRole::ALL, "ALL is in row order");
    }
}
