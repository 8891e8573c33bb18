//! The lab around the product's access layer (`ibal`): what a real host would find on the
//! other side of its adapter, simulated, and the builder that puts a host together from a
//! scenario.
//!
//! - [`srp_target`]: the SRP target port a disk logs in to (its LUN, its route, its login
//!   admission), behind the product's `ibal::target::Target`;
//! - [`ipoib_peer`]: the remote IPoIB endpoint an interface talks to, behind
//!   `ibal::ipoib::Peer`;
//! - [`subnet`]: the subnet manager and SA that IPoIB rejoins through, behind
//!   `ibal::ipoib::SubnetAdmin`;
//! - [`block`] and [`pattern`]: the workload above a disk, behind
//!   `ibal::workload::Workload`, which issues reads and writes and checks every block;
//! - [`baselines`]: what the fleet compares the product's behaviour with (the retry rules
//!   other than the shipped backoff), given to the product through its extension points;
//! - [`turns`]: the order of a fleet's calls into what its hosts share when its hosts are
//!   stepped on several threads;
//! - [`stack`] and [`budget`]: a virtual-time host (`hcabus-sim`) with the access layer and
//!   the clients a scenario names, checked against what the adapter can give.
//!
//! Nothing here ships: the product crates never depend on it.
#![forbid(unsafe_code)]

pub mod baselines;
pub mod block;
pub mod budget;
pub mod ipoib_peer;
pub mod pattern;
pub mod peers;
pub mod srp_target;
pub mod stack;
pub mod subnet;
pub mod turns;
pub mod user_process;

#[cfg(test)]
mod access_tests;
#[cfg(test)]
mod disk_tests;
