//! The crate's heavier suites in one test binary: cargo runs test binaries one after
//! another, libtest runs one binary's tests side by side, so here the exhaustive model
//! checks and the long tables share the machine's cores instead of taking turns on one.

mod clients;
mod failover_model;
mod ioctl_sim;
mod model_check;
mod multipath;
mod protocol_table;
