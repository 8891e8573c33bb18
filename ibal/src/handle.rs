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
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stale handle: {}", self.why())]
pub struct StaleHandle {
    pub made_in: Epoch,
    pub current: Epoch,
}

impl StaleHandle {
    /// Why, as the message says it: released in this epoch, or made in an older one.
    fn why(&self) -> StaleWhy {
        StaleWhy(*self)
    }
}

#[derive(Debug)]
struct StaleWhy(StaleHandle);

impl fmt::Display for StaleWhy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let StaleHandle { made_in, current } = self.0;
        if made_in == current {
            write!(f, "its resource was released for a reset in {current}")
        } else {
            write!(f, "made in {made_in} but the hardware is in {current}")
        }
    }
}

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
