//! White-box tests of what the coordinator holds: what it reserves when it is built, what a
//! refusal gives back, the action queue's bound and the storm window. The protocol's own tests
//! (one per rule of docs/protocol.md) drive a simulated adapter and live with the simulator,
//! in sim/tests/protocol.

use super::*;
use crate::hca::Identity;
use crate::policy::Policy;
use crate::reserve::Heap;

fn policy() -> Policy {
    Policy {
        quiesce_deadline_ms: 1_000,
        hw_ready_timeout_ms: 2_000,
        auto_restart_window_ms: 60_000,
        ..Policy::default()
    }
}

fn config(max_clients: u16, recorder_capacity: usize) -> Config {
    Config {
        max_clients,
        recorder_capacity,
        policy: policy(),
    }
}

fn identity() -> Identity {
    Identity {
        node_guid: 1,
        vendor_id: 0x15B3,
        device_id: 0x1003,
        subsys_vendor_id: 0x15B3,
        subsys_id: 0x0050,
        serial: 7,
        fw_version: Identity::fw_version(2, 42, 5000),
    }
}

/// Bytes of room each part holds: what `reserve` took, and what `give_back` returns.
fn room(c: &Coordinator) -> [usize; 9] {
    [
        c.slots.capacity(),
        c.requests.capacity(),
        c.order.capacity(),
        c.actions.capacity(),
        c.recorder.capacity(),
        c.reset.room(),
        c.concluded.room(),
        c.history.capacity(),
        c.kept.room(),
    ]
}

#[test]
fn every_part_the_reset_path_touches_is_reserved_when_the_coordinator_is_built() {
    let c = Coordinator::new(config(8, 64), identity(), Instant::ZERO).expect("valid");
    assert_eq!((c.slots.len(), c.requests.len()), (8, 8));
    assert_eq!(c.actions.capacity(), (3 + usize::from(MAX_PORTS)) * 8 + 32);
    assert_eq!(c.recorder.capacity(), 64);
    assert_eq!(c.kept.room(), bundle::bundle_bytes(8, 64));
    assert_eq!((c.reset.room(), c.concluded.room()), (8, 8));
    assert!(c.history.capacity() >= history::HISTORY_LEN);
    assert!(c.reset.forced().is_empty() && !c.reset_in_progress());
    // Health polling starts with the coordinator.
    let first = c.policy().health_poll_interval();
    assert_eq!(
        c.timers[TimerId::HealthPoll as usize].map(|_| ()),
        Some(()),
        "no health poll armed"
    );
    let mut c = c;
    assert_eq!(
        c.pop_action(),
        Some(Action::ArmTimer {
            timer: TimerId::HealthPoll,
            at: Instant::ZERO + first,
            token: 1,
        })
    );
}

#[test]
fn memory_the_allocator_refuses_is_an_error_naming_the_key_that_asked_for_it() {
    let huge = usize::MAX / 8;
    let e = Coordinator::new(config(8, huge), identity(), Instant::ZERO).expect_err("refused");
    assert_eq!(e.field, "recorder_capacity");
    let mut slot = core::mem::MaybeUninit::uninit();
    let e = Coordinator::init_in(&mut slot, config(8, huge), identity(), Instant::ZERO, &Heap)
        .expect_err("refused");
    assert_eq!(e.field, "recorder_capacity");
    // An invalid policy is refused before anything is written.
    let bad = Config {
        policy: Policy {
            quiesce_deadline_ms: 0,
            ..policy()
        },
        ..config(8, 64)
    };
    let mut slot = core::mem::MaybeUninit::uninit();
    assert!(Coordinator::init_in(&mut slot, bad, identity(), Instant::ZERO, &Heap).is_err());
}

#[test]
fn built_in_place_it_is_the_same_coordinator_and_a_refusal_gives_every_byte_back() {
    let mut slot = core::mem::MaybeUninit::uninit();
    let c = Coordinator::init_in(&mut slot, config(8, 64), identity(), Instant::ZERO, &Heap)
        .expect("room");
    let boxed = Coordinator::new(config(8, 64), identity(), Instant::ZERO).expect("valid");
    assert_eq!(room(c), room(&boxed));
    assert_eq!((c.state(), c.epoch()), (State::Operational, Epoch(1)));
    c.give_back();
    assert_eq!(
        room(c),
        [0; 9],
        "a refused init_in must leave nothing to free"
    );
}

/// The action queue is sized for the worst case: one more action is a sizing bug, counted
/// and asserted, never a silent loss.
#[test]
#[should_panic(expected = "action queue overflow: 1 dropped")]
fn an_action_past_the_queues_room_is_counted_and_asserted() {
    let mut c = Coordinator::new(config(8, 64), identity(), Instant::ZERO).expect("valid");
    // Bounded by the room, not by what the queue says it holds.
    for _ in c.actions.len()..=c.actions.capacity() {
        c.push(Action::Pnp(PnpOp::ReenumerateChildren));
    }
}

/// The storm window counts what began less than its length ago: a reset exactly one
/// window old has left it.
#[test]
fn a_window_counts_what_began_less_than_its_length_ago() {
    let mut w = stage::Window::new();
    let window = Duration::from_ms(100);
    w.push(Instant::from_ms(0));
    w.push(Instant::from_ms(50));
    assert_eq!(w.count_within(Instant::from_ms(99), window), 2);
    assert_eq!(w.count_within(Instant::from_ms(100), window), 1);
    assert_eq!(w.count_within(Instant::from_ms(150), window), 0);
}
