//! One test per port rule (docs/design.md §4 PORT_ACTIVE / PORT_DOWN, §5 "Ports"), on the bare
//! coordinator with the stepper as host; the hardware's port reports are fed by hand.

use std::vec::Vec;

use hcabus::coordinator::*;
use hcabus::errors::PortError;
use hcabus::policy::Policy;
use hcabus::recorder::RecordKind;
use hcabus::types::*;
use hcabus_sim::hca::{SimHca, SimHcaConfig};
use hcabus_sim::Stepper;

fn stepper() -> Stepper {
    let config = Config {
        max_clients: 8,
        recorder_capacity: 1024,
        policy: Policy::default(),
    };
    let mut s = Stepper::new(config, SimHca::new(SimHcaConfig::default())).expect("policy");
    s.set_strict(true);
    s
}

fn reg(s: &mut Stepper, name: &str) -> ClientId {
    let d = ClientDesc::new(name, ClientKind::Custom, ClientFlags::empty()).expect("name fits");
    let r = s.call(|c, now| c.register(now, d)).expect("register");
    s.pump();
    r.id
}

fn port(s: &mut Stepper, port: u8, state: PortState, lid: u16) {
    s.call(|c, now| c.port_changed(now, port, PortAttrs::bare(state, lid)))
        .expect("a port that exists");
    s.pump();
}

/// Starts a forced reset in which every client of `ids` executes at once.
fn reset_executed(s: &mut Stepper, ids: &[ClientId]) {
    s.call(|c, now| c.admin_reset(now, AdminReset::Forced))
        .expect("reset");
    s.pump();
    for id in ids {
        let e = reset_epoch_of(s, *id);
        s.call(|c, now| c.reset_execute(now, *id, e))
            .expect("execute");
        s.pump();
    }
}

/// Runs a forced reset in which every client executes at once, to its end.
fn reset(s: &mut Stepper, ids: &[ClientId]) {
    reset_executed(s, ids);
    s.advance(1_000);
    assert_eq!(s.c().state(), State::Operational);
}

fn reset_epoch_of(s: &Stepper, id: ClientId) -> Epoch {
    s.delivered()
        .iter()
        .rev()
        .find_map(|&(c, e)| match e {
            Event::Reset { epoch, .. } if c == id => Some(epoch),
            _ => None,
        })
        .expect("the client got RESET")
}

fn port_events(s: &Stepper, id: ClientId) -> Vec<Event> {
    s.delivered()
        .iter()
        .filter(|(c, e)| *c == id && e.kind().is_port())
        .map(|(_, e)| *e)
        .collect()
}

#[test]
fn ports_the_hardware_never_reported_make_no_events() {
    let mut s = stepper();
    let a = reg(&mut s, "a");
    reset(&mut s, &[a]);
    assert_eq!(s.events_of(a), [EventKind::Reset, EventKind::ResetEnd]);
    assert_eq!(s.c().port(1), None);
}

#[test]
fn a_port_going_down_and_up_while_operational_tells_every_running_client() {
    let mut s = stepper();
    port(&mut s, 1, PortState::Active, 7);
    port(&mut s, 2, PortState::Active, 8);
    let (a, b) = (reg(&mut s, "a"), reg(&mut s, "b"));
    assert!(
        port_events(&s, a).is_empty(),
        "a newcomer believes every port Active"
    );
    port(&mut s, 2, PortState::Down, 0);
    port(&mut s, 2, PortState::Init, 0);
    port(&mut s, 2, PortState::Active, 9);
    let epoch = Epoch(1);
    let expected = [
        Event::PortDown { epoch, port: 2 },
        Event::PortActive {
            epoch,
            port: 2,
            lid: 9,
        },
    ];
    assert_eq!(
        port_events(&s, a),
        expected,
        "Init is still not Active: no event"
    );
    assert_eq!(port_events(&s, b), expected);
    assert_eq!(s.c().port(2), Some(PortAttrs::bare(PortState::Active, 9)));
}

/// A new master that reassigns LIDs changes an Active port's LID under it: every running
/// client that has the port as Active hears PORT_ACTIVE again, with the new LID (what it
/// addressed by the old one is gone); a client that has it as down hears nothing new, and
/// the other port's clients nothing at all.
#[test]
fn an_active_ports_new_lid_is_a_second_port_active_to_whoever_has_it_active() {
    let mut s = stepper();
    port(&mut s, 1, PortState::Active, 7);
    port(&mut s, 2, PortState::Active, 8);
    let a = reg(&mut s, "a");
    port(&mut s, 1, PortState::Active, 17);
    let epoch = Epoch(1);
    let relabelled = Event::PortActive {
        epoch,
        port: 1,
        lid: 17,
    };
    assert_eq!(port_events(&s, a), [relabelled]);
    port(&mut s, 1, PortState::Active, 17);
    assert_eq!(port_events(&s, a).len(), 1, "the same LID again is no news");
    port(&mut s, 1, PortState::Down, 0);
    port(&mut s, 1, PortState::Active, 27);
    let back = Event::PortActive {
        epoch,
        port: 1,
        lid: 27,
    };
    assert_eq!(
        port_events(&s, a),
        [relabelled, Event::PortDown { epoch, port: 1 }, back],
        "a port back with a new LID is one PORT_ACTIVE, not two"
    );
    let recorded = s
        .c()
        .recorder()
        .iter()
        .filter(|r| matches!(r.kind, RecordKind::Port { port: 1, .. }))
        .count();
    assert_eq!(
        recorded, 4,
        "each change of state or LID in the flight recorder"
    );
}

#[test]
fn a_report_that_changes_nothing_is_ignored_and_a_port_that_does_not_exist_is_refused() {
    let mut s = stepper();
    port(&mut s, 1, PortState::Active, 7);
    let records = s.c().recorder().next_seq();
    port(&mut s, 1, PortState::Active, 7);
    assert_eq!(s.c().recorder().next_seq(), records, "nothing recorded");
    for bad in [0, MAX_PORTS + 1] {
        let r = s.call(|c, now| c.port_changed(now, bad, PortAttrs::bare(PortState::Active, 1)));
        assert_eq!(r, Err(PortError::NoSuchPort));
    }
}

#[test]
fn after_a_reset_port_active_follows_reset_end_when_the_port_comes_back() {
    let mut s = stepper();
    port(&mut s, 1, PortState::Active, 7);
    let a = reg(&mut s, "a");
    reset(&mut s, &[a]);
    // The reset took the port down; it is not back yet.
    assert_eq!(s.c().port(1).map(|p| p.state), Some(PortState::Down));
    assert_eq!(s.events_of(a), [EventKind::Reset, EventKind::ResetEnd]);
    let down = s.c().recorder().iter().any(|r| {
        r.kind
            == RecordKind::Port {
                port: 1,
                state: PortState::Down,
                lid: 0,
            }
    });
    assert!(down, "the reset's port-down is in the flight recorder");
    // The link trains and the subnet manager gives it a new LID.
    port(&mut s, 1, PortState::Active, 31);
    assert_eq!(
        s.events_of(a),
        [EventKind::Reset, EventKind::ResetEnd, EventKind::PortActive]
    );
    assert_eq!(
        port_events(&s, a),
        [Event::PortActive {
            epoch: Epoch(2),
            port: 1,
            lid: 31
        }]
    );
}

#[test]
fn a_port_back_before_the_restore_ends_is_announced_right_after_reset_end() {
    let mut s = stepper();
    port(&mut s, 1, PortState::Active, 7);
    let a = reg(&mut s, "a");
    reset_executed(&mut s, &[a]);
    let held = s.drive_to_restoring().expect("restoring");
    // Reported during the reset: recorded, told to nobody yet.
    port(&mut s, 1, PortState::Active, 12);
    assert!(port_events(&s, a).is_empty());
    s.deliver_held(held);
    assert_eq!(
        s.events_of(a),
        [EventKind::Reset, EventKind::ResetEnd, EventKind::PortActive]
    );
}

#[test]
fn a_newcomer_hears_of_the_ports_that_are_not_active() {
    let mut s = stepper();
    port(&mut s, 1, PortState::Active, 7);
    port(&mut s, 2, PortState::Down, 0);
    let a = reg(&mut s, "a");
    assert_eq!(
        port_events(&s, a),
        [Event::PortDown {
            epoch: Epoch(1),
            port: 2
        }]
    );
}

#[test]
fn a_failed_device_tells_its_zombies_nothing_of_ports() {
    let mut s = stepper();
    port(&mut s, 1, PortState::Active, 7);
    let a = reg(&mut s, "a");
    s.hca_mut().never_return();
    reset_executed(&mut s, &[a]);
    for _ in 0..120 {
        s.advance(10_000);
    }
    assert_eq!(s.c().state(), State::Failed);
    port(&mut s, 1, PortState::Active, 7);
    assert!(port_events(&s, a).is_empty());
}

#[test]
fn the_service_is_back_when_every_port_active_before_the_reset_is_active_again() {
    let mut s = stepper();
    let a = reg(&mut s, "a");
    port(&mut s, 1, PortState::Active, 0x10);
    port(&mut s, 2, PortState::Down, 0);
    assert_eq!(s.c().awaiting_ports(), 0, "no reset yet");
    reset(&mut s, &[a]);
    // Operational again, and port 1 (Active before) not yet: recovering. Port 2 was Down
    // before the reset (its cable out): nobody waits for it.
    assert_eq!(s.c().state(), State::Operational);
    assert_eq!(s.c().awaiting_ports(), 0b01);
    port(&mut s, 2, PortState::Active, 0x11);
    assert_eq!(s.c().awaiting_ports(), 0b01, "port 2 was not awaited");
    port(&mut s, 1, PortState::Init, 0);
    assert_eq!(s.c().awaiting_ports(), 0b01, "training is not Active");
    port(&mut s, 1, PortState::Active, 0x12);
    assert_eq!(s.c().awaiting_ports(), 0, "restored");
    // Both Active now: a second reset awaits both, and a device that fails awaits nothing.
    reset(&mut s, &[a]);
    assert_eq!(s.c().awaiting_ports(), 0b11);
    s.call(|c, now| c.surprise_removal(now));
    s.pump();
    assert_eq!(s.c().awaiting_ports(), 0, "removed: nothing is coming back");
}

/// QUERY_STATE's flags say what the operator must know: a reset under way, then, once the
/// bus is Operational again, that the service is still recovering and which ports it waits
/// for; nothing once they are back.
#[test]
fn query_state_flags_say_recovering_and_the_ports_awaited() {
    use hcabus::ioctl::{
        state_out, STATE_AWAITED_PORTS_SHIFT, STATE_RECOVERING, STATE_RESET_IN_PROGRESS,
    };
    let flags = |s: &Stepper| state_out(s.c(), s.now()).flags;
    let mut s = stepper();
    let a = reg(&mut s, "a");
    port(&mut s, 1, PortState::Down, 0);
    port(&mut s, 2, PortState::Active, 0x11);
    assert_eq!(flags(&s), 0, "nothing under way");
    reset_executed(&mut s, &[a]);
    assert_eq!(
        flags(&s) & (STATE_RESET_IN_PROGRESS | STATE_RECOVERING),
        STATE_RESET_IN_PROGRESS
    );
    s.advance(1_000);
    assert_eq!(s.c().state(), State::Operational);
    assert_eq!(
        flags(&s),
        STATE_RECOVERING | 0b10 << STATE_AWAITED_PORTS_SHIFT,
        "port 2 awaited"
    );
    port(&mut s, 2, PortState::Active, 0x12);
    assert_eq!(flags(&s), 0, "recovered");
}

/// A port's record says what a client sees of it, its state and LID: a change of only its
/// physical state or speed updates the view and writes no record.
#[test]
fn only_a_new_state_or_lid_is_recorded() {
    let mut s = stepper();
    let port_records = |s: &Stepper| {
        s.c()
            .recorder()
            .iter()
            .filter(|r| matches!(r.kind, RecordKind::Port { .. }))
            .count()
    };
    port(&mut s, 1, PortState::Active, 0x10);
    let before = port_records(&s);
    let faster = PortAttrs {
        width: 4,
        speed: Some(LinkSpeed::Edr),
        ..PortAttrs::bare(PortState::Active, 0x10)
    };
    s.call(|c, now| c.port_changed(now, 1, faster))
        .expect("port 1");
    assert_eq!(s.c().port(1).map(|p| p.width), Some(4), "the view follows");
    assert_eq!(port_records(&s), before, "no record");
    port(&mut s, 1, PortState::Active, 0x11);
    assert_eq!(port_records(&s), before + 1, "a new LID is recorded");
}

/// While the device is reset its ports give no light: physically Disabled, not the
/// LinkUp they had.
#[test]
fn a_port_taken_down_by_a_reset_is_physically_disabled() {
    let mut s = stepper();
    let a = reg(&mut s, "a");
    port(&mut s, 1, PortState::Active, 0x10);
    assert_eq!(s.c().port(1).map(|p| p.phys), Some(PhysState::LinkUp));
    reset_executed(&mut s, &[a]);
    let view = s.c().port(1).expect("port 1");
    assert_eq!(
        (view.state, view.phys),
        (PortState::Down, PhysState::Disabled)
    );
}

/// A Failed or Removed device serves no port: no view shows one Active, whatever the links
/// last reported (the view is the one QUERY_STATE and the reports read).
#[test]
fn a_failed_or_removed_device_shows_no_active_port() {
    let config = Config {
        max_clients: 8,
        recorder_capacity: 1024,
        policy: Policy {
            auto_recover: false,
            ..Policy::default()
        },
    };
    let mut s = Stepper::new(config, SimHca::new(SimHcaConfig::default())).expect("policy");
    port(&mut s, 1, PortState::Active, 16);
    assert_eq!(s.c().port(1).map(|p| p.state), Some(PortState::Active));
    s.call(|c, now| c.catastrophic_error(now));
    s.pump();
    assert_eq!(
        s.c().state(),
        State::Failed,
        "auto_recover off: failed, not reset"
    );
    let failed = s.c().port(1).expect("reported");
    assert_eq!((failed.state, failed.lid), (PortState::Down, 0));
    s.call(|c, now| c.surprise_removal(now));
    s.pump();
    let removed = s.c().port(1).expect("reported");
    assert_eq!(
        (removed.state, removed.lid, removed.phys),
        (PortState::Down, 0, PhysState::Disabled)
    );
}
