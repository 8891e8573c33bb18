//! hcabus: the soft-reset coordinator of an InfiniBand HCA bus driver.
//!
//! The core ([`coordinator`], [`hca`], [`policy`], [`recorder`]) is `no_std` + `alloc` and
//! sans-IO: it never reads a clock, spawns a thread or takes a lock. Feature `sim` adds the
//! simulated HCA and the two hosts (virtual time and real threads) that run it.
#![cfg_attr(not(feature = "std"), no_std)]
#![forbid(unsafe_code)]

extern crate alloc;

#[macro_use]
pub mod wire;

pub mod bus;
pub mod bus_abi;
pub mod coordinator;
pub mod errors;
pub mod fabric;
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

#[cfg(feature = "sim")]
pub mod sim;

pub use coordinator::{
    Action, ClientInfo, Config, Coordinator, ExecuteOutcome, Registration, ResetRecord, ResetResult,
};
pub use hca::{Hca, HwCompletion, HwStep, Identity};
pub use policy::{Policy, PolicyError};
pub use time::{Duration, Instant};
pub use types::*;
