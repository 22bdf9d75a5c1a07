//! Process-wide registries: devices ([`DeviceId`]) and threads ([`ThreadId`]). Names (ops,
//! spans, queue labels) are the engine's interned [`OpName`](crate::engine::OpName)s.
//!
//! Each is append-only and lives for the whole process, so an id recorded in an event always
//! resolves, in every profiler. Registering takes a lock and a hash lookup and allocates only
//! the first time a device is seen: register once, keep the id, and record the id.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::LazyLock;

use crate::device::identity::{Device, PoolId, PoolRole};
use crate::sync::{thread, thread_local, AtomicU32, Mutex, Ordering};

/// A device as the profiler records it: a CPU or GPU device of the engine, a pool of its own
/// (the CPU priority pool, the intra-op pool), or a named one (a demo's, a test's). Each gets
/// its own process (`pid`) in a Chrome trace. Id 0 is the host (threads that belong to no
/// device). The registry keeps what each id stands for: its typed [`Device`], if it has one,
/// and the name it is shown by.
///
/// ```
/// use enginetop::device::identity::{Device, PoolId, PoolRole};
/// use enginetop::profiler::DeviceId;
/// let gpu = DeviceId::of(Device::Gpu(0));
/// assert_eq!((gpu.name(), gpu.device()), ("gpu0", Some(Device::Gpu(0))));
/// let copy = PoolId::new(Device::Gpu(0), PoolRole::GpuCopy);
/// assert_eq!(DeviceId::of_pool(copy), gpu); // a GPU's pools record on the GPU
/// let named = DeviceId::register("doc-named");
/// assert_eq!((named.name(), named.device()), ("doc-named", None));
/// assert_eq!(DeviceId::HOST.device(), Some(Device::Host));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId(u16);

impl DeviceId {
    /// The host: events that belong to no device.
    pub const HOST: DeviceId = DeviceId(0);

    /// The device named `name`, registered on first use, with no typed identity (a demo's or
    /// a test's device).
    pub fn register(name: &str) -> DeviceId {
        DEVICES.lock().entry(name, None)
    }

    /// Device `device` (named as it displays: `cpu0`, `gpu1`), registered on first use.
    pub fn of(device: Device) -> DeviceId {
        DEVICES.lock().entry(&device.to_string(), Some(device))
    }

    /// The device pool `pool` records on: a CPU's workers, the pooled engine's shared workers
    /// (CPU 0's, where its CPU ops record) and a GPU's pools on their device (with its ops,
    /// so a trace shows a device's ops, steals and parks in one process); the
    /// CPU priority pool (`cpu-prio`), the pooled engine's `io` pool and the intra-op pool
    /// (`intra-op`) each on one of their own.
    pub fn of_pool(pool: PoolId) -> DeviceId {
        let own = |name: &str| DEVICES.lock().entry(name, Some(pool.device));
        match pool.role {
            PoolRole::CpuWorker
            | PoolRole::SharedWorker
            | PoolRole::GpuCompute
            | PoolRole::GpuCopy
            | PoolRole::GpuPriority => DeviceId::of(pool.device),
            PoolRole::CpuPriority => own("cpu-prio"),
            PoolRole::CpuIo => own("io"),
            PoolRole::IntraOp => own("intra-op"),
        }
    }

    /// The device shown as `name` that stands for `device` (typed, a pool's own, or named:
    /// `None`), registered on first use: what a recording's device table describes, so a
    /// replayed device has the live one's typed identity.
    pub(crate) fn restore(name: &str, device: Option<Device>) -> DeviceId {
        DEVICES.lock().entry(name, device)
    }

    /// A device id from its number (for tests and replay).
    pub const fn from_raw(id: u16) -> DeviceId {
        DeviceId(id)
    }

    /// The id as a number.
    pub const fn id(self) -> u16 {
        self.0
    }

    /// The device's name (`"unknown"` for an id never registered).
    pub fn name(self) -> &'static str {
        DEVICES
            .lock()
            .entries
            .get(usize::from(self.0))
            .map_or("unknown", |&(name, _)| name)
    }

    /// The typed device it stands for (`None` for a named one, or an id never registered).
    pub fn device(self) -> Option<Device> {
        DEVICES
            .lock()
            .entries
            .get(usize::from(self.0))
            .and_then(|&(_, device)| device)
    }
}

/// A snapshot shows a device by its name.
impl serde::Serialize for DeviceId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// A thread that recorded events: a small process-wide id, its name kept in a registry
/// (`cpu0-w3`, `intra-2`, `profiler`, ...). Id 0 means "not stamped yet".
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
pub struct ThreadId(u32);

impl ThreadId {
    /// Not a thread (an event not yet stamped by the collector).
    pub(crate) const UNKNOWN: ThreadId = ThreadId(0);

    /// The calling thread's id, registering it (with its `std` name, or `thread-<id>`) on
    /// first use.
    pub fn current() -> ThreadId {
        CURRENT_THREAD.with(|current| {
            let known = current.get();
            if known != 0 {
                return ThreadId(known);
            }
            let id = ThreadId(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
            let name = thread::current()
                .name()
                .map_or_else(|| format!("thread-{}", id.0), str::to_string);
            THREADS.lock().insert(id.0, name);
            current.set(id.0);
            id
        })
    }

    /// The id as a number (the `tid` of Chrome traces).
    pub const fn id(self) -> u32 {
        self.0
    }

    /// A thread id from its number (for tests and replay).
    pub const fn from_raw(id: u32) -> ThreadId {
        ThreadId(id)
    }

    /// The thread's name (`thread-<id>` if it never registered).
    pub fn name(self) -> String {
        THREADS
            .lock()
            .get(&self.0)
            .cloned()
            .unwrap_or_else(|| format!("thread-{}", self.0))
    }
}

/// Renames the calling thread in the profiler's registry (for threads spawned without a
/// `std` name, e.g. `driver`).
///
/// ```
/// use enginetop::profiler::{name_current_thread, ThreadId};
/// std::thread::spawn(|| {
///     name_current_thread("driver");
///     assert_eq!(ThreadId::current().name(), "driver");
/// }).join().unwrap();
/// ```
pub fn name_current_thread(name: &str) {
    let id = ThreadId::current();
    THREADS.lock().insert(id.0, name.to_string());
}

/// The append-only device registry: each id's name and typed device.
struct DeviceTable {
    ids: HashMap<&'static str, u16>,
    entries: Vec<(&'static str, Option<Device>)>,
}

impl DeviceTable {
    /// The id of `name`, registered on first use. A device's name is its display, so a typed
    /// registration and a named one of the same name (a demo's `cpu0`) share one id, which
    /// keeps the typed device whichever came first.
    fn entry(&mut self, name: &str, device: Option<Device>) -> DeviceId {
        if let Some(&id) = self.ids.get(name) {
            let known = &mut self.entries[usize::from(id)].1;
            *known = known.or(device);
            return DeviceId(id);
        }
        let id = u16::try_from(self.entries.len()).expect("fewer than 65,536 devices");
        let name: &'static str = Box::leak(name.into());
        self.entries.push((name, device));
        self.ids.insert(name, id);
        DeviceId(id)
    }
}

static DEVICES: LazyLock<Mutex<DeviceTable>> = LazyLock::new(|| {
    let mut table = DeviceTable {
        ids: HashMap::new(),
        entries: Vec::new(),
    };
    table.entry("host", Some(Device::Host));
    Mutex::new(table)
});
static THREADS: LazyLock<Mutex<HashMap<u32, String>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
static NEXT_THREAD: LazyLock<AtomicU32> = LazyLock::new(|| AtomicU32::new(1));

// Thread-local: a thread's id is a fact about the thread, registered once on first use.
thread_local! {
    /// The calling thread's [`ThreadId`] number, 0 until it registers.
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static CURRENT_THREAD: Cell<u32> = Cell::new(0);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn threads_get_distinct_ids_and_their_std_names() {
        let here = ThreadId::current();
        assert_eq!(ThreadId::current(), here);
        let there = std::thread::Builder::new()
            .name("names-test-worker".into())
            .spawn(ThreadId::current)
            .unwrap()
            .join()
            .unwrap();
        assert_ne!(here, there);
        assert_eq!(there.name(), "names-test-worker");
        assert_eq!(
            ThreadId::from_raw(u32::MAX).name(),
            format!("thread-{}", u32::MAX)
        );
    }

    #[test]
    fn pools_record_on_their_device_or_their_own() {
        let on = |device, role| DeviceId::of_pool(PoolId::new(device, role));
        let gpu = DeviceId::of(Device::Gpu(2));
        assert_eq!(gpu.name(), "gpu2");
        for role in [
            PoolRole::GpuCompute,
            PoolRole::GpuCopy,
            PoolRole::GpuPriority,
        ] {
            assert_eq!(on(Device::Gpu(2), role), gpu, "{role:?}");
        }
        assert_eq!(
            on(Device::Cpu(3), PoolRole::CpuWorker),
            DeviceId::of(Device::Cpu(3))
        );
        let prio = on(Device::Cpu(0), PoolRole::CpuPriority);
        assert_eq!(
            (prio.name(), prio.device()),
            ("cpu-prio", Some(Device::Cpu(0)))
        );
        assert_ne!(prio, DeviceId::of(Device::Cpu(0)));
        let intra = DeviceId::of_pool(PoolId::INTRA_OP);
        assert_eq!(
            (intra.name(), intra.device()),
            ("intra-op", Some(Device::Host))
        );
        assert_eq!(on(Device::Cpu(0), PoolRole::CpuIo).name(), "io");
        let shared = DeviceId::of_pool(PoolId::SHARED_WORKERS);
        assert_eq!(shared, DeviceId::of(Device::Cpu(0)));
    }

    #[test]
    fn a_named_device_of_a_typed_devices_name_gets_its_type() {
        let named = DeviceId::register("gpu61");
        assert_eq!(named.device(), None);
        let typed = DeviceId::of(Device::Gpu(61));
        assert_eq!((typed, typed.device()), (named, Some(Device::Gpu(61))));
        assert_eq!(DeviceId::register("gpu61").device(), Some(Device::Gpu(61)));
    }

    #[test]
    fn devices_register_once() {
        let gpu = DeviceId::register("names-test-gpu");
        assert_eq!(DeviceId::register("names-test-gpu"), gpu);
        assert_ne!(gpu, DeviceId::HOST);
        assert_eq!(gpu.name(), "names-test-gpu");
    }
}
