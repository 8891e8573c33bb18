//! The access layer and its clients through resets (issue: boot-from-SAN rides through).

use hcabus::bus::{BusHandle, ClientReport};
use hcabus::fabric::{Fabric, RemoteRdma};
use hcabus::ioctl::Wire;
use hcabus::types::*;
use hcabus::verbs::*;
use hcabus::{Duration, Instant, State};
use hcabus_lab::stack::{self, ClientSpec, LabParts, Node, ScriptedConfig, StackSetup};
use hcabus_sim::{Behavior, Fault, RemoteError};
use ibal::disk::SrpClient;
use ibal::uverbs::{UverbsClient, UverbsError};
use ibal::*;

fn run(setup: &StackSetup) -> Node {
    let mut host = stack::build(setup).expect("valid stack");
    host.run();
    host
}

fn disk<'a>(host: &'a Node, name: &str) -> &'a SrpClient {
    hcabus_lab::stack::disks(host)
        .find(|d| d.name() == name)
        .unwrap_or_else(|| panic!("no disk {name}"))
}

#[test]
fn a_catastrophic_error_under_load_loses_no_io() {
    let host = run(&stack::boot_from_san_fast());
    let resets = host.resets();
    assert_eq!(resets.len(), 1);
    assert_eq!(resets[0].outcome(), "Restored");
    assert_eq!(host.coordinator().epoch(), Epoch(2));
    for name in ["bootdisk", "data-lun"] {
        let d = disk(&host, name);
        let s = d.disk().stats();
        assert!(
            s.max_in_flight_at_reset >= 32,
            "{name}: {} in flight at RESET",
            s.max_in_flight_at_reset
        );
        assert_eq!(
            s.taken_back, s.max_in_flight_at_reset,
            "{name}: all taken back"
        );
        assert_eq!(
            d.lab_target().stats().write_mismatches,
            0,
            "{name}: target verified writes"
        );
        assert!(d.disk().is_up(), "{name} works again");
        assert_eq!(d.events(), [EventKind::Reset, EventKind::ResetEnd]);
    }
    let io = stack::io_stats(&host);
    assert!(io.submitted > 10_000, "{io:?}");
    assert_eq!(io.lost, 0, "{io:?}");
    assert_eq!(io.duplicated, 0, "{io:?}");
    assert_eq!(io.failed, 0, "{io:?}");
    assert_eq!(io.read_mismatches, 0, "{io:?}");
    assert!(io.reads_verified > 5_000, "{io:?}");
    // Whatever is not completed is still in flight at the end of the run, and tracked.
    let outstanding: u64 = hcabus_lab::stack::disks(&host)
        .map(|d| d.lab_workload().outstanding().count() as u64)
        .sum();
    assert_eq!(io.completed + outstanding, io.submitted);
    assert!(outstanding <= 64, "nothing stuck: {outstanding}");
    assert!(
        io.max_latency_us >= resets[0].total_us().expect("finished"),
        "held I/O waited out the reset"
    );
    assert_eq!(host.checker().violations, Vec::<String>::new());
    assert_eq!(host.stats().pnp_operations, 0);
}

#[test]
fn io_completes_after_the_reset_not_only_before() {
    let setup = stack::boot_from_san_fast();
    let mut host = stack::build(&setup).expect("stack");
    host.run_until(Instant::from_ms(2_300));
    let at_recovery = stack::io_stats(&host).completed;
    host.run();
    let io = stack::io_stats(&host);
    assert!(
        io.completed > at_recovery + 5_000,
        "{} completed after recovery",
        io.completed - at_recovery
    );
}

#[test]
fn held_io_fails_once_as_retryable_past_io_hold_timeout_and_the_disk_comes_back() {
    let mut setup = stack::boot_from_san_fast();
    setup.sim.policy.io_hold_timeout_ms = 100;
    setup.sim.hca.hw_reset = Duration::from_ms(800);
    let host = run(&setup);
    assert_eq!(host.resets()[0].outcome(), "Restored");
    let io = stack::io_stats(&host);
    assert!(io.failed > 0, "{io:?}");
    assert_eq!(
        io.retryable, io.failed,
        "every failure is retryable: {io:?}"
    );
    assert_eq!(io.duplicated, 0, "each failed exactly once: {io:?}");
    assert_eq!(io.lost, 0);
    assert_eq!(io.read_mismatches, 0);
    // The data LUN gives up at io_hold_timeout; the boot disk is on the paging path and
    // holds (paging_io_hold_timeout = 0: until Failed or Removed).
    for (name, timeouts) in [("bootdisk", 0), ("data-lun", 1)] {
        let d = disk(&host, name);
        assert_eq!(d.disk().stats().hold_timeouts, timeouts, "{name}");
        assert!(d.disk().is_up(), "{name} works after RESET_END");
    }
    assert_eq!(io.paging_failed, 0, "{io:?}");
    // A paging hold the administrator bounded is honoured, and its failures are flagged.
    let mut bounded = setup.clone();
    bounded.sim.policy.paging_io_hold_timeout_ms = 100;
    let host = run(&bounded);
    let io = stack::io_stats(&host);
    assert_eq!(disk(&host, "bootdisk").disk().stats().hold_timeouts, 1);
    assert!(io.paging_failed > 0, "{io:?}");
    assert_eq!(io.retryable, io.failed);
    // Well past the reset, new I/O completes normally again.
    let mut host = stack::build(&setup).expect("stack");
    host.run_until(Instant::from_ms(3_200));
    let before = stack::io_stats(&host);
    host.run();
    let after = stack::io_stats(&host);
    assert!(after.completed > before.completed + 3_000);
    assert_eq!(after.failed, before.failed, "no failures once it is back");
}

#[test]
fn a_reset_that_ends_in_failed_fails_held_io_once_and_nothing_hangs() {
    let mut setup = stack::boot_from_san_fast();
    // Every reset assertion fails: retries, then the FLR, then Failed.
    setup
        .sim
        .faults
        .insert(0, (Instant::from_ms(500), Fault::ResetFails(100)));
    let host = run(&setup);
    assert_eq!(host.coordinator().state(), State::Failed);
    assert_eq!(host.resets()[0].outcome(), "HardwareDead");
    let io = stack::io_stats(&host);
    assert!(
        io.failed >= 64,
        "held and in-flight I/O failed upward: {io:?}"
    );
    assert_eq!(io.retryable, 0, "a dead device is not retryable: {io:?}");
    assert_eq!((io.lost, io.duplicated), (0, 0), "{io:?}");
    for d in hcabus_lab::stack::disks(&host) {
        assert_eq!(
            d.lab_workload().outstanding().count(),
            0,
            "{}: nothing hangs",
            d.name()
        );
        assert_eq!(
            d.events(),
            [EventKind::Reset, EventKind::ResetFailed],
            "{}",
            d.name()
        );
    }
    let u = stack::processes(&host).next().expect("uverbs");
    assert!(u.stats().refused_gone > 0, "opens fail on a failed device");
}

#[test]
fn ipoib_hands_sends_back_and_rejoins_its_groups() {
    let setup = stack::boot_from_san_fast();
    let mut host = stack::build(&setup).expect("stack");
    host.run_until(Instant::from_ms(1_300));
    let before: Vec<_> = hcabus_lab::stack::nets(&host)
        .map(|n| (*n.stats(), n.qpn()))
        .collect();
    host.run();
    for (n, (was, old_qpn)) in hcabus_lab::stack::nets(&host).zip(before) {
        let s = n.stats();
        assert!(s.completed_back > 0, "{}: {s:?}", n.name());
        assert_eq!(s.dropped, 0, "{}: {s:?}", n.name());
        assert_eq!((s.link_downs, s.link_ups), (1, 2), "{}", n.name());
        assert!(n.link_up());
        let qpn = n.qpn().expect("a queue pair again");
        assert_ne!(Some(qpn), old_qpn, "a new queue pair");
        for g in n.groups() {
            assert!(
                host.hca().verbs().is_attached(qpn, g),
                "{} joined {g:#x}",
                n.name()
            );
        }
        assert!(
            s.received_multicast > was.received_multicast + 100,
            "multicast flows again"
        );
        assert!(s.sent > was.sent + 2_000, "sends flow again");
        assert!(
            n.peer().received() >= s.sent - 1,
            "the peer got what we sent"
        );
    }
}

#[test]
fn user_contexts_get_eio_then_reopen_on_the_new_epoch_and_not_after_removal() {
    let setup = StackSetup {
        clients: vec![ClientSpec::Uverbs {
            name: "uverbs".into(),
            config: Default::default(),
        }],
        ..stack::boot_from_san_fast()
    };
    let mut setup = setup;
    setup.sim.faults.clear();
    let mut host = stack::build(&setup).expect("stack");
    host.with_agent::<UverbsClient, _>(|u, _| u.stop_process());
    let old = host
        .with_agent::<UverbsClient, _>(|u, bus| u.open(bus))
        .expect("agent")
        .expect("open");
    assert_eq!(
        host.with_agent::<UverbsClient, _>(|u, bus| u.work(bus, old)),
        Some(Ok(()))
    );
    host.inject(Fault::AdminReset);
    host.run_until(Instant::from_ms(1_000));
    assert_eq!(host.coordinator().epoch(), Epoch(2));
    let (eio, new, epoch) = host
        .with_agent::<UverbsClient, _>(|u, bus| {
            let eio = u.work(bus, old);
            let new = u.open(bus).expect("reopen");
            (eio, new, u.context_epoch(new))
        })
        .expect("agent");
    assert_eq!(
        eio,
        Err(UverbsError::DeviceReset),
        "the old context answers EIO"
    );
    assert_eq!(epoch, Some(Epoch(2)), "the new context is on the new epoch");
    let ok = host.with_agent::<UverbsClient, _>(|u, bus| (u.work(bus, new), u.close(bus, old)));
    assert_eq!(ok, Some((Ok(()), Ok(()))));
    host.inject(Fault::SurpriseRemoval);
    let after = host
        .with_agent::<UverbsClient, _>(|u, bus| (u.open(bus), u.work(bus, new)))
        .expect("agent");
    assert_eq!(
        after,
        (Err(UverbsError::DeviceGone), Err(UverbsError::DeviceReset))
    );
    // The provider counts what it answered, whoever called.
    let s = host
        .with_agent::<UverbsClient, _>(|u, _| *u.stats())
        .expect("agent");
    assert_eq!(
        (
            s.opens,
            s.ops_ok,
            s.eio,
            s.refused_gone,
            s.refused_resetting
        ),
        (2, 2, 2, 1, 0),
        "{s:?}"
    );
    assert_eq!(s.last_epoch, Some(Epoch(2)));
}

#[test]
fn the_default_user_process_sees_eio_once_and_keeps_running_on_the_new_epoch() {
    let host = run(&stack::boot_from_san_fast());
    let p = *stack::processes(&host).next().expect("uverbs").stats();
    assert_eq!(p.eio, 1, "{p:?}");
    assert_eq!(p.opens, 2, "{p:?}");
    assert_eq!(p.last_epoch, Some(Epoch(2)));
    assert!(p.ops_ok > 500, "{p:?}");
}

const PEER: RemoteQp = RemoteQp {
    lid: 0x77,
    qpn: Qpn(0x42),
};

/// An RC queue pair in `pd` connected to `PEER`, ready to answer RDMA.
fn connected_qp(
    ibal: &mut Ibal,
    bus: &mut hcabus_sim::SimCtx<'_>,
    c: ConsumerId,
    pd: PdHandle,
) -> QpHandle {
    let cq = ibal.create_cq(bus, c, 8).expect("cq");
    let qp = ibal
        .create_qp(bus, c, QpSpec::on_one_cq(pd, QpType::Rc, cq, 1, 4))
        .expect("qp");
    ibal.ready_to_receive(bus, c, qp, Some(PEER)).expect("rtr");
    qp
}

fn region(
    ibal: &mut Ibal,
    bus: &mut hcabus_sim::SimCtx<'_>,
    c: ConsumerId,
    pd: PdHandle,
    addr: u64,
    flags: MrFlags,
) -> MrKeys {
    let spec = MrSpec {
        pd,
        addr,
        len: 4096,
        access: Access::LOCAL_WRITE | Access::REMOTE_READ,
        flags,
    };
    ibal.reg_mr(bus, c, spec).expect("mr").1
}

#[test]
fn a_peer_s_rdma_read_with_an_old_r_key_works_only_for_a_preserved_region() {
    let mut setup = stack::boot_from_san_fast();
    setup.clients.clear();
    setup.sim.faults.clear();
    let mut host = stack::build(&setup).expect("stack");
    let (c, pd, kept, plain, kept_addr, plain_addr) = host
        .with_agent::<IbalClient, _>(|client, bus| {
            let shared = client.shared().clone();
            let mut ibal = shared.lock();
            let c = ibal.open("exporter").expect("consumer");
            let pd = ibal.alloc_pd(bus, c).expect("pd");
            connected_qp(&mut ibal, bus, c, pd);
            let kept_addr = bus.device().dma_alloc(4096).expect("dma");
            let plain_addr = bus.device().dma_alloc(4096).expect("dma");
            for (addr, text) in [(kept_addr, b"kept"), (plain_addr, b"lost")] {
                bus.device()
                    .with_dma(addr, 4, |m| m.copy_from_slice(text))
                    .expect("mem");
            }
            let kept = region(&mut ibal, bus, c, pd, kept_addr, MrFlags::PRESERVE_KEYS);
            let plain = region(&mut ibal, bus, c, pd, plain_addr, MrFlags::empty());
            (c, pd, kept, plain, kept_addr, plain_addr)
        })
        .expect("ibal");
    host.inject(Fault::Catastrophic);
    host.run_until(Instant::from_ms(3_000));
    assert_eq!(host.coordinator().epoch(), Epoch(2));
    // After RESET_END the consumer reconnects (a new QP in its preserved PD) and
    // re-registers its ordinary region; the peer keeps the R-Keys it was told before.
    let (qpn, fresh) = host
        .with_agent::<IbalClient, _>(|client, bus| {
            let shared = client.shared().clone();
            let mut ibal = shared.lock();
            let qp = connected_qp(&mut ibal, bus, c, pd);
            let fresh = region(&mut ibal, bus, c, pd, plain_addr, MrFlags::empty());
            (ibal.qpn(c, qp).expect("qpn"), fresh)
        })
        .expect("ibal");
    let mut out = [0u8; 4];
    let hca = host.hca_mut();
    assert_eq!(
        hca.remote_rdma_read(RemoteRdma::new(PEER, qpn, kept.rkey, kept_addr), &mut out),
        Ok(())
    );
    assert_eq!(&out, b"kept");
    assert_eq!(
        hca.remote_rdma_read(RemoteRdma::new(PEER, qpn, plain.rkey, plain_addr), &mut out),
        Err(RemoteError::AccessError),
        "an ordinary region's old R-Key is refused"
    );
    assert_ne!(fresh.rkey, plain.rkey);
    assert_eq!(
        hca.remote_rdma_read(RemoteRdma::new(PEER, qpn, fresh.rkey, plain_addr), &mut out),
        Ok(()),
        "its new R-Key works, once renegotiated"
    );
    let stats = *host
        .agent::<IbalClient>()
        .expect("ibal")
        .shared()
        .lock()
        .stats();
    assert_eq!(stats.preserved_restored, 1);
}

#[test]
fn an_unresponsive_client_keeps_stale_handles_that_never_reach_the_new_epoch() {
    let mut setup = stack::boot_from_san_fast();
    setup.sim.faults.clear();
    setup.sim.policy.quiesce_deadline_ms = 100;
    setup.clients = vec![ClientSpec::Scripted {
        name: "wedged".into(),
        config: ScriptedConfig {
            kind: ClientKind::Custom,
            flags: ClientFlags::empty(),
            behavior: Behavior {
                never_ack: true,
                ..Behavior::default()
            },
        },
    }];
    let mut host = stack::build(&setup).expect("stack");
    // The wedged client's verbs resources, made before the reset.
    let (wedged, old_qp, keys, addr) = host
        .with_agent::<IbalClient, _>(|client, bus| {
            let shared = client.shared().clone();
            let mut ibal = shared.lock();
            let c = ibal.open("wedged").expect("consumer");
            let pd = ibal.alloc_pd(bus, c).expect("pd");
            let qp = connected_qp(&mut ibal, bus, c, pd);
            ibal.modify_qp(bus, c, qp, QpState::Rts, None).expect("rts");
            let addr = bus.device().dma_alloc(4096).expect("dma");
            let keys = region(&mut ibal, bus, c, pd, addr, MrFlags::empty());
            (c, qp, keys, addr)
        })
        .expect("ibal");
    host.inject(Fault::AdminReset);
    host.run_until(Instant::from_ms(2_000));
    let r = &host.resets()[0];
    assert_eq!(r.outcome(), "Restored");
    assert_eq!(r.forced_clients, ["wedged"]);
    // Someone else makes a QP after the reset: it takes the wedged client's old slot.
    let (err, other_qpn, zombie_kept) = host
        .with_agent::<IbalClient, _>(|client, bus| {
            let shared = client.shared().clone();
            let mut ibal = shared.lock();
            let other = ibal.open("other").expect("consumer");
            let pd = ibal.alloc_pd(bus, other).expect("pd");
            let qp = connected_qp(&mut ibal, bus, other, pd);
            ibal.modify_qp(bus, other, qp, QpState::Rts, None)
                .expect("rts");
            let send = Send {
                wr_id: 1,
                sge: Sge {
                    addr,
                    len: 8,
                    lkey: keys.lkey,
                },
                dest: Dest::Connected,
            };
            let err = ibal.post_send(bus, wedged, old_qp, &send);
            // Its released objects stay as zombies, holding their slots, until it
            // destroys them: a stale handle can never name someone else's object.
            let zombie_slot_kept = qp.index != old_qp.index;
            let destroyed = ibal.destroy_qp(bus, wedged, old_qp);
            (
                err,
                ibal.qpn(other, qp).expect("qpn"),
                zombie_slot_kept && destroyed.is_ok(),
            )
        })
        .expect("ibal");
    assert!(
        zombie_kept,
        "zombie kept its slot; destroying it later succeeds"
    );
    assert_eq!(
        err,
        Err(PostError::StaleHandle(StaleHandle {
            made_in: Epoch(1),
            current: Epoch(2)
        }))
    );
    assert_eq!(
        host.hca().verbs().qp_sends(other_qpn),
        Some(0),
        "the stale call never touched the new epoch's QP"
    );
    assert_eq!(host.hca().verbs().stats().sends_posted, 0);
}

/// Random fault plans and policies against the whole stack under load: whatever happens to
/// the device, no I/O is lost, duplicated or corrupted, and the event guarantees hold.
/// `HCABUS_RANDOM_SEEDS=N` runs more (the default keeps the suite quick in debug builds).
#[test]
fn random_faults_never_lose_duplicate_or_corrupt_io() {
    let seeds: u64 = std::env::var("HCABUS_RANDOM_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(24);
    let mut outcomes = std::collections::BTreeMap::new();
    let mut failed_io_runs = 0;
    for seed in 0..seeds {
        let setup = stack::random_stack(seed);
        let host = run(&setup);
        let io = stack::io_stats(&host);
        for r in host.resets() {
            *outcomes.entry(r.outcome()).or_insert(0u32) += 1;
        }
        failed_io_runs += u32::from(io.failed > 0);
        let why = || format!("seed {seed}: faults {:?}, {io:?}", setup.sim.faults);
        assert_eq!(io.lost, 0, "{}", why());
        assert_eq!(io.unaccounted(), 0, "the accounting closes: {}", why());
        assert_eq!(io.duplicated, 0, "{}", why());
        assert_eq!(io.read_mismatches, 0, "{}", why());
        // A paging I/O that fails is a bugcheck: with the hold unbounded the paging path fails
        // only on a device that failed or went away.
        if setup.sim.policy.paging_io_hold_timeout_ms == 0 && io.paging_failed > 0 {
            let gave_up = host.resets().iter().any(|r| {
                matches!(
                    r.outcome(),
                    "HardwareDead"
                        | "DeviceReplaced"
                        | "StormLimit"
                        | "AutoRestartExpired"
                        | "AutoRecoverOff"
                        | "Removed"
                )
            });
            assert!(
                gave_up || host.coordinator().state() == State::Removed,
                "paging I/O failed on a device that could still recover: {}",
                why()
            );
        }
        for d in hcabus_lab::stack::disks(&host) {
            assert_eq!(d.lab_target().stats().write_mismatches, 0, "{}", why());
        }
        assert!(
            host.checker().violations.is_empty(),
            "{}: {:?}",
            why(),
            host.checker().violations
        );
        // A device that is working at the end, with its last reset well behind (and the
        // fabric's link training and subnet-manager sweep after it), has every disk working
        // too. A cable pulled or a busy target may keep a disk down to the end: not checked.
        let fabric = setup.sim.hca.link_up.as_us() + setup.sim.hca.sm_sweep.as_us();
        let settled = host
            .resets()
            .last()
            .and_then(|r| r.total_us().map(|t| r.started_at.as_us() + t))
            .is_none_or(|end| end + fabric + 1_000_000 < host.end().as_us());
        let fabric_faults = setup
            .sim
            .faults
            .iter()
            .any(|(_, f)| matches!(f, Fault::PortDown { .. } | Fault::TargetBusy(_)));
        if host.coordinator().state() == State::Operational && settled && !fabric_faults {
            for d in hcabus_lab::stack::disks(&host) {
                assert!(d.disk().is_up(), "{}: {} is not back", why(), d.name());
            }
        }
    }
    eprintln!("outcomes over {seeds} seeds: {outcomes:?}; runs with failed I/O: {failed_io_runs}");
    assert!(
        outcomes.len() >= 3,
        "the plans reach several outcomes: {outcomes:?}"
    );
}

/// The default stack with a planned reset at 1 s and `first` registered right after IBAL;
/// returns the host run to 0.9 s and the adapter's live objects then.
fn planned_with(mut setup: StackSetup, first: (&str, ClientFlags, Behavior)) -> (Node, usize) {
    setup.sim.faults = vec![(Instant::from_ms(1_000), Fault::PlannedReset)];
    let (name, flags, behavior) = first;
    setup.clients.insert(
        0,
        ClientSpec::Scripted {
            name: name.into(),
            config: ScriptedConfig {
                kind: ClientKind::Custom,
                flags,
                behavior,
            },
        },
    );
    let mut host = stack::build(&setup).expect("stack");
    host.run_until(Instant::from_ms(900));
    let objects = host.hca().verbs().live_objects();
    (host, objects)
}

/// `setup` with every disk's last-path guard off: for a test about another client's answer
/// to a planned reset, which the boot disk, whose only path this adapter is, would otherwise
/// veto first (docs/design.md §7 "Last-path guard").
fn unguarded(mut setup: StackSetup) -> StackSetup {
    for c in &mut setup.clients {
        if let ClientSpec::Disk { config, .. } = c {
            config.initiator.guard_last_path = false;
        }
    }
    setup
}

fn ibal_stats(host: &Node) -> IbalStats {
    *host
        .agent::<IbalClient>()
        .expect("ibal")
        .shared()
        .lock()
        .stats()
}

#[test]
fn a_vetoed_planned_reset_disturbs_nobody_and_tears_nothing_down() {
    let vetoer = Behavior {
        veto_planned: true,
        ..Behavior::default()
    };
    let first = ("vetoer", ClientFlags::CAN_VETO, vetoer);
    let (mut host, objects_before) = planned_with(unguarded(stack::boot_from_san_fast()), first);
    host.run();
    let r = &host.resets()[0];
    assert_eq!(r.outcome(), "Aborted");
    assert_eq!(r.vetoed_by.as_deref(), Some("vetoer"));
    assert_eq!(host.coordinator().epoch(), Epoch(1), "same epoch");
    let ibal = ibal_stats(&host);
    assert_eq!((ibal.released, ibal.orphans_destroyed), (0, 0), "{ibal:?}");
    assert_eq!(host.hca().verbs().live_objects(), objects_before);
    for d in hcabus_lab::stack::disks(&host) {
        assert!(d.disk().is_up(), "{}", d.name());
        assert!(d.events().is_empty(), "{} heard {:?}", d.name(), d.events());
        assert_eq!(d.disk().stats().logins, 1, "{} logged in once", d.name());
    }
    let io = stack::io_stats(&host);
    assert_eq!((io.lost, io.duplicated, io.failed), (0, 0, 0), "{io:?}");
}

#[test]
fn an_aborted_planned_reset_restarts_everyone_on_the_same_epoch_and_leaks_nothing() {
    let mut setup = unguarded(stack::boot_from_san_fast());
    setup.sim.policy.abort_on_unresponsive = true;
    setup.sim.policy.quiesce_deadline_ms = 500;
    // Registered right after IBAL, the wedged client hears RESET after every other client
    // has released its resources (in software: a reset was under way), so the abort at the
    // deadline leaves hardware objects nobody owns, which IBAL must destroy.
    let wedged = Behavior {
        never_ack: true,
        ..Behavior::default()
    };
    let (mut host, objects_before) = planned_with(setup, ("wedged", ClientFlags::empty(), wedged));
    host.run();
    let r = &host.resets()[0];
    assert_eq!(r.outcome(), "AbortedUnresponsive");
    // docs/design.md §5 "An abort is not a veto": the unresponsive client is named as such.
    assert_eq!(r.vetoed_by, None);
    assert_eq!(r.unresponsive_clients, ["wedged"]);
    assert!(r.forced_clients.is_empty(), "nobody forced through");
    assert_eq!(host.coordinator().epoch(), Epoch(1), "same epoch");
    let ibal = ibal_stats(&host);
    assert!(ibal.orphans_destroyed > 0, "{ibal:?}");
    assert_eq!(
        host.hca().verbs().live_objects(),
        objects_before,
        "everything re-created once, every orphan destroyed in the device"
    );
    for d in hcabus_lab::stack::disks(&host) {
        assert!(d.disk().is_up(), "{}", d.name());
        assert_eq!(d.events(), [EventKind::Reset, EventKind::ResetAborted]);
    }
    let io = stack::io_stats(&host);
    assert_eq!((io.lost, io.duplicated, io.failed), (0, 0, 0), "{io:?}");
}

/// QUERY_STATE's flags as an operator's tool reads them.
fn state_flags(host: &mut Node) -> u32 {
    use hcabus::ioctl::{encode_empty, StateOut, IOCTL_HCABUS_QUERY_STATE};
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let mut out = [0u8; 512];
    let rights = hcabus::ioctl::Rights::READ;
    host.ioctl(IOCTL_HCABUS_QUERY_STATE, &input, &mut out, rights);
    StateOut::decode(&out).expect("QUERY_STATE").flags
}

/// docs/design.md §5 "Service restored": on the default host (link training 0.5 s, the
/// subnet manager's sweep 3 s) the adapter is Operational a second after a catastrophic
/// error, and QUERY_STATE says "recovering, waiting for ports 1 and 2" until both are Active.
#[test]
fn operational_is_not_the_service_until_every_port_that_was_active_is_active_again() {
    use hcabus::ioctl::{STATE_AWAITED_PORTS_SHIFT, STATE_RECOVERING, STATE_RESET_IN_PROGRESS};
    let mut host = stack::build(&stack::boot_from_san()).expect("stack");
    host.run_until(Instant::from_ms(1_000));
    assert_eq!(state_flags(&mut host), 0, "in service");
    // Found by the next health poll, then reset.
    host.inject(Fault::Catastrophic);
    let mut reset_seen = false;
    let mut restored_at = None;
    let mut back_at = None;
    for ms in (1_010..10_000).step_by(10) {
        host.run_until(Instant::from_ms(ms));
        let flags = state_flags(&mut host);
        reset_seen |= flags & STATE_RESET_IN_PROGRESS != 0;
        let operational = host.coordinator().state() == State::Operational;
        if reset_seen && operational && restored_at.is_none() {
            restored_at = Some(ms);
            assert_eq!(flags & STATE_RECOVERING, STATE_RECOVERING, "{flags:#x}");
            assert_eq!(flags >> STATE_AWAITED_PORTS_SHIFT, 0b11, "{flags:#x}");
        }
        if restored_at.is_some() && flags == 0 {
            back_at = Some(ms);
            break;
        }
    }
    let (restored, back) = (
        restored_at.expect("restored"),
        back_at.expect("service back"),
    );
    // Every port Active again: each client heard PORT_ACTIVE for both.
    for port in 1..=2 {
        let view = host.coordinator().port(port).expect("reported");
        assert_eq!(view.state, PortState::Active, "port {port}");
    }
    assert!(
        back - restored >= 3_000,
        "the fabric's 3.5 s: {restored} -> {back}"
    );
}

/// Reports ask each client what it did (`StackClient::activity`): what a client says must
/// agree with the kind it registers as, or a report would count a disk as a network
/// interface or miss it altogether.
#[test]
fn every_client_says_an_activity_that_agrees_with_its_kind() {
    use stack::Activity;
    let mut setups = vec![stack::boot_from_san(), stack::boot_from_san_fast()];
    setups.extend((0..8).map(stack::random_stack));
    let mut disks_seen = 0;
    for setup in &setups {
        let host = run(setup);
        let mut disks = 0;
        for a in host.agents() {
            let kind = a.kind();
            let agrees = match a.activity() {
                Activity::Disk(_) => {
                    disks += 1;
                    matches!(kind, ClientKind::Srp | ClientKind::BootDisk)
                }
                Activity::Net(_) => kind == ClientKind::Ipoib,
                Activity::Verbs(_) => kind == ClientKind::Uverbs,
                // The access layer, or a scripted client playing whatever kind its
                // scenario names.
                Activity::Control(_) => true,
            };
            // And the access layer carries no I/O of its own.
            let agrees = agrees
                && (kind != ClientKind::Ibal || matches!(a.activity(), Activity::Control(_)));
            assert!(
                agrees,
                "{}: {:?} says {:?}",
                setup.sim.name,
                kind,
                a.activity()
            );
        }
        assert_eq!(stack::disks(&host).count(), disks, "{}", setup.sim.name);
        // The reports' I/O total and the clients' own counters (QUERY_COUNTERS) agree.
        let counted: u64 = stack::disks(&host).map(|d| d.counters().submitted).sum();
        assert_eq!(
            stack::io_stats(&host).submitted,
            counted,
            "{}",
            setup.sim.name
        );
        disks_seen += disks;
    }
    assert!(
        disks_seen >= 2,
        "the boot stacks have a boot disk and a data LUN each"
    );
}
