//! TensorFlow's session pools: which pool a session's ops run on, and which pool their inner
//! loops run on.
//!
//! # TensorFlow's model
//! A TensorFlow session runs the ops of a step on an *inter-op* pool and the loops inside one
//! op on an *intra-op* pool. `DirectSession` picks its inter-op pools in this order, the first
//! that applies winning:
//! 1. `session_inter_op_thread_pool` has entries: one pool per entry. An entry with a
//!    `global_name` is a process-wide named pool, created by the first session that names it
//!    and shared by every later one; naming it again with another `num_threads` is an
//!    `InvalidArgument` error. An entry without a name is a pool the session owns.
//! 2. `use_per_session_threads`: one pool the session owns.
//! 3. Otherwise the global inter-op pool, created by the first session that needs it with that
//!    session's size; later sessions get the same pool whatever size they ask for.
//!
//! The intra-op pool is always the process-wide one (TensorFlow's CPU device pool), created by
//! the first session, whatever later sessions ask for. A `0` thread count means "pick": the
//! session's `inter_op_threads` for a pool entry, and the schedulable CPUs for those
//! (`NumInterOpThreadsFromSessionOptions`). A run picks its inter-op pool by index
//! (`RunOptions.inter_op_thread_pool`); an index with no pool is an error.
//!
//! # Here
//! What TensorFlow keeps in statics lives in a [`PoolRegistry`]: [`PoolRegistry::global`] for
//! the process, [`PoolRegistry::new`] for tests and anything that wants isolation.
//! [`PoolRegistry::open_session`] turns [`SessionOptions`] into [`SessionPools`]: `Arc<Pool>`
//! handles to the session's inter-op pools (one per run index) and its intra-op pool.
//! Pools are named so threads read well: the global pools are `inter` and `intra` (threads
//! `inter-w0`...), a per-session pool is `session3-inter`, an unnamed entry `session3-inter1`,
//! a named pool its `global_name`.
//!
//! Differences from TensorFlow, all on the side of saying more: a session whose size for a
//! global pool is ignored gets a [`SessionWarning`] (TensorFlow is silent), and a session's
//! pool entries are all checked before any pool is created, so a failed open leaves no new
//! named pool behind. The run index `-1` ("run in the caller's thread") is not offered.
//!
//! # Lifetimes
//! Global and named pools live as long as their registry: for [`PoolRegistry::global`] that is
//! the process, as in TensorFlow. A named pool is *not* dropped when its last session goes, so
//! its threads stay ready and a later session asking for it with another size still gets the
//! error. Session-owned pools stop when the last handle to them drops (normally with the
//! [`SessionPools`]); like any [`Pool`], dropping one first runs what is queued.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use crate::sync::Arc;

use super::{Pool, PoolError, PoolKind, PoolOptions, DEFAULT_MAX_THREADS};
use crate::config::{schedulable_cpus, RuntimeConfig, HARD_MAX_THREADS};
use crate::sync::Mutex;

/// One `session_inter_op_thread_pool` entry: `{num_threads, global_name}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedPoolSpec {
    /// Workers; 0 = the session's `inter_op_threads` (itself 0 = one per CPU).
    pub num_threads: usize,
    /// `Some(name)`: a process-wide pool shared by every session naming it. `None` (or an
    /// empty name, as in TensorFlow): a pool this session owns.
    pub global_name: Option<String>,
}

impl NamedPoolSpec {
    /// A process-wide pool called `name`.
    pub fn global(name: impl Into<String>, num_threads: usize) -> Self {
        Self {
            num_threads,
            global_name: Some(name.into()),
        }
    }

    /// A pool the session owns.
    pub fn owned(num_threads: usize) -> Self {
        Self {
            num_threads,
            global_name: None,
        }
    }

    /// The global name, if this entry has a non-empty one.
    fn shared_name(&self) -> Option<&str> {
        self.global_name.as_deref().filter(|name| !name.is_empty())
    }
}

/// How a session wants its pools, in TensorFlow's `ConfigProto` terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionOptions {
    /// `inter_op_parallelism_threads`; 0 = one per schedulable CPU.
    pub inter_op_threads: usize,
    /// `intra_op_parallelism_threads`; 0 = one per schedulable CPU.
    pub intra_op_threads: usize,
    /// Give this session its own inter-op pool instead of the global one.
    pub use_per_session_threads: bool,
    /// `session_inter_op_thread_pool`: when not empty, the session's inter-op pools, one per
    /// run index; beats `use_per_session_threads`.
    pub session_inter_op_thread_pools: Vec<NamedPoolSpec>,
    /// Implementation of the pools this session creates.
    pub pool_kind: PoolKind,
    /// Whether idle workers of the pools this session creates may spin.
    pub allow_spinning: bool,
    /// Resize ceiling of the pools this session creates, and the cap on a `0` count.
    pub max_threads: usize,
}

impl Default for SessionOptions {
    /// TensorFlow's defaults: both counts 0 (pick), the global pools, no pool entries.
    fn default() -> Self {
        Self {
            inter_op_threads: 0,
            intra_op_threads: 0,
            use_per_session_threads: false,
            session_inter_op_thread_pools: Vec::new(),
            pool_kind: PoolKind::Eigen,
            allow_spinning: true,
            max_threads: DEFAULT_MAX_THREADS,
        }
    }
}

impl SessionOptions {
    /// The runtime's settings, with its resolved thread counts, for the global pools.
    ///
    /// ```
    /// use enginetop::config::RuntimeConfig;
    /// use enginetop::pool::session::SessionOptions;
    ///
    /// let config = RuntimeConfig { inter_op_threads: 1, intra_op_threads: 2, ..Default::default() };
    /// let options = SessionOptions::from_config(&config);
    /// assert_eq!((options.inter_op_threads, options.intra_op_threads), (1, 2));
    /// ```
    pub fn from_config(config: &RuntimeConfig) -> Self {
        let threads = config.resolved();
        Self {
            inter_op_threads: threads.inter_op,
            intra_op_threads: threads.intra_op,
            pool_kind: config.pool_kind,
            allow_spinning: config.allow_spinning,
            max_threads: config.max_threads,
            ..Self::default()
        }
    }

    /// The inter-op size, `0` resolved to the schedulable CPUs (at most `max_threads`).
    pub fn effective_inter_op_threads(&self) -> usize {
        self.resolve(self.inter_op_threads)
    }

    /// The intra-op size, `0` resolved to the schedulable CPUs (at most `max_threads`).
    pub(crate) fn effective_intra_op_threads(&self) -> usize {
        self.resolve(self.intra_op_threads)
    }

    /// A pool entry's size: `0` means the session's inter-op size.
    fn entry_threads(&self, spec: &NamedPoolSpec) -> usize {
        match spec.num_threads {
            0 => self.effective_inter_op_threads(),
            n => n,
        }
    }

    fn resolve(&self, count: usize) -> usize {
        match count {
            0 => schedulable_cpus().min(self.max_threads).max(1),
            n => n,
        }
    }

    fn pool_options(&self, name: String, threads: usize) -> PoolOptions {
        PoolOptions::new(self.pool_kind, threads, name)
            .allow_spinning(self.allow_spinning)
            .max_threads(self.max_threads)
    }

    fn start_pool(&self, name: String, threads: usize) -> Result<Arc<Pool>, PoolError> {
        Pool::new(self.pool_options(name, threads)).map(Arc::new)
    }
}

/// Who a session's inter-op pool belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolScope {
    /// The registry's global inter-op pool.
    Global,
    /// This session's own pool.
    Session,
    /// A process-wide pool with this `global_name`.
    Named(String),
}

/// One of a session's inter-op pools.
#[derive(Clone, Debug)]
pub struct SessionPool {
    /// The pool.
    pub pool: Arc<Pool>,
    /// Whether it is shared, and how.
    pub scope: PoolScope,
}

/// The pools one session runs on. Dropping it drops the session's own pools (once no other
/// handle holds them); shared pools stay with the registry.
///
/// ```
/// use enginetop::pool::session::{PoolRegistry, SessionOptions};
///
/// let registry = PoolRegistry::new();
/// let options = SessionOptions { inter_op_threads: 1, intra_op_threads: 1, ..Default::default() };
/// let session = registry.open_session(&options).unwrap();
/// session.inter_op_pool(0).unwrap().spawn(|| println!("an op"));
/// assert_eq!(session.intra_op_pool().name(), "intra");
/// assert!(session.inter_op_pool(1).is_err());
/// ```
#[derive(Debug)]
pub struct SessionPools {
    id: usize,
    inter_op: Vec<SessionPool>,
    intra_op: Arc<Pool>,
    warnings: Vec<SessionWarning>,
}

impl SessionPools {
    /// This session's number in its registry (1 for the first); per-session pools carry it.
    pub fn id(&self) -> usize {
        self.id
    }

    /// The inter-op pool run `run_index` uses (TensorFlow's `RunOptions.inter_op_thread_pool`).
    pub fn inter_op_pool(&self, run_index: usize) -> Result<&Arc<Pool>, SessionError> {
        self.inter_op.get(run_index).map(|entry| &entry.pool).ok_or(
            SessionError::RunPoolOutOfRange {
                index: run_index,
                count: self.inter_op.len(),
            },
        )
    }

    /// Every inter-op pool, in run-index order, with who owns it.
    pub fn inter_op_pools(&self) -> &[SessionPool] {
        &self.inter_op
    }

    /// The intra-op pool (always the registry's global one).
    pub fn intra_op_pool(&self) -> &Arc<Pool> {
        &self.intra_op
    }

    /// Sizes this session asked for that a shared pool ignored.
    pub fn warnings(&self) -> &[SessionWarning] {
        &self.warnings
    }
}

/// Holds the shared pools: TensorFlow's process statics, as a value.
///
/// ```
/// use enginetop::pool::session::{NamedPoolSpec, PoolRegistry, SessionOptions};
/// use std::sync::Arc;
///
/// let registry = PoolRegistry::new();
/// let options = SessionOptions {
///     intra_op_threads: 1,
///     session_inter_op_thread_pools: vec![NamedPoolSpec::global("io", 1)],
///     ..Default::default()
/// };
/// let first = registry.open_session(&options).unwrap();
/// let second = registry.open_session(&options).unwrap();
/// assert!(Arc::ptr_eq(first.inter_op_pool(0).unwrap(), second.inter_op_pool(0).unwrap()));
/// ```
pub struct PoolRegistry {
    state: Mutex<RegistryState>,
}

/// Everything under the registry's lock.
#[derive(Default)]
struct RegistryState {
    sessions_opened: usize,
    global_inter: Option<SharedPool>,
    global_intra: Option<SharedPool>,
    named: BTreeMap<String, SharedPool>,
}

/// A shared pool and the size it was first configured with (what later sessions must match).
struct SharedPool {
    pool: Arc<Pool>,
    configured_threads: usize,
}

impl PoolRegistry {
    /// An empty registry: no pools until a session asks.
    pub fn new() -> Self {
        Self {
            state: Mutex::new(RegistryState::default()),
        }
    }

    /// The process-wide registry (TensorFlow's statics); its pools live until the process
    /// exits.
    pub fn global() -> &'static PoolRegistry {
        static GLOBAL: OnceLock<PoolRegistry> = OnceLock::new();
        GLOBAL.get_or_init(PoolRegistry::new)
    }

    /// Gets (creating what is missing) the pools a session with `options` runs on.
    pub fn open_session(&self, options: &SessionOptions) -> Result<SessionPools, SessionError> {
        check_max_threads(options.max_threads)?;
        let mut state = self.state.lock();
        state.check_pool_entries(options)?;
        state.sessions_opened += 1;
        let id = state.sessions_opened;
        let mut warnings = Vec::new();
        let inter_op = state.inter_op_pools(id, options, &mut warnings)?;
        let intra_op = state.global_intra(options, &mut warnings)?;
        Ok(SessionPools {
            id,
            inter_op,
            intra_op,
            warnings,
        })
    }

    /// The process-wide pool called `name`, if some session created it.
    pub fn named_pool(&self, name: &str) -> Option<Arc<Pool>> {
        let state = self.state.lock();
        state.named.get(name).map(|shared| shared.pool.clone())
    }

    /// Every shared pool (global inter-op, global intra-op, then named ones by name), for
    /// dashboards and tests.
    pub(crate) fn shared_pools(&self) -> Vec<Arc<Pool>> {
        let state = self.state.lock();
        let globals = [&state.global_inter, &state.global_intra];
        globals
            .into_iter()
            .flatten()
            .chain(state.named.values())
            .map(|shared| shared.pool.clone())
            .collect()
    }
}

impl Default for PoolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for PoolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .shared_pools()
            .iter()
            .map(|pool| pool.name().to_string())
            .collect();
        f.debug_struct("PoolRegistry")
            .field("shared_pools", &names)
            .finish()
    }
}

impl RegistryState {
    /// Rejects bad names and size conflicts (with existing pools or within `options`) before
    /// anything is created.
    fn check_pool_entries(&self, options: &SessionOptions) -> Result<(), SessionError> {
        let mut asked: BTreeMap<&str, usize> = BTreeMap::new();
        for (index, spec) in options.session_inter_op_thread_pools.iter().enumerate() {
            let Some(name) = spec.shared_name() else {
                continue;
            };
            check_pool_name(index, name)?;
            let existing = self
                .named
                .get(name)
                .map(|shared| shared.configured_threads)
                .or_else(|| asked.get(name).copied());
            match existing {
                Some(existing) if existing != spec.num_threads => {
                    return Err(SessionError::NamedPoolSizeMismatch {
                        name: name.to_string(),
                        existing,
                        requested: spec.num_threads,
                    })
                }
                _ => asked.insert(name, spec.num_threads),
            };
        }
        Ok(())
    }

    /// The session's inter-op pools, in TensorFlow's order of precedence.
    fn inter_op_pools(
        &mut self,
        session: usize,
        options: &SessionOptions,
        warnings: &mut Vec<SessionWarning>,
    ) -> Result<Vec<SessionPool>, SessionError> {
        let specs = &options.session_inter_op_thread_pools;
        if !specs.is_empty() {
            let pools = specs.iter().enumerate();
            return pools
                .map(|(index, spec)| self.entry_pool(session, index, spec, options))
                .collect();
        }
        if options.use_per_session_threads {
            let name = format!("session{session}-inter");
            let pool = options.start_pool(name, options.effective_inter_op_threads())?;
            return Ok(vec![SessionPool {
                pool,
                scope: PoolScope::Session,
            }]);
        }
        let pool = self.global_inter(options, warnings)?;
        Ok(vec![SessionPool {
            pool,
            scope: PoolScope::Global,
        }])
    }

    /// The pool for one `session_inter_op_thread_pool` entry (sizes already checked).
    fn entry_pool(
        &mut self,
        session: usize,
        index: usize,
        spec: &NamedPoolSpec,
        options: &SessionOptions,
    ) -> Result<SessionPool, SessionError> {
        let threads = options.entry_threads(spec);
        let Some(name) = spec.shared_name() else {
            let pool = options.start_pool(format!("session{session}-inter{index}"), threads)?;
            return Ok(SessionPool {
                pool,
                scope: PoolScope::Session,
            });
        };
        let pool = match self.named.get(name) {
            Some(shared) => shared.pool.clone(),
            None => {
                let pool = options.start_pool(name.to_string(), threads)?;
                let shared = SharedPool {
                    pool: pool.clone(),
                    configured_threads: spec.num_threads,
                };
                self.named.insert(name.to_string(), shared);
                pool
            }
        };
        Ok(SessionPool {
            pool,
            scope: PoolScope::Named(name.to_string()),
        })
    }

    fn global_inter(
        &mut self,
        options: &SessionOptions,
        warnings: &mut Vec<SessionWarning>,
    ) -> Result<Arc<Pool>, SessionError> {
        let threads = options.effective_inter_op_threads();
        shared_or_start(
            &mut self.global_inter,
            GlobalPool::InterOp,
            threads,
            options,
            warnings,
        )
    }

    fn global_intra(
        &mut self,
        options: &SessionOptions,
        warnings: &mut Vec<SessionWarning>,
    ) -> Result<Arc<Pool>, SessionError> {
        let threads = options.effective_intra_op_threads();
        shared_or_start(
            &mut self.global_intra,
            GlobalPool::IntraOp,
            threads,
            options,
            warnings,
        )
    }
}

/// The global pool in `slot`, started with `threads` if this is the first session to ask;
/// a later session asking for another size gets the pool and a warning.
fn shared_or_start(
    slot: &mut Option<SharedPool>,
    role: GlobalPool,
    threads: usize,
    options: &SessionOptions,
    warnings: &mut Vec<SessionWarning>,
) -> Result<Arc<Pool>, SessionError> {
    if let Some(shared) = slot {
        if shared.configured_threads != threads {
            warnings.push(SessionWarning::GlobalPoolSizeIgnored {
                role,
                existing: shared.configured_threads,
                requested: threads,
            });
        }
        return Ok(shared.pool.clone());
    }
    let pool = options.start_pool(role.global_pool_name().to_string(), threads)?;
    *slot = Some(SharedPool {
        pool: pool.clone(),
        configured_threads: threads,
    });
    Ok(pool)
}

/// A global name becomes thread names (`<name>-w0`): no control characters (a NUL would make
/// the thread spawn panic).
fn check_pool_name(index: usize, name: &str) -> Result<(), SessionError> {
    if name.chars().any(char::is_control) {
        return Err(SessionError::BadPoolName {
            index,
            name: name.to_string(),
        });
    }
    Ok(())
}

fn check_max_threads(max_threads: usize) -> Result<(), SessionError> {
    if (1..=HARD_MAX_THREADS).contains(&max_threads) {
        Ok(())
    } else {
        Err(SessionError::BadMaxThreads { max_threads })
    }
}

/// Which of the two global pools (TensorFlow's inter-op and intra-op pools).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GlobalPool {
    /// Runs ops side by side.
    InterOp,
    /// Runs the loops inside one op.
    IntraOp,
}

impl GlobalPool {
    /// The name of the registry's global pool for this role (and its threads' prefix).
    pub(crate) fn global_pool_name(self) -> &'static str {
        match self {
            GlobalPool::InterOp => "inter",
            GlobalPool::IntraOp => "intra",
        }
    }
}

/// Something a session asked for that it did not get; the session still opened.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionWarning {
    /// A global pool already existed with another size; the first session's size wins.
    GlobalPoolSizeIgnored {
        /// Which global pool.
        role: GlobalPool,
        /// The size it was created with.
        existing: usize,
        /// The size this session asked for.
        requested: usize,
    },
}

impl fmt::Display for SessionWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionWarning::GlobalPoolSizeIgnored {
                role,
                existing,
                requested,
            } => {
                let kind = match role {
                    GlobalPool::InterOp => "inter-op",
                    GlobalPool::IntraOp => "intra-op",
                };
                write!(
                    f,
                    "this session asked for {requested} {kind} threads, but the shared `{}` \
                     pool was created with {existing} by an earlier session, and the first \
                     session's size wins; ",
                    role.global_pool_name()
                )?;
                match role {
                    GlobalPool::InterOp => f.write_str(
                        "set use_per_session_threads to give this session its own inter-op pool",
                    ),
                    GlobalPool::IntraOp => f.write_str(
                        "the intra-op pool is always shared, so open the first session with \
                         this size or use a separate PoolRegistry",
                    ),
                }
            }
        }
    }
}

/// Why a session could not get its pools, or a run its pool.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A named pool asked for with a size other than the one it was created with
    /// (TensorFlow's `InvalidArgument`).
    #[error(
        "pool `{name}` was configured previously with num_threads = {existing}; cannot \
         re-configure it with num_threads = {requested}: ask for num_threads = {existing} \
         or use another global_name"
    )]
    NamedPoolSizeMismatch {
        /// The pool's `global_name`.
        name: String,
        /// The size it was configured with.
        existing: usize,
        /// The size asked for now.
        requested: usize,
    },
    /// A run index with no inter-op pool.
    #[error(
        "inter_op_thread_pool {index} does not exist: this session has {count} inter-op \
         pool(s), so valid indexes are 0 to {}; pick one of those, or add entries to \
         session_inter_op_thread_pools",
        .count.saturating_sub(1)
    )]
    RunPoolOutOfRange {
        /// The index asked for.
        index: usize,
        /// How many inter-op pools the session has.
        count: usize,
    },
    /// A `global_name` that cannot name threads.
    #[error(
        "session_inter_op_thread_pools[{index}] has global_name {name:?}, which cannot name \
         threads: use a name without control characters, or None for a session-owned pool"
    )]
    BadPoolName {
        /// The entry's index.
        index: usize,
        /// The name.
        name: String,
    },
    /// `max_threads` outside `1..=HARD_MAX_THREADS`.
    #[error(
        "SessionOptions.max_threads = {max_threads} is not a usable thread limit: expected 1 \
         to {limit}; set e.g. max_threads = 128",
        limit = HARD_MAX_THREADS
    )]
    BadMaxThreads {
        /// The value given.
        max_threads: usize,
    },
    /// A pool could not be started (too many threads for `max_threads`, or the OS refused).
    #[error(transparent)]
    Pool(#[from] PoolError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// One inter-op and one intra-op thread, global pools.
    fn small() -> SessionOptions {
        SessionOptions {
            inter_op_threads: 1,
            intra_op_threads: 1,
            max_threads: 4,
            ..SessionOptions::default()
        }
    }

    fn with_entries(entries: Vec<NamedPoolSpec>) -> SessionOptions {
        SessionOptions {
            session_inter_op_thread_pools: entries,
            ..small()
        }
    }

    fn per_session() -> SessionOptions {
        SessionOptions {
            use_per_session_threads: true,
            ..small()
        }
    }

    fn same(a: &Arc<Pool>, b: &Arc<Pool>) -> bool {
        Arc::ptr_eq(a, b)
    }

    /// The name of the thread that runs a task on `pool`.
    fn worker_thread_name(pool: &Pool) -> String {
        let (tx, rx) = mpsc::channel();
        pool.spawn(move || {
            let name = std::thread::current().name().map(str::to_string);
            tx.send(name).unwrap();
        });
        rx.recv().unwrap().unwrap_or_default()
    }

    #[test]
    fn global_pools_are_shared_by_two_sessions_and_the_first_size_wins() {
        let registry = PoolRegistry::new();
        let first = registry.open_session(&small()).unwrap();
        let bigger = SessionOptions {
            inter_op_threads: 2,
            intra_op_threads: 2,
            ..small()
        };
        let second = registry.open_session(&bigger).unwrap();

        let (inter1, inter2) = (
            first.inter_op_pool(0).unwrap(),
            second.inter_op_pool(0).unwrap(),
        );
        assert!(same(inter1, inter2));
        assert!(same(first.intra_op_pool(), second.intra_op_pool()));
        assert_eq!(inter2.num_threads(), 1, "the first session's size wins");
        assert_eq!(second.intra_op_pool().num_threads(), 1);
        assert_eq!(inter1.name(), "inter");
        assert_eq!(first.intra_op_pool().name(), "intra");
        assert_eq!(first.inter_op_pools()[0].scope, PoolScope::Global);
        assert_eq!(registry.shared_pools().len(), 2);

        assert!(first.warnings().is_empty());
        assert_eq!(
            second.warnings(),
            [
                SessionWarning::GlobalPoolSizeIgnored {
                    role: GlobalPool::InterOp,
                    existing: 1,
                    requested: 2
                },
                SessionWarning::GlobalPoolSizeIgnored {
                    role: GlobalPool::IntraOp,
                    existing: 1,
                    requested: 2
                },
            ]
        );
        let message = second.warnings()[0].to_string();
        assert!(
            message.contains("asked for 2 inter-op threads"),
            "{message}"
        );
        assert!(
            message.contains("`inter` pool was created with 1"),
            "{message}"
        );
    }

    #[test]
    fn per_session_pools_are_distinct_and_named_after_the_session() {
        let registry = PoolRegistry::new();
        let first = registry.open_session(&per_session()).unwrap();
        let second = registry.open_session(&per_session()).unwrap();

        let (inter1, inter2) = (
            first.inter_op_pool(0).unwrap(),
            second.inter_op_pool(0).unwrap(),
        );
        assert!(!same(inter1, inter2));
        assert_eq!(
            (inter1.name(), inter2.name()),
            ("session1-inter", "session2-inter")
        );
        assert_eq!(first.inter_op_pools()[0].scope, PoolScope::Session);
        assert_eq!(worker_thread_name(inter2), "session2-inter-w0");
        assert!(
            same(first.intra_op_pool(), second.intra_op_pool()),
            "intra stays global"
        );
        let shared: Vec<String> = registry
            .shared_pools()
            .iter()
            .map(|pool| pool.name().to_string())
            .collect();
        assert_eq!(shared, ["intra"], "no global inter-op pool was made");
    }

    #[test]
    fn global_pool_threads_read_well() {
        let registry = PoolRegistry::new();
        let session = registry.open_session(&small()).unwrap();
        assert_eq!(
            worker_thread_name(session.inter_op_pool(0).unwrap()),
            "inter-w0"
        );
        assert_eq!(worker_thread_name(session.intra_op_pool()), "intra-w0");
    }

    #[test]
    fn a_named_pool_is_shared_by_every_session_naming_it() {
        let registry = PoolRegistry::new();
        let options = with_entries(vec![NamedPoolSpec::global("shared", 1)]);
        let first = registry.open_session(&options).unwrap();
        let second = registry.open_session(&options).unwrap();

        let pool = first.inter_op_pool(0).unwrap();
        assert!(same(pool, second.inter_op_pool(0).unwrap()));
        assert!(same(pool, &registry.named_pool("shared").unwrap()));
        assert_eq!(pool.name(), "shared");
        let scope = &second.inter_op_pools()[0].scope;
        assert_eq!(scope, &PoolScope::Named("shared".to_string()));
        assert_eq!(worker_thread_name(pool), "shared-w0");
    }

    #[test]
    fn re_asking_for_a_named_pool_with_another_size_names_both_sizes() {
        let registry = PoolRegistry::new();
        let _first = registry
            .open_session(&with_entries(vec![NamedPoolSpec::global("shared", 1)]))
            .unwrap();
        let err = registry
            .open_session(&with_entries(vec![NamedPoolSpec::global("shared", 2)]))
            .unwrap_err();
        let expected = SessionError::NamedPoolSizeMismatch {
            name: "shared".to_string(),
            existing: 1,
            requested: 2,
        };
        assert_eq!(err, expected);
        assert_eq!(
            err.to_string(),
            "pool `shared` was configured previously with num_threads = 1; cannot \
             re-configure it with num_threads = 2: ask for num_threads = 1 or use another \
             global_name"
        );
    }

    #[test]
    fn a_named_pool_outlives_its_sessions() {
        let registry = PoolRegistry::new();
        let session = registry
            .open_session(&with_entries(vec![NamedPoolSpec::global("kept", 1)]))
            .unwrap();
        drop(session);
        assert!(registry.named_pool("kept").is_some());
        let err = registry
            .open_session(&with_entries(vec![NamedPoolSpec::global("kept", 2)]))
            .unwrap_err();
        assert!(matches!(
            err,
            SessionError::NamedPoolSizeMismatch { existing: 1, .. }
        ));
    }

    #[test]
    fn conflicting_sizes_in_one_session_create_nothing() {
        let registry = PoolRegistry::new();
        let entries = vec![NamedPoolSpec::global("x", 1), NamedPoolSpec::global("x", 2)];
        let err = registry.open_session(&with_entries(entries)).unwrap_err();
        assert!(matches!(
            err,
            SessionError::NamedPoolSizeMismatch {
                existing: 1,
                requested: 2,
                ..
            }
        ));
        assert!(registry.named_pool("x").is_none());
        assert!(registry.shared_pools().is_empty());
    }

    #[test]
    fn pool_entries_give_one_pool_per_run_index() {
        let registry = PoolRegistry::new();
        let entries = vec![NamedPoolSpec::owned(1), NamedPoolSpec::global("io", 1)];
        let session = registry.open_session(&with_entries(entries)).unwrap();
        assert_eq!(session.inter_op_pools().len(), 2);
        assert_eq!(session.inter_op_pool(0).unwrap().name(), "session1-inter0");
        assert_eq!(session.inter_op_pool(1).unwrap().name(), "io");
        assert_eq!(session.inter_op_pools()[0].scope, PoolScope::Session);
    }

    #[test]
    fn an_empty_global_name_is_a_session_owned_pool() {
        let registry = PoolRegistry::new();
        let session = registry
            .open_session(&with_entries(vec![NamedPoolSpec::global("", 1)]))
            .unwrap();
        assert_eq!(session.inter_op_pools()[0].scope, PoolScope::Session);
        assert!(registry.named_pool("").is_none());
    }

    #[test]
    fn pool_entries_beat_per_session_threads() {
        let registry = PoolRegistry::new();
        let options = SessionOptions {
            use_per_session_threads: true,
            ..with_entries(vec![NamedPoolSpec::global("wins", 1)])
        };
        let session = registry.open_session(&options).unwrap();
        assert_eq!(session.inter_op_pool(0).unwrap().name(), "wins");
    }

    #[test]
    fn run_index_out_of_range_names_the_valid_range() {
        let registry = PoolRegistry::new();
        let entries = vec![NamedPoolSpec::owned(1), NamedPoolSpec::owned(1)];
        let session = registry.open_session(&with_entries(entries)).unwrap();
        assert!(session.inter_op_pool(1).is_ok());
        let err = session.inter_op_pool(2).unwrap_err();
        assert_eq!(err, SessionError::RunPoolOutOfRange { index: 2, count: 2 });
        let message = err.to_string();
        assert!(
            message.starts_with("inter_op_thread_pool 2 does not exist"),
            "{message}"
        );
        assert!(message.contains("valid indexes are 0 to 1"), "{message}");
    }

    #[test]
    fn zero_entry_threads_take_the_sessions_inter_op_size() {
        let registry = PoolRegistry::new();
        let options = SessionOptions {
            inter_op_threads: 2,
            ..with_entries(vec![NamedPoolSpec::owned(0)])
        };
        let session = registry.open_session(&options).unwrap();
        assert_eq!(session.inter_op_pool(0).unwrap().num_threads(), 2);
    }

    #[test]
    fn zero_threads_resolve_to_the_cpus_capped_at_max_threads() {
        let options = SessionOptions {
            inter_op_threads: 0,
            max_threads: 2,
            ..per_session()
        };
        let expected = schedulable_cpus().min(2);
        assert_eq!(options.effective_inter_op_threads(), expected);
        let session = PoolRegistry::new().open_session(&options).unwrap();
        assert_eq!(session.inter_op_pool(0).unwrap().num_threads(), expected);
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        let registry = PoolRegistry::new();
        let nul_name = with_entries(vec![NamedPoolSpec::global("bad\0name", 1)]);
        let err = registry.open_session(&nul_name).unwrap_err();
        assert!(matches!(err, SessionError::BadPoolName { index: 0, .. }));
        assert!(err.to_string().contains("\"bad\\0name\""), "{err}");

        let huge = SessionOptions {
            max_threads: usize::MAX,
            ..small()
        };
        let err = registry.open_session(&huge).unwrap_err();
        assert_eq!(
            err,
            SessionError::BadMaxThreads {
                max_threads: usize::MAX
            }
        );

        let too_many = SessionOptions {
            inter_op_threads: 5,
            ..per_session()
        };
        let err = registry.open_session(&too_many).unwrap_err();
        assert!(matches!(
            err,
            SessionError::Pool(PoolError::TooManyThreads { .. })
        ));
        assert!(err.to_string().contains("session"), "{err}");
    }

    #[test]
    fn the_global_registry_is_one_per_process() {
        assert!(std::ptr::eq(PoolRegistry::global(), PoolRegistry::global()));
    }

    #[test]
    fn options_from_config_carry_resolved_counts() {
        let config = RuntimeConfig {
            inter_op_threads: 0,
            intra_op_threads: 2,
            schedulable_cpus: 3,
            pool_kind: PoolKind::Simple,
            allow_spinning: false,
            ..RuntimeConfig::default()
        };
        let options = SessionOptions::from_config(&config);
        assert_eq!((options.inter_op_threads, options.intra_op_threads), (3, 2));
        assert_eq!(options.pool_kind, PoolKind::Simple);
        assert!(!options.allow_spinning);
        assert_eq!(options.max_threads, config.max_threads);
    }
}
