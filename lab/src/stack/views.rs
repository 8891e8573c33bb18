//! The lab's own parts of a disk, seen again through the product's traits: the target and
//! the workload the lab's builder gave it, for the figures and checks only the lab's models
//! keep (a target's statistics, a workload's series and latencies).

use crate::block::BlockWorkload;
use crate::srp_target::SrpTarget;
use ibal::disk::SrpClient;
use ibal::multipath::Multipath;

/// What the lab built a disk from. Every disk of a lab-built host is: the answers panic
/// only on a client the lab's builder did not make, which no host of the lab holds.
pub trait LabParts {
    /// The simulated target port the disk logs in to.
    fn lab_target(&self) -> &SrpTarget;
    /// The workload above the disk.
    fn lab_workload(&self) -> &BlockWorkload;
}

const NOT_LAB_BUILT: &str = "a disk the lab's builder made carries the lab's target and workload";

impl LabParts for SrpClient {
    fn lab_target(&self) -> &SrpTarget {
        self.target().as_any().downcast_ref().expect(NOT_LAB_BUILT)
    }
    fn lab_workload(&self) -> &BlockWorkload {
        self.workload()
            .and_then(|w| w.as_any().downcast_ref())
            .expect(NOT_LAB_BUILT)
    }
}

/// The workload above a multipath disk the lab built.
pub fn multipath_workload(mp: &Multipath) -> &BlockWorkload {
    mp.workload().as_any().downcast_ref().expect(NOT_LAB_BUILT)
}
