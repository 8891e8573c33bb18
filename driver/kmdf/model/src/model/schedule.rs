//! Other processors: the model under shuttle. Off (the default), the machine has one thread
//! and runs a DPC, a timer or a work item itself, one after another (`machine.rs`). On
//! ([`explore`]), every DDI is a scheduling point, each processor is a shuttle thread with its
//! own IRQL, and a wait (a spin lock or wait lock held by another thread, a rundown wait, a
//! cancel or flush with Wait TRUE, KMDF's delete of a DPC still running) yields until another
//! thread ends it, as it would on a machine with more than one processor.
//!
//! What is one step: the layer's code between two scheduling points runs without another
//! thread in between; the points are every DDI and, on the Linux build, every access of the
//! layer to a shared atomic (`hcabus_model_point`). A DDI's effect comes after its point, so
//! an atomic read just before a DDI and the DDI's effect can be split by another thread. A wait that
//! never ends is shuttle's step bound ([`MAX_STEPS`]): the schedule is printed and the process
//! fails.

use std::string::String;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::vec::Vec;

use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::Runner;

use super::kernel::Kernel;
use super::{violation, with, Rule};

static ON: AtomicBool = AtomicBool::new(false);

/// The IRQL of each shuttle thread: (thread, IRQL). Not a thread-local: shuttle's threads
/// are continuations on one OS thread.
static IRQLS: Mutex<Vec<(usize, u8)>> = Mutex::new(Vec::new());

/// The waits that had to let another thread run first, by DDI, over all schedules: what
/// shows the exploration reached the races (printed by [`explore`]).
/// Each entry: the DDI, how many of its waits let another thread run, the longest in turns.
static CONTENDED: Mutex<Vec<(&'static str, usize, usize)>> = Mutex::new(Vec::new());

/// A wait longer than this many turns of the other threads is a deadlock. The longest wait
/// the suite's schedules see is printed by [`explore`] (`longest`); this is far above it.
const MAX_TURNS: usize = 5_000;

/// Scheduling points in the schedule under way, and the most any schedule took.
static YIELDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static MOST_YIELDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A schedule longer than this never ends (the suite's longest is printed by [`explore`];
/// this is far above it, and below shuttle's own bound, [`MAX_STEPS`]).
const MAX_YIELDS: usize = 50_000;

/// Processor switches: the thread last seen running, the switches of the schedule under way,
/// the most any schedule had, and all of them (printed by [`explore`]).
static RUNNING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static SWITCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static MOST_SWITCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static ALL_SWITCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The calling thread runs now: a switch if another ran last. Called wherever a thread
/// resumes (after a yield or a join, at its start), so every switch is seen once.
fn running() {
    let me = me();
    if RUNNING.swap(me, Ordering::Relaxed) != me {
        SWITCHES.fetch_add(1, Ordering::Relaxed);
    }
}

/// The schedule under way (from 1), for the report of a broken rule.
static SCHEDULE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A schedule longer than this is a wait that never ends.
pub(crate) const MAX_STEPS: usize = 400_000;

/// Whether other processors run (a shuttle execution is under way).
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The calling thread: 1 on the one-threaded machine, shuttle's task id + 1 under shuttle.
/// 0 is no thread (a lock free, a callback not running).
pub(crate) fn me() -> usize {
    if on() {
        usize::from(shuttle::thread::current().id()) + 1
    } else {
        1
    }
}

/// The Linux build's atomics call this before each access (hcabus-kmdf's `shared.rs`), so
/// that a schedule can split the layer's code between any two accesses to shared memory.
#[unsafe(no_mangle)]
extern "C" fn hcabus_model_point() {
    point();
}

/// A scheduling point: another thread may run here.
pub(crate) fn point() {
    if on() {
        yield_now();
    }
}

/// Lets another thread run (under shuttle only). A schedule that reaches [`MAX_YIELDS`]
/// has a thread that waits for ever: a deadlock, or a loop of the driver's with no end.
pub(crate) fn yield_now() {
    let n = YIELDS.fetch_add(1, Ordering::Relaxed) + 1;
    if n == MAX_YIELDS {
        violation(
            Rule::Deadlock,
            "(schedule)",
            &format!("{MAX_YIELDS} scheduling points and no end: a thread waits for ever"),
        );
    }
    switching(shuttle::thread::yield_now);
    running();
}

/// Runs a shuttle operation that may let other threads run first: the crossing between the
/// model and the image (`image::switch`) is per processor, so the caller's is put back.
pub(crate) fn switching<R>(f: impl FnOnce() -> R) -> R {
    let saved = super::image::save();
    let r = f();
    super::image::restore(saved);
    r
}

/// Starts another processor (a shuttle thread), with no call into the image under way.
pub(crate) fn spawn<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> shuttle::thread::JoinHandle<T> {
    switching(|| {
        shuttle::thread::spawn(move || {
            super::image::restore((0, 0));
            running();
            f()
        })
    })
}

/// Waits for a processor started by [`spawn`] to end.
pub(crate) fn join<T>(t: shuttle::thread::JoinHandle<T>) -> std::thread::Result<T> {
    let r = switching(|| t.join());
    running();
    r
}

pub(crate) fn irql() -> Option<u8> {
    if !on() {
        return None;
    }
    let me = me();
    let irqls = IRQLS.lock().unwrap_or_else(PoisonError::into_inner);
    Some(irqls.iter().find(|(t, _)| *t == me).map_or(0, |(_, l)| *l))
}

pub(crate) fn set_irql(level: u8) -> bool {
    if !on() {
        return false;
    }
    let me = me();
    let mut irqls = IRQLS.lock().unwrap_or_else(PoisonError::into_inner);
    match irqls.iter_mut().find(|(t, _)| *t == me) {
        Some((_, l)) => *l = level,
        None => irqls.push((me, level)),
    }
    true
}

/// Waits until `ready` says so, another thread running between two looks. On one thread the
/// wait could never end: a deadlock, the `rule` broken in `ddi`.
pub(crate) fn wait_until(
    rule: Rule,
    ddi: &'static str,
    why: &str,
    mut ready: impl FnMut(&mut Kernel) -> bool,
) {
    let mut turns = 0;
    while !with(&mut ready) {
        if !on() {
            violation(rule, ddi, why);
        }
        if turns == MAX_TURNS {
            violation(
                Rule::Deadlock,
                ddi,
                &format!("{why}: still waiting after {MAX_TURNS} turns of the other threads"),
            );
        }
        turns += 1;
        yield_now();
    }
    if turns > 0 {
        let mut contended = CONTENDED.lock().unwrap_or_else(PoisonError::into_inner);
        match contended.iter_mut().find(|(d, _, _)| *d == ddi) {
            Some((_, n, longest)) => {
                *n += 1;
                *longest = (*longest).max(turns);
            }
            None => contended.push((ddi, 1, turns)),
        }
    }
}

/// Where a broken rule was found: the schedule, when other processors run.
pub(crate) fn whereabouts() -> Option<usize> {
    on().then(|| SCHEDULE.load(Ordering::Relaxed))
}

/// Runs `body` under shuttle's random scheduler for `iterations` schedules from `seed`, then
/// under PCT at depth 3 for as many: each schedule a fresh machine (the body installs it).
/// Freed driver memory is kept until the schedule ends, so that a use after free reads what
/// was there (handles the model then finds deleted) rather than another allocation.
pub(crate) fn explore(seed: u64, iterations: usize, body: fn()) {
    let mut config = shuttle::Config::new();
    // A debug build of the layer and the model needs more than shuttle's 60 KiB per thread
    // (the driver's own stack is measured on the release build: linkcheck.sh).
    config.stack_size = 4 << 20;
    config.max_steps = shuttle::MaxSteps::FailAfter(MAX_STEPS);
    let schedule = move || {
        SCHEDULE.fetch_add(1, Ordering::Relaxed);
        ON.store(true, Ordering::Relaxed);
        IRQLS.lock().unwrap_or_else(PoisonError::into_inner).clear();
        crate::model::heap::quarantine(true);
        YIELDS.store(0, Ordering::Relaxed);
        SWITCHES.store(0, Ordering::Relaxed);
        RUNNING.store(me(), Ordering::Relaxed);
        body();
        MOST_YIELDS.fetch_max(YIELDS.load(Ordering::Relaxed), Ordering::Relaxed);
        let switches = SWITCHES.load(Ordering::Relaxed);
        MOST_SWITCHES.fetch_max(switches, Ordering::Relaxed);
        ALL_SWITCHES.fetch_add(switches, Ordering::Relaxed);
        crate::model::heap::quarantine(false);
        ON.store(false, Ordering::Relaxed);
    };
    let random = RandomScheduler::new_from_seed(seed, iterations);
    Runner::new(random, config.clone()).run(schedule);
    let pct = PctScheduler::new_from_seed(seed, 3, iterations);
    Runner::new(pct, config).run(schedule);
    let contended = CONTENDED.lock().unwrap_or_else(PoisonError::into_inner);
    let waits: Vec<String> = contended
        .iter()
        .map(|(d, n, longest)| format!("{d} {n} (longest {longest} turns)"))
        .collect();
    let schedules = SCHEDULE.load(Ordering::Relaxed);
    println!(
        "conc: {schedules} schedules from seed {seed:#x}, the longest {} scheduling points; \
         processor switches {} in all, {} a schedule on average, at most {}; waits that let \
         another thread run: {}",
        MOST_YIELDS.load(Ordering::Relaxed),
        ALL_SWITCHES.load(Ordering::Relaxed),
        ALL_SWITCHES.load(Ordering::Relaxed) / schedules.max(1),
        MOST_SWITCHES.load(Ordering::Relaxed),
        waits.join(", ")
    );
}
