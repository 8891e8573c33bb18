//! The threaded host (driver/src/sim/threaded.rs) and its verifier (driver/src/sim/verifier.rs),
//! the very files the hcabus crate builds, compiled a second time here against a `sim::sync`
//! of shuttle's primitives: shuttle then owns every lock, wait, notification, thread switch and
//! thread-local, and its schedulers explore the host's interleavings (tests/shuttle.rs).
//!
//! The modules the host names with `crate::` are hcabus's own, re-exported at this crate's
//! root under the same names.

pub use hcabus::{coordinator, errors, hca, policy, time, timers, types};

pub mod sim {
    pub mod sync;

    #[path = "../../../../driver/src/sim/verifier.rs"]
    pub mod verifier;

    // The parts the hcabus crate's other hosts use are unused here.
    #[allow(dead_code)]
    #[path = "../../../../driver/src/sim/threaded.rs"]
    pub mod threaded;

    pub use threaded::{EventCallback, StartError, ThreadedBus, ThreadedHost};
}
