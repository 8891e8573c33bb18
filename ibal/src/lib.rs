//! ibal: the access layer over the hcabus bus, itself a reset client, and the clients that
//! ride through a reset on it: IPoIB, the SRP initiator, the boot disk and user verbs
//! (docs/design.md §7).
//!
//! Everything here is generic over [`hcabus::bus::BusHandle`]: the access layer and its
//! clients run unchanged on the virtual-time host and on the threaded host (the model of
//! the KMDF glue), and need only `hcabus`'s `std` feature. Feature `sim` adds [`stack`] and
//! [`budget`], which assemble a virtual-time host from a scenario.
#![forbid(unsafe_code)]

pub mod access;
pub mod block;
#[cfg(feature = "sim")]
pub mod budget;
pub mod disk;
pub mod errors;
#[cfg(feature = "sim")]
pub mod fleet;
pub mod handle;
pub mod ibal_client;
pub mod io;
pub mod ipoib;
pub mod multipath;
pub mod pattern;
pub mod retry;
pub mod srp;
pub mod srp_target;
#[cfg(feature = "sim")]
pub mod stack;
pub mod subnet;
pub mod target;
pub mod uverbs;
pub mod workload;

pub use access::{
    ClientBus, Dest, FabricBus, Ibal, IbalConfig, IbalStats, MrFlags, MrSpec, Phase, QpSpec, Send,
    VerbsBus,
};
pub use errors::{CreateError, DestroyError, OpenError, PollError, PostError};
pub use handle::{
    kind, AhHandle, ConsumerId, CqHandle, Handle, MrHandle, PdHandle, QpHandle, StaleHandle,
};
pub use ibal_client::{IbalClient, SharedIbal};
