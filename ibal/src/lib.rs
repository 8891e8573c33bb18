//! ibal: the access layer over the hcabus bus, itself a reset client, and the clients that
//! ride through a reset on it: IPoIB, the SRP initiator, the boot disk and user verbs
//! (SPEC §7).
//!
//! Everything here runs in the simulator: the access layer drives `SimHca`'s verbs through
//! [`access::Lower`], and each client is an [`hcabus::sim::Agent`] of the virtual-time host.
#![forbid(unsafe_code)]

pub mod access;
pub mod block;
pub mod budget;
pub mod disk;
pub mod errors;
pub mod handle;
pub mod ibal_client;
pub mod ipoib;
pub mod retry;
pub mod srp;
pub mod stack;
pub mod uverbs;

pub use access::{
    Dest, Ibal, IbalConfig, IbalStats, MrFlags, MrSpec, Phase, QpSpec, Send, VerbsBus,
};
pub use errors::{CreateError, DestroyError, OpenError, PollError, PostError};
pub use handle::{
    kind, AhHandle, ConsumerId, CqHandle, Handle, MrHandle, PdHandle, QpHandle, StaleHandle,
};
pub use ibal_client::{IbalClient, SharedIbal};
