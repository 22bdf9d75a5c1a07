//! The loom facade: every atomic, lock, condition variable, cell and thread used by a
//! concurrent module is imported from here, never from `std` directly.
//!
//! In a normal build these are `std`'s types. Built with `RUSTFLAGS="--cfg loom"` they are
//! loom's, so the loom models beside each module (`#[cfg(loom)] mod loom_tests`) explore the
//! very code that ships, with every interleaving up to `LOOM_MAX_PREEMPTIONS`.
//!
//! Two small adapters smooth over the differences between the two worlds:
//! - [`Mutex::lock`] (and [`RwLock::read`] / [`RwLock::write`]) never return a poison error:
//!   our tasks run under `catch_unwind`, so a poisoned lock only means some unrelated panic
//!   unwound through a guard, and the protected data (queues, counters, a workload's tensors)
//!   stays consistent between statements.
//! - [`UnsafeCell`] offers loom's closure API (`with`, `with_mut`) in both worlds, so access to
//!   raw cell contents is tracked by loom.
//!
//! [`SpinMutex`] is the lock for short critical sections that two threads hit at the same
//! moment (an engine var: a pusher appending, a worker completing): `parking_lot`'s mutex,
//! which spins briefly before it parks and wakes only a thread that parked (`std`'s futex
//! mutex, once contended, makes a wake-up call on every unlock and sleeps without spinning).
//! Under loom it is the facade's [`Mutex`], so the models explore the same protocol.

#![allow(unused_imports)]

use std::sync::PoisonError;

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::hint::spin_loop;
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    pub(crate) use loom::sync::{Arc, Condvar as RawCondvar, Mutex as RawMutex, MutexGuard};
    pub(crate) use loom::sync::{RwLock as RawRwLock, RwLockReadGuard, RwLockWriteGuard};
    pub(crate) use loom::thread;
    pub(crate) use loom::thread_local;
}

#[cfg(not(loom))]
mod imp {
    pub(crate) use std::hint::spin_loop;
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
    };
    pub(crate) use std::sync::{Arc, Condvar as RawCondvar, Mutex as RawMutex, MutexGuard};
    pub(crate) use std::sync::{RwLock as RawRwLock, RwLockReadGuard, RwLockWriteGuard};
    pub(crate) use std::thread;
    pub(crate) use std::thread_local;
}

pub(crate) use imp::*;

#[cfg(loom)]
pub(crate) use self::{Mutex as SpinMutex, MutexGuard as SpinMutexGuard};
#[cfg(not(loom))]
pub(crate) use parking_lot::{Mutex as SpinMutex, MutexGuard as SpinMutexGuard};

/// A mutex whose `lock` ignores poisoning (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(RawMutex<T>);

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(RawMutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A reader-writer lock whose `read` and `write` ignore poisoning, like [`Mutex::lock`].
#[derive(Debug, Default)]
pub(crate) struct RwLock<T>(RawRwLock<T>);

impl<T> RwLock<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(RawRwLock::new(value))
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A condition variable paired with [`Mutex`]; `wait` ignores poisoning like `lock`.
#[derive(Debug, Default)]
pub(crate) struct Condvar(RawCondvar);

impl Condvar {
    pub(crate) fn new() -> Self {
        Self(RawCondvar::new())
    }

    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits at most `timeout`; returns the guard (spurious and timed-out wake-ups look alike,
    /// callers re-check their predicate).
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        match self.0.wait_timeout(guard, timeout) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }

    pub(crate) fn notify_one(&self) {
        self.0.notify_one();
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// `UnsafeCell` with loom's closure-based access API in both worlds.
#[cfg(not(loom))]
#[derive(Debug, Default)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    /// Gives `f` a shared raw pointer to the contents.
    #[allow(dead_code)] // loom's API has it; readers that only read use it
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Gives `f` an exclusive raw pointer to the contents.
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
