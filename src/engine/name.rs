//! Interned names: a push carries a 4-byte [`OpName`], never a `String`, so the hot path
//! does not allocate; the profiler records the same ids (op names, span names, queue labels)
//! and resolves them to text when it reports.
//!
//! The table is process-wide (ids mean the same in every engine and profiler) and
//! append-only: a name is stored once, leaked, and lives for the rest of the process. The
//! engine's own op names are added first, so their ids are the constants below. Interning
//! takes a lock and a hash lookup; each thread keeps its last few names in a small cache in
//! front of the table, so a site that interns per event (a probe naming the span it sees)
//! compares a few bytes instead of taking the lock every recording thread would contend for.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use crate::sync::{thread_local, Mutex};

/// An interned name: an op's, a profiler span's or a queue label.
///
/// ```
/// use enginetop::engine::OpName;
/// let add = OpName::new("add");
/// assert_eq!(add, OpName::new("add"));
/// assert_eq!(add.as_str(), "add");
/// assert_eq!(OpName::from_id(add.id()), Some(add));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpName(u32);

/// Names the engine itself uses, interned first so their ids are fixed.
const BUILT_IN: [&str; 5] = [
    "unnamed",
    "WaitForVar",
    "DeleteVariable",
    "DeleteOperator",
    "ImperativeBulk",
];

impl OpName {
    /// The name of an op pushed without one.
    pub(crate) const UNNAMED: OpName = OpName(0);
    /// The read op `wait_for_var` pushes.
    pub(crate) const WAIT_FOR_VAR: OpName = OpName(1);
    /// The write op `delete_variable` pushes.
    pub const DELETE_VARIABLE: OpName = OpName(2);
    /// The op `delete_operator` pushes.
    pub(crate) const DELETE_OPERATOR: OpName = OpName(3);
    /// The op a flushed bulk is pushed as.
    pub(crate) const IMPERATIVE_BULK: OpName = OpName(4);

    /// Interns `name` (the same text always gets the same id).
    pub fn new(name: &str) -> OpName {
        let slot = recent_slot(name);
        let cached = RECENT.try_with(|recent| recent[slot].get()).ok().flatten();
        if let Some((text, id)) = cached {
            if text == name {
                return id;
            }
        }
        let (text, id) = {
            let mut interner = INTERNER.lock();
            let id = match interner.ids.get(name) {
                Some(&id) => OpName(id),
                None => interner.add(Box::leak(name.into())),
            };
            (interner.names[id.0 as usize], id)
        };
        let _ = RECENT.try_with(|recent| recent[slot].set(Some((text, id))));
        id
    }

    /// The name's id (stable for the life of the process).
    pub const fn id(self) -> u32 {
        self.0
    }

    /// A name from its id, unchecked: a test's arbitrary bit pattern, or a recording's id
    /// before it is mapped to this process's (`Stats::remap`).
    pub(crate) const fn from_raw(id: u32) -> OpName {
        OpName(id)
    }

    /// The name with id `id`, if one was interned.
    pub fn from_id(id: u32) -> Option<OpName> {
        let interner = INTERNER.lock();
        ((id as usize) < interner.names.len()).then_some(OpName(id))
    }

    /// The name's text (`"unknown"` for an id never interned).
    pub fn as_str(self) -> &'static str {
        INTERNER
            .lock()
            .names
            .get(self.0 as usize)
            .copied()
            .unwrap_or("unknown")
    }
}

impl Default for OpName {
    fn default() -> Self {
        OpName::UNNAMED
    }
}

impl From<&str> for OpName {
    fn from(name: &str) -> Self {
        OpName::new(name)
    }
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpName({}: {:?})", self.0, self.as_str())
    }
}

struct Interner {
    ids: HashMap<&'static str, u32>,
    names: Vec<&'static str>,
}

impl Interner {
    fn add(&mut self, name: &'static str) -> OpName {
        let id = u32::try_from(self.names.len()).expect("fewer than 2^32 distinct op names");
        self.names.push(name);
        self.ids.insert(name, id);
        OpName(id)
    }
}

static INTERNER: LazyLock<Mutex<Interner>> = LazyLock::new(|| {
    let mut interner = Interner {
        ids: HashMap::new(),
        names: Vec::new(),
    };
    for name in BUILT_IN {
        interner.add(name);
    }
    Mutex::new(interner)
});

/// Slots of each thread's cache of recently interned names.
const RECENT_SLOTS: usize = 8;

/// The cache slot of `name`: its length and last byte, mixed (cheap, and names that differ
/// usually differ in one of them).
fn recent_slot(name: &str) -> usize {
    let last = name.as_bytes().last().map_or(0, |&byte| usize::from(byte));
    (name.len().wrapping_mul(31) ^ last) % RECENT_SLOTS
}

// Thread-local: each thread's last few interned names, so interning a name it just used
// takes no lock on the process-wide table.
thread_local! {
    #[allow(clippy::missing_const_for_thread_local)] // loom's thread_local! has no const form
    static RECENT: [Cell<Option<(&'static str, OpName)>>; RECENT_SLOTS] = Default::default();
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn built_in_names_have_fixed_ids() {
        assert_eq!(OpName::UNNAMED.as_str(), "unnamed");
        assert_eq!(OpName::new("WaitForVar"), OpName::WAIT_FOR_VAR);
        assert_eq!(OpName::IMPERATIVE_BULK.as_str(), "ImperativeBulk");
    }

    #[test]
    fn distinct_names_get_distinct_ids() {
        let a = OpName::new("name-test-a");
        let b = OpName::new("name-test-b");
        assert_ne!(a, b);
        assert_eq!(a.to_string(), "name-test-a");
        assert!(OpName::from_id(u32::MAX).is_none());
        assert_eq!(OpName(u32::MAX).as_str(), "unknown");
    }

    #[test]
    fn names_sharing_a_cache_slot_keep_their_own_ids() {
        // Same length, same last byte: the same slot of the per-thread cache.
        let (first, second) = ("names-slot-ab", "names-slot-cb");
        assert_eq!(recent_slot(first), recent_slot(second));
        let a = OpName::new(first);
        let b = OpName::new(second);
        assert_ne!(a, b);
        assert_eq!((OpName::new(first), OpName::new(second)), (a, b));
        assert_eq!((a.as_str(), b.as_str()), (first, second));
        // Another thread (empty cache) resolves the same ids from the table.
        let other = std::thread::spawn(move || (OpName::new(first), OpName::new(second)));
        assert_eq!(other.join().unwrap(), (a, b));
    }
}
