//! A value two parts of one connection share behind a lock (the replication writer
//! and one of the connection's streams), with one fact about it kept beside the lock
//! and read without locking: the token exports' "an export is pending", the huge
//! object queue's "idle". A packet with nothing to do for the value takes no lock
//! (each lock is a full barrier, on every packet of every connection).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The fact a [`FlaggedMutex`] keeps about its value.
pub trait Flag {
    /// The fact, computed from the value.
    fn flag(&self) -> bool;
}

/// A value behind a lock, with its [`Flag`] set on every unlock.
#[derive(Debug)]
pub struct FlaggedMutex<T: Flag> {
    value: Mutex<T>,
    /// The value's flag, as of its last unlock.
    flag: AtomicBool,
}

impl<T: Flag + Default> Default for FlaggedMutex<T> {
    /// The default value, its flag computed from it.
    fn default() -> Self {
        Self::new(T::default())
    }
}

impl<T: Flag> FlaggedMutex<T> {
    /// `value`, behind the lock.
    pub fn new(value: T) -> Self {
        Self {
            flag: AtomicBool::new(value.flag()),
            value: Mutex::new(value),
        }
    }

    /// Locks the value (a poisoned lock still yields it).
    pub fn lock(&self) -> FlaggedGuard<'_, T> {
        FlaggedGuard {
            value: self
                .value
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            flag: &self.flag,
        }
    }

    /// The value's flag as of its last unlock, read without locking.
    pub fn flag(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

/// The locked value of a [`FlaggedMutex`]; on unlock it sets the flag.
#[derive(Debug)]
pub struct FlaggedGuard<'a, T: Flag> {
    value: MutexGuard<'a, T>,
    flag: &'a AtomicBool,
}

impl<T: Flag> std::ops::Deref for FlaggedGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Flag> std::ops::DerefMut for FlaggedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T: Flag> Drop for FlaggedGuard<'_, T> {
    fn drop(&mut self) {
        // Still locked here: the guard's fields drop after this.
        self.flag.store(self.value.flag(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Queue(Vec<u32>);

    impl Flag for Queue {
        fn flag(&self) -> bool {
            !self.0.is_empty()
        }
    }

    #[test]
    fn the_flag_follows_the_value_through_every_unlock() {
        let m = FlaggedMutex::new(Queue(vec![1]));
        assert!(m.flag(), "set from the value");
        m.lock().0.clear();
        assert!(!m.flag());
        {
            let mut q = m.lock();
            q.0.push(2);
            assert!(!m.flag(), "set on unlock, not before");
        }
        assert!(m.flag());
    }

    #[test]
    fn a_default_value_starts_with_its_own_flag() {
        struct Idle;
        impl Flag for Idle {
            fn flag(&self) -> bool {
                true
            }
        }
        impl Default for Idle {
            fn default() -> Self {
                Idle
            }
        }
        assert!(FlaggedMutex::<Idle>::default().flag());
        assert!(!FlaggedMutex::<Queue>::default().flag());
    }
}
