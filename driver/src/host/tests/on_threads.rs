//! The threaded host (threaded.rs) on real threads, the IRQL verifier (irql.rs) and std's
//! threads as the host sees them (facade.rs). Every outcome asserted is one the code
//! guarantees, whatever the scheduling: ordering comes from joins and channels, and the
//! only waits are the host's own bounded ones.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex};

use crate::host::facade::{next_context, StdThreads, Threads};
use crate::host::irql::{self, BlockAtDispatch, Irql};
use crate::host::threaded::{EventCallback, StartError, StdPlatform, ThreadPlatform, ThreadedHost};

use super::*;

/// Far longer than a reset on the fake adapter takes (milliseconds): only a hang reaches it.
const LONG: std::time::Duration = std::time::Duration::from_secs(4);

/// Runs a test's body on a thread of its own and fails the test if it has not returned in
/// a little more than [`LONG`]: a host that hangs (a wait nobody ends, as a mutant of the
/// platform makes) fails at once instead of holding the test binary until it is killed.
/// The thread left hanging ends with the process.
fn within(body: fn()) {
    let (done, ended) = mpsc::channel();
    let t = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match ended.recv_timeout(LONG + std::time::Duration::from_secs(1)) {
        Ok(()) => t.join().expect("the body returned"),
        Err(mpsc::RecvTimeoutError::Disconnected) => match t.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the body returned without saying so"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("the threaded host hung"),
    }
}

/// Deadlines and the health poll far away, so that only the reset's own probe (1 ms after
/// the assert) is due while a test runs.
fn threaded_config() -> Config {
    Config {
        max_clients: 8,
        recorder_capacity: 1024,
        policy: Policy {
            quiesce_deadline_ms: 60_000,
            health_poll_interval_ms: 60_000,
            hw_poll_interval_ms: 8,
            hw_ready_timeout_ms: 20_000,
            auto_restart_window_ms: 600_000,
            ..Policy::default()
        },
    }
}

fn start(hca: FakeHca) -> ThreadedHost {
    ThreadedHost::<StdThreads>::start(threaded_config(), hca).expect("the host starts")
}

/// What one callback saw: the event, the thread it ran on, whether it ran raised.
type Seen = (EventKind, Option<String>, bool);

#[derive(Default)]
struct Probe {
    seen: Mutex<Vec<Seen>>,
    execute: bool,
    panic: bool,
}

impl Probe {
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen").clone()
    }
    fn kinds(&self) -> Vec<EventKind> {
        self.seen().into_iter().map(|s| s.0).collect()
    }
}

impl EventCallback for Probe {
    fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        let thread = std::thread::current().name().map(String::from);
        self.seen
            .lock()
            .expect("seen")
            .push((event.kind(), thread, StdThreads::raised()));
        if let Event::Reset { epoch, .. } = event {
            if self.execute {
                assert_eq!(bus.reset_execute(id, epoch), Ok(ExecuteOutcome::Accepted));
            }
            assert!(!self.panic, "a client's bug, contained by the host");
        }
    }
}

/// A host on the fake adapter with `probe` registered as client "t".
fn registered(probe: Probe) -> (ThreadedHost, Arc<Probe>) {
    let host = start(hca());
    let probe = Arc::new(probe);
    host.bus()
        .register(desc("t"), probe.clone())
        .expect("registers");
    (host, probe)
}

fn this_thread() -> Option<String> {
    std::thread::current().name().map(String::from)
}

/// A call at PASSIVE_LEVEL drains on the caller's thread; the timer thread fires the probe
/// and finishes the reset; the event log hears both ends; dropping the host stops its
/// thread (which lets go of the bus).
#[test]
fn a_reset_on_threads_drains_on_the_caller_and_ends_on_the_timer_thread() {
    within(a_reset_on_threads_drains_on_the_caller_and_ends_on_the_timer_thread_body);
}

fn a_reset_on_threads_drains_on_the_caller_and_ends_on_the_timer_thread_body() {
    let (host, probe) = registered(Probe {
        execute: true,
        ..Probe::default()
    });
    let bus = host.bus();
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    assert_eq!(probe.seen()[0], (EventKind::Reset, this_thread(), true));
    assert_eq!(bus.wait_idle(LONG), Ok(true));
    assert_eq!(probe.kinds(), [EventKind::Reset, EventKind::ResetEnd]);
    assert!(
        probe.seen().iter().all(|s| s.2),
        "every callback runs raised"
    );
    assert_eq!(bus.epoch(), Epoch(2));
    assert_eq!(
        (
            bus.event_log_entries(),
            bus.pnp_operations(),
            bus.callback_panics()
        ),
        (2, 0, 0)
    );
    let weak = Arc::downgrade(bus);
    drop(host);
    assert!(
        weak.upgrade().is_none(),
        "the timer thread still holds the bus"
    );
}

/// A call made at DISPATCH_LEVEL never runs a callback on its own thread: the timer thread
/// (another processor) delivers. Waiting is refused there.
#[test]
fn a_call_at_dispatch_is_delivered_by_the_timer_thread() {
    within(a_call_at_dispatch_is_delivered_by_the_timer_thread_body);
}

fn a_call_at_dispatch_is_delivered_by_the_timer_thread_body() {
    let (host, probe) = registered(Probe {
        execute: true,
        ..Probe::default()
    });
    let bus = host.bus();
    // The timer thread asleep (until the health poll, a minute away): the call must wake
    // it. Looked at until it is, under the watchdog.
    while !bus.platform().timer_thread_asleep() {
        std::thread::yield_now();
    }
    {
        let _raised = irql::raise_to_dispatch();
        assert!(
            bus.platform().at_dispatch(),
            "the bus sees the caller raised"
        );
        assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
        assert_eq!(
            bus.wait_idle(LONG),
            Err(BlockAtDispatch {
                what: "ThreadedBus::wait_idle"
            })
        );
    }
    assert!(!bus.platform().at_dispatch());
    assert_eq!(bus.wait_idle(LONG), Ok(true));
    let timers = Some(String::from("hcabus-timers"));
    assert_eq!(probe.seen()[0], (EventKind::Reset, timers, true));
    assert_eq!(bus.epoch(), Epoch(2));
}

/// A drain deferred on this thread waits for the kick: nothing is delivered before it.
#[test]
fn a_deferred_drain_runs_at_the_kick() {
    within(a_deferred_drain_runs_at_the_kick_body);
}

fn a_deferred_drain_runs_at_the_kick_body() {
    let (host, probe) = registered(Probe {
        execute: true,
        ..Probe::default()
    });
    let bus = host.bus();
    let r = ThreadPlatform::<StdThreads>::deferring(|| bus.admin_reset(AdminReset::Forced));
    assert_eq!(r, Ok(Epoch(1)));
    assert!(probe.seen().is_empty());
    assert!(!bus.is_idle());
    bus.kick();
    assert_eq!(probe.seen()[0], (EventKind::Reset, this_thread(), true));
    assert_eq!(bus.wait_idle(LONG), Ok(true));
    assert_eq!(bus.epoch(), Epoch(2));
}

/// A callback that panics is contained and counted; its event counts as delivered.
#[test]
fn a_panicking_callback_is_counted_and_the_reset_goes_on() {
    within(a_panicking_callback_is_counted_and_the_reset_goes_on_body);
}

fn a_panicking_callback_is_counted_and_the_reset_goes_on_body() {
    let (host, probe) = registered(Probe {
        execute: true,
        panic: true,
        ..Probe::default()
    });
    let bus = host.bus();
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    assert_eq!(bus.wait_idle(LONG), Ok(true));
    assert_eq!(bus.callback_panics(), 1);
    assert_eq!(probe.kinds(), [EventKind::Reset, EventKind::ResetEnd]);
    assert_eq!(bus.epoch(), Epoch(2));
}

/// Waiting for idle gives up at its bound while a client holds the reset, and returns once
/// the client executes.
#[test]
fn wait_idle_is_bounded_and_ends_when_the_bus_is_idle() {
    within(wait_idle_is_bounded_and_ends_when_the_bus_is_idle_body);
}

fn wait_idle_is_bounded_and_ends_when_the_bus_is_idle_body() {
    let host = start(hca());
    let bus = host.bus();
    let probe = Arc::new(Probe::default());
    let id = bus
        .register(desc("t"), probe.clone())
        .expect("registers")
        .id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    assert_eq!(
        bus.wait_idle(std::time::Duration::from_millis(20)),
        Ok(false)
    );
    assert_eq!(
        bus.reset_execute(id, Epoch(1)),
        Ok(ExecuteOutcome::Accepted)
    );
    assert_eq!(bus.wait_idle(LONG), Ok(true));
    assert_eq!(bus.epoch(), Epoch(2));
}

/// Another adapter behind the reset: the host's PnP and event log counters.
#[test]
fn a_replaced_device_is_counted_by_the_threaded_host() {
    within(a_replaced_device_is_counted_by_the_threaded_host_body);
}

fn a_replaced_device_is_counted_by_the_threaded_host_body() {
    let other = Identity {
        node_guid: 2,
        ..identity()
    };
    let host = start(FakeHca {
        swap: Some(other),
        ..hca()
    });
    let bus = host.bus();
    let probe = Arc::new(Probe {
        execute: true,
        ..Probe::default()
    });
    bus.register(desc("t"), probe.clone()).expect("registers");
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    assert_eq!(bus.wait_idle(LONG), Ok(true));
    assert_eq!(bus.state(), State::Failed);
    assert_eq!((bus.pnp_operations(), bus.event_log_entries()), (2, 2));
    assert_eq!(probe.kinds(), [EventKind::Reset, EventKind::ResetFailed]);
}

#[test]
fn a_host_on_a_dead_device_does_not_start() {
    within(a_host_on_a_dead_device_does_not_start_body);
}

fn a_host_on_a_dead_device_does_not_start_body() {
    let dead = FakeHca {
        fail_identity: true,
        ..hca()
    };
    assert_eq!(
        ThreadedHost::<StdThreads>::start(threaded_config(), dead).err(),
        Some(StartError::Bus(NewError::Hardware(HwError::Absent)))
    );
}

/// Holds its RESET callback until the test lets it go.
struct Gate {
    entered: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
    returned: AtomicBool,
}

impl EventCallback for Gate {
    fn on_event(&self, _bus: ClientView<'_, StdPlatform>, _id: ClientId, event: Event) {
        if let Event::Reset { .. } = event {
            self.entered
                .lock()
                .expect("entered")
                .send(())
                .expect("the test listens");
            self.release
                .lock()
                .expect("release")
                .recv()
                .expect("the test releases");
            self.returned.store(true, Ordering::SeqCst);
        }
    }
}

/// Unregister from another thread while the client's callback runs returns only after
/// that callback has returned, however late the callback is let go.
#[test]
fn unregister_on_another_thread_waits_for_the_running_callback() {
    within(unregister_on_another_thread_waits_for_the_running_callback_body);
}

fn unregister_on_another_thread_waits_for_the_running_callback_body() {
    let host = start(hca());
    let bus = Arc::clone(host.bus());
    let (entered_tx, entered_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel();
    let gate = Arc::new(Gate {
        entered: Mutex::new(entered_tx),
        release: Mutex::new(release_rx),
        returned: AtomicBool::new(false),
    });
    let id = bus
        .register(desc("gate"), gate.clone())
        .expect("registers")
        .id;
    let resetter = {
        let bus = Arc::clone(&bus);
        std::thread::spawn(move || bus.admin_reset(AdminReset::Forced))
    };
    entered_rx.recv().expect("RESET reached the gate");
    let leaver = {
        let bus = Arc::clone(&bus);
        let gate = Arc::clone(&gate);
        std::thread::spawn(move || {
            assert_eq!(bus.unregister(id), Ok(()));
            gate.returned.load(Ordering::SeqCst)
        })
    };
    // Gives the leaver a chance to reach its wait first; its result does not depend on it.
    for _ in 0..1_000 {
        std::thread::yield_now();
    }
    release_tx.send(()).expect("the gate waits");
    assert!(
        leaver.join().expect("the leaver"),
        "unregister returned while its client's callback ran"
    );
    assert_eq!(resetter.join().expect("the resetter"), Ok(Epoch(1)));
    assert_eq!(bus.wait_idle(LONG), Ok(true));
    assert_eq!(bus.epoch(), Epoch(2));
}

/// Raising restores the level it found; a blocking call is refused (and counted) only at
/// DISPATCH_LEVEL. On a thread of its own, whose IRQL no other test touches.
#[test]
fn the_irql_is_per_thread_and_blocking_is_refused_at_dispatch() {
    within(the_irql_is_per_thread_and_blocking_is_refused_at_dispatch_body);
}

fn the_irql_is_per_thread_and_blocking_is_refused_at_dispatch_body() {
    std::thread::spawn(|| {
        assert_eq!(irql::current(), Irql::Passive);
        assert_eq!(irql::check_may_block("passive"), Ok(()));
        let before = irql::block_violations();
        {
            let _outer = irql::raise_to_dispatch();
            assert_eq!(irql::current(), Irql::Dispatch);
            {
                let _inner = irql::raise_to_dispatch();
            }
            assert_eq!(
                irql::current(),
                Irql::Dispatch,
                "the inner guard restores DISPATCH"
            );
            assert_eq!(
                irql::check_may_block("a"),
                Err(BlockAtDispatch { what: "a" })
            );
            assert_eq!(
                irql::check_may_block("b"),
                Err(BlockAtDispatch { what: "b" })
            );
        }
        assert_eq!(irql::current(), Irql::Passive);
        // Other threads may add theirs; these two are counted whatever they do.
        assert!(irql::block_violations() >= before + 2);
        assert_eq!(irql::set(Irql::Dispatch), Irql::Passive);
        assert!(StdThreads::raised());
        assert_eq!(irql::set(Irql::Passive), Irql::Dispatch);
        assert!(!StdThreads::raised());
    })
    .join()
    .expect("the IRQL thread");
}

/// std's threads as the host uses them: contexts per thread, the deferred-drain count,
/// DISPATCH_LEVEL around a callback, a clock that moves, locks and spawned threads.
#[test]
fn std_threads_give_each_thread_its_context_and_level() {
    within(std_threads_give_each_thread_its_context_and_level_body);
}

fn std_threads_give_each_thread_its_context_and_level_body() {
    let (a, b) = (next_context(), next_context());
    assert!(a >= 1 && b > a, "{a} {b}");
    let here = StdThreads::context();
    assert_eq!(StdThreads::context(), here);
    let there = std::thread::spawn(StdThreads::context)
        .join()
        .expect("the other thread");
    assert_ne!(there, here);

    assert_eq!(StdThreads::with_deferring(|d| d.get()), 0);
    let inside =
        ThreadPlatform::<StdThreads>::deferring(|| StdThreads::with_deferring(|d| d.get()));
    assert_eq!(inside, 1);
    assert_eq!(StdThreads::with_deferring(|d| d.get()), 0);

    assert!(!StdThreads::raised());
    assert!(StdThreads::at_dispatch(StdThreads::raised));
    assert!(!StdThreads::raised());
    assert_eq!(StdThreads::may_block("passive"), Ok(()));
    assert_eq!(
        StdThreads::at_dispatch(|| StdThreads::may_block("raised")),
        Err(BlockAtDispatch { what: "raised" })
    );

    // The bus clock moves on (bounded, so that a clock stuck at zero fails, not hangs).
    let clock = StdThreads::clock();
    let start = std::time::Instant::now();
    while StdThreads::now(&clock) == Instant::ZERO {
        assert!(start.elapsed() < LONG, "the bus clock never moved");
        std::hint::spin_loop();
    }

    let m = StdThreads::mutex(5u32);
    *StdThreads::lock(&m) += 1;
    assert_eq!(StdThreads::into_inner(m), 6);

    let ran = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&ran);
    let handle = StdThreads::spawn("hcabus-test", move || {
        let named = std::thread::current().name() == Some("hcabus-test");
        flag.store(named, Ordering::SeqCst);
    })
    .expect("spawns");
    StdThreads::join(handle);
    assert!(ran.load(Ordering::SeqCst), "joined a thread of that name");
}

/// The rundown's count of callbacks that returned: a wait for a count already passed
/// returns at once (a callback that ended between the rundown's look and its wait).
#[test]
fn a_rundown_wait_for_a_count_already_passed_returns_at_once() {
    within(a_rundown_wait_for_a_count_already_passed_returns_at_once_body);
}

fn a_rundown_wait_for_a_count_already_passed_returns_at_once_body() {
    let host = start(hca());
    let p = host.bus().platform();
    let before = p.deliveries_ended();
    p.delivery_ended();
    p.delivery_ended();
    assert_eq!(p.deliveries_ended(), before + 2);
    p.wait_delivery_end(before + 1);
    p.wait_delivery_end(before);
}
