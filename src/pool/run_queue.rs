//! PLACEHOLDER (being replaced by the lock-free Eigen RunQueue): same API, a locked deque.
#![allow(clippy::missing_safety_doc)]

use std::collections::VecDeque;

use crate::sync::Mutex;

/// Eigen's RunQueue API.
#[derive(Debug)]
pub struct RunQueue<T> {
    capacity: usize,
    items: Mutex<VecDeque<T>>,
}

impl<T> RunQueue<T> {
    /// A queue holding at most `capacity` (a power of two, at least 2) items.
    pub fn new(capacity: usize) -> Self {
        assert!(capacity >= 2 && capacity.is_power_of_two());
        Self {
            capacity,
            items: Mutex::new(VecDeque::with_capacity(capacity)),
        }
    }
    /// Owner only.
    pub unsafe fn push_front(&self, value: T) -> Result<(), T> {
        let mut items = self.items.lock();
        if items.len() == self.capacity {
            return Err(value);
        }
        items.push_front(value);
        Ok(())
    }
    /// Owner only.
    pub unsafe fn pop_front(&self) -> Option<T> {
        self.items.lock().pop_front()
    }
    /// Any thread.
    pub fn push_back(&self, value: T) -> Result<(), T> {
        let mut items = self.items.lock();
        if items.len() == self.capacity {
            return Err(value);
        }
        items.push_back(value);
        Ok(())
    }
    /// Any thread.
    pub fn pop_back(&self) -> Option<T> {
        self.items.lock().pop_back()
    }
    /// Any thread: up to half, appended to `out` (oldest last like Eigen).
    pub fn pop_back_half(&self, out: &mut Vec<T>) -> usize {
        let mut items = self.items.lock();
        let n = items.len().div_ceil(2);
        for _ in 0..n {
            out.push(items.pop_back().unwrap());
        }
        n
    }
    /// Items queued.
    pub fn size(&self) -> usize {
        self.items.lock().len()
    }
    /// Whether none is queued.
    pub fn is_empty(&self) -> bool {
        self.size() == 0
    }
    /// The most it holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}
