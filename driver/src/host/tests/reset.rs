//! A reset through the host: inputs under the lock (bus.rs), the DPC and the work item
//! (drain.rs), timers armed and cancelled on the platform, the event log, PnP, the IOCTL.

use crate::ioctl::{encode_empty, Reply, Rights, StateOut, Wire, IOCTL_HCABUS_QUERY_STATE};

use super::*;

/// The event log's entry for reset 1's start.
fn started(reason: ResetReason) -> EventLogEntry {
    EventLogEntry::ResetStarted {
        epoch: 1,
        reason: reason as u8,
    }
}

/// The whole of a forced reset on a platform that queues its DPC and work item: RESET newest
/// first, the closing health read and every hardware step in the work item, in order, each
/// timer armed and cancelled once, RESET_END oldest first, and an event log entry at each
/// end of it.
#[test]
fn a_forced_reset_runs_step_by_step_on_a_queuing_platform() {
    let bus = new_bus(false);
    let a = bus.register(desc("a"), executes()).expect("registers").id;
    let b = bus.register(desc("b"), executes()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    assert!(
        w(&bus).delivered.is_empty(),
        "the DPC delivers, not the caller"
    );

    // One DPC: both RESETs, the barrier closed, the closing read handed to the work item.
    bus.dpc();
    let reset = reset_event(1, ResetReason::AdminForced, false, 500);
    assert_eq!(w(&bus).delivered, [(b, reset), (a, reset)]);
    assert_eq!(hw_calls(&bus), ["identity"], "steps wait for the work item");
    assert_eq!(
        bus.core.with(|c| (c.hw_queue.len(), c.log_queue.len())),
        (1, 1)
    );
    assert!(w(&bus).work_pending);
    assert_eq!(w(&bus).work_asks, 1);
    assert_eq!(bus.state(), State::Quiescing);

    settle(&bus);
    assert_eq!(bus.state(), State::Resetting);
    assert_eq!(
        hw_calls(&bus),
        ["identity", "read_health", "save_config", "assert_reset"]
    );
    fire(&bus, TimerId::HwPoll);

    let mut steps = vec!["identity", "read_health"];
    steps.extend(HW_RESET);
    assert_eq!(hw_calls(&bus), steps);
    assert_eq!(
        w(&bus).delivered,
        [(b, reset), (a, reset), (a, end_event(2)), (b, end_event(2))]
    );
    assert_eq!(
        w(&bus).arms,
        [
            (TimerId::HealthPoll, at(1_000)),
            (TimerId::QuiesceDeadline, at(500)),
            (TimerId::AutoRestartWindow, at(60_000)),
            (TimerId::HwReadyTimeout, at(2_000)),
            (TimerId::HwPoll, at(1)),
            (TimerId::HealthPoll, at(1_001)),
        ]
    );
    assert_eq!(
        w(&bus).cancels,
        [
            TimerId::QuiesceDeadline,
            TimerId::HealthPoll,
            TimerId::HwReadyTimeout,
            TimerId::AutoRestartWindow,
        ]
    );
    assert_eq!(
        w(&bus).log,
        [
            started(ResetReason::AdminForced),
            EventLogEntry::ResetRestored { epoch: 2 },
        ]
    );
    assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
    assert_eq!(w(&bus).ended, 4);
    assert!(w(&bus).pnp.is_empty());
    assert!(bus.is_idle());
    // The event log's scan stopped after the last record: the next finds only news.
    let scanned = bus.core.with(|c| c.log_seq);
    assert_eq!(scanned, bus.inspect(|c| c.recorder().next_seq()));
}

/// The tracing hears every record once, in the recorder's order, as drains end; the records
/// of the reset, from its start to its end, carry it (epoch, reason, start), and those before
/// and after carry none.
#[test]
fn the_trace_hears_each_record_once_with_the_reset_it_falls_in() {
    use crate::recorder::RecordTag;
    let bus = new_bus(false);
    let _a = bus.register(desc("a"), executes()).expect("registers");
    w(&bus).now = at(7);
    let heard_before = w(&bus).traced.len();
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    assert_eq!(
        w(&bus).traced.len(),
        heard_before,
        "nothing is traced before a drain"
    );
    settle(&bus);
    fire(&bus, TimerId::HwPoll);
    settle(&bus);
    assert_eq!(bus.state(), State::Operational);
    let _b = bus.register(desc("b"), executes()).expect("registers");
    settle(&bus);

    let traced = w(&bus).traced.clone();
    let recorded: Vec<(u64, RecordTag)> =
        bus.inspect(|c| c.recorder().iter().map(|r| (r.seq, r.kind.tag())).collect());
    let heard: Vec<(u64, RecordTag)> = traced.iter().map(|&(s, t, _)| (s, t)).collect();
    assert_eq!(heard, recorded);
    let start = traced
        .iter()
        .position(|t| t.1 == RecordTag::ResetStarted)
        .expect("the reset started");
    let end = traced
        .iter()
        .position(|t| t.1 == RecordTag::ResetFinished)
        .expect("the reset finished");
    let span = ResetSpan {
        epoch: Epoch(1),
        reason: ResetReason::AdminForced,
        started: at(7),
    };
    for (i, (seq, tag, reset)) in traced.iter().enumerate() {
        let inside = (start..=end).contains(&i);
        assert_eq!(*reset, inside.then_some(span), "record {seq} ({tag:?})");
    }
    assert!(
        end + 1 < traced.len(),
        "a record after the reset carries none"
    );
}

/// The same reset on a platform with no DPCs: everything runs on the caller's thread, a
/// call from inside a callback only queues its actions for the drain under way, and the
/// result is the same.
#[test]
fn a_forced_reset_runs_on_the_callers_thread_with_one_drainer() {
    let bus = new_bus(true);
    let a = bus.register(desc("a"), executes()).expect("registers").id;
    let nested = on(|bus, id, event| {
        if let Event::Reset { epoch, .. } = event {
            let asks = w(bus).dpc_asks;
            assert_eq!(bus.reset_execute(id, epoch), Ok(ExecuteOutcome::Accepted));
            assert_eq!(w(bus).dpc_asks, asks + 1);
            assert!(bus.core.with(|c| c.draining));
            assert_eq!(
                w(bus).delivered.len(),
                1,
                "no delivery from inside a callback"
            );
        }
    });
    let b = bus.register(desc("b"), nested).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    assert_eq!(
        bus.state(),
        State::Resetting,
        "drained up to the first probe"
    );
    fire(&bus, TimerId::HwPoll);
    let reset = reset_event(1, ResetReason::AdminForced, false, 500);
    assert_eq!(
        w(&bus).delivered,
        [(b, reset), (a, reset), (a, end_event(2)), (b, end_event(2))]
    );
    let mut steps = vec!["identity", "read_health"];
    steps.extend(HW_RESET);
    assert_eq!(hw_calls(&bus), steps);
    assert_eq!(
        w(&bus).log,
        [
            started(ResetReason::AdminForced),
            EventLogEntry::ResetRestored { epoch: 2 },
        ]
    );
    let pending = {
        let w = w(&bus);
        (w.dpc_pending, w.work_pending)
    };
    assert_eq!(pending, (false, false), "nothing is ever queued");
    assert!(bus.is_idle());
}

/// A veto stops a planned reset before anything is torn down: RESET_ABORTED to the vetoer
/// only, no hardware step, and the start still reaches the event log (a work item for the
/// log alone).
#[test]
fn a_vetoed_planned_reset_touches_no_hardware_and_logs_its_start() {
    let bus = new_bus(false);
    let p = bus.register(desc("p"), quiet()).expect("registers").id;
    let vetoes = on(|bus, id, event| {
        if let Event::ResetQuery { epoch, .. } = event {
            let view = ClientView::of(bus);
            assert_eq!(view.reset_veto(id, epoch, ShortText::cut("busy")), Ok(()));
        }
    });
    let v = bus.register(veto_desc("v"), vetoes).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Planned), Ok(Epoch(1)));
    bus.dpc();
    // Aborted, and the log entry waits for the work item: not idle yet.
    assert_eq!(bus.state(), State::Operational);
    assert_eq!(bus.core.with(|c| c.log_queue.len()), 1);
    assert!(!bus.is_idle());
    settle(&bus);
    let query = Event::ResetQuery {
        epoch: Epoch(1),
        reason: ResetReason::AdminPlanned,
        deadline: at(300),
    };
    let aborted = Event::ResetAborted {
        epoch: Epoch(1),
        vetoed_by: v,
        cause: AbortCause::Veto,
    };
    assert_eq!(w(&bus).delivered, [(v, query), (v, aborted)]);
    assert!(!w(&bus).delivered.iter().any(|d| d.0 == p));
    assert_eq!(hw_calls(&bus), ["identity"]);
    assert_eq!(
        w(&bus).arms,
        [
            (TimerId::HealthPoll, at(1_000)),
            (TimerId::QueryDeadline, at(300)),
        ]
    );
    assert_eq!(w(&bus).cancels, [TimerId::QueryDeadline]);
    assert_eq!(w(&bus).log, [started(ResetReason::AdminPlanned)]);
    assert_eq!(w(&bus).work_asks, 1);
    assert!(bus.is_idle());
}

/// A consent lets the planned reset go on: RESET newest first, planned, to the whole
/// barrier; silence is consent at the query's deadline.
#[test]
fn a_planned_reset_goes_on_at_consent_or_at_the_query_deadline() {
    let bus = new_bus(true);
    let p = bus.register(desc("p"), executes()).expect("registers").id;
    let consents = on(|bus, id, event| match event {
        Event::ResetQuery { epoch, .. } => {
            assert_eq!(ClientView::of(bus).reset_consent(id, epoch), Ok(()));
        }
        Event::Reset { epoch, .. } => {
            assert_eq!(bus.reset_execute(id, epoch), Ok(ExecuteOutcome::Accepted));
        }
        _ => {}
    });
    let v = bus
        .register(veto_desc("v"), consents)
        .expect("registers")
        .id;
    assert_eq!(bus.admin_reset(AdminReset::Planned), Ok(Epoch(1)));
    let query = Event::ResetQuery {
        epoch: Epoch(1),
        reason: ResetReason::AdminPlanned,
        deadline: at(300),
    };
    let reset = reset_event(1, ResetReason::AdminPlanned, true, 500);
    assert_eq!(w(&bus).delivered, [(v, query), (v, reset), (p, reset)]);
    assert_eq!(bus.state(), State::Resetting);

    let bus = new_bus(false);
    let p = bus.register(desc("p"), quiet()).expect("registers").id;
    let v = bus.register(veto_desc("v"), quiet()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Planned), Ok(Epoch(1)));
    settle(&bus);
    fire(&bus, TimerId::QueryDeadline);
    let late = reset_event(1, ResetReason::AdminPlanned, true, 800);
    assert_eq!(w(&bus).delivered, [(v, query), (v, late), (p, late)]);
    // The deadline's own expiry ended the query: nothing left to cancel.
    assert!(w(&bus).cancels.is_empty());
    assert_eq!(bus.state(), State::Quiescing);
}

/// A timer fires only at or after its due time in the bus's table; an expiry of a timer
/// the table does not hold is stale and ignored. The health poll reads the device and arms
/// the next poll.
#[test]
fn timers_fire_when_due_and_stale_expiries_are_ignored() {
    let bus = new_bus(false);
    bus.timer_fired(TimerId::HealthPoll);
    settle(&bus);
    assert_eq!(hw_calls(&bus), ["identity"], "not due yet");
    assert_eq!(
        bus.core.with(|c| c.timers.armed(TimerId::HealthPoll)),
        Some((at(1_000), 1))
    );
    bus.timer_fired(TimerId::QuiesceDeadline);
    settle(&bus);
    assert_eq!(bus.state(), State::Operational);
    assert!(w(&bus).delivered.is_empty());

    fire(&bus, TimerId::HealthPoll);
    assert_eq!(hw_calls(&bus), ["identity", "read_health"]);
    assert_eq!(bus.inspect(|c| c.health_report().counter), Some(1));
    assert_eq!(
        bus.core.with(|c| c.timers.armed(TimerId::HealthPoll)),
        Some((at(2_000), 2))
    );
    assert_eq!(
        w(&bus).arms,
        [
            (TimerId::HealthPoll, at(1_000)),
            (TimerId::HealthPoll, at(2_000)),
        ]
    );
    // The same expiry again, at the same instant: the table has moved on.
    bus.timer_fired(TimerId::HealthPoll);
    settle(&bus);
    assert_eq!(hw_calls(&bus), ["identity", "read_health"]);
    assert!(w(&bus).log.is_empty());
    assert_eq!(w(&bus).work_asks, 1, "one work item, for the one read");
}

/// A reset that cannot save config space fails the device (RESET_FAILED, its log entry);
/// an administrator's restart then resets it from the hardware reset on.
#[test]
fn a_failed_reset_is_logged_and_a_restart_brings_the_device_back() {
    let bus = bus_with(
        false,
        FakeHca {
            fail_save: true,
            ..hca()
        },
    );
    let a = bus.register(desc("a"), executes()).expect("registers").id;
    assert_eq!(bus.admin_restart(), Err(RestartError::NotFailed));
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    assert_eq!(bus.state(), State::Failed);
    assert_eq!(hw_calls(&bus), ["identity", "read_health", "save_config"]);
    let kept = bus.inspect(|c| {
        let b = crate::coordinator::bundle::read_bundle(c.kept_bundle().expect("kept"));
        b.expect("a bundle").header.config_bytes
    });
    assert_eq!(kept, 0, "a save that failed kept no config space");
    let failed = Event::ResetFailed {
        epoch: Epoch(1),
        error: FailReason::HardwareDead,
    };
    let reset = reset_event(1, ResetReason::AdminForced, false, 500);
    assert_eq!(w(&bus).delivered, [(a, reset), (a, failed)]);

    bus.with_hca(|h| h.fail_save = false);
    assert_eq!(bus.admin_restart(), Ok(Epoch(1)));
    settle(&bus);
    fire(&bus, TimerId::HwPoll);
    assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
    // The save that worked handed its config space through the host to the bundle.
    let config = bus.inspect(|c| {
        use crate::coordinator::bundle::{read_bundle, BundleCause, BUNDLE_MAX_BYTES};
        let mut out = alloc::vec![0u8; BUNDLE_MAX_BYTES];
        let n = c.bundle_now(BundleCause::OnDemand, &mut out).expect("room");
        let b = read_bundle(&out[..n]).expect("a bundle");
        b.header.config[..b.header.config_bytes as usize].to_vec()
    });
    assert_eq!(config, FAKE_CONFIG);
    assert_eq!(
        w(&bus).delivered,
        [(a, reset), (a, failed), (a, end_event(2))]
    );
    let started = started(ResetReason::AdminForced);
    assert_eq!(
        w(&bus).log,
        [
            started,
            EventLogEntry::ResetFailed {
                epoch: 1,
                error: FailReason::HardwareDead as u8,
            },
            started,
            EventLogEntry::ResetRestored { epoch: 2 },
        ]
    );
    // A later save that fails leaves none, not the earlier one.
    bus.with_hca(|h| h.fail_save = true);
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(2)));
    settle(&bus);
    assert_eq!(bus.state(), State::Failed);
    let kept = bus.inspect(|c| {
        let b = crate::coordinator::bundle::read_bundle(c.kept_bundle().expect("kept"));
        b.expect("a bundle").header.config_bytes
    });
    assert_eq!(
        kept, 0,
        "the failed save's bundle carries no stale config space"
    );
}

/// Another adapter behind the reset: PnP is told (children missing, then enumerated
/// again), the device fails as replaced, and the log says so in its own entry.
#[test]
fn a_replaced_device_goes_to_pnp_and_the_event_log() {
    let other = Identity {
        node_guid: 2,
        ..identity()
    };
    let bus = bus_with(
        false,
        FakeHca {
            swap: Some(other),
            ..hca()
        },
    );
    let a = bus.register(desc("a"), executes()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    fire(&bus, TimerId::HwPoll);
    assert_eq!(bus.state(), State::Failed);
    assert_eq!(
        w(&bus).pnp,
        [PnpOp::ReportChildrenMissing, PnpOp::ReenumerateChildren]
    );
    let failed = Event::ResetFailed {
        epoch: Epoch(1),
        error: FailReason::DeviceReplaced,
    };
    assert_eq!(w(&bus).delivered.last(), Some(&(a, failed)));
    assert_eq!(
        w(&bus).log,
        [
            started(ResetReason::AdminForced),
            EventLogEntry::DeviceReplaced { epoch: 1 },
        ]
    );
}

/// A command timeout starts a reset of its own reason; surprise removal ends every wait
/// (each armed timer cancelled), tells PnP and every client, and refuses newcomers.
#[test]
fn a_command_timeout_resets_and_surprise_removal_ends_the_bus() {
    let bus = new_bus(false);
    let a = bus.register(desc("a"), quiet()).expect("registers").id;
    bus.command_timeout();
    settle(&bus);
    let reset = reset_event(1, ResetReason::CommandTimeout, false, 500);
    assert_eq!(w(&bus).delivered, [(a, reset)]);
    assert_eq!(w(&bus).log, [started(ResetReason::CommandTimeout)]);
    assert!(w(&bus).cancels.is_empty());
    bus.surprise_removal();
    settle(&bus);
    assert_eq!(bus.state(), State::Removed);
    let fatal = Event::DeviceFatal {
        reason: FatalReason::SurpriseRemoval,
    };
    assert_eq!(w(&bus).delivered, [(a, reset), (a, fatal)]);
    assert_eq!(w(&bus).pnp, [PnpOp::ReportChildrenMissing]);
    assert_eq!(
        w(&bus).cancels,
        [TimerId::QuiesceDeadline, TimerId::HealthPoll]
    );
    assert_eq!(
        bus.register(desc("late"), quiet()).map(|r| r.id),
        Err(RegisterError::DeviceRemoved)
    );
    assert_eq!(
        bus.admin_reset(AdminReset::Forced),
        Err(AdminResetError::DeviceRemoved)
    );
}

/// A hardware step or log entry that finds its queue full is counted, never silent.
#[test]
fn a_full_queue_counts_each_overflow() {
    let bus = new_bus(false);
    // Powered down, so that the work item leaves the queues as they are filled.
    bus.d0_exit();
    bus.core.with(|c| {
        while c.hw_queue.push(HwStep::ReadHealth).is_ok() {}
        while c
            .log_queue
            .push(EventLogEntry::ResetRestored { epoch: 9 })
            .is_ok()
        {}
    });
    w(&bus).now = at(1_000);
    bus.timer_fired(TimerId::HealthPoll);
    bus.dpc();
    assert_eq!(bus.overflows(), 1, "the health read found no room");
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    bus.dpc();
    assert_eq!(bus.overflows(), 2, "the reset's log entry found no room");
    assert_eq!(
        bus.core.with(|c| (c.hw_queue.len(), c.log_queue.len())),
        (8, 16)
    );
}

/// QUERY_STATE through the bus: the coordinator at the bus's time, and the time zero on
/// the platform's wall clock.
#[test]
fn device_control_answers_from_the_coordinator_at_the_bus_time() {
    let bus = new_bus(false);
    {
        let mut w = w(&bus);
        w.now = at(5);
        w.wall_ms = Some(1_000_000);
    }
    bus.register(desc("a"), quiet()).expect("registers");
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let mut out = vec![0u8; core::mem::size_of::<StateOut>()];
    let reply = bus.device_control(IOCTL_HCABUS_QUERY_STATE, &input, &mut out, Rights::READ);
    assert_eq!(reply, Reply::ok(core::mem::size_of::<StateOut>()));
    let state = StateOut::decode(&out).expect("decodes");
    assert_eq!(
        (
            state.state,
            state.epoch,
            state.clients,
            state.time_zero_unix_ms
        ),
        (State::Operational as u32, 1, 1, 999_995)
    );
    // An input is an input: the DPC is asked for whatever it set in motion.
    assert_eq!(w(&bus).dpc_asks, 3);
}
