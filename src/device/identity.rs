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
/// a CPU's workers before its priority pool, a GPU's compute workers, then its copy workers,
/// then its prioritized worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolRole {
    /// A CPU device's inter-op workers (the pooled engine's shared `engine` workers too).
    CpuWorker,
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
    pub const ALL: [PoolRole; 7] = [
        PoolRole::CpuWorker,
        PoolRole::CpuIo,
        PoolRole::CpuPriority,
        PoolRole::IntraOp,
        PoolRole::GpuCompute,
        PoolRole::GpuCopy,
        PoolRole::GpuPriority,
    ];

    /// The role's code in a profiler event (1 and up; 0 is "no role").
    pub const fn code(self) -> u8 {
        self as u8 + 1
    }

    /// The role of event code `code` (`None` for 0 or a code this build does not know).
    pub fn from_code(code: u8) -> Option<PoolRole> {
        PoolRole::ALL
            .get(usize::from(code.checked_sub(1)?))
            .copied()
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

    /// The pool of `role` on `device`.
    pub const fn new(device: Device, role: PoolRole) -> Self {
        PoolId { device, role }
    }
}

impl fmt::Display for PoolId {
    /// The pool's name for people, the one the summary's pools table and its attribution
    /// share with [`Lane`]'s: `cpu0 workers`, `cpu priority` (one pool serves every CPU
    /// device), `io worker`, `intra-op pool`, `gpu0 compute`, `gpu0 priority`. A role's
    /// short form ([`PoolRole`]'s display) is what thread names use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.role {
            PoolRole::CpuWorker => write!(f, "{} workers", self.device),
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
/// [`PoolId`], it names the pooled engine's shared workers and the naive engine's driver
/// thread, and it takes a GPU's pools as one.
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
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lane::Driver => f.write_str("driver thread"),
            Lane::SharedWorkers => f.write_str("engine workers"),
            Lane::CpuWorkers(id) => write!(f, "{} workers", Device::Cpu(*id)),
            Lane::Priority => f.write_str("cpu priority"),
            Lane::Io => f.write_str("io worker"),
            Lane::Gpu(id) => write!(f, "{} workers", Device::Gpu(*id)),
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

    /// A pool's name is its lane's where both name the same threads, so a summary's pools
    /// table and its attribution name a pool alike.
    #[test]
    fn pools_and_lanes_name_the_same_threads_alike() {
        let cpu0 = PoolId::new(Device::Cpu(0), PoolRole::CpuWorker);
        assert_eq!(cpu0.to_string(), Lane::CpuWorkers(0).to_string());
        assert_eq!(PoolId::CPU_PRIORITY.to_string(), Lane::Priority.to_string());
        let io = PoolId::new(Device::Cpu(0), PoolRole::CpuIo);
        assert_eq!(io.to_string(), Lane::Io.to_string());
        assert_eq!(PoolId::INTRA_OP.to_string(), "intra-op pool");
        let prio = PoolId::new(Device::Gpu(1), PoolRole::GpuPriority);
        assert_eq!(prio.to_string(), "gpu1 priority");
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
    }
}
