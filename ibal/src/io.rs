//! Block I/O between a disk and the layer above it: a request, its completion and how it
//! ended, and the accounting every disk keeps. Product code: the disks (single-path,
//! multipath, the boot disk) take and give these; a `Workload` above the disk issues them.

use hcabus::Instant;

use crate::srp::SrpStatus;

/// Bytes of one logical block.
pub const BLOCK_SIZE: usize = 4096;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The checksum a disk takes of a read's data and a write carries of its own, so that the
/// layer above can tell the data it gets from the data it wanted.
///
/// FNV-1a, 64 bits, taken a 64-bit word at a time (bytes for a tail): enough to tell one
/// block's contents from another's. Each step is a bijection of the running hash for a
/// given word, so two blocks that differ in one word always differ in their checksums. A
/// word at a time is 8x fewer multiplies than FNV's byte at a time, which was two thirds
/// of hcasim's instructions.
pub fn checksum(data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(8);
    let mut h = FNV_OFFSET;
    for w in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        h = (h ^ u64::from_le_bytes(word)).wrapping_mul(FNV_PRIME);
    }
    for b in words.remainder() {
        h = (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// The checksum of a command's data, block by block: one block's is [`checksum`]'s; a
/// command of several folds each block's checksum into the first's, so that a layer that
/// keeps one checksum per block (the peers' models) can tell what a read of several should
/// carry without the data.
pub fn checksum_blocks(data: &[u8]) -> u64 {
    let mut blocks = data.chunks(BLOCK_SIZE);
    let mut h = blocks.next().map_or(FNV_OFFSET, checksum);
    for b in blocks {
        h = fold_block(h, checksum(b));
    }
    h
}

/// The running checksum of a command's data once its next block, whose own checksum is
/// `block`, is taken in (see [`checksum_blocks`]). Multiplied before the block is taken in
/// (FNV-1's order), so that two blocks swapped give another checksum.
pub const fn fold_block(h: u64, block: u64) -> u64 {
    h.wrapping_mul(FNV_PRIME) ^ block
}

/// How an I/O completed upward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoStatus {
    Ok,
    /// Held past `io_hold_timeout`: the layer above may retry it.
    Retryable,
    /// The device failed; nothing more will complete on it.
    DeviceFailed,
    /// The device is gone.
    DeviceRemoved,
    /// The target answered with an error.
    Target(SrpStatus),
    /// More blocks than the disk's buffers take (its `max_blocks`), or none: never sent.
    TooLarge,
}

impl IoStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            IoStatus::Ok => "ok",
            IoStatus::Retryable => "retryable (device resetting)",
            IoStatus::DeviceFailed => "device failed",
            IoStatus::DeviceRemoved => "device removed",
            IoStatus::Target(_) => "target error",
            IoStatus::TooLarge => "larger than the disk takes",
        }
    }
}

/// One I/O handed to a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoRequest {
    pub id: u64,
    pub lba: u64,
    pub write: bool,
    /// Blocks it moves, from `lba` on: 1 for most, more for a large transfer, 0 for a
    /// check (which moves no data).
    pub blocks: u16,
    /// Checksum of the data a write carries ([`checksum_blocks`]).
    pub checksum: u64,
    pub submitted_at: Instant,
}

impl IoRequest {
    /// A request submitted at time zero whose data (for a write) is stamped with its id:
    /// what the unit tests and the failover model check give a disk.
    pub const fn stamped(id: u64, lba: u64, write: bool) -> Self {
        IoRequest {
            id,
            lba,
            write,
            blocks: 1,
            checksum: id,
            submitted_at: Instant::ZERO,
        }
    }

    /// Bytes of data it moves.
    pub const fn bytes(&self) -> u64 {
        self.blocks as u64 * BLOCK_SIZE as u64
    }
}

impl IoRequest {
    /// The id of an idle path's check: no workload issues it (ids count up from 1).
    pub const CHECK_ID: u64 = u64::MAX;

    /// An idle path's check (SCSI's TEST UNIT READY): no data and no block, nobody's I/O;
    /// its answer says the path moves (docs/design.md §7 "Idle checks").
    pub const fn check(at: Instant) -> Self {
        IoRequest {
            id: Self::CHECK_ID,
            lba: 0,
            write: false,
            blocks: 0,
            checksum: 0,
            submitted_at: at,
        }
    }

    pub const fn is_check(&self) -> bool {
        self.id == Self::CHECK_ID
    }
}

/// One I/O completed upward by a disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoCompletion {
    pub id: u64,
    pub status: IoStatus,
    /// Checksum of the data a successful read returned.
    pub checksum: u64,
}

/// The `io` fields of the report (docs/design.md §9) and the evidence behind them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoStats {
    pub submitted: u64,
    pub completed: u64,
    pub failed: u64,
    /// Owed at the end of the run and still held by a disk on a live path.
    pub in_flight: u64,
    /// Owed at the end of the run with nobody to complete it (docs/design.md §9).
    pub lost: u64,
    /// Of `failed`, those of a paging-path disk (a bugcheck 0x7A on Windows).
    pub paging_failed: u64,
    pub duplicated: u64,
    /// The longest any I/O waited for its upward completion, failed ones included.
    pub max_latency_us: u64,
    /// The longest a failed I/O waited before it failed (0 when none failed).
    pub max_failed_latency_us: u64,
    /// Failures that were retryable (held past `io_hold_timeout`).
    pub retryable: u64,
    /// Reads whose data did not match what was last written.
    pub read_mismatches: u64,
    pub reads_verified: u64,
    /// Submissions the disk turned away as busy (never accepted, so never owed).
    pub busy: u64,
    /// Of those owed, commands out on the wire past their bound and the escalation after
    /// it (docs/design.md §7 "Every command ends"): none unless something failed to end
    /// them. A run that ends with any is not clean.
    pub overdue: u64,
}

impl IoStats {
    pub fn add(&mut self, o: &IoStats) {
        self.submitted += o.submitted;
        self.completed += o.completed;
        self.failed += o.failed;
        self.in_flight += o.in_flight;
        self.lost += o.lost;
        self.paging_failed += o.paging_failed;
        self.duplicated += o.duplicated;
        self.max_latency_us = self.max_latency_us.max(o.max_latency_us);
        self.max_failed_latency_us = self.max_failed_latency_us.max(o.max_failed_latency_us);
        self.retryable += o.retryable;
        self.read_mismatches += o.read_mismatches;
        self.reads_verified += o.reads_verified;
        self.busy += o.busy;
        self.overdue += o.overdue;
    }
}

impl IoStats {
    /// What was submitted and is not accounted for as completed, failed, in flight or lost
    /// (negative: more accounted for than submitted). Zero when the accounting closes.
    pub fn unaccounted(&self) -> i128 {
        i128::from(self.submitted)
            - i128::from(self.completed)
            - i128::from(self.failed)
            - i128::from(self.in_flight)
            - i128::from(self.lost)
    }

    /// Whether the I/O accounting closes: submitted = completed + failed + in flight + lost.
    pub fn closes(&self) -> bool {
        self.unaccounted() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_stats_sums_the_counts_and_keeps_the_worst_latencies() {
        let a = IoStats {
            submitted: 2,
            completed: 3,
            failed: 5,
            in_flight: 7,
            lost: 11,
            paging_failed: 13,
            duplicated: 17,
            max_latency_us: 19,
            max_failed_latency_us: 230,
            retryable: 29,
            read_mismatches: 31,
            reads_verified: 37,
            busy: 41,
            overdue: 43,
        };
        let mut sum = IoStats {
            max_latency_us: 100,
            max_failed_latency_us: 23,
            ..a
        };
        sum.add(&a);
        let want = IoStats {
            submitted: 4,
            completed: 6,
            failed: 10,
            in_flight: 14,
            lost: 22,
            paging_failed: 26,
            duplicated: 34,
            max_latency_us: 100,
            max_failed_latency_us: 230,
            retryable: 58,
            read_mismatches: 62,
            reads_verified: 74,
            busy: 82,
            overdue: 86,
        };
        assert_eq!(sum, want);
    }

    #[test]
    fn every_status_says_what_it_is() {
        let all = [
            (IoStatus::Ok, "ok"),
            (IoStatus::Retryable, "retryable (device resetting)"),
            (IoStatus::DeviceFailed, "device failed"),
            (IoStatus::DeviceRemoved, "device removed"),
            (IoStatus::Target(SrpStatus::LbaOutOfRange), "target error"),
            (IoStatus::TooLarge, "larger than the disk takes"),
        ];
        for (status, text) in all {
            assert_eq!(status.as_str(), text);
        }
    }

    /// One block's checksum is the plain one; several fold their blocks' in order, so a
    /// layer that keeps a checksum per block gets the same without the data, and blocks
    /// swapped give another.
    #[test]
    fn a_commands_checksum_folds_its_blocks() {
        let mut data = std::vec![0u8; 3 * BLOCK_SIZE];
        for (i, b) in data.iter_mut().enumerate() {
            *b = (i * 7 / 5) as u8;
        }
        let one = &data[..BLOCK_SIZE];
        assert_eq!(checksum_blocks(one), checksum(one));
        let sums: std::vec::Vec<u64> = data.chunks(BLOCK_SIZE).map(checksum).collect();
        let folded = fold_block(fold_block(sums[0], sums[1]), sums[2]);
        assert_eq!(checksum_blocks(&data), folded);
        let swapped = fold_block(fold_block(sums[1], sums[0]), sums[2]);
        assert_ne!(checksum_blocks(&data), swapped);
    }

    #[test]
    fn a_request_moves_its_blocks_and_a_check_none() {
        let large = IoRequest {
            blocks: 16,
            ..IoRequest::stamped(1, 0, true)
        };
        assert_eq!(large.bytes(), 65_536);
        assert_eq!(IoRequest::check(Instant::ZERO).bytes(), 0);
    }
}
