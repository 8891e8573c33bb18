//! ibal: the access layer over the hcabus bus, itself a reset client (SPEC §7).
//!
//! Early days: this crate holds the piece every resource builds on, handles stamped with
//! the epoch they were made in. The verbs model, IPoIB, SRP, the boot disk and user verbs
//! come next.
#![forbid(unsafe_code)]

use core::fmt;
use core::marker::PhantomData;

pub use hcabus::types::Epoch;

/// Kinds of verbs resources, as type markers for [`Handle`].
pub mod kind {
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Pd {}
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Cq {}
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Qp {}
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Mr {}
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum Ah {}
}

/// A resource handle: an index and the epoch of the hardware it was made on. After a reset
/// the hardware has forgotten the resource, so a handle from an older epoch is stale.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Handle<K> {
    pub index: u32,
    pub epoch: Epoch,
    kind: PhantomData<K>,
}

// Manual impls: a derive would require `K: Clone`, which the marker types need not be.
impl<K> Clone for Handle<K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<K> Copy for Handle<K> {}

/// The handle was made in an older epoch than the hardware's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleHandle {
    pub made_in: Epoch,
    pub current: Epoch,
}

impl fmt::Display for StaleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "stale handle: made in {} but the hardware is in {}",
            self.made_in, self.current
        )
    }
}

impl core::error::Error for StaleHandle {}

impl<K> Handle<K> {
    pub fn new(index: u32, epoch: Epoch) -> Self {
        Handle {
            index,
            epoch,
            kind: PhantomData,
        }
    }

    /// `Ok` only for a handle of the current epoch.
    pub fn check(&self, current: Epoch) -> Result<(), StaleHandle> {
        if self.epoch == current {
            Ok(())
        } else {
            Err(StaleHandle {
                made_in: self.epoch,
                current,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_of_an_older_epoch_are_stale() {
        let qp: Handle<kind::Qp> = Handle::new(7, Epoch(1));
        assert_eq!(qp.check(Epoch(1)), Ok(()));
        let err = qp.check(Epoch(2)).expect_err("reset happened");
        assert_eq!(
            err,
            StaleHandle {
                made_in: Epoch(1),
                current: Epoch(2)
            }
        );
        assert_eq!(
            err.to_string(),
            "stale handle: made in e1 but the hardware is in e2"
        );
    }
}
