//! What issues a disk's I/O and takes its completions: the layer above the disk (a file
//! system, the pager), as the disk meets it. The product's disks see it through
//! [`Workload`] only; the lab's workload (`hcabus-lab`) issues reads and writes at a rate
//! and checks every completion.

use core::any::Any;
use core::fmt::Debug;

use hcabus::Instant;
use rand::RngCore;

use crate::io::{IoCompletion, IoRequest, IoStats};

/// Writes the data of write `req` into the disk's DMA block: where the layer above's
/// buffer reaches the wire. A real storage stack hands the buffer down with the request;
/// here whoever makes the requests says how their data is made.
pub type WriteData = fn(req: &IoRequest, block: &mut [u8]);

/// The layer above one disk: it issues I/O and takes every completion.
pub trait Workload: Debug + Send + Any + dyn_clone::DynClone {
    /// The next I/O due at `now`, if any (a refused one first).
    fn next_request(&mut self, now: Instant, rng: &mut dyn RngCore) -> Option<IoRequest>;
    /// The disk took `req`: it is owed a completion.
    fn accepted(&mut self, req: IoRequest);
    /// The disk was busy: `req` is offered again before anything new.
    fn refused(&mut self, req: IoRequest);
    /// An I/O completed upward.
    fn complete(&mut self, c: IoCompletion, now: Instant);
    /// When the next I/O is due.
    fn next_at(&self) -> Option<Instant>;
    /// What it saw so far.
    fn stats(&self) -> &IoStats;
    /// Its accounting now, each I/O still owed counted in flight when `live` says a disk
    /// will complete it, lost otherwise: [`IoStats::closes`] holds of the answer.
    fn accounted(&self, live: &dyn Fn(u64) -> bool) -> IoStats;
    /// How its writes' data is made.
    fn write_data(&self) -> WriteData;
    /// The concrete workload, for the host that made it (its series, its latencies).
    fn as_any(&self) -> &dyn Any;
}

dyn_clone::clone_trait_object!(Workload);

#[cfg(test)]
pub(crate) mod fake;
