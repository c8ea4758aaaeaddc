//! FNV-1a hashing for the crate's small maps.
//!
//! The keys are short ids (participant ids, tool-call ids) looked up once or
//! twice per entry on the projection's hot path; the maps hold a roster or the
//! calls still waiting for a result, never an unbounded set grown from
//! untrusted input, so SipHash's protection buys nothing and costs a lot.

use std::hash::{BuildHasherDefault, Hasher};

/// Builds [`Fnv`] hashers.
pub(crate) type FnvBuild = BuildHasherDefault<Fnv>;

/// The FNV-1a hasher.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
