//! hcabus: the soft-reset coordinator of an InfiniBand HCA bus driver.
//!
//! The core ([`coordinator`], [`hca`], [`policy`], [`recorder`]) is `no_std` + `alloc` and
//! sans-IO: it never reads a clock, spawns a thread or takes a lock. [`host`] is the one locked
//! host that runs it over a platform (the KMDF driver's, or with feature `std` threads). The
//! simulated adapter and the virtual-time hosts are the crate hcabus-sim, outside the product.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

#[macro_use]
pub mod wire;

pub mod bus;
pub mod bus_abi;
pub mod client_entry;
pub mod coordinator;
pub mod errors;
pub mod fabric;
pub mod fault;
pub mod hca;
pub mod host;
pub mod ioctl;
pub mod mmio;
pub mod policy;
pub mod recorder;
pub mod reserve;
pub mod time;
pub mod timers;
pub mod types;
pub mod verbs;

pub use coordinator::{
    Action, ClientInfo, Config, Coordinator, ExecuteOutcome, Registration, ResetRecord, ResetResult,
};
pub use hca::{Hca, HwCompletion, HwStep, Identity};
pub use policy::{Policy, PolicyError};
pub use time::{Duration, Instant};
pub use types::*;
