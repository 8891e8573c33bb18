//! Large transfers: a disk whose workload moves 16 blocks (64 KiB) at once in one I/O of
//! three. Each slot's buffer takes the largest, the target moves and checks every block,
//! and a link of reduced bandwidth is slow in proportion to what crosses it.

use hcabus::{Duration, Instant};

use super::{config, disk, run_to, setup};
use crate::srp_target::{Route, RoutePhase, Slowness};
use crate::stack::{self, BuildError, DiskSpec, LabParts, LargeIo, Load};
use ibal::disk::DiskConfig;
use ibal::io::BLOCK_SIZE;

const LARGE: LargeIo = LargeIo {
    pct: 33,
    blocks: 16,
};

/// `config`'s disk with large transfers, over a link of `bandwidth_mb_s` (0: unlimited).
fn large(bandwidth_mb_s: u32) -> DiskSpec {
    let phase = RoutePhase {
        slow: Slowness {
            bandwidth_mb_s,
            ..Slowness::NONE
        },
        ..RoutePhase::plain(Instant::ZERO, Duration::from_us(100))
    };
    let mut route = Route::default();
    route.push(phase).expect("the phase at 0");
    let c = config();
    DiskSpec {
        initiator: DiskConfig {
            max_blocks: LARGE.blocks,
            ..c.initiator
        },
        load: Load {
            large: LARGE,
            ..c.load
        },
        route,
    }
}

/// Every block of a large read is the one the last write of it left, on a link of any
/// speed; the slots' buffers are sized for 16 blocks; on a 250 MB/s link (1x SDR) the p99,
/// a large command's, is its 263 us of crossing later than on an unlimited one.
#[test]
fn large_transfers_move_and_check_every_block_and_cross_a_narrow_link_slowly() {
    let mut worst = [0; 2];
    for (k, mb_s) in [0, 250].into_iter().enumerate() {
        let mut h = stack::build(&setup(large(mb_s), std::vec![])).expect("builds");
        let (_, io) = run_to(&mut h, 1_000);
        let c = disk(&h);
        let t = c.lab_target().stats();
        assert_eq!(t.write_mismatches, 0, "{mb_s} MB/s: {t:?}");
        assert!(t.reads > 200 && t.writes > 200, "{t:?}");
        assert!(
            io.reads_verified + 4 > t.reads,
            "every read checked: {io:?}"
        );
        let (_, dma) = c.disk().dma_reserved();
        let slots = c.disk().config().slots();
        assert!(
            dma >= slots * 16 * BLOCK_SIZE as u64,
            "{dma} for {slots} slots"
        );
        // One I/O in three is large: the slowest hundredth are.
        worst[k] = c.lab_workload().latencies().percentile(990_000);
    }
    // The histogram's buckets are within a tenth.
    assert!(worst[1] >= worst[0] + 263 * 9 / 10, "p99s {worst:?}");
}

/// A disk whose workload moves more blocks at once than its buffers take is refused when
/// it is built, the client named.
#[test]
fn a_disk_whose_buffers_are_too_small_for_its_workload_is_refused() {
    let mut spec = large(0);
    spec.initiator.max_blocks = 8;
    let refused = stack::build(&setup(spec, std::vec![])).err();
    assert!(
        matches!(
            &refused,
            Some(BuildError::TooLarge { client, moves: 16, takes: 8 }) if client == "d0"
        ),
        "{refused:?}"
    );
}
