//! Process-wide registries: interned names ([`NameId`]), devices ([`DeviceId`]) and threads
//! ([`ThreadId`]).
//!
//! Each is append-only and lives for the whole process, so an id recorded in an event always
//! resolves, in every profiler. Interning takes a lock and a hash lookup and allocates only the
//! first time a name is seen: intern once, keep the id, and record the id on the hot path.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use crate::sync::{thread, thread_local, AtomicU32, Mutex, Ordering};

/// An interned name (op, span, queue label, pool): 4 bytes in an event, its text in a
/// process-wide table.
///
/// ```
/// use enginetop::profiler::NameId;
/// let gemm = NameId::intern("gemm");
/// assert_eq!(gemm, NameId::intern("gemm"));
/// assert_eq!(gemm.as_str(), "gemm");
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NameId(u32);

impl NameId {
    /// The empty name, `"unnamed"` (id 0).
    pub const UNNAMED: NameId = NameId(0);

    /// Interns `name`: the same text always gets the same id.
    ///
    /// Each thread keeps its last few names in a small cache in front of the process-wide
    /// table, so a recording site that interns per event (a probe naming the op it sees)
    /// compares a few bytes instead of taking the table's lock, which every recording thread
    /// would otherwise contend for.
    pub fn intern(name: &str) -> NameId {
        let slot = recent_slot(name);
        let cached = RECENT.try_with(|recent| recent[slot].get()).ok().flatten();
        if let Some((text, id)) = cached {
            if text == name {
                return id;
            }
        }
        let (text, id) = {
            let mut table = NAMES.lock();
            let id = match table.ids.get(name) {
                Some(&id) => id,
                None => table.add(name),
            };
            (table.names[id as usize], NameId(id))
        };
        let _ = RECENT.try_with(|recent| recent[slot].set(Some((text, id))));
        id
    }

    /// The id as a number (stable for the life of the process).
    pub const fn id(self) -> u32 {
        self.0
    }

    /// A name id from its number, unchecked (for ids known to be interned, e.g. an engine
    /// `OpName` that interns through [`NameId::intern`]).
    pub const fn from_raw(id: u32) -> NameId {
        NameId(id)
    }

    /// The name with id `id`, if one was interned.
    pub fn from_id(id: u32) -> Option<NameId> {
        ((id as usize) < NAMES.lock().names.len()).then_some(NameId(id))
    }

    /// The name's text (`"unknown"` for an id never interned).
    pub fn as_str(self) -> &'static str {
        NAMES
            .lock()
            .names
            .get(self.0 as usize)
            .copied()
            .unwrap_or("unknown")
    }
}

impl fmt::Debug for NameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NameId({}: {:?})", self.0, self.as_str())
    }
}

impl fmt::Display for NameId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A device: a pool, a CPU device of the engine, a GPU. Each gets its own process (`pid`) in
/// a Chrome trace. Id 0 is the host (threads that belong to no device).
///
/// ```
/// use enginetop::profiler::DeviceId;
/// let cpu0 = DeviceId::register("cpu0");
/// assert_eq!(DeviceId::register("cpu0"), cpu0);
/// assert_eq!(cpu0.name(), "cpu0");
/// assert_eq!(DeviceId::HOST.name(), "host");
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId(u16);

impl DeviceId {
    /// The host: events that belong to no device.
    pub const HOST: DeviceId = DeviceId(0);

    /// The device named `name`, registered on first use.
    pub fn register(name: &str) -> DeviceId {
        let mut table = DEVICES.lock();
        if let Some(&id) = table.ids.get(name) {
            return DeviceId(id as u16);
        }
        let id = table.add(name);
        DeviceId(u16::try_from(id).expect("fewer than 65,536 devices"))
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
            .names
            .get(usize::from(self.0))
            .copied()
            .unwrap_or("unknown")
    }
}

/// A thread that recorded events: a small process-wide id, its name kept in a registry
/// (`cpu0-w3`, `intra-2`, `profiler`, ...). Id 0 means "not stamped yet".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadId(u32);

impl ThreadId {
    /// Not a thread (an event not yet stamped by the collector).
    pub const UNKNOWN: ThreadId = ThreadId(0);

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

/// An append-only string table.
struct Table {
    ids: HashMap<&'static str, u32>,
    names: Vec<&'static str>,
}

impl Table {
    fn with(first: &'static str) -> Self {
        let mut table = Table {
            ids: HashMap::new(),
            names: Vec::new(),
        };
        table.add(first);
        table
    }

    fn add(&mut self, name: &str) -> u32 {
        let id = u32::try_from(self.names.len()).expect("fewer than 2^32 names");
        let name: &'static str = Box::leak(name.into());
        self.names.push(name);
        self.ids.insert(name, id);
        id
    }
}

/// Names interned before any other, with fixed ids 0 to 4: the engine's built-in op names,
/// in the engine's order, so that its `OpName` ids and these ids can be the same.
pub const BUILT_IN_NAMES: [&str; 5] = [
    "unnamed",
    "WaitForVar",
    "DeleteVariable",
    "DeleteOperator",
    "ImperativeBulk",
];

static NAMES: LazyLock<Mutex<Table>> = LazyLock::new(|| {
    let mut table = Table::with(BUILT_IN_NAMES[0]);
    for name in &BUILT_IN_NAMES[1..] {
        table.add(name);
    }
    Mutex::new(table)
});
static DEVICES: LazyLock<Mutex<Table>> = LazyLock::new(|| Mutex::new(Table::with("host")));
static THREADS: LazyLock<Mutex<HashMap<u32, String>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
static NEXT_THREAD: LazyLock<AtomicU32> = LazyLock::new(|| AtomicU32::new(1));

/// Slots of each thread's cache of recently interned names.
const RECENT_SLOTS: usize = 8;

/// The cache slot of `name`: its length and last byte, mixed (cheap, and op names that
/// differ usually differ in one of them).
fn recent_slot(name: &str) -> usize {
    let last = name.as_bytes().last().map_or(0, |&byte| usize::from(byte));
    (name.len().wrapping_mul(31) ^ last) % RECENT_SLOTS
}

// Thread-local: each thread's last few interned names, so interning a name it just used
// takes no lock on the process-wide table.
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static RECENT: [Cell<Option<(&'static str, NameId)>>; RECENT_SLOTS] = Default::default();
}

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
    fn names_intern_once_and_resolve() {
        let a = NameId::intern("names-test-a");
        let b = NameId::intern("names-test-b");
        assert_ne!(a, b);
        assert_eq!(NameId::intern("names-test-a"), a);
        assert_eq!(a.to_string(), "names-test-a");
        assert_eq!(NameId::from_id(a.id()), Some(a));
        assert_eq!(NameId::from_id(u32::MAX), None);
        assert_eq!(NameId::UNNAMED.as_str(), "unnamed");
    }

    #[test]
    fn names_sharing_a_cache_slot_keep_their_own_ids() {
        // Same length, same last byte: the same slot of the per-thread cache.
        let (first, second) = ("names-slot-ab", "names-slot-cb");
        assert_eq!(recent_slot(first), recent_slot(second));
        let a = NameId::intern(first);
        let b = NameId::intern(second);
        assert_ne!(a, b);
        assert_eq!((NameId::intern(first), NameId::intern(second)), (a, b));
        assert_eq!((a.as_str(), b.as_str()), (first, second));
        // Another thread (empty cache) resolves the same ids from the table.
        let other = std::thread::spawn(move || (NameId::intern(first), NameId::intern(second)));
        assert_eq!(other.join().unwrap(), (a, b));
    }

    #[test]
    fn the_engines_built_in_names_have_fixed_ids() {
        for (id, name) in BUILT_IN_NAMES.iter().enumerate() {
            assert_eq!(NameId::intern(name), NameId::from_raw(id as u32));
        }
    }

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
    fn devices_register_once() {
        let gpu = DeviceId::register("names-test-gpu");
        assert_eq!(DeviceId::register("names-test-gpu"), gpu);
        assert_ne!(gpu, DeviceId::HOST);
        assert_eq!(gpu.name(), "names-test-gpu");
    }
}
