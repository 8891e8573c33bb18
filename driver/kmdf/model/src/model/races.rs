//! The races docs/windows.md argues, run: the layer on the model with other processors
//! (`schedule`, `processors`). A DPC processor, a timer processor and a worker run the bus's deferred
//! work; an administrator's thread sends IOCTLs; two C children call through
//! HCABUS_BUS_INTERFACE_V1, one of them unregistering while a reset is delivered and the other
//! holding the interface past the removal; the PnP manager, on the scenario's own thread,
//! rebalances the bus, forces a reset, sleeps and wakes the device and removes it by
//! surprise. Each schedule is a fresh machine, explored by shuttle from a fixed seed.
//!
//! `HCABUS_MODEL_SCHEDULES=N` explores N schedules per scheduler (random, then PCT) instead
//! of the suite's count, and `HCABUS_MODEL_SEED` starts from another seed: the long run of
//! docs/windows.md.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use hcabus::bus_abi::status;
use hcabus::errors::RefusalCode;
use hcabus::ioctl::ResetMode;
use wdk_sys::*;

use super::admin::{self, ADMIN};
use super::cchild::CChild;
use super::harness::started;
use super::harness::{assert_caught, expect, run, Outcome};
use super::machine::{Machine, FILE_READ_DATA};
use super::processors::{Processors, Sendable};
use super::{violation, Rule};
use hcabus_kmdf::kernel::ChildFunction;
use hcabus_kmdf::lab::Defect;

const SEED: u64 = 0x6b6d_6466_7261_6365;

/// Schedules per scheduler in the suite: enough that each planted race below is caught
/// (each is found within its first few dozen schedules from this seed).
const SCHEDULES: usize = 150;

/// Set by the PnP manager's thread before it starts the surprise removal: a child's call
/// answered DEVICE_REMOVED before then is a rebalance shown as a removal.
static REMOVING: AtomicBool = AtomicBool::new(false);

/// Set by the PnP manager's thread from its stop to its restart.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Over all schedules: what shows the exploration reached each race (printed at the end).
struct Reached {
    stops: AtomicUsize,
    resets: AtomicUsize,
    busy_answers: AtomicUsize,
    calls_during_stop: AtomicUsize,
    removed_answers: AtomicUsize,
    unregisters_during_callback: AtomicUsize,
}

static REACHED: Reached = Reached {
    stops: AtomicUsize::new(0),
    resets: AtomicUsize::new(0),
    busy_answers: AtomicUsize::new(0),
    calls_during_stop: AtomicUsize::new(0),
    removed_answers: AtomicUsize::new(0),
    unregisters_during_callback: AtomicUsize::new(0),
};

fn count(counter: &AtomicUsize) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// `HCABUS_MODEL_SEED=N` (decimal or 0x-hex) explores from another seed.
pub(crate) fn seed() -> u64 {
    let s = std::env::var("HCABUS_MODEL_SEED").unwrap_or_default();
    let parsed = match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    };
    parsed.unwrap_or(SEED)
}

/// Schedules per scheduler: `HCABUS_MODEL_SCHEDULES`, or the scenario's `default`.
fn schedules(default: usize) -> usize {
    std::env::var("HCABUS_MODEL_SCHEDULES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The scenarios of this file (in the child process); `false` for another name.
pub(super) fn scenario(name: &str) -> bool {
    match name {
        "races" => super::schedule::explore(seed(), schedules(SCHEDULES), life_on_four_processors),
        "chaos" => {
            super::schedule::explore(seed(), schedules(CHAOS_SCHEDULES), chaos_on_four_processors);
            let c = &CHAOS;
            println!(
                "chaos reached: rebalances {}, sleeps {}, hibernations {}, cancelled stops {}, \
                 resets {}",
                c[0].load(Ordering::Relaxed),
                c[1].load(Ordering::Relaxed),
                c[2].load(Ordering::Relaxed),
                c[3].load(Ordering::Relaxed),
                c[4].load(Ordering::Relaxed),
            );
        }
        _ => return false,
    }
    let r = &REACHED;
    println!(
        "races reached: stops {}, forced resets {}, calls during a stop {}, busy answers {}, \
         removed answers {}, unregisters during a callback {}",
        r.stops.load(Ordering::Relaxed),
        r.resets.load(Ordering::Relaxed),
        r.calls_during_stop.load(Ordering::Relaxed),
        r.busy_answers.load(Ordering::Relaxed),
        r.removed_answers.load(Ordering::Relaxed),
        r.unregisters_during_callback.load(Ordering::Relaxed),
    );
    true
}

fn removed() -> i32 {
    status::of_refusal(RefusalCode::DeviceRemoved)
}

/// A child's call answered: done, busy (a stop under way at DISPATCH_LEVEL, or past the
/// wait), or removed, and removed only once the removal has begun.
fn check_answer(what: &str, answer: i32) {
    if answer == removed() && !REMOVING.load(Ordering::Acquire) {
        violation(
            Rule::RemovedDuringRebalance,
            what,
            "answered DEVICE_REMOVED while the device was only stopped",
        );
    }
    expect(
        [status::SUCCESS, status::DEVICE_BUSY, removed()].contains(&answer),
        &format!("{what}: {answer:#x}"),
    );
    if answer == status::DEVICE_BUSY {
        count(&REACHED.busy_answers);
    } else if answer == removed() {
        count(&REACHED.removed_answers);
    }
}

/// The child that stays: it calls while the bus is rebalanced, reset, slept and removed,
/// holds the interface until the removal is over, is refused after it, then lets go.
fn staying_child(child: Sendable<Box<CChild>>, removed_done: &AtomicBool) {
    let mut child = child.0;
    while !removed_done.load(Ordering::Acquire) {
        if STOPPING.load(Ordering::Acquire) {
            count(&REACHED.calls_during_stop);
        }
        let (answer, _, _) = child.query_state();
        check_answer("the staying child's query_state", answer);
    }
    let (answer, _, _) = child.query_state();
    expect(
        answer == removed(),
        &format!("a call through an interface held past the removal: {answer:#x}"),
    );
    check_answer("the staying child's unregister", child.detach());
}

/// The child that leaves while the bus delivers: it unregisters as soon as its callback runs
/// (on the DPC's thread), and once its unregister returns, the callback must be over and never
/// run again (the C child checks, on entry and on return).
fn leaving_child(child: Sendable<Box<CChild>>) {
    let mut child = child.0;
    let (answer, _, _) = child.query_state();
    check_answer("the leaving child's query_state", answer);
    while !child.in_callback() && !REMOVING.load(Ordering::Acquire) {
        super::schedule::yield_now();
    }
    check_answer("the leaving child's unregister", child.detach());
    if child.unregistered_during_callback {
        count(&REACHED.unregisters_during_callback);
    }
}

/// An administrator's thread: QUERY_STATE through the control device while the PnP manager
/// works (answered, or refused while the bus is stopped or gone: the model checks that the
/// request is completed once, with nothing touched after).
fn administrator() {
    let mut io = Machine::io_manager();
    for _ in 0..3 {
        let _ = admin::query_state(&mut io, FILE_READ_DATA);
    }
}

/// A rebalance: the stop (refused while a reset is open) and the restart. Whether it stopped.
fn rebalance(m: &mut Machine) -> bool {
    STOPPING.store(true, Ordering::Release);
    let stopped = m.stop() == STATUS_SUCCESS;
    if stopped {
        let status = m.start();
        expect(status == STATUS_SUCCESS, &format!("restart: {status:#x}"));
    }
    STOPPING.store(false, Ordering::Release);
    stopped
}

/// The administrator's forced reset, taken or refused busy (another is open). Whether taken.
fn forced_reset(m: &mut Machine, what: &str) -> bool {
    let asked = admin::request_reset(m, ADMIN, ResetMode::Forced);
    expect(
        asked == STATUS_SUCCESS || asked == STATUS_DEVICE_BUSY,
        &format!("{what}: {asked:#x}"),
    );
    asked == STATUS_SUCCESS
}

/// The surprise removal that ends a schedule, the other processors joined, the unload.
fn remove_and_unload<const N: usize>(
    mut m: Machine,
    removed_done: &AtomicBool,
    threads: [shuttle::thread::JoinHandle<()>; N],
    cpus: Processors,
) {
    REMOVING.store(true, Ordering::Release);
    m.surprise_remove();
    removed_done.store(true, Ordering::Release);
    for t in threads {
        if super::schedule::join(t).is_err() {
            violation(Rule::Expectation, "processor", "a thread panicked");
        }
    }
    cpus.stop();
    m.unload();
}

fn life_on_four_processors() {
    REMOVING.store(false, Ordering::Release);
    STOPPING.store(false, Ordering::Release);
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let staying = Sendable(CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0"));
    let port = ChildFunction::Ipoib { port: 1 }.serial();
    let leaving = Sendable(CChild::attach(fdo, port, c"ipoib1"));
    let removed_done = std::sync::Arc::new(AtomicBool::new(false));
    let cpus = Processors::start();
    let done = std::sync::Arc::clone(&removed_done);
    let threads = [
        super::schedule::spawn(move || staying_child(staying, &done)),
        super::schedule::spawn(move || leaving_child(leaving)),
        super::schedule::spawn(administrator),
    ];
    // The PnP manager: a rebalance (refused while a reset is open), a forced reset, a
    // sleep and a wake, another forced reset and a surprise removal while it runs.
    if rebalance(&mut m) {
        count(&REACHED.stops);
    }
    if forced_reset(&mut m, "a forced reset") {
        count(&REACHED.resets);
    }
    m.power_down(_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3);
    let status = m.power_up();
    expect(status == STATUS_SUCCESS, &format!("D0Entry: {status:#x}"));
    // A reset still in flight as the device is pulled: its DPC, timers and work item run
    // on while release hardware runs the bus down.
    forced_reset(&mut m, "a forced reset before the removal");
    remove_and_unload(m, &removed_done, threads, cpus);
}

/// Schedules per scheduler for CHAOS: each draws its own order of transitions.
const CHAOS_SCHEDULES: usize = 50;

/// Over all schedules of CHAOS: rebalances, sleeps, hibernations, cancelled stops and
/// resets that went through.
static CHAOS: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];

/// DF - Concurrent Hardware And Operating System (CHAOS): the PnP manager's and the power
/// manager's transitions, four of them in an order drawn for each schedule (xorshift from the
/// seed and the schedule's number: the same schedule draws the same order), while a child and
/// an administrator do I/O on other processors and the DPC, timers and work item run; then
/// a surprise removal. The child is never told the device was removed before it is.
fn chaos_on_four_processors() {
    REMOVING.store(false, Ordering::Release);
    STOPPING.store(false, Ordering::Release);
    let mut m = started();
    let fdo = m.fdo.unwrap_or_default();
    let staying = Sendable(CChild::attach(fdo, ChildFunction::Srp.serial(), c"srp0"));
    let removed_done = std::sync::Arc::new(AtomicBool::new(false));
    let cpus = Processors::start();
    let done = std::sync::Arc::clone(&removed_done);
    let threads = [
        super::schedule::spawn(move || staying_child(staying, &done)),
        super::schedule::spawn(administrator),
    ];
    let schedule = super::schedule::whereabouts().unwrap_or(0) as u64;
    let mut draw = (seed() ^ schedule.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
    for _ in 0..4 {
        draw ^= draw << 13;
        draw ^= draw >> 7;
        draw ^= draw << 17;
        let went = match draw % 5 {
            0 => rebalance(&mut m),
            n @ (1 | 2) => {
                m.power_down(if n == 1 {
                    _WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3
                } else {
                    _WDF_POWER_DEVICE_STATE::WdfPowerDevicePrepareForHibernation
                });
                let status = m.power_up();
                expect(status == STATUS_SUCCESS, &format!("D0Entry: {status:#x}"));
                true
            }
            3 => {
                let allowed = m.query_stop() == STATUS_SUCCESS;
                if allowed {
                    m.cancel_stop();
                }
                allowed
            }
            _ => forced_reset(&mut m, "a forced reset"),
        };
        if went {
            count(&CHAOS[(draw % 5) as usize]);
        }
    }
    remove_and_unload(m, &removed_done, threads, cpus);
}

#[test]
fn chaos_pnp_and_power_transitions_at_once_with_io() {
    let o = run("chaos", None);
    assert_eq!(o.code, Some(0), "CHAOS failed:\n{}", o.stderr);
    show_reached(&o);
    for name in [
        "rebalances",
        "sleeps",
        "hibernations",
        "cancelled stops",
        "resets",
    ] {
        assert!(
            figure(&o.stdout, "chaos reached:", name) > 0,
            "{name}: not reached in\n{}",
            o.stdout
        );
    }
}

/// What a line of a scenario's output says its schedules reached, if it says so (libtest may
/// have written the test's name before it on the same line).
pub(super) fn reached(line: &str) -> Option<&str> {
    ["conc:", "races reached:", "chaos reached:"]
        .iter()
        .find_map(|head| line.find(head).map(|at| &line[at..]))
}

/// Prints what the schedules of `o` reached (for CI's log and the docs' figures).
fn show_reached(o: &Outcome) {
    for line in o.stdout.lines().filter_map(reached) {
        println!("{line}");
    }
}

/// The figure `name` on the line of `out` that starts with `line`: `name N`.
fn figure(out: &str, line: &str, name: &str) -> usize {
    out.lines()
        .find_map(|l| l.find(line).map(|at| &l[at..]))
        .and_then(|l| l.split(name).nth(1))
        .and_then(|rest| rest.trim_start().split([',', ' ']).next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn the_layer_holds_on_four_processors_through_rebalance_reset_sleep_and_surprise_removal() {
    let o = run("races", None);
    assert_eq!(o.code, Some(0), "the races failed:\n{}", o.stderr);
    show_reached(&o);
    // Each race was reached, not only survived: the processors switched, the rundown waited
    // for a holder, a lock was contended, a child was answered busy across a stop and removed
    // after the removal, an unregister was called with the child's callback running.
    for (line, name) in [
        ("conc:", "processor switches"),
        ("conc:", "ExWaitForRundownProtectionRelease"),
        ("conc:", "WdfSpinLockAcquire"),
        ("races reached:", "stops"),
        ("races reached:", "forced resets"),
        ("races reached:", "calls during a stop"),
        ("races reached:", "removed answers"),
        ("races reached:", "unregisters during a callback"),
    ] {
        assert!(
            figure(&o.stdout, line, name) > 0,
            "{name}: not reached in\n{}",
            o.stdout
        );
    }
}

/// The bus is freed under a DPC, a timer, a child or an IOCTL still inside it: whichever
/// comes first of a deleted lock or timer used (the platform's objects go with the bus), a
/// lock deleted while its holder is still inside (what the schedules find first since the
/// layer's atomics are scheduling points too) and a thread that never gets out (its state
/// read from freed memory no longer changes). Freed
/// memory is held back while schedules run, so the finding is the same every run.
#[test]
fn a_rundown_released_before_the_call_is_caught_as_a_bus_freed_under_its_caller() {
    let o = run("races", Some(Defect::RundownReleasedEarly));
    let line = o
        .stderr
        .lines()
        .find(|l| l.starts_with("KMDF MODEL BUGCHECK"))
        .unwrap_or_default();
    assert_eq!(
        o.code,
        Some(super::BUGCHECK_EXIT),
        "not caught:\n{}",
        o.stderr
    );
    assert!(
        line.contains("UsedAfterDelete")
            || line.contains("Deadlock")
            || line.contains("a lock deleted while held"),
        "caught as something else: {line}"
    );
}

#[test]
fn an_unregister_that_does_not_wait_for_a_running_callback_is_caught() {
    assert_caught("races", Defect::SharedContext, &["CallbackAfterUnregister"]);
}

#[test]
fn a_stop_published_after_the_rundown_is_caught_as_a_removal_seen_by_a_child() {
    assert_caught(
        "races",
        Defect::StoppedAfterRundown,
        &["RemovedDuringRebalance"],
    );
}

/// D1, found once every access of the layer to shared memory is a scheduling point (not
/// only its DDI calls): a child's call refused at the door, then a start that opens it and
/// clears `stopped`, then the child's loads: taken for a removal.
#[test]
fn a_start_between_a_refused_call_and_its_loads_is_caught_as_a_removal_seen_by_a_child() {
    assert_caught(
        "races",
        Defect::StartMissedAfterRefusal,
        &["RemovedDuringRebalance", "query_state"],
    );
}
