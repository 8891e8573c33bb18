//! ibal: the access layer over the hcabus bus, itself a reset client, and the clients that
//! ride through a reset on it: IPoIB, the SRP initiator, the boot disk and user verbs
//! (docs/design.md §7).
//!
//! Everything here is generic over [`hcabus::bus::BusHandle`]: the access layer and its
//! clients run unchanged on the virtual-time host and on the threaded host (the model of
//! the KMDF glue), and need only `hcabus`'s `std` feature.
//!
//! Nothing here is simulated. What a client meets beyond its adapter (a disk's target
//! port, [`target::Target`], which also says how long a login takes; IPoIB's peer,
//! [`ipoib::Peer`]; the subnet administrator IPoIB rejoins through, [`ipoib::SubnetAdmin`])
//! and what drives it from above (a disk's [`workload::Workload`], an interface's
//! [`ipoib::Traffic`], the user-verbs provider's [`uverbs::UserProcess`]) are traits; the
//! lab (`hcabus-lab`) gives the simulated ones and builds whole hosts.
#![forbid(unsafe_code)]

pub mod access;
pub mod disk;
pub mod errors;
pub mod handle;
pub mod ibal_client;
pub mod io;
pub mod ipoib;
pub mod multipath;
pub mod retry;
pub mod srp;
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
