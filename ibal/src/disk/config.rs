//! How a disk's initiator is set up: its queue and hold, its target and LUN, how it
//! retries a refused login, its path timeout and command bound, and what that asks of the adapter (DMA memory, CQ
//! entries), which a host checks before a run and the disk reserves at start. What it
//! carries and how far its target is are not the initiator's: the lab sets them apart.

use hcabus::verbs::Lid;
use hcabus::Duration;

use super::PathTimeout;
use crate::io::BLOCK_SIZE;
use crate::retry::RetryPolicy;
use crate::srp::IU_SIZE;

/// How a disk is set up (the `[[clients]]` keys of docs/design.md §9 for `srp` and `bootdisk`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiskConfig {
    /// The boot disk: paging path, executes from inside its RESET callback.
    pub boot: bool,
    /// Commands on the wire at once (the SRP request limit).
    pub queue_depth: u16,
    /// Further I/Os the disk accepts and holds while the queue or the link is busy.
    pub hold_capacity: u16,
    pub port: u8,
    pub target_lid: Lid,
    pub lun_id: u32,
    /// A data LUN finishes its quiesce as deferred work, this long after RESET.
    pub ack_delay: Duration,
    /// A path of a multipath disk: how long a command may be outstanding, while another
    /// path answers, before it is given up here (the target told to abort it) and re-issued
    /// there (docs/design.md §7 "Fast path failover", "Adaptive path timeout").
    pub path_timeout: PathTimeout,
    /// The last-path guard (docs/design.md §7): registers CAN_VETO and refuses a planned
    /// reset that would leave the disk with no Active, logged-in path. On for a boot disk
    /// unless its configuration says otherwise.
    pub guard_last_path: bool,
    /// How a refused login is retried: the shipped backoff unless a fleet compares it
    /// with another (docs/design.md §11).
    pub login_retry: RetryPolicy,
    /// The command bound's ceiling (docs/design.md §7 "Every command ends"): no command is
    /// out longer before it is given up and sent again.
    pub command_timeout: Duration,
    /// A multipath disk's path groups: each path's priority and when I/O fails back to a
    /// better group (docs/design.md §7 "Path groups").
    pub path_groups: PathGroups,
    /// The largest command it takes, in blocks: each slot's data buffer is this long,
    /// reserved at start (1 unless its workload moves more at once). A larger I/O is
    /// completed upward at once as [`IoStatus::TooLarge`](crate::io::IoStatus::TooLarge).
    pub max_blocks: u16,
}

/// Most paths a disk may have (a multipath disk's bound).
pub const MAX_PATHS: usize = 4;

/// Each path's group (0 the best: ALUA's active/optimized; higher, worse) and how long a
/// path of a better group must have been back before I/O returns to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct PathGroups {
    pub priority: [u8; MAX_PATHS],
    /// Zero: at once (dm-multipath's `failback immediate`); else deferred this long
    /// (`failback N`), so a path that flaps is not given the load at each return.
    pub failback: Duration,
}

impl DiskConfig {
    /// How long this disk holds I/O through a reset before failing it upward (retryable):
    /// `io_hold_timeout`, or for the paging path `paging_io_hold_timeout`, where `None`
    /// (0) holds until the device is Failed or Removed: failing a paging I/O is a bugcheck
    /// on Windows, so the disk holds while recovery is possible.
    pub fn hold_timeout(&self, policy: &hcabus::Policy) -> Option<Duration> {
        if self.boot {
            let ms = policy.paging_io_hold_timeout_ms;
            (ms > 0).then(|| Duration::from_ms(ms))
        } else {
            Some(Duration::from_ms(policy.io_hold_timeout_ms))
        }
    }

    /// Command slots: the queue depth plus the hold capacity.
    pub fn slots(&self) -> u64 {
        u64::from(self.queue_depth) + u64::from(self.hold_capacity)
    }

    /// Bytes of one slot's data buffer: its largest command's.
    pub fn data_bytes(&self) -> u64 {
        u64::from(self.max_blocks.max(1)) * BLOCK_SIZE as u64
    }

    /// DMA memory the disk reserves at start: a data buffer, a command IU and an ABORT
    /// TASK IU per slot, a response IU per request-limit credit.
    pub fn dma_bytes(&self) -> u64 {
        let n = self.slots();
        n * self.data_bytes()
            + 2 * n * IU_SIZE as u64
            + u64::from(self.queue_depth) * IU_SIZE as u64
    }

    /// Its completion queue: a send and a receive completion per credit, and some slack.
    pub fn cq_entries(&self) -> u32 {
        2 * u32::from(self.queue_depth) + 8
    }
}

impl Default for DiskConfig {
    fn default() -> Self {
        DiskConfig {
            boot: false,
            queue_depth: 32,
            hold_capacity: 224,
            port: 1,
            target_lid: 0x100,
            lun_id: 0,
            ack_delay: Duration::ZERO,
            path_timeout: PathTimeout::Off,
            guard_last_path: false,
            login_retry: RetryPolicy::Backoff,
            command_timeout: super::DEFAULT_COMMAND_TIMEOUT,
            path_groups: PathGroups::default(),
            max_blocks: 1,
        }
    }
}
