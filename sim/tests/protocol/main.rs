//! The protocol's tests on the bare coordinator, the IOCTL dispatcher and the register-level
//! adapter, each driven by the simulator's stepper or register file (the crate that has what
//! they need: the core itself has no simulator).

mod coordinator;
mod ioctl;
mod mmio;
