//! The threaded host: real threads, callbacks with no lock held, re-entrant bus calls.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use hcabus::coordinator::Config;
use hcabus::host::{ClientView, EventCallback, StdPlatform, ThreadedHost};
use hcabus::types::*;
use hcabus::types::{AdminReset, State};
use hcabus::{Duration, Policy};
use hcabus_sim::{SharedSimHca, SimHca, SimHcaConfig};
use hcabus_tests::{desc, wait_for};

fn policy() -> Policy {
    Policy {
        quiesce_deadline_ms: 200,
        hw_poll_interval_ms: 1,
        hw_ready_timeout_ms: 2_000,
        ..Policy::default()
    }
}

fn start(hw_reset_ms: u64) -> (ThreadedHost, SharedSimHca) {
    let hca = SharedSimHca::new(SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(hw_reset_ms),
        ..SimHcaConfig::default()
    }));
    let host = ThreadedHost::start(
        Config {
            max_clients: 32,
            recorder_capacity: 4096,
            policy: policy(),
        },
        hca.clone(),
    )
    .expect("start");
    (host, hca)
}

/// Waits (bounded) until `cond` holds; the bound only turns a hang into a failure.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// Execute from inside the RESET callback.
    Inline,
    /// Unregister from inside the RESET callback.
    Unregister,
    /// Unregister and register again from inside the RESET callback.
    Reregister,
    /// Hand the execute to another thread.
    OtherThread,
    /// Never execute.
    Never,
    /// Panic in the RESET callback (a client bug).
    Panic,
}

struct Client {
    mode: Mode,
    log: Mutex<Vec<(ClientId, EventKind)>>,
    pending: Arc<AtomicU64>,
    me: Mutex<Option<ClientId>>,
    self_ref: Mutex<Option<Arc<Client>>>,
}

impl EventCallback for Client {
    fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        self.log.lock().expect("log").push((id, event.kind()));
        let Event::Reset { epoch, .. } = event else {
            return;
        };
        match self.mode {
            Mode::Inline => {
                bus.reset_execute(id, epoch)
                    .expect("execute inside callback");
            }
            Mode::Unregister => bus.unregister(id).expect("unregister inside callback"),
            Mode::Reregister => {
                bus.unregister(id).expect("unregister inside callback");
                let me = self.self_ref.lock().expect("ref").clone().expect("set");
                let reg = bus
                    .register(desc("rereg", ClientKind::Custom, ClientFlags::empty()), me)
                    .expect("register inside callback");
                assert!(reg.late);
                *self.me.lock().expect("me") = Some(reg.id);
            }
            Mode::OtherThread => self.pending.store(epoch.0, Ordering::SeqCst),
            Mode::Never => {}
            Mode::Panic => panic!("client bug in the RESET callback"),
        }
    }
}

fn client(mode: Mode) -> Arc<Client> {
    let c = Arc::new(Client {
        mode,
        log: Mutex::new(Vec::new()),
        pending: Arc::new(AtomicU64::new(0)),
        me: Mutex::new(None),
        self_ref: Mutex::new(None),
    });
    *c.self_ref.lock().expect("ref") = Some(c.clone());
    c
}

fn kinds(c: &Client) -> Vec<EventKind> {
    c.log.lock().expect("log").iter().map(|(_, k)| *k).collect()
}

#[test]
fn callbacks_call_back_into_the_bus_without_deadlock() {
    let (host, _hca) = start(20);
    let bus = host.bus().clone();
    let inline = client(Mode::Inline);
    let leaver = client(Mode::Unregister);
    let rereg = client(Mode::Reregister);
    let remote = client(Mode::OtherThread);
    let mut ids = Vec::new();
    for (name, c) in [
        ("inline", &inline),
        ("leaver", &leaver),
        ("rereg", &rereg),
        ("remote", &remote),
    ] {
        let reg = bus
            .register(
                desc(name, ClientKind::Custom, ClientFlags::empty()),
                c.clone(),
            )
            .expect("register");
        *c.me.lock().expect("me") = Some(reg.id);
        ids.push(reg.id);
    }
    // Another thread executes for `remote` when its RESET arrives.
    let worker = {
        let bus = bus.clone();
        let pending = remote.pending.clone();
        let id = ids[3];
        std::thread::spawn(move || {
            let until = StdInstant::now() + StdDuration::from_secs(20);
            while StdInstant::now() < until {
                let e = pending.swap(0, Ordering::SeqCst);
                if e != 0 {
                    bus.reset_execute(id, Epoch(e))
                        .expect("execute from another thread");
                    return true;
                }
                std::thread::yield_now();
            }
            false
        })
    };
    assert_eq!(bus.reset_request(ids[0]), Ok(Epoch(1)));
    assert!(worker.join().expect("worker"), "remote never saw RESET");
    wait_for("reset end", || {
        bus.epoch() == Epoch(2) && bus.state() == State::Operational
    });
    wait_for("RESET_END to remote", || kinds(&remote).len() == 2);
    assert_eq!(kinds(&inline), [EventKind::Reset, EventKind::ResetEnd]);
    assert_eq!(kinds(&leaver), [EventKind::Reset]);
    // Old id got RESET, the new (late) id RESET_END.
    let log = rereg.log.lock().expect("log").clone();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0], (ids[2], EventKind::Reset));
    assert_eq!(log[1].1, EventKind::ResetEnd);
    assert_ne!(log[1].0, ids[2]);
    assert_eq!(kinds(&remote), [EventKind::Reset, EventKind::ResetEnd]);
    let forced = bus.inspect(|c| c.last_reset().expect("record").forced().to_vec());
    assert!(forced.is_empty(), "nobody waited for the deadline");
    assert_eq!(bus.pnp_operations(), 0);
    // Break the self-reference cycle so the clients can be freed.
    for c in [&inline, &leaver, &rereg, &remote] {
        c.self_ref.lock().expect("ref").take();
    }
}

#[test]
fn unresponsive_client_on_real_threads_is_forced_at_the_deadline() {
    let (host, _hca) = start(5);
    let bus = host.bus();
    let ok = client(Mode::Inline);
    let stuck = client(Mode::Never);
    bus.register(
        desc("ok", ClientKind::Ipoib, ClientFlags::empty()),
        ok.clone(),
    )
    .expect("register");
    let stuck_id = bus
        .register(
            desc("stuck", ClientKind::Srp, ClientFlags::empty()),
            stuck.clone(),
        )
        .expect("register")
        .id;
    bus.admin_reset(AdminReset::Forced).expect("reset");
    wait_for("reset end", || bus.epoch() == Epoch(2));
    wait_for("RESET_END to stuck", || kinds(&stuck).len() == 2);
    let forced = bus.inspect(|c| c.last_reset().expect("record").forced().to_vec());
    assert_eq!(forced, [stuck_id]);
    // The host's work item wrote what the drain found for the system event log.
    let idle = bus.wait_idle(std::time::Duration::from_secs(60));
    assert_eq!(idle, Ok(true));
    assert_eq!(
        bus.event_log_entries(),
        2,
        "the reset's start and its restore"
    );
    for c in [&ok, &stuck] {
        c.self_ref.lock().expect("ref").take();
    }
}

#[test]
fn surprise_removal_from_another_thread_during_quiesce() {
    let (host, hca) = start(5);
    let bus = host.bus().clone();
    let stuck = client(Mode::Never);
    bus.register(
        desc("stuck", ClientKind::Custom, ClientFlags::empty()),
        stuck.clone(),
    )
    .expect("register");
    bus.reset_request(bus.inspect(|c| c.clients().next().expect("one").id))
        .expect("request");
    assert_eq!(bus.state(), State::Quiescing);
    let remover = {
        let bus = bus.clone();
        std::thread::spawn(move || {
            hca.with(|h| h.remove());
            bus.surprise_removal();
        })
    };
    remover.join().expect("remover");
    assert_eq!(bus.state(), State::Removed);
    wait_for("DEVICE_FATAL", || kinds(&stuck).len() == 2);
    assert_eq!(kinds(&stuck), [EventKind::Reset, EventKind::DeviceFatal]);
    assert_eq!(bus.pnp_operations(), 1);
    assert!(bus
        .reset_request(ClientId {
            index: 0,
            generation: 0
        })
        .is_err());
    stuck.self_ref.lock().expect("ref").take();
}

#[test]
fn many_threads_hammering_the_bus_keep_it_consistent() {
    let (host, _hca) = start(2);
    let bus = host.bus().clone();
    let clients: Vec<Arc<Client>> = (0..8).map(|_| client(Mode::Inline)).collect();
    let ids: Vec<ClientId> = clients
        .iter()
        .enumerate()
        .map(|(i, c)| {
            bus.register(
                desc(&format!("c{i}"), ClientKind::Custom, ClientFlags::empty()),
                c.clone(),
            )
            .expect("register")
            .id
        })
        .collect();
    let requests = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = ids
        .iter()
        .take(4)
        .map(|id| {
            let (bus, id, requests) = (bus.clone(), *id, requests.clone());
            std::thread::spawn(move || {
                for _ in 0..20 {
                    if bus.reset_request(id).is_ok() {
                        requests.fetch_add(1, Ordering::SeqCst);
                    }
                    std::thread::sleep(StdDuration::from_micros(300));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    wait_for("quiet bus", || {
        matches!(bus.state(), State::Operational | State::Failed)
            && !bus.inspect(|c| c.reset_in_progress())
    });
    // Every client saw RESET/outcome pairs and nothing else.
    for c in &clients {
        let k = kinds(c);
        assert!(k.len() >= 2, "{k:?}");
        for pair in k.chunks(2) {
            assert_eq!(pair[0], EventKind::Reset, "{k:?}");
            assert!(
                matches!(pair[1], EventKind::ResetEnd | EventKind::ResetFailed),
                "{k:?}"
            );
        }
        c.self_ref.lock().expect("ref").take();
    }
    assert!(requests.load(Ordering::SeqCst) > 0);
}

#[test]
fn a_panicking_callback_does_not_stall_the_others() {
    let (host, _hca) = start(5);
    let bus = host.bus();
    let good = client(Mode::Inline);
    let buggy = client(Mode::Panic);
    bus.register(
        desc("good", ClientKind::Ipoib, ClientFlags::empty()),
        good.clone(),
    )
    .expect("register");
    bus.register(
        desc("buggy", ClientKind::Custom, ClientFlags::empty()),
        buggy.clone(),
    )
    .expect("register");
    bus.admin_reset(AdminReset::Forced).expect("reset");
    // The buggy client never executes: forced at the 200 ms deadline; the reset completes.
    assert_eq!(bus.wait_idle(StdDuration::from_secs(20)), Ok(true));
    assert_eq!(bus.epoch(), Epoch(2));
    assert_eq!(bus.callback_panics(), 1);
    assert_eq!(kinds(&good), [EventKind::Reset, EventKind::ResetEnd]);
    assert_eq!(kinds(&buggy), [EventKind::Reset, EventKind::ResetEnd]);
    // And the bus still serves calls afterwards.
    assert_eq!(bus.state(), State::Operational);
    for c in [&good, &buggy] {
        c.self_ref.lock().expect("ref").take();
    }
}

/// A callback that holds its RESET until the test lets it go: it tells when it is under way
/// and whether the child's Unregister had returned while it still ran.
struct Holding {
    entered: std::sync::atomic::AtomicBool,
    unregistered: std::sync::atomic::AtomicBool,
    ran_after_unregister: std::sync::atomic::AtomicBool,
}

impl EventCallback for Holding {
    fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        let Event::Reset { epoch, .. } = event else {
            return;
        };
        self.entered.store(true, Ordering::SeqCst);
        // Stays under way until the Unregister of another thread returns, or for at most
        // 200 ms: with the rundown that Unregister cannot return first, so the bound is what
        // ends the wait; without it, the return is seen here. The bound decides nothing on a
        // bus that keeps its promise: the test passes however slow the machine is.
        let until = StdInstant::now() + StdDuration::from_millis(200);
        while StdInstant::now() < until {
            if self.unregistered.load(Ordering::SeqCst) {
                self.ran_after_unregister.store(true, Ordering::SeqCst);
                break;
            }
            std::hint::spin_loop();
        }
        let _ = bus.reset_execute(id, epoch);
    }
}

/// Unregister is a rundown: called at PASSIVE_LEVEL from another thread while the client's
/// callback runs, it returns only after that callback has returned, so the child may free
/// its context at once.
#[test]
fn unregister_from_another_thread_waits_for_the_running_callback() {
    let (host, _hca) = start(1);
    let bus = Arc::clone(host.bus());
    let holding = Arc::new(Holding {
        entered: false.into(),
        unregistered: false.into(),
        ran_after_unregister: false.into(),
    });
    let cb: Arc<dyn EventCallback> = holding.clone();
    let id = bus
        .register(
            desc("holding", ClientKind::Custom, ClientFlags::empty()),
            cb,
        )
        .expect("register")
        .id;
    let admin = Arc::clone(&bus);
    let resetter = std::thread::spawn(move || admin.admin_reset(AdminReset::Forced));
    wait_for("the RESET callback to start", || {
        holding.entered.load(Ordering::SeqCst)
    });
    bus.unregister(id).expect("unregister");
    holding.unregistered.store(true, Ordering::SeqCst);
    resetter.join().expect("resetter").expect("reset");
    assert!(
        !holding.ran_after_unregister.load(Ordering::SeqCst),
        "the callback was still running when Unregister returned"
    );
    assert!(bus.wait_idle(StdDuration::from_secs(30)).expect("passive"));
    assert_eq!(bus.state(), State::Operational);
}

/// A call made at DISPATCH_LEVEL (a child holding its own spin lock) never runs a callback on
/// the calling thread: what it sets in motion is delivered on another (the timer thread, the
/// model of another processor), after the call has returned.
#[test]
fn a_call_at_dispatch_level_is_delivered_on_another_thread() {
    struct Where(Mutex<Vec<std::thread::ThreadId>>);
    impl EventCallback for Where {
        fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
            self.0
                .lock()
                .expect("log")
                .push(std::thread::current().id());
            if let Event::Reset { epoch, .. } = event {
                let _ = bus.reset_execute(id, epoch);
            }
        }
    }
    let (host, _hca) = start(1);
    let bus = Arc::clone(host.bus());
    let seen = Arc::new(Where(Mutex::new(Vec::new())));
    let cb: Arc<dyn EventCallback> = seen.clone();
    bus.register(desc("where", ClientKind::Custom, ClientFlags::empty()), cb)
        .expect("register");
    let raised = hcabus::host::irql::set(hcabus::host::irql::Irql::Dispatch);
    let reset = bus.admin_reset(AdminReset::Forced);
    let here = seen.0.lock().expect("log").clone();
    hcabus::host::irql::set(raised);
    reset.expect("reset");
    let me = std::thread::current().id();
    assert!(
        here.iter().all(|t| *t != me),
        "called back on the raised thread"
    );
    assert!(bus.wait_idle(StdDuration::from_secs(30)).expect("passive"));
    let after = seen.0.lock().expect("log").clone();
    assert_eq!(after.len(), 2, "RESET and RESET_END");
    assert!(
        after.iter().all(|t| *t != me),
        "delivered on another thread"
    );
    assert_eq!(bus.epoch(), Epoch(2));
}
