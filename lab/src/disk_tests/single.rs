//! The disk on its own adapter, one small host each: its login, its I/O and the data it
//! checks, a reset's take-back, the hold and its timeout, a failed or removed device, a port
//! loss, a busy target, its DMA memory. tests/tests runs it among whole stacks; these pin
//! each rule with the numbers it implies, fast enough for mutation testing (docs/verification.md).

use std::vec::Vec;

use hcabus::bus::ClientReport;
use hcabus::fabric::Fabric;
use hcabus::{Duration, Instant, Policy};
use hcabus_sim::{Fault, SimSetup};

use crate::srp_target::Route;
use crate::stack::{self, ClientSpec, DiskSpec, LabParts, Load, Node, StackSetup};
use ibal::disk::{DiskConfig, DiskStats, SrpClient};
use ibal::io::IoStats;
use ibal::retry::ClientProblem;
use ibal::srp::{SrpRsp, SrpStatus, IU_SIZE};

/// One I/O a millisecond; four on the wire at once; twelve more held.
fn config() -> DiskSpec {
    DiskSpec {
        initiator: DiskConfig {
            queue_depth: 4,
            hold_capacity: 12,
            ..DiskConfig::default()
        },
        load: Load {
            iops: 1_000,
            read_pct: 50,
            ..Load::default()
        },
        route: Route::default(),
    }
}

pub(super) fn setup(config: DiskSpec, faults: Vec<(u64, Fault)>) -> StackSetup {
    StackSetup {
        sim: SimSetup {
            name: "disk".into(),
            duration: Duration::from_ms(2_000),
            faults: faults
                .into_iter()
                .map(|(at, f)| (Instant::from_ms(at), f))
                .collect(),
            // Two ports, a hardware reset of 200 ms.
            ..hcabus_sim::scenarios::boot_from_san_run()
        },
        ibal: Some(Default::default()),
        clients: std::vec![ClientSpec::Disk {
            name: "d0".into(),
            config,
        }],
    }
}

pub(super) fn host(config: DiskSpec, faults: Vec<(u64, Fault)>) -> Node {
    stack::build(&setup(config, faults)).expect("builds")
}

fn run_to(host: &mut Node, ms: u64) -> (DiskStats, IoStats) {
    host.run_until(Instant::from_ms(ms));
    let v = &host.checker().violations;
    assert!(v.is_empty(), "at {ms} ms: {v:?}");
    assert_eq!(host.now(), Instant::from_ms(ms));
    let d = disk(host);
    let io = d.io_stats();
    let k = ClientReport::counters(d);
    let held = io.submitted - io.completed - io.failed;
    let s = d.disk().stats();
    assert_eq!(
        (k.submitted, k.completed, k.failed, k.held),
        (io.submitted, io.completed, io.failed, held),
        "what the report says of it at {ms} ms"
    );
    assert_eq!(
        (k.logins, k.logins_refused),
        (s.logins.into(), s.login_retries.into())
    );
    assert_eq!(
        io.unaccounted(),
        0,
        "the accounting closes at {ms} ms: {io:?}"
    );
    assert_eq!(
        (io.duplicated, io.read_mismatches, io.overdue),
        (0, 0, 0),
        "at {ms} ms"
    );
    (*d.disk().stats(), io)
}

fn disk(host: &Node) -> &SrpClient {
    stack::disks(host).next().expect("one disk")
}

#[test]
fn a_disk_logs_in_and_serves_checking_every_block_it_reads() {
    let mut config = config();
    // Three commands on the wire at a time, of the four the request limit allows.
    config.route = Route::constant(Duration::from_us(2_500)).with_login(Duration::from_ms(2));
    let mut h = host(config, Vec::new());
    let (d, io) = run_to(&mut h, 100);
    let c = disk(&h);
    assert!(c.disk().is_up() && c.disk().is_connected() && c.is_live_path());
    assert_eq!(
        (d.logins, d.login_retries, h.hca().stats().logins_refused),
        (1, 0, 0)
    );
    // I/Os from 0 to 100 ms, the last three still out.
    assert_eq!(io.submitted, 101);
    assert_eq!((io.completed, io.in_flight, io.failed), (98, 3, 0));
    assert_eq!(c.disk().in_flight(), 3);
    assert_eq!(
        d.commands_sent, 101,
        "nothing waits: the limit is never reached"
    );
    assert_eq!((d.answers, d.stale_responses, d.late_discarded), (98, 0, 0));
    assert_eq!(
        c.lab_target().stats().commands,
        100,
        "the last, sent at 100 ms, is on the wire"
    );
    let t = c.lab_target().stats();
    assert_eq!(
        t.reads + t.writes,
        100,
        "every command it took is a read or a write"
    );
    assert_eq!(
        t.write_mismatches, 0,
        "each write's block is what its request wrote"
    );
    assert!(
        io.reads_verified + 4 > t.reads && io.reads_verified <= t.reads,
        "every read answered is checked"
    );
    assert!(t.reads > 30 && t.writes > 30, "about half each: {t:?}");
    // A command's latency is the route's 2.5 ms and the target's service time (< 0.25 ms),
    // plus the login's 2 ms for the first.
    assert!(
        (4_500..4_750).contains(&io.max_latency_us),
        "{}",
        io.max_latency_us
    );
    let oldest = c.lab_workload().outstanding().next().expect("three out").id;
    assert!(c.disk().tracks(oldest) && !c.disk().tracks(io.submitted + 1));
    assert_eq!(
        c.disk().path_timeout(),
        None,
        "a disk of one path never gives up"
    );
    assert!(c.problem().is_none() && c.refusals == 0);
}

/// The disk of [`config`] on a route of 2.5 ms: two or three commands out at any time.
fn routed() -> DiskSpec {
    DiskSpec {
        route: Route::constant(Duration::from_us(2_500)),
        ..config()
    }
}

fn with_policy(config: DiskSpec, faults: Vec<(u64, Fault)>, policy: Policy) -> Node {
    let mut s = setup(config, faults);
    s.sim.policy = policy;
    stack::build(&s).expect("builds")
}

#[test]
fn a_reset_takes_back_what_is_out_holds_what_comes_and_reissues_it_all() {
    // An administrator's reset at 100 ms; the hardware reset takes 200 ms.
    let mut h = host(routed(), std::vec![(100, Fault::AdminReset)]);
    let (d, io) = run_to(&mut h, 101);
    let c = disk(&h);
    assert!(!c.disk().is_up() && !c.disk().is_connected());
    assert_eq!(
        c.disk().in_flight(),
        0,
        "nothing is on the wire of a reset adapter"
    );
    // The I/Os of 0..=97 ms were answered; those of 98 and 99 ms were out.
    assert_eq!(
        (d.answers, d.taken_back, d.max_in_flight_at_reset),
        (98, 2, 2)
    );
    assert_eq!(
        (io.submitted, io.in_flight),
        (102, 4),
        "two taken back, two new, all held"
    );
    assert_eq!(d.max_held, 4);
    let mut ids: Vec<u64> = c.lab_workload().outstanding().map(|r| r.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [99, 100, 101, 102], "ids count from 1");
    assert!(ids.iter().all(|&id| c.disk().tracks(id)) && !c.disk().tracks(98));
    let (d, io) = run_to(&mut h, 160);
    // Every slot full (the workload asks no more of a disk with none free).
    assert_eq!((d.max_held, io.submitted, io.in_flight), (16, 114, 16));
    assert_eq!(
        (io.failed, d.hold_timeouts),
        (0, 0),
        "held for 30 s at most"
    );
    let (d, io) = run_to(&mut h, 400);
    let c = disk(&h);
    assert!(c.disk().is_up());
    assert_eq!((d.logins, d.taken_back), (2, 2));
    assert_eq!((io.failed, io.retryable, io.lost), (0, 0, 0));
    // Each I/O was sent once, but the two taken back twice.
    assert_eq!(d.commands_sent, io.completed + io.in_flight + d.taken_back);
    assert_eq!(
        d.answers, io.completed,
        "the old connection's answers never came"
    );
    // The I/O of 98 ms waited for the hardware (200 ms), the login and its route.
    assert!(
        (205_000..206_000).contains(&io.max_latency_us),
        "{}",
        io.max_latency_us
    );
    assert_eq!(d.late_discarded + d.stale_responses, 0);
}

#[test]
fn past_its_hold_timeout_a_disk_fails_what_it_holds_then_what_comes_until_it_is_back() {
    let policy = Policy {
        io_hold_timeout_ms: 50,
        ..Policy::default()
    };
    let mut h = with_policy(routed(), std::vec![(100, Fault::AdminReset)], policy);
    let (d, io) = run_to(&mut h, 149);
    assert_eq!((d.hold_timeouts, io.failed, io.in_flight), (0, 0, 16));
    let (d, io) = run_to(&mut h, 150);
    assert_eq!(d.hold_timeouts, 1);
    // The 16 held at 100 + 50 ms, as retryable, and the I/O of 150 ms at once.
    assert_eq!((io.failed, io.retryable, io.in_flight), (17, 17, 0));
    assert_eq!(
        io.max_failed_latency_us, 52_000,
        "the I/O of 98 ms, failed at 150 ms"
    );
    let (d, io) = run_to(&mut h, 299);
    assert_eq!(
        (d.hold_timeouts, io.failed),
        (1, 166),
        "once; then one a millisecond"
    );
    let (d, io) = run_to(&mut h, 400);
    assert!(disk(&h).disk().is_up());
    assert_eq!((d.logins, d.hold_timeouts), (2, 1));
    assert_eq!(io.failed, 167, "no more once logged in again (300.5 ms)");
    assert_eq!(d.commands_sent, io.completed + io.in_flight + d.taken_back);
}

/// A device that fails (`ResetFails` past every retry) or leaves fails everything the disk
/// held, and everything after, with the status that says so.
#[test]
fn a_failed_or_removed_device_fails_what_is_held_and_what_comes() {
    let failed = std::vec![(100, Fault::ResetFails(9)), (100, Fault::AdminReset)];
    let removed = std::vec![(100, Fault::SurpriseRemoval)];
    let boot = DiskSpec {
        initiator: DiskConfig {
            boot: true,
            ..routed().initiator
        },
        ..routed()
    };
    for (faults, config, state) in [
        (failed.clone(), routed(), hcabus::State::Failed),
        (removed, routed(), hcabus::State::Removed),
        (failed, boot, hcabus::State::Failed),
    ] {
        let mut h = host(config, faults);
        let (d, io) = run_to(&mut h, 101);
        assert_eq!(h.coordinator().state(), state);
        let c = disk(&h);
        assert!(!c.disk().is_up() && !c.disk().is_connected());
        assert_eq!((d.taken_back, io.in_flight), (2, 0), "{state:?}");
        let failed_at_101 = io.failed;
        assert!(
            failed_at_101 >= 3,
            "the two taken back and what came: {io:?}"
        );
        let (d, io) = run_to(&mut h, 400);
        assert_eq!(
            io.failed,
            failed_at_101 + 299,
            "{state:?}: each new I/O at once"
        );
        assert_eq!(
            (io.retryable, io.in_flight, io.lost),
            (0, 0, 0),
            "{state:?}"
        );
        assert_eq!((d.commands_sent, d.logins, d.hold_timeouts), (100, 1, 0));
        assert_eq!(
            io.max_failed_latency_us, 2_000,
            "the I/O of 98 ms at 100 ms"
        );
        let paging = if config.initiator.boot { io.failed } else { 0 };
        assert_eq!(io.paging_failed, paging, "only the paging path's count");
    }
}

#[test]
fn a_busy_target_is_asked_again_after_a_backoff() {
    let mut h = host(routed(), std::vec![(0, Fault::TargetBusy(3))]);
    // Registered, not logged in yet: what it holds is owed by no live path.
    let (d, io) = run_to(&mut h, 3);
    assert!(!disk(&h).is_live_path() && ClientReport::id(disk(&h)).is_some());
    assert_eq!((d.logins, io.lost, io.in_flight), (0, io.submitted, 0));
    assert!(io.submitted > 0);
    let (d, io) = run_to(&mut h, 100);
    assert!(disk(&h).is_live_path());
    assert!(disk(&h).disk().is_up() && disk(&h).problem().is_none());
    assert_eq!(
        (d.logins, d.login_retries, d.logins_refused_busy),
        (1, 3, 3)
    );
    assert_eq!(h.hca().stats().logins_refused, 3);
    assert_eq!((io.failed, io.completed + io.in_flight), (0, io.submitted));
    // The first I/O waited out three backoffs.
    assert!(io.max_latency_us > 5_000, "{}", io.max_latency_us);
}

/// A target that refuses logins for longer than the hold (a storage upgrade): the data LUN
/// gives up at the hold, failing what it holds upward as retryable and what comes at once,
/// then probes at the backoff's cap and is back by itself once the target answers, its
/// record cleared; no adapter reset is needed.
#[test]
fn a_data_lun_that_gave_up_probes_on_and_is_back_once_the_target_answers() {
    let policy = Policy {
        io_hold_timeout_ms: 50,
        ..Policy::default()
    };
    // Refused for the first dozen attempts: about 2.6 s of backoff at its cap.
    let mut h = with_policy(routed(), std::vec![(0, Fault::TargetBusy(12))], policy);
    let (d, io) = run_to(&mut h, 500);
    assert_eq!(d.logins, 0);
    let error = disk(&h)
        .problem()
        .map(|p| p.to_string())
        .unwrap_or_default();
    assert!(error.contains("gave up"), "{error}");
    assert!(io.failed > 0 && io.failed == io.retryable, "{io:?}");
    assert_eq!(d.hold_timeouts, 1);
    let (d, io) = run_to(&mut h, 6_000);
    assert_eq!((d.logins, d.login_retries), (1, 12), "{d:?}");
    assert!(disk(&h).disk().is_up() && disk(&h).problem().is_none());
    assert_eq!(d.hold_timeouts, 1, "given up once");
    assert_eq!(io.submitted, io.completed + io.failed + io.in_flight);
    assert_eq!(h.coordinator().counters().resets_started, 0);
    let late = run_to(&mut h, 6_500).1;
    assert!(late.completed > io.completed, "I/O flows again");
    assert_eq!(late.failed, io.failed, "and none fails");
}

/// A disk on port 2 logs in as port 2's LID: the target's answers find it.
#[test]
fn a_disk_on_the_second_port_is_answered_there() {
    let config = DiskSpec {
        initiator: DiskConfig {
            port: 2,
            ..routed().initiator
        },
        ..routed()
    };
    let mut h = host(config, Vec::new());
    let (d, io) = run_to(&mut h, 100);
    assert!(disk(&h).disk().is_up());
    assert_eq!(
        (d.logins, d.answers, io.completed),
        (1, 98, 98),
        "as on port 1"
    );
}

/// What a broken target might send: an answer with a tag no command carried, and bytes
/// that are no SRP response at all. Each is counted and changes nothing else.
#[test]
fn answers_that_match_no_command_are_counted_and_dropped() {
    let mut h = host(routed(), Vec::new());
    let (before, io_before) = run_to(&mut h, 50);
    let (me, to) = disk(&h).lab_target().connection().expect("logged in");
    let unknown = SrpRsp {
        tag: (999 << 32) | 1,
        status: SrpStatus::Good,
        checksum: 0,
    };
    let mut iu = [0u8; IU_SIZE];
    let len = unknown.encode(&mut iu);
    h.hca_mut().remote_send(me, to, &iu[..len]).expect("sent");
    h.hca_mut().remote_send(me, to, &[0xee; 3]).expect("sent");
    let (d, io) = run_to(&mut h, 60);
    assert_eq!(d.stale_responses, before.stale_responses + 2);
    assert_eq!(
        d.answers,
        before.answers + 10 + 1,
        "ten I/Os and the unknown tag"
    );
    assert_eq!(io.completed, io_before.completed + 10);
    assert_eq!((d.late_discarded, d.aborts_answered), (0, 0));
}

/// At 20,000 I/Os a second on a route of 1 ms, the request limit is what bounds the wire:
/// exactly 16 out, never more; the slots past it hold.
#[test]
fn a_saturated_disk_keeps_its_request_limit_and_every_block_intact() {
    let config = DiskSpec {
        initiator: DiskConfig {
            queue_depth: 16,
            hold_capacity: 16,
            ..config().initiator
        },
        load: Load {
            iops: 20_000,
            ..config().load
        },
        route: Route::constant(Duration::from_ms(1)),
    };
    let mut h = host(config, std::vec![(30, Fault::AdminReset)]);
    let mut most = 0;
    for tenth_ms in 1..=290 {
        h.run_until(Instant::from_us(tenth_ms * 100));
        most = most.max(disk(&h).disk().in_flight());
    }
    assert_eq!(most, 16, "the request limit, reached and kept");
    let (d, io) = run_to(&mut h, 600);
    let c = disk(&h);
    let t = c.lab_target().stats();
    assert_eq!((t.overflowed, t.write_mismatches, t.malformed), (0, 0, 0));
    // Every slot held through the reset; the workload asks no more than there are slots.
    assert_eq!((d.max_held, io.busy, io.in_flight), (32, 0, 32));
    assert_eq!((d.max_in_flight_at_reset, c.disk().in_flight()), (16, 16));
    let on_wire = u64::from(c.disk().in_flight());
    assert_eq!(d.commands_sent, io.completed + on_wire + d.taken_back);
    assert!(io.reads_verified > 1_000, "{io:?}");
}

/// The paging path holds by `paging_io_hold_timeout_ms`, not `io_hold_timeout_ms`: with 0
/// it holds while recovery is possible (failing a paging I/O is a bugcheck on Windows).
#[test]
fn the_paging_path_holds_by_its_own_timeout() {
    let boot = DiskSpec {
        initiator: DiskConfig {
            boot: true,
            ..routed().initiator
        },
        ..routed()
    };
    for (paging_ms, io_ms, expires) in [(50, 30_000, true), (0, 50, false)] {
        let policy = Policy {
            io_hold_timeout_ms: io_ms,
            paging_io_hold_timeout_ms: paging_ms,
            ..Policy::default()
        };
        let mut h = with_policy(boot, std::vec![(100, Fault::AdminReset)], policy);
        let (d, io) = run_to(&mut h, 150);
        assert_eq!(d.hold_timeouts, u32::from(expires), "paging {paging_ms} ms");
        assert_eq!(
            io.failed,
            if expires { 17 } else { 0 },
            "paging {paging_ms} ms"
        );
        assert_eq!(io.paging_failed, io.failed);
        let (d, io) = run_to(&mut h, 400);
        assert!(disk(&h).disk().is_up() && d.logins == 2);
        assert_eq!(io.failed == 0, !expires);
    }
}

/// A data LUN acknowledges its quiesce as deferred work `ack_delay` after RESET; the boot
/// disk, which cannot wait for a worker thread, from inside the callback.
#[test]
fn a_data_lun_acknowledges_its_quiesce_after_its_delay_and_the_boot_disk_at_once() {
    for (boot, ack_ms, done_ms) in [(false, 20, 120), (false, 0, 100), (true, 20, 100)] {
        let config = DiskSpec {
            initiator: DiskConfig {
                boot,
                ack_delay: Duration::from_ms(ack_ms),
                ..routed().initiator
            },
            ..routed()
        };
        let mut h = host(config, std::vec![(100, Fault::AdminReset)]);
        run_to(&mut h, 400);
        let resets = h.resets();
        assert_eq!(resets.len(), 1);
        let quiesced = resets[0].facts.quiesce_done_at;
        assert_eq!(
            quiesced,
            Some(Instant::from_ms(done_ms)),
            "boot {boot}, {ack_ms} ms"
        );
        assert_eq!(disk(&h).refusals, 0, "its execute was taken");
    }
}

/// A data LUN and an IPoIB interface that acknowledge their quiesce as deferred work 400 ms
/// after RESET, under a quiesce deadline of 50 ms: every reset goes ahead without them.
fn late_acks(faults: Vec<(u64, Fault)>) -> Node {
    let config = DiskSpec {
        initiator: DiskConfig {
            ack_delay: Duration::from_ms(400),
            ..routed().initiator
        },
        ..routed()
    };
    let mut s = setup(config, faults);
    s.sim.policy = Policy {
        quiesce_deadline_ms: 50,
        ..Policy::default()
    };
    s.clients.push(ClientSpec::Ipoib {
        name: "ib0".into(),
        config: crate::stack::IpoibSpec {
            interface: ibal::ipoib::IpoibConfig {
                ack_delay: Duration::from_ms(400),
                ..Default::default()
            },
            ..Default::default()
        },
    });
    stack::build(&s).expect("builds")
}

/// A data LUN and an IPoIB interface whose deferred executes come after the reset they were
/// for (forced past the quiesce deadline; the hardware reset and the restore done): the
/// reset is over, so the execute is dropped, and each comes back when its port is Active.
/// (Before, the pending execute kept PORT_ACTIVE from logging in, and nothing did later:
/// the disk stayed down until its hold timeout, the interface for good.)
#[test]
fn a_reset_forced_past_a_clients_deferred_execute_still_brings_it_back() {
    // A cable pulled on port 2 late in the run: the ports are modelled, so after the
    // hardware reset port 1 is Down until PORT_ACTIVE.
    let pull = Fault::PortDown {
        port: 2,
        duration: Duration::from_ms(10),
    };
    let mut h = late_acks(std::vec![(100, Fault::AdminReset), (1_900, pull)]);
    let (d, io) = run_to(&mut h, 600);
    let resets = h.resets();
    assert_eq!(resets[0].facts.forced_count, 2, "{:?}", resets[0].facts);
    assert!(resets[0].facts.finished_at < Some(Instant::from_ms(500)));
    let c = disk(&h);
    assert!(c.disk().is_up(), "{:?}", ClientReport::events(c));
    assert_eq!(
        (d.logins, io.failed, c.refusals),
        (2, 0, 0),
        "no execute after its reset"
    );
    let ib0 = stack::nets(&h).next().expect("ib0");
    assert!(ib0.link_up(), "{:?}", ClientReport::events(ib0));
}

/// A reset aborted after RESET (a client past its quiesce deadline, with
/// `abort_on_unresponsive`): RESET_ABORTED brings the disk back at once, with no hardware
/// reset; the other port's news changes nothing for it.
#[test]
fn a_reset_aborted_after_reset_brings_the_disk_back_and_the_other_port_is_not_its_own() {
    let config = DiskSpec {
        initiator: DiskConfig {
            ack_delay: Duration::from_ms(400),
            ..routed().initiator
        },
        ..routed()
    };
    let policy = Policy {
        quiesce_deadline_ms: 50,
        abort_on_unresponsive: true,
        ..Policy::default()
    };
    let pull = Fault::PortDown {
        port: 2,
        duration: Duration::from_ms(50),
    };
    let faults = std::vec![(100, Fault::PlannedReset), (300, pull)];
    let mut h = with_policy(config, faults, policy);
    let (d, io) = run_to(&mut h, 200);
    let resets = h.resets();
    assert!(!resets[0].facts.hw_entered, "{:?}", resets[0].facts);
    assert!(
        disk(&h).disk().is_up(),
        "{:?}",
        ClientReport::events(disk(&h))
    );
    assert_eq!((d.logins, d.taken_back, io.failed), (2, 2, 0));
    let (d, _) = run_to(&mut h, 600);
    assert!(disk(&h).disk().is_up());
    assert_eq!(
        (d.logins, d.port_losses),
        (2, 0),
        "port 2's cable is not port 1's"
    );
    assert_eq!(disk(&h).refusals, 0, "its execute dropped with the reset");
}

/// A disk the access layer cannot open, or the bus cannot register: it says why, counts
/// the refusal, and holds nothing it could serve.
#[test]
fn a_disk_that_cannot_open_or_register_says_why() {
    let mut no_consumer = setup(routed(), Vec::new());
    no_consumer.ibal = Some(ibal::IbalConfig {
        max_consumers: 0,
        ..Default::default()
    });
    let mut no_slot = setup(routed(), Vec::new());
    no_slot.sim.max_clients = 1;
    for (s, what) in [(no_consumer, "consumer"), (no_slot, "registration")] {
        let mut h = stack::build_unchecked(&s).expect("builds");
        let (d, _) = run_to(&mut h, 50);
        let c = disk(&h);
        assert_eq!((c.refusals, d.logins), (1, 0), "{what}");
        let problem = c.problem();
        let named = match problem {
            Some(ClientProblem::NoConsumer(_)) => "consumer",
            Some(ClientProblem::NotRegistered(_)) => "registration",
            _ => "",
        };
        assert_eq!(named, what, "{problem:?}");
        assert!(!c.disk().is_up() && !c.is_live_path());
    }
}

mod admission;
mod bound;
mod events;
mod large;
mod memory;
