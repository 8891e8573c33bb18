//! Device power and PnP stops (power.rs): D0Exit's bounded wait, what the bus holds in Dx,
//! D0Entry, and a parked bus resumed on new resources.

use core::mem::MaybeUninit;

use super::*;

fn power_down(waited_ms: u32, reset_held: bool) -> PowerDown {
    PowerDown {
        waited_ms,
        reset_held,
    }
}

/// A bus with one quiet client and a forced reset waiting for it.
fn waiting_reset(here: bool) -> (Bus<Fake>, ClientId) {
    let bus = new_bus(here);
    let a = bus.register(desc("a"), quiet()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    (bus, a)
}

/// Idle, D0Exit neither waits nor holds anything: it stops the armed timers and the
/// device; D0Entry arms them again and asks for the DPC, and no work item for nothing.
#[test]
fn an_idle_bus_powers_down_at_once_and_back_up() {
    let bus = new_bus(false);
    assert_eq!(bus.d0_exit(), power_down(0, false));
    assert!(w(&bus).delays.is_empty());
    assert_eq!(w(&bus).cancels, [TimerId::HealthPoll]);
    assert!(!bus.powered());
    assert!(!bus.reset_open());
    let (dpcs, works) = {
        let w = w(&bus);
        (w.dpc_asks, w.work_asks)
    };
    bus.d0_entry();
    assert!(bus.powered());
    assert_eq!(
        w(&bus).arms,
        [
            (TimerId::HealthPoll, at(1_000)),
            (TimerId::HealthPoll, at(1_000)),
        ]
    );
    let asked = {
        let w = w(&bus);
        (w.dpc_asks, w.work_asks)
    };
    assert_eq!(asked, (dpcs + 1, works));
}

/// In Dx a reset is taken and its events go out, but no deadline is armed and no step
/// touches the device; the event log is still written. D0Entry arms what was kept and
/// queues the held step; the steps then run in order.
#[test]
fn in_dx_the_bus_keeps_timers_and_holds_steps_for_d0_entry() {
    let bus = new_bus(false);
    let a = bus.register(desc("a"), quiet()).expect("registers").id;
    assert_eq!(bus.d0_exit(), power_down(0, false));
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    let reset = reset_event(1, ResetReason::AdminForced, false, 500);
    assert_eq!(w(&bus).delivered, [(a, reset)]);
    assert_eq!(w(&bus).arms, [(TimerId::HealthPoll, at(1_000))]);
    assert_eq!(
        bus.core.with(|c| c.timers.armed(TimerId::QuiesceDeadline)),
        Some((at(500), 2))
    );
    assert!(bus.reset_open());

    assert_eq!(bus.reset_execute(a, Epoch(1)), Ok(ExecuteOutcome::Accepted));
    settle(&bus);
    assert_eq!(
        hw_calls(&bus),
        ["identity"],
        "the closing read waits for D0"
    );
    assert_eq!(bus.core.with(|c| c.hw_queue.len()), 1);
    assert_eq!(
        w(&bus).cancels,
        [TimerId::HealthPoll, TimerId::QuiesceDeadline]
    );
    assert_eq!(
        w(&bus).log,
        [EventLogEntry::ResetStarted {
            epoch: 1,
            reason: ResetReason::AdminForced as u8,
        }]
    );
    let works = w(&bus).work_asks;

    bus.d0_entry();
    assert_eq!(
        hw_calls(&bus),
        ["identity"],
        "queued, not run by D0Entry itself"
    );
    assert_eq!(w(&bus).work_asks, works + 1);
    assert_eq!(
        w(&bus).arms,
        [
            (TimerId::HealthPoll, at(1_000)),
            (TimerId::HealthPoll, at(1_000)),
        ]
    );
    settle(&bus);
    assert_eq!(
        hw_calls(&bus),
        ["identity", "read_health", "save_config", "assert_reset"]
    );
    assert_eq!(bus.state(), State::Resetting);
}

/// On a platform that runs the work item where it is queued, D0Entry runs the held steps
/// itself.
#[test]
fn d0_entry_runs_held_steps_on_a_platform_without_work_items() {
    let (bus, a) = waiting_reset(true);
    assert_eq!(bus.d0_exit(), power_down(0, true));
    assert_eq!(bus.reset_execute(a, Epoch(1)), Ok(ExecuteOutcome::Accepted));
    assert_eq!(hw_calls(&bus), ["identity"]);
    bus.d0_entry();
    assert_eq!(
        hw_calls(&bus),
        ["identity", "read_health", "save_config", "assert_reset"]
    );
}

/// A reset in flight that cannot be waited for is held: one look, no wait, every armed
/// timer stopped.
#[test]
fn d0_exit_holds_a_reset_it_cannot_wait_for() {
    let (bus, _) = waiting_reset(false);
    assert_eq!(bus.d0_exit(), power_down(0, true));
    assert_eq!(w(&bus).delays, [D0_EXIT_LOOK]);
    assert_eq!(
        w(&bus).cancels,
        [TimerId::QuiesceDeadline, TimerId::HealthPoll]
    );
    assert!(bus.reset_open());
}

/// The wait is bounded: a reset that never ends is waited for D0_EXIT_WAIT_MS, looking
/// every 10 ms, then held.
#[test]
fn d0_exit_waits_at_most_its_bound() {
    let (bus, _) = waiting_reset(false);
    w(&bus).can_delay = true;
    assert_eq!(bus.d0_exit(), power_down(D0_EXIT_WAIT_MS, true));
    let delays = w(&bus).delays.clone();
    assert_eq!(delays.len(), 1_000);
    assert!(delays.iter().all(|d| *d == D0_EXIT_LOOK));
}

/// The bound is time elapsed, not the looks counted: with Windows' clock each 10 ms look
/// sleeps to the next 15.625 ms tick, and D0Exit gives up after 10 s (640 looks), not after
/// 1,000 looks and 15.6 s.
#[test]
fn d0_exit_bounds_the_time_elapsed_on_windows_clock_tick() {
    let (bus, _) = waiting_reset(false);
    {
        let mut world = w(&bus);
        world.can_delay = true;
        world.tick_us = 15_625;
    }
    let started = bus.now();
    let down = bus.d0_exit();
    let elapsed_ms = bus.now().saturating_since(started).as_ms();
    assert!(down.reset_held);
    assert!(
        (10_000..10_016).contains(&elapsed_ms),
        "D0Exit waited {elapsed_ms} ms for a bound of {D0_EXIT_WAIT_MS} ms"
    );
    assert_eq!(u64::from(down.waited_ms), elapsed_ms);
    assert_eq!(w(&bus).delays.len(), 640);
}

/// A reset that ends while D0Exit waits (the other processors ran on) is not held.
#[test]
fn d0_exit_stops_waiting_when_the_reset_ends() {
    let bus = shared(true);
    let a = bus.register(desc("a"), quiet()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    let meanwhile: Hook = Rc::new(move |bus: &Bus<Fake>| {
        if w(bus).delays.len() == 3 {
            assert_eq!(bus.reset_execute(a, Epoch(1)), Ok(ExecuteOutcome::Accepted));
            fire(bus, TimerId::HwPoll);
        }
    });
    {
        let mut world = w(&bus);
        world.can_delay = true;
        world.on_delay = Some(meanwhile);
    }
    // Three looks of 10 ms, and the hardware poll the hook fires was due 1 ms after.
    assert_eq!(bus.d0_exit(), power_down(31, false));
    assert_eq!(w(&bus).delays, [D0_EXIT_LOOK; 3]);
    assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
}

/// A step waiting alone (no reset open) is also a reset in flight for D0Exit and a PnP
/// stop: the config space a reset saved must not be cut across.
#[test]
fn a_step_waiting_alone_keeps_the_bus_open() {
    let bus = new_bus(false);
    assert_eq!(bus.d0_exit(), power_down(0, false));
    w(&bus).now = at(1_000);
    bus.timer_fired(TimerId::HealthPoll);
    settle(&bus);
    assert_eq!(bus.core.with(|c| c.hw_queue.len()), 1);
    assert!(!bus.inspect(|c| c.reset_in_progress()));
    assert!(bus.reset_open());
    assert!(!bus.is_idle());
    assert_eq!(bus.d0_exit(), power_down(0, true));
    assert_eq!(w(&bus).delays, [D0_EXIT_LOOK]);
    // A step running is a reset in flight too.
    bus.core.with(|c| {
        c.hw_queue.pop();
        c.stepping = true;
    });
    assert!(bus.reset_open());
    bus.core.with(|c| c.stepping = false);
    assert!(!bus.reset_open());
}

/// Across a PnP stop the bus is parked: the coordinator, the clients' callbacks and the
/// timers' due times outlive the old platform; resumed, it waits for D0Entry, then goes on
/// on the new one.
#[test]
fn a_parked_bus_resumes_on_new_resources_with_its_clients() {
    let (bus, a) = waiting_reset(false);
    assert_eq!(bus.d0_exit(), power_down(0, true));
    let parked = bus.park();
    let c = parked.coordinator();
    assert_eq!((c.state(), c.client_count()), (State::Quiescing, 1));

    let (platform, world) = fake(false);
    let bus = Bus::resume(platform, parked, hca()).expect("resumes");
    assert!(!bus.powered());
    assert_eq!(world.borrow().dpc_asks, 0);
    assert!(world.borrow().arms.is_empty());
    bus.d0_entry();
    settle(&bus);
    assert_eq!(
        world.borrow().arms,
        [
            (TimerId::QuiesceDeadline, at(500)),
            (TimerId::HealthPoll, at(1_000)),
        ]
    );
    assert_eq!(bus.reset_execute(a, Epoch(1)), Ok(ExecuteOutcome::Accepted));
    settle(&bus);
    fire(&bus, TimerId::HwPoll);
    assert_eq!(world.borrow().delivered, [(a, end_event(2))]);
    let mut steps = vec!["read_health"];
    steps.extend(HW_RESET);
    assert_eq!(hw_calls(&bus), steps);
}

/// A start that cannot resume the parked bus says why; built in place it is the same bus.
#[test]
fn resuming_fails_on_a_lock_the_platform_refuses_and_works_in_place() {
    for lock in ["spin", "wait"] {
        let parked = new_bus(false).park();
        let (platform, world) = fake(false);
        world.borrow_mut().refuse = Some(lock);
        assert_eq!(
            Bus::resume(platform, parked, hca()).err(),
            Some(NewError::Platform(PlatformError::Status(REFUSED))),
            "{lock}"
        );
        let parked = new_bus(false).park();
        let (platform, world) = fake(false);
        world.borrow_mut().refuse = Some(lock);
        let mut room = MaybeUninit::uninit();
        assert_eq!(
            Bus::resume_in(&mut room, platform, parked, hca()).err(),
            Some(NewError::Platform(PlatformError::Status(REFUSED))),
            "{lock}"
        );
    }
    let parked = new_bus(false).park();
    let (platform, world) = fake(false);
    let mut room = MaybeUninit::uninit();
    let bus = Bus::resume_in(&mut room, platform, parked, hca()).expect("resumes in place");
    assert_eq!((bus.state(), bus.powered()), (State::Operational, false));
    bus.d0_entry();
    assert_eq!(world.borrow().arms, [(TimerId::HealthPoll, at(1_000))]);
}

/// D0Exit looks again every 10 ms (power.rs' D0_EXIT_LOOK_MS, private there).
const D0_EXIT_LOOK: u32 = 10;

/// A health read the poll issued just before D0Exit waits in Dx with the other held steps.
/// At D0Entry the poll's old due time has long passed (a minute asleep); armed there, it
/// fires at once, ahead of the work item that runs the read, and takes the read for one the
/// device never answered: a catastrophic reset after every such wake. D0Entry arms the poll
/// a whole interval on instead, so the held read answers first.
#[test]
fn a_health_read_held_across_dx_is_not_taken_for_an_unanswered_one() {
    let bus = new_bus(false);
    let _a = bus.register(desc("a"), quiet()).expect("registers").id;
    queue_a_health_read(&bus);
    assert_eq!(bus.core.with(|c| c.hw_queue.len()), 1, "the read waits");
    // A step waits for D0 (the read): held, in D0Exit's words.
    assert_eq!(bus.d0_exit(), power_down(0, true));
    w(&bus).now = at(60_000);
    bus.d0_entry();
    let armed = w(&bus).armed[TimerId::HealthPoll as usize].expect("re-armed");
    assert!(
        armed >= at(61_000),
        "the poll re-armed at {armed}, before the held read can answer"
    );
    // The platform's order on Windows: what is due fires before the work item runs.
    if armed <= w(&bus).now {
        fire(&bus, TimerId::HealthPoll);
    }
    settle(&bus);
    fire(&bus, TimerId::HealthPoll);
    assert_eq!(bus.state(), State::Operational);
    assert_eq!(bus.epoch(), Epoch(1));
}

/// A clock that does not move (each look sleeps, and no time passes) does not hold D0Exit:
/// it gives up after twice the wait's worth of looks.
#[test]
fn d0_exit_gives_up_after_its_looks_on_a_clock_that_stands_still() {
    // Shared, so that the fake reaches the bus for the hook.
    let bus = shared(false);
    let _a = bus.register(desc("a"), quiet()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    w(&bus).can_delay = true;
    let stand_still: Hook = Rc::new(|bus: &Bus<Fake>| {
        let mut w = w(bus);
        w.now = w.now - crate::time::Duration::from_ms(10);
    });
    w(&bus).on_delay = Some(stand_still);
    let down = bus.d0_exit();
    assert!(down.reset_held);
    assert_eq!(w(&bus).delays.len(), 2_000);
}

/// With no step waiting, D0Entry arms the health poll at its kept due time: one due
/// meanwhile fires at once, and the watch resumes with a poll.
#[test]
fn d0_entry_with_no_step_waiting_keeps_the_polls_due_time() {
    let bus = new_bus(false);
    assert_eq!(bus.d0_exit(), power_down(0, false));
    w(&bus).now = at(60_000);
    bus.d0_entry();
    assert_eq!(
        w(&bus).armed[TimerId::HealthPoll as usize],
        Some(at(1_000)),
        "due during the sleep: fires at once"
    );
}

/// A query-stop is allowed with no reset open, and holds resets from then on: an
/// administrator's reset is refused STOP_PENDING until the release, then taken.
#[test]
fn an_allowed_query_stop_holds_resets_until_they_are_released() {
    let bus = new_bus(false);
    let _a = bus.register(desc("a"), quiet()).expect("registers").id;
    assert!(bus.query_stop());
    assert!(bus.inspect(|c| c.resets_held()));
    assert_eq!(
        bus.admin_reset(AdminReset::Forced),
        Err(AdminResetError::StopPending)
    );
    bus.release_resets();
    assert!(!bus.inspect(|c| c.resets_held()));
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
}

/// A Failed device under a granted query-stop: the administrator's restart is a reset too,
/// so it is refused STOP_PENDING and nothing is touched; after the release it is taken.
#[test]
fn a_restart_of_a_failed_device_waits_for_a_granted_query_stop() {
    let bus = bus_with(
        false,
        FakeHca {
            fail_save: true,
            ..hca()
        },
    );
    let _a = bus.register(desc("a"), executes()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    assert_eq!(bus.state(), State::Failed);
    bus.with_hca(|h| h.fail_save = false);
    assert!(bus.query_stop(), "nothing open on a Failed device");
    let calls = hw_calls(&bus).len();
    assert_eq!(bus.admin_restart(), Err(RestartError::StopPending));
    assert_eq!(bus.state(), State::Failed);
    assert_eq!(hw_calls(&bus).len(), calls, "no hardware step");
    bus.release_resets();
    assert_eq!(bus.admin_restart(), Ok(Epoch(1)));
}

/// With a reset open, or a step waiting, the query-stop is refused and nothing is held.
#[test]
fn a_query_stop_with_a_reset_open_is_refused_and_holds_nothing() {
    let (bus, _) = waiting_reset(false);
    assert!(!bus.query_stop());
    assert!(!bus.inspect(|c| c.resets_held()));
}

/// D0Entry after the restart releases what the query held.
#[test]
fn d0_entry_releases_the_resets_a_query_stop_held() {
    let bus = new_bus(false);
    assert!(bus.query_stop());
    assert_eq!(bus.d0_exit(), power_down(0, false));
    bus.d0_entry();
    assert!(!bus.inspect(|c| c.resets_held()));
}

/// A step waiting with no reset open (a health read queued for the work item) also refuses
/// the query-stop: its mapping goes with the stop.
#[test]
fn a_query_stop_with_a_step_waiting_is_refused() {
    let bus = new_bus(false);
    queue_a_health_read(&bus);
    assert!(!bus.inspect(|c| c.reset_in_progress()));
    assert!(!bus.query_stop());
}

/// The health poll fires and its read waits in the queue for the work item, not yet run.
fn queue_a_health_read(bus: &Bus<Fake>) {
    let due = w(bus).armed[TimerId::HealthPoll as usize]
        .take()
        .expect("the poll is armed");
    w(bus).now = due;
    bus.timer_fired(TimerId::HealthPoll);
    bus.dpc();
}

/// A health read that never answers while a query-stop holds resets: the fault waits for
/// the release and the device goes on serving, so its monitor goes on too, the next poll a
/// whole interval after this one (at once would poll in a loop; never would stop the watch).
#[test]
fn an_unanswered_health_read_under_a_held_stop_arms_the_next_poll_an_interval_on() {
    let bus = new_bus(false);
    let _a = bus.register(desc("a"), quiet()).expect("registers").id;
    assert!(bus.query_stop());
    // The poll at 1 s queues its read and arms the next at 2 s; the read is never run.
    queue_a_health_read(&bus);
    let due = w(&bus).armed[TimerId::HealthPoll as usize]
        .take()
        .expect("the next poll");
    assert_eq!(due, at(2_000));
    w(&bus).now = due;
    bus.timer_fired(TimerId::HealthPoll);
    bus.dpc();
    assert_eq!(bus.state(), State::Operational, "held, not reset");
    assert!(bus.inspect(|c| c.resets_held()));
    assert_eq!(
        w(&bus).armed[TimerId::HealthPoll as usize],
        Some(at(3_000)),
        "the next poll, an interval on"
    );
}
