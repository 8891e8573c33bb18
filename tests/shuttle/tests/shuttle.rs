//! The one locked host under shuttle: resets with clients executing inside their callbacks and
//! from other threads, clients leaving and coming back while a reset runs, and a quiesce
//! deadline firing against the last execute. Each test runs under shuttle's random scheduler
//! and under PCT (which finds bugs of a given depth with a known probability), seeded, so a run
//! is the same every time; a failure prints the schedule that replays it.
//!
//! `HCABUS_SHUTTLE_ITERATIONS=N` runs N schedules per scheduler instead of the suite's count.

use std::sync::atomic::{AtomicUsize, Ordering};

use hcabus::errors::ExecuteError;
use hcabus::host::EventCallback;
use hcabus::types::*;
use hcabus::{Config, Duration, Epoch, ExecuteOutcome, Policy, State};
use hcabus_shuttle::{ShuttleBus, ShuttleHost, ShuttleThreads, ShuttleView, MAX_JUMP_US};
use hcabus_sim::SimHca;
use hcabus_sim::SimHcaConfig;
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::sync::{Arc, Condvar, Mutex};
use shuttle::thread;
use shuttle::Runner;

/// Schedules per scheduler in the suite.
const ITERATIONS: usize = 2_000;
const SEED: u64 = 0x6863_6162_7573;

fn iterations() -> usize {
    std::env::var("HCABUS_SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(ITERATIONS)
}

/// Runs `f` under the random scheduler, then under PCT at depth 3.
fn explore(f: impl Fn() + Send + Sync + 'static) {
    let f = std::sync::Arc::new(f);
    let g = std::sync::Arc::clone(&f);
    let random = RandomScheduler::new_from_seed(SEED, iterations());
    Runner::new(random, Default::default()).run(move || g());
    let pct = PctScheduler::new_from_seed(SEED, 3, iterations());
    Runner::new(pct, Default::default()).run(move || f());
}

/// A quiesce deadline the virtual clock never jumps to (beyond `MAX_JUMP_US`): every client
/// executes in time, so a test checks the execute paths themselves.
const NEVER_MS: u64 = 2 * MAX_JUMP_US / 1_000;

fn config(quiesce_deadline_ms: u64) -> Config {
    Config {
        max_clients: 8,
        recorder_capacity: 256,
        policy: Policy {
            quiesce_deadline_ms,
            // Far out: the periodic poll would otherwise keep the virtual clock running for
            // ever (see sim/sync.rs); no test here needs it.
            health_poll_interval_ms: 3_600_000,
            ..Policy::default()
        },
    }
}

fn start(quiesce_deadline_ms: u64) -> ShuttleHost {
    let hca = SimHca::new(SimHcaConfig {
        hw_reset: Duration::ZERO,
        ..SimHcaConfig::default()
    });
    ShuttleHost::start(config(quiesce_deadline_ms), hca).expect("the host starts")
}

/// How a client answers RESET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// `reset_execute` from inside the callback.
    Inline,
    /// Hands the epoch to a worker thread, which executes.
    Worker,
    /// Unregisters from inside the callback and registers again.
    Reregister,
}

/// One client: its events, and the epoch a worker is to execute.
struct Client {
    answer: Answer,
    events: Mutex<Vec<EventKind>>,
    handoff: Mutex<Option<(ClientId, Epoch)>>,
    handed: Condvar,
    /// Answers to the worker's execute.
    outcomes: Mutex<Vec<Result<ExecuteOutcome, ExecuteError>>>,
}

impl Client {
    fn new(answer: Answer) -> Arc<Self> {
        Arc::new(Client {
            answer,
            events: Mutex::new(Vec::new()),
            handoff: Mutex::new(None),
            handed: Condvar::new(),
            outcomes: Mutex::new(Vec::new()),
        })
    }

    fn events(&self) -> Vec<EventKind> {
        self.events.lock().expect("events").clone()
    }

    /// The worker: waits for one RESET's epoch and executes it.
    fn work(&self, bus: &ShuttleBus) {
        let mut slot = self.handoff.lock().expect("handoff");
        let (id, epoch) = loop {
            if let Some(h) = slot.take() {
                break h;
            }
            slot = self.handed.wait(slot).expect("handoff");
        };
        drop(slot);
        let outcome = bus.reset_execute(id, epoch);
        self.outcomes.lock().expect("outcomes").push(outcome);
    }
}

/// The host holds an `Arc<dyn EventCallback>`; the test keeps the client's own `Arc`.
struct Callback(Arc<Client>);

impl EventCallback<ShuttleThreads> for Callback {
    fn on_event(&self, bus: ShuttleView<'_>, id: ClientId, event: Event) {
        let c = &self.0;
        c.events.lock().expect("events").push(event.kind());
        let Event::Reset { epoch, .. } = event else {
            return;
        };
        match c.answer {
            Answer::Inline => {
                bus.reset_execute(id, epoch)
                    .expect("execute in the callback");
            }
            Answer::Worker => {
                *c.handoff.lock().expect("handoff") = Some((id, epoch));
                c.handed.notify_all();
            }
            Answer::Reregister => {
                bus.unregister(id).expect("unregister in the callback");
                let again = Callback(Arc::clone(c));
                bus.register(desc("again"), std::sync::Arc::new(again))
                    .expect("register again in the callback");
            }
        }
    }
}

fn desc(name: &str) -> ClientDesc {
    ClientDesc::new(name, ClientKind::Custom, ClientFlags::empty()).expect("a literal name fits")
}

fn register(bus: &ShuttleBus, name: &str, client: &Arc<Client>) -> ClientId {
    let cb = Callback(Arc::clone(client));
    bus.register(desc(name), std::sync::Arc::new(cb))
        .expect("registered")
        .id
}

fn wait_idle(bus: &ShuttleBus) {
    let idle = bus
        .wait_idle(std::time::Duration::from_secs(3_600))
        .expect("the test thread may block");
    assert!(idle, "the bus went idle");
}

#[test]
fn a_reset_with_clients_executing_in_callbacks_and_from_other_threads() {
    explore(|| {
        let host = start(NEVER_MS);
        let bus = host.bus().clone();
        let inline = Client::new(Answer::Inline);
        let worker = Client::new(Answer::Worker);
        register(&bus, "inline", &inline);
        register(&bus, "worker", &worker);
        let w = Arc::clone(&worker);
        let b = bus.clone();
        let t = thread::spawn(move || w.work(&b));
        // The administrator's reset from a third thread, racing the worker's start.
        let admin = bus.clone();
        let a = thread::spawn(move || admin.admin_reset(AdminReset::Forced));
        assert_eq!(a.join().expect("admin"), Ok(Epoch(1)));
        t.join().expect("worker");
        wait_idle(&bus);
        for c in [&inline, &worker] {
            assert_eq!(c.events(), [EventKind::Reset, EventKind::ResetEnd]);
        }
        assert_eq!(
            worker.outcomes.lock().expect("outcomes").as_slice(),
            [Ok(ExecuteOutcome::Accepted)]
        );
        assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
        assert_eq!(bus.callback_panics(), 0);
    });
}

#[test]
fn clients_leave_and_come_back_while_a_reset_runs() {
    explore(|| {
        let host = start(NEVER_MS);
        let bus = host.bus().clone();
        let rereg = Client::new(Answer::Reregister);
        let leaver = Client::new(Answer::Worker);
        let newcomer = Client::new(Answer::Inline);
        register(&bus, "rereg", &rereg);
        let leaver_id = register(&bus, "leaver", &leaver);
        let b = bus.clone();
        let leaves = thread::spawn(move || b.unregister(leaver_id));
        let b = bus.clone();
        let n = Arc::clone(&newcomer);
        let joins = thread::spawn(move || register(&b, "newcomer", &n));
        bus.admin_reset(AdminReset::Forced).expect("reset");
        assert_eq!(leaves.join().expect("leaver"), Ok(()));
        joins.join().expect("newcomer");
        wait_idle(&bus);
        // Left from inside its callback and came back as a late registrant: RESET, then the
        // end the late registrant hears; nothing twice.
        assert_eq!(rereg.events(), [EventKind::Reset, EventKind::ResetEnd]);
        // Left before or during the reset: RESET at most, never an end.
        assert!(
            matches!(leaver.events().as_slice(), [] | [EventKind::Reset]),
            "{:?}",
            leaver.events()
        );
        // Came in before the reset (RESET then RESET_END), during it (RESET_END alone) or
        // after it (nothing).
        assert!(
            matches!(
                newcomer.events().as_slice(),
                [EventKind::Reset, EventKind::ResetEnd] | [EventKind::ResetEnd] | []
            ),
            "{:?}",
            newcomer.events()
        );
        assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
        assert_eq!(bus.inspect(|c| c.client_count()), 2);
    });
}

static FORCED: AtomicUsize = AtomicUsize::new(0);
static IN_TIME: AtomicUsize = AtomicUsize::new(0);

#[test]
fn the_quiesce_deadline_racing_the_last_execute_has_one_winner() {
    FORCED.store(0, Ordering::SeqCst);
    IN_TIME.store(0, Ordering::SeqCst);
    explore(|| {
        let host = start(10);
        let bus = host.bus().clone();
        let worker = Client::new(Answer::Worker);
        let id = register(&bus, "worker", &worker);
        let w = Arc::clone(&worker);
        let b = bus.clone();
        let t = thread::spawn(move || w.work(&b));
        bus.admin_reset(AdminReset::Forced).expect("reset");
        t.join().expect("worker");
        wait_idle(&bus);
        let outcome = worker.outcomes.lock().expect("outcomes")[0];
        let forced = bus.inspect(|c| c.last_reset().expect("record").forced().to_vec());
        match outcome {
            Ok(ExecuteOutcome::Accepted) => {
                assert!(forced.is_empty(), "in time, yet forced: {forced:?}");
                IN_TIME.fetch_add(1, Ordering::SeqCst);
            }
            // Forced at the deadline: told so while the reset still runs, or refused with
            // NoResetPending once it is over (docs/design.md §3 lists that refusal).
            Ok(ExecuteOutcome::TooLate) | Err(ExecuteError::NoResetPending) => {
                assert_eq!(forced, [id], "too late, so forced at the deadline");
                FORCED.fetch_add(1, Ordering::SeqCst);
            }
            other => panic!("executed once in a reset it was part of: {other:?}"),
        }
        // Either way: one RESET, one RESET_END, one hardware reset.
        assert_eq!(worker.events(), [EventKind::Reset, EventKind::ResetEnd]);
        assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
    });
    let (forced, in_time) = (
        FORCED.load(Ordering::SeqCst),
        IN_TIME.load(Ordering::SeqCst),
    );
    eprintln!("deadline race: {in_time} schedules executed in time, {forced} were forced");
    assert!(
        forced > 0 && in_time > 0,
        "both winners were explored: {in_time} in time, {forced} forced"
    );
}

/// A child that keeps its context alive only until Unregister returns: a callback that starts,
/// or is still running, after that is a use after free on Windows.
struct Mortal {
    /// Set by the child's thread once Unregister has returned.
    freed: std::sync::atomic::AtomicBool,
    late: AtomicUsize,
    calls: AtomicUsize,
}

struct MortalCallback(Arc<Mortal>);

impl EventCallback<ShuttleThreads> for MortalCallback {
    fn on_event(&self, bus: ShuttleView<'_>, id: ClientId, event: Event) {
        let m = &self.0;
        m.calls.fetch_add(1, Ordering::SeqCst);
        if m.freed.load(Ordering::SeqCst) {
            m.late.fetch_add(1, Ordering::SeqCst);
        }
        // Room for the unregistering thread to run while this callback is under way.
        thread::yield_now();
        if let Event::Reset { epoch, .. } = event {
            let _ = bus.reset_execute(id, epoch);
        }
        thread::yield_now();
        if m.freed.load(Ordering::SeqCst) {
            m.late.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Unregister is a rundown: a child unregistering at PASSIVE_LEVEL from its own thread while
/// a reset delivers to it on another never sees a callback start or run on after Unregister
/// returned.
#[test]
fn no_callback_starts_or_runs_after_unregister_returns() {
    explore(|| {
        let host = start(NEVER_MS);
        let bus = host.bus().clone();
        let m = Arc::new(Mortal {
            freed: false.into(),
            late: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
        });
        let cb = MortalCallback(Arc::clone(&m));
        let id = bus
            .register(desc("mortal"), std::sync::Arc::new(cb))
            .expect("registered")
            .id;
        let admin = bus.clone();
        let a = thread::spawn(move || admin.admin_reset(AdminReset::Forced));
        bus.unregister(id).expect("unregister");
        m.freed.store(true, Ordering::SeqCst);
        a.join().expect("admin").expect("reset");
        wait_idle(&bus);
        assert_eq!(
            m.late.load(Ordering::SeqCst),
            0,
            "a callback after Unregister"
        );
        assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
    });
}

/// A child written as Windows children are: its own lock (a spin lock, raising its thread to
/// DISPATCH_LEVEL) held across Register and taken in its callback. A call at DISPATCH_LEVEL
/// never runs a callback on the calling thread, so the child never waits on itself (shuttle
/// reports a deadlock otherwise).
#[test]
fn a_child_holding_its_own_spin_lock_across_register_never_deadlocks() {
    struct Locked(Arc<Mutex<u32>>);
    impl EventCallback<ShuttleThreads> for Locked {
        fn on_event(&self, bus: ShuttleView<'_>, id: ClientId, event: Event) {
            *self.0.lock().expect("the child's lock") += 1;
            if let Event::Reset { epoch, .. } = event {
                let _ = bus.reset_execute(id, epoch);
            }
        }
    }
    explore(|| {
        let host = start(NEVER_MS);
        let bus = host.bus().clone();
        let admin = bus.clone();
        let a = thread::spawn(move || admin.admin_reset(AdminReset::Forced));
        let lock = Arc::new(Mutex::new(0u32));
        let was = hcabus_shuttle::raise();
        let held = lock.lock().expect("the child's lock");
        let cb = Locked(Arc::clone(&lock));
        bus.register(desc("spinner"), std::sync::Arc::new(cb))
            .expect("registered");
        drop(held);
        hcabus_shuttle::lower(was);
        a.join().expect("admin").expect("reset");
        wait_idle(&bus);
        assert_eq!((bus.state(), bus.epoch()), (State::Operational, Epoch(2)));
    });
}
