//! The disk as one path of a multipath disk, two adapters each with one path: a slow path
//! given up and its commands aborted, a blackholed one dropped, an adapter's reset moving
//! the commands to the other path, the last-path guard, the counters each path reports.
//! tests/tests/suites/multipath.rs and the failover model run these among whole stacks; here each
//! rule is pinned by the numbers it implies, fast enough for mutation testing.

use std::vec::Vec;

use hcabus::verbs::RcTransport;
use hcabus::{Duration, Instant, Policy};
use hcabus_sim::{Fault, SimSetup};

use crate::srp_target::{Route, RoutePhase};
use crate::stack::{
    self, AdapterSetup, ClientSpec, LabParts, Load, MultiNode, MultiSetup, MultipathSpec,
    PathConfig, StackSetup,
};
use hcabus::fabric::Fabric;
use ibal::disk::{DiskConfig, DiskStats, PathTimeout, SrpClient};
use ibal::io::IoStats;
use ibal::multipath::{PathStats, SharedMultipath};
use ibal::srp::{SrpRsp, SrpStatus, IU_SIZE};

fn disk_config() -> DiskConfig {
    DiskConfig {
        queue_depth: 8,
        hold_capacity: 64,
        path_timeout: PathTimeout::DEFAULT,
        ..DiskConfig::default()
    }
}

/// The disk's workload: 1,000 I/Os a second, half of them reads.
const LOAD: Load = Load {
    iops: 1_000,
    read_pct: 50,
    n_blocks: 1024,
    large: crate::block::LargeIo::NONE,
    series_buckets: crate::block::SERIES_BUCKETS,
};

/// Blocks enough that no write in a test's second comes to a block a given-up write holds
/// (the write fence's own test is `a_write_held_by_a_fence_drops_the_connection_...`).
const WIDE: u64 = 1 << 16;

/// Each path's route when a test says nothing of it: 200 us.
fn healthy_route() -> Route {
    Route::constant(Duration::from_us(200))
}

/// A route whose answers take `latency` from `at_ms` on (200 us before).
fn slow_from(at_ms: u64, latency: Duration, blackhole: bool) -> Route {
    let mut r = Route::constant(Duration::from_us(200));
    let phase = RoutePhase {
        blackhole,
        ..RoutePhase::plain(Instant::from_ms(at_ms), latency)
    };
    r.push(phase).expect("one phase after the first");
    r
}

struct Paths {
    routes: [Route; 2],
    faults: [Vec<(u64, Fault)>; 2],
    policy: Policy,
    guard: bool,
    /// The largest CQ path 0's adapter makes.
    max_cq_0: Option<u32>,
    timeout: PathTimeout,
    /// A CAN_VETO client on path 1's adapter that never answers a query: the query stays
    /// open until its deadline.
    silent_vetoer_1: bool,
    /// The disk's workload rate.
    iops: u32,
    /// The blocks its I/O spreads over.
    n_blocks: u64,
    /// Both adapters' transport timer.
    transport: RcTransport,
}

impl Default for Paths {
    fn default() -> Self {
        let r = healthy_route();
        Paths {
            routes: [r, r],
            faults: [Vec::new(), Vec::new()],
            policy: Policy::default(),
            guard: false,
            max_cq_0: None,
            timeout: PathTimeout::DEFAULT,
            silent_vetoer_1: false,
            iops: LOAD.iops,
            n_blocks: LOAD.n_blocks,
            transport: RcTransport::DEFAULT,
        }
    }
}

fn world(p: Paths) -> MultiNode {
    let adapter = |i: usize| {
        let mut sim = hcabus_sim::scenarios::boot_from_san_run();
        sim.name = std::format!("hca{i}");
        sim.duration = Duration::from_ms(5_000);
        sim.policy = p.policy;
        sim.hca.identity.node_guid += 0x10 * i as u64;
        sim.hca.identity.serial += i as u64;
        sim.hca.transport = p.transport;
        if let (0, Some(n)) = (i, p.max_cq_0) {
            sim.hca.verbs.max_cq_entries = n;
        }
        sim.faults = p.faults[i]
            .iter()
            .map(|&(at, f)| (Instant::from_ms(at), f))
            .collect();
        let initiator = DiskConfig {
            guard_last_path: p.guard,
            path_timeout: p.timeout,
            ..disk_config()
        };
        let mut clients = std::vec![ClientSpec::DiskPath {
            name: "disk".into(),
            config: PathConfig {
                initiator,
                route: p.routes[i],
                disk: 0,
                path: i,
            },
        }];
        if i == 1 && p.silent_vetoer_1 {
            clients.push(ClientSpec::Scripted {
                name: "silent".into(),
                config: crate::stack::ScriptedConfig {
                    kind: hcabus::types::ClientKind::Custom,
                    flags: hcabus::types::ClientFlags::CAN_VETO,
                    behavior: hcabus_sim::Behavior {
                        never_ack: true,
                        ..Default::default()
                    },
                },
            });
        }
        AdapterSetup {
            name: std::format!("hca{i}"),
            stack: StackSetup {
                sim: SimSetup { ..sim },
                ibal: Some(Default::default()),
                clients,
            },
        }
    };
    let setup = MultiSetup {
        name: "paths".into(),
        seed: 1,
        adapters: std::vec![adapter(0), adapter(1)],
        disks: std::vec![MultipathSpec {
            name: "disk".into(),
            config: DiskConfig {
                guard_last_path: p.guard,
                path_timeout: p.timeout,
                ..disk_config()
            },
            load: Load {
                iops: p.iops,
                n_blocks: p.n_blocks,
                ..LOAD
            },
            paths: 2,
        }],
    };
    match p.max_cq_0 {
        // An adapter the budget would refuse: what a run does with it.
        Some(_) => stack::build_multi_unchecked(&setup).expect("builds"),
        None => stack::build_multi(&setup).expect("builds"),
    }
}

fn path(world: &MultiNode, i: usize) -> &SrpClient {
    stack::disks(&world.hosts()[i].1).next().expect("a path")
}

fn shared(world: &MultiNode) -> SharedMultipath {
    path(world, 0)
        .multipath()
        .expect("a path of a disk")
        .0
        .clone()
}

/// Runs to `ms` and checks what holds at every instant: no violation, the accounting
/// closes, nothing lost or duplicated, and each path's report agrees with the disk's queue.
fn run_to(world: &mut MultiNode, ms: u64) -> (IoStats, [PathStats; 2], [DiskStats; 2]) {
    world.run_until(Instant::from_ms(ms));
    let (_, violations) = world.invariants();
    assert!(violations.is_empty(), "at {ms} ms: {violations:?}");
    let io = stack::io_stats_all(world);
    assert_eq!(
        io.unaccounted(),
        0,
        "the accounting closes at {ms} ms: {io:?}"
    );
    assert_eq!(
        (io.lost, io.duplicated, io.read_mismatches, io.overdue),
        (0, 0, 0, 0),
        "at {ms} ms"
    );
    let mp = shared(world);
    let m = mp.lock();
    let stats = [0, 1].map(|i| m.path_stats(i).expect("two paths"));
    let unpathed = m.stats().failed_unpathed;
    let queued = m.queued() as u64;
    drop(m);
    let mut completed = 0;
    let mut submitted = 0;
    for (i, s) in stats.iter().enumerate() {
        let c = path(world, i);
        assert_eq!(c.multipath().map(|(_, index)| index), Some(i));
        assert_eq!(
            c.io_stats(),
            IoStats::default(),
            "a path's I/O is its disk's"
        );
        let k = c.counters();
        let (own, waiting) = if i == 0 { (unpathed, queued) } else { (0, 0) };
        assert_eq!(
            (k.submitted, k.completed, k.failed),
            (s.taken - s.moved + own + waiting, s.ios, s.failed + own),
            "path {i} at {ms} ms"
        );
        assert_eq!(
            k.held,
            s.taken - s.moved - s.ios - s.failed + waiting,
            "path {i} at {ms} ms"
        );
        assert_eq!(
            k.submitted,
            k.completed + k.failed + k.held,
            "path {i}'s accounting closes at {ms} ms"
        );
        submitted += k.submitted;
        assert_eq!(
            (k.failovers, k.commands_moved),
            (u64::from(s.failovers), s.moved)
        );
        let d = c.disk().stats();
        assert_eq!(
            (k.logins, k.logins_refused),
            (d.logins.into(), d.login_retries.into())
        );
        completed += s.ios;
    }
    assert_eq!(completed, io.completed, "every completion through one path");
    assert_eq!(submitted, io.submitted, "every I/O counted on one adapter");
    (io, stats, [0, 1].map(|i| *path(world, i).disk().stats()))
}

#[test]
fn two_healthy_paths_share_the_load_and_never_give_up() {
    let mut w = world(Paths::default());
    let (io, p, d) = run_to(&mut w, 200);
    assert!(path(&w, 0).disk().is_up() && path(&w, 1).disk().is_up());
    assert!(p[0].ios > 40 && p[1].ios > 40, "both serve: {p:?}");
    assert_eq!((d[0].given_up, d[1].given_up, io.failed), (0, 0, 0));
    // The adaptive timeout learned each path: well under its 3 s cap, at least its floor.
    for (i, d) in d.iter().enumerate() {
        let t = path(&w, i).disk().path_timeout().expect("adaptive");
        assert!(
            (Duration::from_ms(5)..Duration::from_ms(50)).contains(&t),
            "{t:?}"
        );
        assert!(path(&w, i).disk().timing().answers().0 > 40);
        assert_eq!(path(&w, i).disk().answers(), d.answers);
    }
}

/// Path 0's route turns 300 ms slow at 100 ms: each command out past the learned timeout
/// (5.35 ms here) is given up there, aborted at the target and re-issued on path 1; the
/// path is then probed, one command at a time. Each probe's late answer still measures the
/// route (the tag names that one send), so the path learns its new latency, its probes
/// come back within it, and it serves again at 300 ms, giving nothing more up. Priced at
/// 300 ms beside a 200 us path that is never full, it wins only what the selector gives a
/// path idle for a second: one I/O, which keeps its round trip current.
#[test]
fn a_slow_path_gives_its_commands_up_then_learns_its_latency_and_serves_again() {
    let mut w = world(Paths {
        routes: [
            slow_from(100, Duration::from_ms(300), false),
            healthy_route(),
        ],
        n_blocks: WIDE,
        ..Paths::default()
    });
    let (_, p, d) = run_to(&mut w, 99);
    // Equal routes: the selector shares the I/O (docs/design.md §7 "Path selection").
    let before = p[0].ios;
    assert!((20..=80).contains(&before), "{p:?}");
    assert_eq!((d[0].given_up, d[0].answers), (0, before));
    let (io, p, d) = run_to(&mut w, 110);
    assert_eq!((p[0].slow_failovers, p[0].given_up, p[0].moved), (1, 2, 2));
    assert_eq!(d[0].given_up, 2);
    assert_eq!(io.failed, 0, "moved, not failed");
    // What it answered before the route slowed, and nothing since.
    let answered = p[0].ios;
    assert!((before..=before + 1).contains(&answered), "{p:?}");
    let (_, p, d) = run_to(&mut w, 300);
    // Probed: the first probe waits for the path's own check, which the route holds as
    // it holds everything, to be given up with the commands (docs/design.md §7 "Evidence
    // on demand"); one or two probes by 300 ms.
    assert_eq!((p[0].ios, p[0].restored), (answered, 0), "probed: {p:?}");
    assert!((1..=2).contains(&p[0].probes), "{p:?}");
    assert_eq!(d[0].late_discarded, 0, "nothing back from the route yet");
    let srtt = |w: &MultiNode| path(w, 0).disk().timing().estimator().srtt();
    let healthy = srtt(&w).expect("measured");
    assert!(
        healthy < Duration::from_ms(1),
        "still the route before: {healthy}"
    );
    // The first probe's late answer at 405 ms: one 300 ms sample lifts the timeout over
    // the route's latency, so the next probe is answered within it.
    let (_, p500, _) = run_to(&mut w, 500);
    let t = path(&w, 0).disk().path_timeout().expect("adaptive");
    assert!(t > Duration::from_ms(300), "{t}");
    assert_eq!((p500[0].given_up, p500[0].restored), (5, 0));
    let (io, p, d) = run_to(&mut w, 3_000);
    let c = path(&w, 0);
    assert!(c.disk().is_up(), "slow, not down");
    assert_eq!(io.failed, 0);
    assert_eq!((p[0].restored, p[0].given_up), (1, 5));
    // Its own check stood for one probe when the route first slowed (see above).
    assert!((5..=6).contains(&p[0].probes), "{p:?}");
    let served = (p[0].taken - p[0].probes) - (p500[0].taken - p500[0].probes);
    assert!(
        (1..=3).contains(&served),
        "a stale path's I/O, one a second: {p:?}"
    );
    // A handful of 300 ms samples, each an eighth of the way from under 1 ms: on its way.
    let learned = srtt(&w).expect("measured");
    assert!(
        (Duration::from_ms(100)..Duration::from_ms(310)).contains(&learned),
        "{learned}"
    );
    // Every command was answered or given up, every give-up's abort answered, and each
    // late answer (the target ran the command before its abort came) discarded.
    let out = u64::from(c.disk().in_flight());
    assert_eq!(d[0].commands_sent, p[0].ios + d[0].given_up + out);
    assert_eq!((d[0].aborts_answered, d[0].late_discarded), (5, 5));
    assert_eq!(
        d[0].answers,
        p[0].ios + d[0].aborts_answered + d[0].late_discarded
    );
    assert_eq!(
        (
            d[0].aborts_unsent,
            d[0].abort_timeouts,
            d[0].stale_responses
        ),
        (0, 0, 0)
    );
    let t = c.lab_target().stats();
    assert_eq!(t.aborted + t.aborts_too_late, 5, "{t:?}");
    // The worst I/O is the route's own latency, no worse than with failover off.
    assert!(
        (300_000..301_000).contains(&io.max_latency_us),
        "{}",
        io.max_latency_us
    );
}

/// Both routes 2.5 ms: two or three commands out on each path. A reset of path 0's adapter
/// takes them back and gives them to path 1 at once; path 0 serves again after.
#[test]
fn an_adapters_reset_moves_its_paths_commands_to_the_other_path() {
    let r = Route::constant(Duration::from_us(2_500));
    let mut w = world(Paths {
        routes: [r, r],
        faults: [std::vec![(100, Fault::AdminReset)], Vec::new()],
        ..Paths::default()
    });
    let (_, p, d) = run_to(&mut w, 101);
    assert!(!path(&w, 0).disk().is_up() && !shared(&w).lock().path_up(0));
    let moved = d[0].taken_back;
    assert!(moved > 0, "{d:?}");
    assert_eq!(
        (p[0].failovers, p[0].moved, d[0].max_in_flight_at_reset),
        (1, moved, moved)
    );
    let taken = p[0].taken;
    let (_, p, _) = run_to(&mut w, 250);
    assert_eq!(
        (p[0].taken, p[0].moved),
        (taken, moved),
        "a path down takes nothing"
    );
    let (io, p, d) = run_to(&mut w, 400);
    assert!(path(&w, 0).disk().is_up() && shared(&w).lock().path_up(0));
    assert_eq!((d[0].logins, io.failed, p[0].failovers), (2, 0, 1));
    assert!(p[0].down_us >= 200_000, "the hardware reset: {p:?}");
    // The moved commands waited for no reset: a route's time, twice at most.
    assert!(io.max_latency_us < 6_000, "{}", io.max_latency_us);
    assert!(p[0].ios > 0 && p[1].ios > p[0].ios);
}

/// A path whose adapter left is dead; the other serves everything, nothing fails.
#[test]
fn a_removed_adapters_path_is_dead_and_the_other_serves() {
    let mut w = world(Paths {
        faults: [std::vec![(100, Fault::SurpriseRemoval)], Vec::new()],
        ..Paths::default()
    });
    let (_, p, _) = run_to(&mut w, 99);
    let answered = p[0].ios;
    let (io, p, _) = run_to(&mut w, 700);
    assert!(shared(&w).lock().path_dead(0) && !path(&w, 0).disk().is_up());
    assert!(
        (answered..=answered + 1).contains(&p[0].ios),
        "what it answered before it left: {p:?}"
    );
    assert_eq!(io.failed, 0);
    assert_eq!(p[0].down_us, 600_000, "down since it left, once");
    let m = shared(&w);
    let m = m.lock();
    let (events, _) = m.path_events();
    let dead = events
        .filter(|e| e.path == 0 && e.kind == ibal::multipath::PathEventKind::Dead)
        .count();
    assert_eq!(dead, 1, "declared dead once");
    assert_eq!(p[1].ios, io.completed - p[0].ios);
}

/// The last-path guard: while path 0's adapter resets, a planned reset of path 1's would
/// leave the disk with no path, and its query is vetoed by the disk; once path 0 is back
/// the same request goes through.
#[test]
fn the_last_path_guard_vetoes_a_planned_reset_only_while_it_is_the_last_path() {
    let mut w = world(Paths {
        faults: [
            std::vec![(100, Fault::AdminReset)],
            std::vec![(150, Fault::PlannedReset), (500, Fault::PlannedReset)],
        ],
        guard: true,
        ..Paths::default()
    });
    let (io, _, d) = run_to(&mut w, 1_000);
    let resets = w.resets();
    let planned: Vec<_> = resets.iter().filter(|r| r.facts.planned).collect();
    assert_eq!(planned.len(), 2, "{resets:?}");
    assert_eq!(planned[0].vetoed_by.as_deref(), Some("disk"));
    let why = std::format!("{:?}", planned[0].facts.veto_reason);
    assert!(why.contains("reset"), "path 0 named as resetting: {why}");
    assert!(planned[1].vetoed_by.is_none() && planned[1].facts.hw_entered);
    assert_eq!((io.failed, d[1].logins, d[0].logins), (0, 2, 2));
    assert!(path(&w, 0).disk().is_up() && path(&w, 1).disk().is_up());
}

/// A path is the disk's: it issues nothing of its own and holds nothing past its request
/// limit (waiting I/O waits in the disk's queue).
#[test]
fn a_path_issues_nothing_and_holds_nothing_of_its_own() {
    let w = world(Paths::default());
    for i in 0..2 {
        let c = path(&w, i);
        assert!(c.workload().is_none(), "path {i}: its I/O is the disk's");
        assert_eq!(c.disk().slots().len(), 8, "its request limit, no hold");
    }
}

/// Both adapters leave: every path is dead, and what the disk's queue holds or is given
/// fails there, reported by its first path.
#[test]
fn with_every_path_dead_the_disk_fails_its_io_in_its_queue() {
    let gone = || std::vec![(100, Fault::SurpriseRemoval)];
    let mut w = world(Paths {
        faults: [gone(), gone()],
        ..Paths::default()
    });
    let (io, p, _) = run_to(&mut w, 300);
    let m = shared(&w);
    assert!(m.lock().path_dead(0) && m.lock().path_dead(1));
    let unpathed = m.lock().stats().failed_unpathed;
    assert_eq!(io.failed, unpathed, "failed in the queue, none by a path");
    assert!(unpathed >= 199, "every I/O since 100 ms: {unpathed}");
    assert_eq!((p[0].failed, p[1].failed), (0, 0));
    let k = path(&w, 0).counters();
    assert_eq!((k.submitted, k.failed), (p[0].taken + unpathed, unpathed));
    assert_eq!(
        path(&w, 1).counters().failed,
        0,
        "counted once, on the first path"
    );
}

/// Path 0's adapter cannot make the path's CQ: its login fails for good. The disk's queue
/// holds nothing for it (path 1 serves everything) and the path fails nothing itself.
#[test]
fn a_path_whose_login_fails_for_good_leaves_the_disk_to_its_other_path() {
    let mut w = world(Paths {
        max_cq_0: Some(8),
        ..Paths::default()
    });
    let (io, p, d) = run_to(&mut w, 200);
    let c = path(&w, 0);
    assert!(!c.disk().is_up() && !c.is_live_path());
    assert!(matches!(
        c.problem(),
        Some(ibal::retry::ClientProblem::GaveUp { .. })
    ));
    assert_eq!(
        (d[0].logins, d[0].login_retries, d[0].hold_timeouts),
        (0, 1, 0)
    );
    assert_eq!((io.failed, p[0].taken, p[1].ios), (0, 0, io.completed));
}

/// A target that answers a command with an error (here LBA out of range, sent as a broken
/// target would): the path fails that I/O upward, once; the command's real answer, which
/// comes after, is late and discarded.
#[test]
fn a_target_error_fails_the_io_on_its_path_once() {
    let r = Route::constant(Duration::from_us(2_500));
    let mut w = world(Paths {
        routes: [r, r],
        ..Paths::default()
    });
    run_to(&mut w, 100);
    let c = path(&w, 0);
    let tag = (0..8u64)
        .flat_map(|slot| (1..200u64).map(move |g| (slot << 32) | g))
        .find(|t| c.disk().slots().holds(*t))
        .expect("a command out on path 0");
    let (me, to) = c.lab_target().connection().expect("logged in");
    let rsp = SrpRsp {
        tag,
        status: SrpStatus::LbaOutOfRange,
        checksum: 0,
    };
    let mut iu = [0u8; IU_SIZE];
    let len = rsp.encode(&mut iu);
    let host = w.host_mut(0).expect("hca0");
    host.hca_mut()
        .remote_send(me, to, &iu[..len])
        .expect("sent");
    let (io, p, d) = run_to(&mut w, 120);
    assert_eq!((io.failed, p[0].failed, p[1].failed), (1, 1, 0));
    assert_eq!(d[0].late_discarded, 1, "the real answer, after");
    let k = path(&w, 0).counters();
    assert_eq!(
        (k.failed, k.held),
        (1, p[0].taken - p[0].ios - 1 - p[0].moved)
    );
}

/// Path 0's route is slow from 100 to 400 ms, then healthy again: the path is probed while
/// slow, and after enough prompt answers serves a full share again.
#[test]
fn a_slow_path_that_heals_is_restored_by_its_probes() {
    let mut healed = slow_from(100, Duration::from_ms(300), false);
    let fast = RoutePhase::plain(Instant::from_ms(400), Duration::from_us(200));
    healed.push(fast).expect("a third phase");
    let mut w = world(Paths {
        routes: [healed, healthy_route()],
        n_blocks: WIDE,
        ..Paths::default()
    });
    let (_, p, _) = run_to(&mut w, 99);
    let answered = p[0].ios;
    let (_, p, _) = run_to(&mut w, 399);
    assert!((answered..=answered + 1).contains(&p[0].ios), "{p:?}");
    assert_eq!((p[0].given_up, p[0].restored), (4, 0));
    let (io, p, d) = run_to(&mut w, 500);
    assert_eq!((p[0].restored, p[0].slow_failovers), (1, 1));
    assert!(p[0].probes >= 3, "restored after its probes: {p:?}");
    assert_eq!(d[0].aborts_answered, d[0].given_up, "every abort answered");
    assert_eq!(io.failed, 0);
    // Serving again, it is priced by what it answers now: its answers come back a little
    // slower than path 1's (about 400 us against 300), so it takes what path 1 is too busy
    // for and the I/O the selector gives a path idle for a second (few, at this load),
    // with nothing more given up.
    let (_, p, _) = run_to(&mut w, 1_400);
    let idle = p[0].taken;
    let (_, p, _) = run_to(&mut w, 3_000);
    assert!(p[0].taken > idle, "serving again: {p:?}");
    assert!(!shared(&w).lock().path_suspect(0));
    assert_eq!((p[0].restored, p[0].given_up), (1, 5));
}

/// A transport whose every send completes, in success or in error, within 67.1 ms
/// (2.1 ms timeouts, 7 retries, each timeout up to four times as long): a send out longer
/// is the adapter's stall, not the route's, from 100 ms.
pub(super) const QUICK_TRANSPORT: RcTransport = RcTransport {
    local_ack_timeout: 9,
    retry_count: 7,
};

/// Planned resets of both adapters at once, with the guard: each path's answer counts the
/// other consented away, so exactly one goes ahead and the other is vetoed by the disk.
#[test]
fn planned_resets_of_both_adapters_at_once_leave_the_disk_a_path() {
    let planned = || std::vec![(300, Fault::PlannedReset)];
    let mut w = world(Paths {
        faults: [planned(), planned()],
        guard: true,
        ..Paths::default()
    });
    let (io, _, _) = run_to(&mut w, 800);
    let resets = w.resets();
    let vetoed = resets.iter().filter(|r| r.vetoed_by.is_some()).count();
    let done = resets.iter().filter(|r| r.facts.hw_entered).count();
    assert_eq!((resets.len(), vetoed, done), (2, 1, 1), "{resets:?}");
    assert_eq!((io.failed, io.max_latency_us < 1_000), (0, true));
}

/// Path 1 consents at 300 ms to its adapter's planned reset, whose query a silent client
/// keeps open; path 0's adapter resets at 400 ms; the disk issues `iops`.
fn consent_then_down(iops: u32) -> MultiNode {
    world(Paths {
        faults: [
            std::vec![(400, Fault::AdminReset)],
            std::vec![(300, Fault::PlannedReset)],
        ],
        guard: true,
        silent_vetoer_1: true,
        iops,
        ..Paths::default()
    })
}

/// The guard's answer holds until the query closes (docs/design.md §3): path 1 consents to a planned
/// reset of its adapter while path 0 serves; the query stays open (a client that never
/// answers); path 0's adapter then resets, and path 1 withdraws its consent with a veto
/// instead of letting the silence at the deadline take the disk's last path.
#[test]
fn a_consent_is_withdrawn_when_the_other_path_goes_down_before_the_query_closes() {
    let mut w = consent_then_down(LOAD.iops);
    let (io, _, d) = run_to(&mut w, 1_500);
    let resets = w.resets();
    let planned: Vec<_> = resets.iter().filter(|r| r.facts.planned).collect();
    assert_eq!(planned.len(), 1, "{resets:?}");
    assert_eq!(
        planned[0].vetoed_by.as_deref(),
        Some("disk"),
        "{:?}",
        planned[0]
    );
    assert!(!planned[0].facts.hw_entered);
    let why = std::format!("{:?}", planned[0].facts.veto_reason);
    assert!(why.contains("reset"), "path 0 named as resetting: {why}");
    assert_eq!((io.failed, d[1].logins, path(&w, 1).refusals), (0, 1, 0));
    assert!(path(&w, 0).disk().is_up() && path(&w, 1).disk().is_up());
}

mod failover;
mod fence;
mod guard;
