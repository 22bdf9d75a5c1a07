//! Op names, interned: a push carries a 4-byte [`OpName`], never a `String`, so the hot path
//! does not allocate and the profiler records names by id.
//!
//! The interner is process-wide (ids mean the same in every engine) and append-only: a name
//! is stored once, leaked, and lives for the rest of the process. Interning takes a lock and
//! a hash lookup, so intern a name once and reuse the [`OpName`].
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use crate::sync::Mutex;

/// An interned op name.
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
    pub const UNNAMED: OpName = OpName(0);
    /// The read op `wait_for_var` pushes.
    pub const WAIT_FOR_VAR: OpName = OpName(1);
    /// The write op `delete_variable` pushes.
    pub const DELETE_VARIABLE: OpName = OpName(2);
    /// The op `delete_operator` pushes.
    pub const DELETE_OPERATOR: OpName = OpName(3);
    /// The op a flushed bulk is pushed as.
    pub const IMPERATIVE_BULK: OpName = OpName(4);

    /// Interns `name` (the same text always gets the same id).
    pub fn new(name: &str) -> OpName {
        let mut interner = INTERNER.lock();
        if let Some(&id) = interner.ids.get(name) {
            return OpName(id);
        }
        interner.add(Box::leak(name.into()))
    }

    /// The name's id (stable for the life of the process).
    pub fn id(self) -> u32 {
        self.0
    }

    /// The name with id `id`, if one was interned.
    pub fn from_id(id: u32) -> Option<OpName> {
        let interner = INTERNER.lock();
        ((id as usize) < interner.names.len()).then_some(OpName(id))
    }

    /// The name's text.
    pub fn as_str(self) -> &'static str {
        INTERNER.lock().names[self.0 as usize]
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
    }
}
