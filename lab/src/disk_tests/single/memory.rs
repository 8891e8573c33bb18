//! What a disk takes of its adapter, to the byte and the entry: its DMA memory, its buffers
//! in it, its completion queue; and what it says when the adapter has less.

use std::vec::Vec;

use hcabus::bus::ClientReport;
use ibal::disk::DiskConfig;
use ibal::retry::ClientProblem;

use super::{config, disk, host, routed, run_to, setup};
use crate::stack::{self, DiskSpec};

/// The disk's DMA memory is a data block, a command IU and an ABORT TASK IU per slot and a
/// response IU per credit, each IU 64 bytes: with 16 slots and 4 credits,
/// 16 x (4096 + 2 x 64) + 4 x 64 bytes.
#[test]
fn a_disk_takes_exactly_its_dma_memory_and_without_it_says_so() {
    const NEEDED: u32 = 16 * (4_096 + 2 * 64) + 4 * 64;
    assert_eq!(u64::from(NEEDED), config().initiator.dma_bytes());
    for (limit, up) in [(NEEDED, true), (NEEDED - 1, false)] {
        let mut s = setup(routed(), Vec::new());
        s.sim.hca.verbs.dma_bytes = limit;
        let mut h = stack::build_unchecked(&s).expect("builds");
        let (d, io) = run_to(&mut h, 50);
        let c = disk(&h);
        assert_eq!(c.disk().is_up(), up, "{limit} bytes");
        if up {
            assert_eq!(h.hca().verbs().dma_in_use(), u64::from(NEEDED));
            assert!(c.problem().is_none() && c.refusals == 0 && c.is_live_path());
            assert_eq!((io.completed + io.in_flight, io.lost), (io.submitted, 0));
            continue;
        }
        let bytes = u64::from(NEEDED);
        assert_eq!(c.problem(), Some(ClientProblem::NoDmaMemory { bytes }));
        assert_eq!((c.refusals, d.logins, d.commands_sent), (1, 0, 0));
        assert!(
            !c.is_live_path() && ClientReport::id(c).is_none(),
            "never registered"
        );
        // What it holds will never be served: owed by a disk that is not there, lost.
        assert_eq!((io.in_flight, io.lost, io.completed), (0, 16, 0));
    }
}

/// No two buffers the adapter may hold at once share a byte: each slot's data block, its
/// command IU and its ABORT TASK IU (the command's send may still be pending when it is
/// given up), each credit's response IU; and all of them lie in what the disk reserved.
#[test]
fn the_disks_dma_buffers_never_overlap() {
    let h = host(routed(), Vec::new());
    let d = disk(&h).disk();
    let (base, len) = d.dma_reserved();
    let mut spans: Vec<(u64, u64)> = d.dma_buffers().collect();
    spans.sort_unstable();
    assert_eq!(spans.len(), 3 * 16 + 4);
    assert_eq!(spans[0].0, base, "from the start of the reserve");
    for w in spans.windows(2) {
        assert!(
            w[0].0 + w[0].1 <= w[1].0,
            "{:#x?} overlaps {:#x?}",
            w[0],
            w[1]
        );
    }
    let (last, last_len) = spans[spans.len() - 1];
    assert_eq!(last + last_len, base + len, "to its end, nothing unused");
    assert_eq!(len, d.config().dma_bytes());
}

/// The completion queue is a send and a receive completion per credit and 8 more: with
/// one credit, 10 entries. An adapter whose CQs are that small serves it; one entry less
/// and its login fails for good.
#[test]
fn a_disk_asks_for_exactly_its_completion_queue() {
    let config = DiskSpec {
        initiator: DiskConfig {
            queue_depth: 1,
            ..routed().initiator
        },
        ..routed()
    };
    assert_eq!(config.initiator.cq_entries(), 10);
    for (limit, up) in [(10, true), (9, false)] {
        let mut s = setup(config, Vec::new());
        s.sim.hca.verbs.max_cq_entries = limit;
        let mut h = stack::build_unchecked(&s).expect("builds");
        let (d, _) = run_to(&mut h, 50);
        assert_eq!(disk(&h).disk().is_up(), up, "{limit} entries");
        if up {
            assert_eq!((d.logins, d.login_retries), (1, 0));
            continue;
        }
        // Refused for good (no retry makes the CQ fit): the login gives up at once, and
        // the disk fails what it holds and what comes as retryable rather than hold it.
        let (d, io) = run_to(&mut h, 100);
        let c = disk(&h);
        assert!(matches!(
            c.problem(),
            Some(ClientProblem::GaveUp { attempts: 1, .. })
        ));
        assert_eq!((d.logins, d.login_retries, d.hold_timeouts), (0, 1, 1));
        assert_eq!(
            (io.failed, io.retryable, io.in_flight),
            (io.submitted, io.submitted, 0)
        );
    }
}
