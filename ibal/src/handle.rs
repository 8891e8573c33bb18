//! Resource handles: a slot, the slot's generation, and the epoch the resource was made in.

use core::fmt;
use core::marker::PhantomData;

use hcabus::types::Epoch;

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

/// A resource handle. The generation tells a reused slot from the object the handle named
/// (no ABA); the epoch tells which hardware the object was made on.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Handle<K> {
    pub index: u32,
    pub generation: u32,
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

impl<K> Handle<K> {
    pub fn new(index: u32, generation: u32, epoch: Epoch) -> Self {
        Handle {
            index,
            generation,
            epoch,
            kind: PhantomData,
        }
    }
}

pub type PdHandle = Handle<kind::Pd>;
pub type CqHandle = Handle<kind::Cq>;
pub type QpHandle = Handle<kind::Qp>;
pub type MrHandle = Handle<kind::Mr>;
pub type AhHandle = Handle<kind::Ah>;

/// The handle names a resource the hardware no longer has: released for a reset, or made
/// in an older epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaleHandle {
    pub made_in: Epoch,
    pub current: Epoch,
}

impl fmt::Display for StaleHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.made_in == self.current {
            write!(
                f,
                "stale handle: its resource was released for a reset in {}",
                self.current
            )
        } else {
            write!(
                f,
                "stale handle: made in {} but the hardware is in {}",
                self.made_in, self.current
            )
        }
    }
}

impl core::error::Error for StaleHandle {}

/// A consumer of the access layer (a ULP, a user-verbs context provider).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConsumerId {
    pub index: u16,
    pub generation: u32,
}

impl fmt::Display for ConsumerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "consumer {}.{}", self.index, self.generation)
    }
}
