//! The one locked host: the coordinator behind a spin lock, its actions carried out on a
//! [`Platform`]. The KMDF driver ships it over WDF objects; the threaded host runs it over std
//! (mutexes, a timer thread); the shuttle suite explores it over shuttle's primitives; the C
//! library on Linux wraps the threaded one. So the host the driver ships is the host every
//! concurrency test checks.
//!
//! * [`Bus`] (bus.rs): every input, under the lock, then a kick of the delivery DPC;
//! * the DPC and the work item (drain.rs): the actions, with the lock released around each
//!   callback and each hardware step;
//! * [`ClientCtx`] (client.rs): [`crate::bus::BusHandle`] over the bus, for a Rust client;
//! * [`Platform`] (platform.rs): what the bus needs from the system under it;
//! * [`ResetSpan`] (trace.rs): the reset each record falls in, for the system's tracing.
//!
//! Everything is reserved when the bus is built ([`Bus::new`]); nothing here allocates
//! afterwards.

mod bus;
mod client;
mod drain;
mod event_log;
mod platform;
mod power;
#[cfg(test)]
mod tests;
mod trace;

#[cfg(feature = "std")]
pub mod facade;
/// The host on std: mutexes for locks, a timer thread for the WDFTIMERs (the threaded host the
/// C library and the shuttle suite run).
#[cfg(feature = "std")]
pub mod irql;
#[cfg(feature = "std")]
pub mod threaded;

pub use bus::{Bus, NewError};
pub use client::{ClientCtx, ClientView};
pub use event_log::EventLogEntry;
#[cfg(feature = "std")]
pub use facade::{StdThreads, Threads};
pub use platform::{Lock, Platform, PlatformError, Scheduled};
pub use power::{Parked, PowerDown, D0_EXIT_WAIT_MS};
#[cfg(feature = "std")]
pub use threaded::{
    EventCallback, StartError, StdPlatform, ThreadPlatform, ThreadedBus, ThreadedHost,
};
pub use trace::ResetSpan;
