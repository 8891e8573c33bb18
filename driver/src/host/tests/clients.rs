//! Registration, Unregister's rundown (bus.rs), the drain's delivery rules (drain.rs), and a
//! client's views of the bus (client.rs).

use crate::bus::BusHandle;

use super::*;

fn callback_ids(bus: &Bus<Fake>) -> Vec<Option<ClientId>> {
    bus.core.with(|c| {
        c.callbacks
            .iter()
            .map(|s| s.as_ref().map(|(id, _)| *id))
            .collect()
    })
}

/// Each call is one input and one kick of the DPC, refused or not; a slot's callback follows
/// its registration, and an id from before an unregister is stale.
#[test]
fn register_and_unregister_keep_one_callback_per_live_id() {
    let bus = new_bus(false);
    let a = bus.register(desc("a"), quiet()).expect("registers");
    assert_eq!(
        a,
        Registration {
            id: id(0),
            epoch: Epoch(1),
            state: State::Operational,
            late: false,
        }
    );
    assert_eq!(bus.register(desc("b"), quiet()).map(|r| r.id), Ok(id(1)));
    assert_eq!(callback_ids(&bus), [Some(id(0)), Some(id(1)), None, None]);
    assert_eq!(bus.unregister(id(0)), Ok(()));
    assert_eq!(callback_ids(&bus), [None, Some(id(1)), None, None]);
    assert_eq!(bus.unregister(id(0)), Err(UnregisterError::StaleClient));
    assert_eq!(bus.unregister(id(3)), Err(UnregisterError::UnknownClient));
    let again = ClientId {
        index: 0,
        generation: 1,
    };
    assert_eq!(bus.register(desc("a2"), quiet()).map(|r| r.id), Ok(again));
    assert_eq!(bus.register(desc("c"), quiet()).map(|r| r.id), Ok(id(2)));
    assert_eq!(bus.register(desc("d"), quiet()).map(|r| r.id), Ok(id(3)));
    assert_eq!(
        bus.register(desc("e"), quiet()).map(|r| r.id),
        Err(RegisterError::CapacityFull)
    );
    assert_eq!(
        callback_ids(&bus),
        [Some(again), Some(id(1)), Some(id(2)), Some(id(3))]
    );
    // The start's DPC, then one per call above (nine).
    assert_eq!(w(&bus).dpc_asks, 10);
    assert!(w(&bus).delivered.is_empty());
}

/// A callback runs with the lock released, marked running for the rundown, by the one
/// drainer; the drain is what keeps the bus from being idle then.
#[test]
fn a_callback_runs_unlocked_marked_running_by_the_one_drainer() {
    let bus = new_bus(false);
    let seen = on(|bus, id, event| {
        assert_eq!(
            event,
            Event::PortDown {
                epoch: Epoch(1),
                port: 1
            }
        );
        let inside = bus.core.with(|c| {
            (
                c.running,
                c.draining,
                c.stepping,
                c.hw_queue.len(),
                c.log_queue.len(),
                c.coord.pending_actions(),
                c.coord.reset_in_progress(),
            )
        });
        let running = Some(Running {
            client: id,
            context: 1,
        });
        assert_eq!(inside, (running, true, false, 0, 0, 0, false));
        assert!(!bus.is_idle(), "a drain under way is not idle");
    });
    let a = bus.register(desc("a"), seen).expect("registers").id;
    bus.input(|c, now| c.port_changed(now, 1, PortAttrs::bare(PortState::Down, 0)))
        .expect("port 1");
    assert!(!bus.is_idle(), "an action waits for the DPC");
    assert!(w(&bus).delivered.is_empty(), "queued, not run here");
    settle(&bus);
    assert_eq!(
        w(&bus).delivered,
        [(
            a,
            Event::PortDown {
                epoch: Epoch(1),
                port: 1
            }
        )]
    );
    assert_eq!(bus.core.with(|c| c.running), None);
    assert_eq!(w(&bus).ended, 1);
    assert!(bus.is_idle());
}

/// Idle is every one of: no drain, no step running, no step or log entry waiting, no
/// action, no reset. Each alone makes the bus busy.
#[test]
fn idle_needs_every_queue_empty_and_no_reset() {
    let bus = new_bus(false);
    assert!(bus.is_idle());
    bus.core.with(|c| c.draining = true);
    assert!(!bus.is_idle());
    bus.core.with(|c| c.draining = false);
    bus.core.with(|c| c.stepping = true);
    assert!(!bus.is_idle());
    bus.core.with(|c| c.stepping = false);
    bus.core
        .with(|c| c.hw_queue.push(HwStep::ReadHealth))
        .expect("room");
    assert!(!bus.is_idle());
    bus.core.with(|c| c.hw_queue.pop());
    bus.core
        .with(|c| c.log_queue.push(EventLogEntry::ResetRestored { epoch: 1 }))
        .expect("room");
    assert!(!bus.is_idle());
    bus.core.with(|c| c.log_queue.pop());
    assert!(bus.is_idle());
    bus.register(desc("a"), quiet()).expect("registers");
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    assert_eq!(bus.inspect(|c| c.pending_actions()), 0);
    assert!(!bus.is_idle(), "a reset waits for its client");
}

/// An event whose client's callback is gone (or belongs to another id now) is not
/// delivered, and still reported delivered, so that nothing waits for it.
#[test]
fn an_event_for_a_callback_gone_is_dropped_and_counted_delivered() {
    let bus = new_bus(false);
    let a = bus.register(desc("a"), quiet()).expect("registers").id;
    let b = bus.register(desc("b"), quiet()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    bus.core.with(|c| {
        let other = ClientId {
            index: a.index,
            generation: 7,
        };
        c.callbacks[usize::from(a.index)] = Some((other, quiet()));
        c.callbacks[usize::from(b.index)] = None;
    });
    settle(&bus);
    assert!(w(&bus).delivered.is_empty());
    assert_eq!(w(&bus).ended, 2);
    assert_eq!(bus.core.with(|c| c.running), None);
}

/// From inside its own callback Unregister returns at once (waiting would wait for itself),
/// and nothing follows that callback.
#[test]
fn unregister_from_its_own_callback_does_not_wait_and_ends_its_events() {
    let bus = new_bus(false);
    let leaves = on(|bus, id, event| {
        if let Event::Reset { .. } = event {
            assert_eq!(bus.unregister(id), Ok(()));
        }
    });
    let a = bus.register(desc("a"), leaves).expect("registers").id;
    let b = bus.register(desc("b"), executes()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    fire(&bus, TimerId::HwPoll);
    let reset = reset_event(1, ResetReason::AdminForced, false, 500);
    assert_eq!(
        w(&bus).delivered,
        [(b, reset), (a, reset), (b, end_event(2))]
    );
    assert!(w(&bus).waits.is_empty());
    assert_eq!(bus.inspect(|c| c.client_count()), 1);
}

/// From another context, Unregister of a client whose callback runs waits for that
/// callback to return; it reads the count of ended callbacks before it looks.
#[test]
fn unregister_from_another_context_waits_for_the_running_callback() {
    let bus = shared(false);
    let leaves_elsewhere = on(|bus, id, event| {
        if let Event::Reset { .. } = event {
            w(bus).context = 2;
            assert_eq!(bus.unregister(id), Ok(()));
            w(bus).context = 1;
            assert_eq!(bus.core.with(|c| c.running), None);
        }
    });
    let a = bus
        .register(desc("a"), leaves_elsewhere)
        .expect("registers")
        .id;
    let b = bus.register(desc("b"), executes()).expect("registers").id;
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    // b's RESET had ended when a's callback began.
    assert_eq!(w(&bus).waits, [1]);
    let reset = reset_event(1, ResetReason::AdminForced, false, 500);
    assert_eq!(w(&bus).delivered, [(b, reset), (a, reset)]);
    assert_eq!(bus.inspect(|c| c.client_count()), 1);
}

/// At DISPATCH_LEVEL Unregister cannot wait: it returns, and no later callback starts.
#[test]
fn unregister_at_dispatch_does_not_wait() {
    let bus = new_bus(false);
    let leaves_raised = on(|bus, id, event| {
        if let Event::Reset { .. } = event {
            {
                let mut w = w(bus);
                w.context = 2;
                w.at_dispatch = true;
            }
            assert_eq!(bus.unregister(id), Ok(()));
            let mut w = w(bus);
            w.context = 1;
            w.at_dispatch = false;
        }
    });
    bus.register(desc("a"), leaves_raised).expect("registers");
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    settle(&bus);
    assert!(w(&bus).waits.is_empty());
    assert_eq!(bus.inspect(|c| c.client_count()), 0);
}

/// Only the client whose callback runs is waited for: another client's Unregister from
/// another context returns at once.
#[test]
fn unregister_waits_only_for_its_own_clients_callback() {
    let bus = new_bus(false);
    let removes_b = on(|bus, _, event| {
        if let Event::Reset { .. } = event {
            w(bus).context = 2;
            assert_eq!(bus.unregister(id(1)), Ok(()));
            w(bus).context = 1;
        }
    });
    let a = bus.register(desc("a"), removes_b).expect("registers").id;
    bus.register(desc("b"), quiet()).expect("registers");
    assert_eq!(bus.admin_reset(AdminReset::Forced), Ok(Epoch(1)));
    // b's RESET (the first, newest first) finds no callback: a's is the one running when
    // b leaves. The bus is not shared, so a wait would fail the test.
    bus.core.with(|c| c.callbacks[1] = None);
    settle(&bus);
    assert!(w(&bus).waits.is_empty());
    assert_eq!(w(&bus).delivered.first().map(|d| d.0), Some(a));
    assert_eq!(bus.inspect(|c| c.client_count()), 1);
}

/// A Rust client's handle: reads go to the bus and are not calls; each call is, and its
/// registrations answer to the handle's own callback.
#[test]
fn a_client_ctx_reads_and_calls_the_bus_and_remembers_that_it_called() {
    let bus = new_bus(false);
    w(&bus).now = at(7);
    let active = PortAttrs::bare(PortState::Active, 9);
    bus.input(|c, now| c.port_changed(now, 1, active))
        .expect("port 1");
    let me = quiet();
    let (mut device, mut rng) = (0u32, Steps(0));
    let mut ctx = ClientCtx::new(&bus, &mut device, &mut rng, &me);
    assert!(!ctx.called());
    assert_eq!(
        (ctx.now(), ctx.state(), ctx.epoch(), ctx.policy()),
        (at(7), State::Operational, Epoch(1), policy())
    );
    assert_eq!((ctx.port(1), ctx.port(2)), (Some(active), None));
    assert!(!ctx.called(), "reading is not calling");
    let reg = ctx.register(desc("ctx")).expect("registers");
    assert!(ctx.called());
    *ctx.device() = 9;
    assert_eq!(ctx.rng().next_u64(), 1);
    assert_eq!(device, 9);
    let own = bus.core.with(|c| {
        c.callbacks[usize::from(reg.id.index)]
            .as_ref()
            .is_some_and(|(id, cb)| *id == reg.id && Arc::ptr_eq(&cb.0, &me.0))
    });
    assert!(own, "registered with the handle's callback");

    let mut ctx = ClientCtx::new(&bus, &mut device, &mut rng, &me);
    assert_eq!(ctx.reset_request(reg.id), Ok(Epoch(1)));
    assert!(ctx.called());
    let mut ctx = ClientCtx::new(&bus, &mut device, &mut rng, &me);
    assert_eq!(ctx.unregister(reg.id), Ok(()));
    assert!(ctx.called());
    assert_eq!(bus.inspect(|c| c.client_count()), 0);
}

/// A callback's view of the bus: the client calls and reads, each reaching the bus.
#[test]
fn a_client_view_makes_the_client_calls_on_the_bus() {
    let bus = new_bus(false);
    w(&bus).now = at(4);
    let view = ClientView::of(&bus);
    let copy = view;
    assert_eq!(
        (view.now(), view.state(), view.epoch(), view.policy()),
        (at(4), State::Operational, Epoch(1), policy())
    );
    let v = view
        .register(veto_desc("v"), quiet())
        .expect("registers")
        .id;
    let asks = w(&bus).dpc_asks;
    copy.kick();
    assert_eq!(w(&bus).dpc_asks, asks + 1);
    assert_eq!(bus.admin_reset(AdminReset::Planned), Ok(Epoch(1)));
    assert_eq!(view.state(), State::Preparing);
    assert_eq!(
        view.reset_execute(v, Epoch(1)),
        Err(ExecuteError::NoResetPending)
    );
    assert_eq!(view.reset_consent(v, Epoch(1)), Ok(()));
    assert_eq!(view.state(), State::Quiescing);
    assert_eq!(
        view.reset_veto(v, Epoch(1), ShortText::cut("late")),
        Err(VetoError::NoQueryPending)
    );
    assert_eq!(
        view.reset_execute(v, Epoch(1)),
        Ok(ExecuteOutcome::Accepted)
    );
    assert_eq!(view.reset_request(v), Ok(Epoch(1)));
    assert_eq!(view.unregister(v), Ok(()));
    assert_eq!(view.unregister(v), Err(UnregisterError::StaleClient));
    let me = quiet();
    let (mut device, mut rng) = (0u8, Steps(0));
    let ctx = view.ctx(&mut device, &mut rng, &me);
    assert!(!ctx.called());
    assert_eq!(ctx.now(), at(4));
}
