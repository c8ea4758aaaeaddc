//! Locking the runners' small shared maps.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking over a lock poisoned by a panic: every update of
/// the runners' maps is a single insert, remove or replace, so what a
/// panicking holder left behind is still consistent.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
