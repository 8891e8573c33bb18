use hcabus::verbs::RcTransport;
use hcabus::{Duration, Instant};

use super::*;
use crate::srp_target::{Route, RoutePhase};

fn setup(routes: Vec<Route>, iops: u32, secs: u64) -> PeerSetup {
    PeerSetup {
        seed: 7,
        duration: Duration::from_ms(secs * 1000),
        iops,
        read_pct: 70,
        n_blocks: 1024,
        lun_id: 0,
        queue_depth: 32,
        max_outstanding: 96,
        large: crate::block::LargeIo::NONE,
        rc: RcTransport::DEFAULT,
        routes,
    }
}

fn blackhole(from_ms: u64, to_ms: Option<u64>) -> Route {
    let mut r = Route::default();
    let ph = |at, blackhole| RoutePhase {
        blackhole,
        ..RoutePhase::plain(Instant::from_ms(at), Duration::ZERO)
    };
    r.push(ph(from_ms, true)).expect("in order");
    if let Some(to) = to_ms {
        r.push(ph(to, false)).expect("in order");
    }
    r
}

fn closes(run: &PeerRun) {
    let io = run.io;
    assert_eq!(
        io.submitted,
        io.completed + io.failed + io.in_flight + io.lost,
        "{io:?}"
    );
    assert_eq!(
        (io.lost, io.duplicated, io.read_mismatches),
        (0, 0, 0),
        "{io:?}"
    );
}

#[test]
fn every_peer_carries_a_healthy_disk_without_moving_anything() {
    let s = setup(vec![Route::default(), Route::default()], 2_000, 10);
    for peer in Peer::ALL {
        let run = run(peer, &s).expect("valid");
        closes(&run);
        assert_eq!(run.io.failed, 0, "{}", peer.name());
        assert!(run.io.completed >= 19_990, "{}: {:?}", peer.name(), run.io);
        assert_eq!(run.moved, [0; MAX_PATHS], "{}", peer.name());
        assert!(run.taken_out.iter().all(Vec::is_empty), "{}", peer.name());
        // The lab target's service time, 60 to 250 us, and nothing else.
        let p50 = run.latencies.percentile(500_000);
        assert!((60..=260).contains(&p50), "{}: p50 {p50}", peer.name());
        assert!(run.reads_verified() > 0, "{}", peer.name());
    }
}

#[test]
fn a_dead_path_is_found_by_each_peer_through_its_own_timers() {
    let s = setup(vec![Route::default(), blackhole(2_000, None)], 2_000, 40);
    let fault = Instant::from_ms(2_000);
    // Retry exceeded 8 x 67.1 ms after the first send the route swallowed.
    let qp_error = RcTransport::DEFAULT.retry_budget().expect("timer");
    for peer in Peer::ALL {
        let run = run(peer, &s).expect("valid");
        closes(&run);
        let found = run
            .taken_out_after(1, fault)
            .map(|t| t.saturating_since(fault));
        if peer == Peer::Mpio(Selector::LeastQueue) {
            // Least queue depth keeps to the first idle path, and MPIO verifies no path:
            // an idle dead path is never known.
            assert_eq!(found, None, "{}", peer.name());
            continue;
        }
        let found = found.unwrap_or_else(|| panic!("{} never found it", peer.name()));
        let window = match peer {
            // fast_io_fail_tmo after the queue pair's error.
            Peer::DmSrp(_) => qp_error + timers::SRP_FAST_IO_FAIL,
            Peer::Mpio(_) => qp_error,
            // A selector that keeps to the first idle path may send path 1 nothing but
            // the keep-alive, every 2.5 s.
            Peer::Nvme(_) => timers::KEEP_ALIVE_PERIOD + qp_error,
        };
        assert!(found >= qp_error, "{}: {found:?}", peer.name());
        assert!(
            found <= window + Duration::from_ms(2),
            "{}: {found:?} past {window:?}",
            peer.name()
        );
        assert_eq!(run.io.failed, 0, "{}: the other path serves", peer.name());
        if matches!(
            peer.selector(),
            Selector::RoundRobin | Selector::ServiceTime
        ) {
            // Its commands on the dead path waited until it was found.
            let stuck = run.latencies.max();
            assert!(
                stuck >= found.as_us() - 1_000,
                "{}: {stuck} us",
                peer.name()
            );
        }
    }
}

#[test]
fn a_blackhole_shorter_than_the_retry_budget_is_ridden_through_by_every_peer() {
    let s = setup(
        vec![Route::default(), blackhole(2_000, Some(2_200))],
        2_000,
        6,
    );
    for peer in Peer::ALL {
        let run = run(peer, &s).expect("valid");
        closes(&run);
        assert!(run.taken_out.iter().all(Vec::is_empty), "{}", peer.name());
        assert_eq!(run.moved, [0; MAX_PATHS], "{}", peer.name());
        // Retransmitted after the blackhole: its commands waited it out (a selector that
        // keeps to the first idle path sent path 1 nothing to wait).
        let waited = run.latencies.max() >= 200_000;
        let spreads = matches!(
            peer.selector(),
            Selector::RoundRobin | Selector::ServiceTime
        );
        assert_eq!(waited, spreads, "{}", peer.name());
    }
}

#[test]
fn with_every_path_dead_dm_fails_io_nvme_holds_it_and_mpio_holds_it_twenty_seconds() {
    let dead = || blackhole(1_000, None);
    let s = setup(vec![dead(), dead()], 200, 40);
    let dm = run(Peer::DmSrp(Selector::ServiceTime), &s).expect("valid");
    let nvme = run(Peer::Nvme(Selector::First), &s).expect("valid");
    let mpio = run(Peer::Mpio(Selector::RoundRobin), &s).expect("valid");
    for r in [&dm, &nvme, &mpio] {
        closes(r);
    }
    assert!(dm.io.failed > 0, "no_path_retry fail: {:?}", dm.io);
    assert_eq!(
        nvme.io.failed, 0,
        "requeued while reconnecting: {:?}",
        nvme.io
    );
    assert!(nvme.io.in_flight > 0);
    assert!(mpio.io.failed > 0, "PDORemovePeriod over: {:?}", mpio.io);
    assert!(mpio.io.in_flight == 0, "{:?}", mpio.io);
}

#[test]
fn a_path_that_comes_back_is_reconnected_and_used_again() {
    let s = setup(
        vec![Route::default(), blackhole(2_000, Some(5_000))],
        2_000,
        60,
    );
    for peer in [
        Peer::Nvme(Selector::LeastQueue),
        Peer::DmSrp(Selector::ServiceTime),
    ] {
        let run = run(peer, &s).expect("valid");
        closes(&run);
        assert_eq!(run.io.failed, 0);
        // Only the last tick's I/O is out at the end: nothing waits on the old connection.
        assert!(run.io.in_flight <= 1, "{}: {:?}", peer.name(), run.io);
        assert!(run.latencies.max() < 15_000_000, "{}", peer.name());
        // NVMe's keep-alive fails the controller; ib_srp's reconnect (10 s) comes before
        // fast_io_fail (15 s), and the TUR waited behind the blocked rport: dm never
        // fails the path.
        let out = run.taken_out[1].len();
        let want = usize::from(matches!(peer, Peer::Nvme(_)));
        assert_eq!(out, want, "{}", peer.name());
    }
}

#[test]
fn a_setup_out_of_range_is_refused_by_name() {
    let mut s = setup(vec![], 2, 1);
    assert_eq!(run(Peer::ALL[0], &s).err(), Some(PeerError::Paths));
    s.routes = vec![Route::default()];
    s.queue_depth = 0;
    assert_eq!(run(Peer::ALL[0], &s).err(), Some(PeerError::QueueDepth));
}
