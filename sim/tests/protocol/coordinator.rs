//! One test per transition and rule of docs/design.md §3-§5, on the bare coordinator.
//!
//! The harness plays host: it runs hardware steps on a `SimHca`, keeps timers in virtual
//! time and records deliveries instead of calling clients, so each test states exactly which
//! client calls happen when. Re-entrant callbacks are tested on the real hosts (tests crate).

use std::vec::Vec;

use hcabus::coordinator::*;
use hcabus::errors::*;
use hcabus::hca::{HwStep, Identity};
use hcabus::policy::Policy;
use hcabus::time::{Duration, Instant};
use hcabus::types::*;
use hcabus_sim::fixtures::policy;
use hcabus_sim::hca::{SimHca, SimHcaConfig};
use hcabus_sim::Stepper;

type H = Stepper;

fn harness() -> H {
    harness_with(policy(), 8)
}

fn harness_with(policy: Policy, max_clients: u16) -> H {
    let config = Config {
        max_clients,
        recorder_capacity: 1024,
        policy,
    };
    let mut s = Stepper::new(config, SimHca::new(SimHcaConfig::default())).expect("valid policy");
    s.set_strict(true);
    s
}

/// Shorthands for the calls these tests make.
trait Shorthand {
    fn reg(&mut self, name: &str) -> ClientId;
    fn reg_flags(&mut self, name: &str, flags: ClientFlags) -> ClientId;
    fn reset_epoch_of(&self, id: ClientId) -> Epoch;
    fn request(&mut self, id: ClientId) -> Result<Epoch, RequestError>;
    fn execute(&mut self, id: ClientId) -> Result<ExecuteOutcome, ExecuteError>;
    fn query_epoch_of(&self, id: ClientId) -> Epoch;
    fn consent(&mut self, id: ClientId) -> Result<(), ConsentError>;
    fn admin(&mut self, kind: AdminReset) -> Result<Epoch, AdminResetError>;
    fn asserts(&self) -> usize;
    fn transitions(&self) -> Vec<(State, State)>;
    fn complete(&mut self, ids: &[ClientId]);
}

impl Shorthand for H {
    fn reg(&mut self, name: &str) -> ClientId {
        self.reg_flags(name, ClientFlags::empty())
    }

    fn reg_flags(&mut self, name: &str, flags: ClientFlags) -> ClientId {
        let d = ClientDesc::new(name, ClientKind::Custom, flags).expect("name fits");
        let r = self.call(|c, now| c.register(now, d)).expect("register");
        self.pump();
        r.id
    }

    fn reset_epoch_of(&self, id: ClientId) -> Epoch {
        self.delivered()
            .iter()
            .rev()
            .find_map(|(c, e)| match e {
                Event::Reset { epoch, .. } if *c == id => Some(*epoch),
                _ => None,
            })
            .expect("client got RESET")
    }

    fn request(&mut self, id: ClientId) -> Result<Epoch, RequestError> {
        let r = self.call(|c, now| c.reset_request(now, id));
        self.pump();
        r
    }

    fn execute(&mut self, id: ClientId) -> Result<ExecuteOutcome, ExecuteError> {
        let e = self.reset_epoch_of(id);
        let r = self.call(|c, now| c.reset_execute(now, id, e));
        self.pump();
        r
    }

    fn admin(&mut self, kind: AdminReset) -> Result<Epoch, AdminResetError> {
        let r = self.call(|c, now| c.admin_reset(now, kind));
        self.pump();
        r
    }

    fn query_epoch_of(&self, id: ClientId) -> Epoch {
        self.delivered()
            .iter()
            .rev()
            .find_map(|(c, e)| match e {
                Event::ResetQuery { epoch, .. } if *c == id => Some(*epoch),
                _ => None,
            })
            .expect("client got RESET_QUERY")
    }

    fn consent(&mut self, id: ClientId) -> Result<(), ConsentError> {
        let e = self.query_epoch_of(id);
        let r = self.call(|c, now| c.reset_consent(now, id, e));
        self.pump();
        r
    }

    fn asserts(&self) -> usize {
        self.hw_steps()
            .iter()
            .filter(|s| matches!(s, HwStep::AssertReset | HwStep::FunctionLevelReset))
            .count()
    }

    fn transitions(&self) -> Vec<(State, State)> {
        self.c()
            .recorder()
            .iter()
            .filter_map(|r| match r.kind {
                RecordKind::Transition { from, to } => Some((from, to)),
                _ => None,
            })
            .collect()
    }

    /// Executes every quiescing client and lets the hardware come back.
    fn complete(&mut self, ids: &[ClientId]) {
        for id in ids {
            let _ = self.execute(*id);
        }
        self.advance(5_000);
    }
}

use hcabus::recorder::RecordKind;
use EventKind::*;

/// One client, whose request ran into a device whose every reset fails: Failed.
fn failed_device() -> (H, ClientId) {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().fail_next_resets(4);
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    (h, a)
}

fn busy() -> VetoReason {
    VetoReason::cut("backup window: job 7 running")
}

// ----- transitions ---------------------------------------------------------------------------

#[test]
fn transition_table_is_exactly_spec_section_5() {
    use State::*;
    let all = [
        Operational,
        Quiescing,
        Resetting,
        Restoring,
        Failed,
        Removed,
    ];
    let allowed = [
        (Operational, Quiescing),
        (Quiescing, Resetting),
        (Quiescing, Operational),
        (Quiescing, Failed),
        (Resetting, Restoring),
        (Resetting, Failed),
        (Restoring, Operational),
        (Failed, Resetting),
        (Operational, Removed),
        (Quiescing, Removed),
        (Resetting, Removed),
        (Restoring, Removed),
        (Failed, Removed),
    ];
    for from in all {
        for to in all {
            assert_eq!(
                from.may_become(to),
                allowed.contains(&(from, to)),
                "{from} -> {to}"
            );
        }
    }
}

#[test]
fn operational_to_quiescing_on_client_request_sends_reset_to_everyone() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    assert_eq!(h.request(a), Ok(Epoch(1)));
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(a), [Reset]);
    assert_eq!(h.events_of(b), [Reset]);
    let Some((
        _,
        Event::Reset {
            epoch,
            reason,
            planned,
            deadline,
        },
    )) = h.delivered().first()
    else {
        panic!("RESET first");
    };
    assert_eq!(*epoch, Epoch(1));
    assert_eq!(*reason, ResetReason::ClientRequest);
    assert!(!planned);
    assert_eq!(*deadline, Instant::from_ms(1_000));
}

#[test]
fn full_cycle_quiescing_resetting_restoring_operational() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.request(a).expect("request");
    h.execute(a).expect("a ready");
    assert_eq!(h.c().state(), State::Quiescing, "b still holds hardware");
    h.execute(b).expect("b ready");
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(
        h.hw_steps()[..3],
        [HwStep::ReadHealth, HwStep::SaveConfig, HwStep::AssertReset],
        "a last health read closes the quiesce"
    );
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
    assert_eq!(h.events_of(b), [Reset, ResetEnd]);
    assert!(h.delivered().iter().any(|(_, e)| *e
        == Event::ResetEnd {
            epoch: Epoch(2),
            outcome: ResetOutcome::Restored
        }));
    assert_eq!(
        h.transitions(),
        [
            (State::Operational, State::Quiescing),
            (State::Quiescing, State::Resetting),
            (State::Resetting, State::Restoring),
            (State::Restoring, State::Operational),
        ]
    );
    // The hardware sequence of docs/design.md §5, in order.
    let seq: Vec<HwStep> = h
        .hw_steps()
        .iter()
        .copied()
        .filter(|s| *s != HwStep::ProbeReady && *s != HwStep::ReadHealth)
        .collect();
    assert_eq!(
        seq,
        [
            HwStep::SaveConfig,
            HwStep::AssertReset,
            HwStep::RestoreConfig,
            HwStep::InitCommandInterface,
            HwStep::ReadIdentity
        ]
    );
    let r = h.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Restored(ResetOutcome::Restored))
    );
    assert_eq!(r.new_epoch, Some(Epoch(2)));
    assert!(r.hw_reset().expect("hw time") >= Duration::from_ms(200));
    assert_eq!(h.concluded(), 1);
}

#[test]
fn reset_in_reverse_and_reset_end_in_registration_order_with_reused_slots() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    let c = h.reg("c");
    // b leaves and d takes b's slot: slot order (a, d, c) differs from registration order.
    h.call(|c, now| c.unregister(now, b)).expect("unregister");
    let d = h.reg("d");
    assert_eq!(d.index, b.index);
    h.request(a).expect("request");
    let resets: Vec<ClientId> = h
        .delivered()
        .iter()
        .filter(|(_, e)| e.kind() == Reset)
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(resets, [d, c, a]);
    h.complete(&[a, c, d]);
    let ends: Vec<ClientId> = h
        .delivered()
        .iter()
        .filter(|(_, e)| e.kind() == ResetEnd)
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(ends, [a, c, d]);
}

#[test]
fn quiescing_to_resetting_at_deadline_marks_unresponsive_and_names_it() {
    let mut h = harness();
    let good = h.reg("good");
    let wedged = h.reg("wedged");
    h.request(good).expect("request");
    h.execute(good).expect("ready");
    h.advance(999);
    assert_eq!(h.c().state(), State::Quiescing, "deadline not yet passed");
    h.advance(1);
    assert_ne!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().client(wedged).expect("registered").state,
        ClientState::Unresponsive
    );
    let named = h.c().recorder().iter().any(|r| {
        matches!(r.kind, RecordKind::Unresponsive { client, .. } if client == wedged && r.name.as_str() == "wedged")
    });
    assert!(named, "flight recorder names the unresponsive client");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(
        h.events_of(wedged),
        [Reset, ResetEnd],
        "still gets RESET_END"
    );
    assert_eq!(h.c().last_reset().expect("record").forced(), [wedged]);
    // Its execute after the deadline changes nothing.
    let r = h.call(|c, now| c.reset_execute(now, wedged, Epoch(1)));
    assert_eq!(r, Err(ExecuteError::NoResetPending));
}

#[test]
fn unresponsive_client_executing_after_deadline_is_too_late() {
    let mut h = harness_with(
        Policy {
            hw_ready_timeout_ms: 5_000,
            ..policy()
        },
        8,
    );
    *h.hca_mut() = SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(3_000),
        ..SimHcaConfig::default()
    });
    let slow = h.reg("slow");
    h.request(slow).expect("request");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.execute(slow), Ok(ExecuteOutcome::TooLate));
}

#[test]
fn planned_reset_with_abort_on_unresponsive_aborts_at_deadline() {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    h.execute(a).expect("a ready");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 0, "no hardware reset");
    assert_eq!(h.c().epoch(), Epoch(1));
    assert_eq!(h.events_of(a), [Reset, ResetAborted]);
    assert!(h.delivered().iter().any(|(_, e)| matches!(e,
        Event::ResetAborted { vetoed_by, cause: AbortCause::Unresponsive, .. } if *vetoed_by == wedged)));
    // docs/design.md §5 "An abort is not a veto": the record names no vetoer, keeps the unresponsive
    // client, and gives the quiesce it ran (to its deadline); the log says it aborted.
    let r = h.c().last_reset().expect("a record");
    assert!(r.aborted_unresponsive());
    assert_eq!(r.vetoer(), None);
    assert_eq!(r.forced(), [wedged]);
    assert_eq!(
        r.quiesce(),
        Some(Duration::from_ms(h.c().policy().quiesce_deadline_ms))
    );
    assert!(h.c().recorder().iter().any(|rec| matches!(rec.kind,
        RecordKind::Unresponsive { client, aborts: true } if client == wedged)));
}

#[test]
fn forced_reset_ignores_abort_on_unresponsive() {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            ..policy()
        },
        8,
    );
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Forced).expect("forced");
    h.advance(3_000);
    assert_eq!(h.c().epoch(), Epoch(2), "forced reset went through");
    // The record says so even with the policy on: the late client did not abort it.
    assert!(h.c().recorder().iter().any(|r| matches!(r.kind,
        RecordKind::Unresponsive { client, aborts: false } if client == wedged)));
}

// ----- Preparing: the query of a planned reset (docs/design.md §5) -------------------------------------

#[test]
fn a_veto_stops_a_planned_reset_before_anything_is_torn_down() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(h.c().state(), State::Preparing);
    assert!(h.c().reset_in_progress());
    assert_eq!(h.events_of(a), [], "only CAN_VETO clients are asked");
    assert_eq!(h.events_of(v), [ResetQuery]);
    assert_eq!(h.c().client(v).expect("v").state, ClientState::Queried);
    let e = h.query_epoch_of(v);
    assert_eq!(h.call(|c, now| c.reset_veto(now, v, e, busy())), Ok(()));
    h.pump();
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [], "a veto disturbs nobody");
    assert_eq!(h.events_of(v), [ResetQuery, ResetAborted]);
    assert_eq!(h.asserts(), 0);
    assert_eq!(h.c().epoch(), Epoch(1));
    let r = h.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Aborted {
            by: v,
            cause: AbortCause::Veto
        })
    );
    assert_eq!(r.barrier_size, 0, "no RESET went out");
    assert_eq!(
        r.veto_reason,
        Some(busy()),
        "the administrator can read why"
    );
    let said = h.c().recorder().iter().filter(|r| {
        r.kind
            == RecordKind::Vetoed {
                client: v,
                reason: busy(),
            }
    });
    assert_eq!(said.count(), 1, "the flight recorder keeps the reason");
    assert_eq!(h.c().counters().resets_aborted, 1);
    assert!(h.timers().is_empty() || !h.c().reset_in_progress());
    for id in [a, v] {
        assert_eq!(h.c().client(id).expect("client").state, ClientState::Active);
    }
    assert_eq!(
        h.transitions(),
        [
            (State::Operational, State::Preparing),
            (State::Preparing, State::Operational)
        ]
    );
}

#[test]
fn consent_from_every_queried_client_sends_reset_to_the_whole_barrier() {
    let mut h = harness();
    let a = h.reg("a");
    let v1 = h.reg_flags("v1", ClientFlags::CAN_VETO);
    let v2 = h.reg_flags("v2", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(h.consent(v1), Ok(()));
    assert_eq!(h.consent(v1), Ok(()), "consent is idempotent");
    assert_eq!(h.c().state(), State::Preparing, "v2 has not answered");
    assert_eq!(h.consent(v2), Ok(()));
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(a), [Reset]);
    assert_eq!(h.events_of(v1), [ResetQuery, Reset]);
    assert!(h.c().last_reset().expect("record").planned);
    h.complete(&[a, v1, v2]);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(v2), [ResetQuery, Reset, ResetEnd]);
}

#[test]
fn silence_is_consent_at_the_query_deadline() {
    let mut h = harness();
    let v = h.reg_flags("silent", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.advance(999);
    assert_eq!(h.c().state(), State::Preparing);
    h.advance(1);
    assert_eq!(h.c().state(), State::Quiescing, "query_deadline_ms = 1000");
    assert_eq!(h.events_of(v), [ResetQuery, Reset]);
    let e = h.query_epoch_of(v);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, e, busy())),
        Err(VetoError::NoQueryPending),
        "too late to veto once RESET is out"
    );
}

#[test]
fn a_planned_reset_with_nobody_to_ask_goes_straight_to_its_quiesce() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.transitions(), [(State::Operational, State::Quiescing)]);
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn a_forced_reset_asks_nobody() {
    let mut h = harness();
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Forced).expect("forced");
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(v), [Reset]);
}

#[test]
fn veto_refusals() {
    let mut h = harness();
    let plain = h.reg("plain");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(1), busy())),
        Err(VetoError::NoResetPending)
    );
    h.admin(AdminReset::Planned).expect("planned");
    let late = h.reg_flags("late", ClientFlags::CAN_VETO);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, plain, Epoch(1), busy())),
        Err(VetoError::NotAllowed)
    );
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(0), busy())),
        Err(VetoError::StaleEpoch)
    );
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, late, Epoch(1), busy())),
        Err(VetoError::NotQueried),
        "registered after the query went out"
    );
    // A fatal cause ends the query: the reset cannot be vetoed any more.
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(1), busy())),
        Err(VetoError::NoQueryPending)
    );
    h.complete(&[plain, v, late]);
    assert_eq!(
        h.c().epoch(),
        Epoch(2),
        "the refused vetoes changed nothing"
    );
    assert_eq!(
        h.events_of(late),
        [Reset, ResetEnd],
        "it joined the barrier"
    );
}

#[test]
fn consent_refusals() {
    let mut h = harness();
    let plain = h.reg("plain");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, v, Epoch(1))),
        Err(ConsentError::NoQueryPending)
    );
    h.admin(AdminReset::Planned).expect("planned");
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, plain, Epoch(1))),
        Err(ConsentError::NotQueried)
    );
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, v, Epoch(7))),
        Err(ConsentError::StaleEpoch)
    );
    let gone = ClientId {
        index: 5,
        generation: 0,
    };
    assert_eq!(
        h.call(|c, now| c.reset_consent(now, gone, Epoch(1))),
        Err(ConsentError::UnknownClient)
    );
    assert_eq!(h.c().state(), State::Preparing, "refusals changed nothing");
    assert_eq!(h.c().counters().refusals, 4);
}

/// The stage's name says the state, and inside a reset what it waits for.
#[test]
fn the_stage_name_follows_the_reset() {
    let mut h = harness();
    assert_eq!(h.c().stage_name(), "Operational");
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    assert_eq!(h.c().stage_name(), "Quiescing");
    h.execute(a).expect("ready");
    h.drive_to_restoring().expect("reaches Restoring");
    assert_eq!(h.c().stage_name(), "Restoring");
}

/// Clients coming and going while RESET_END goes out and the host's drain is held up (its
/// DPC waits on another processor) never fill the action queue: a client that leaves takes
/// its queued events with it, and its RESET_END counts as delivered.
#[test]
fn clients_churning_while_the_drain_is_held_up_never_overflow_the_queue() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    h.execute(a).expect("ready");
    // RESET_END queued for `a`; nothing is drained from here.
    let held = h.drive_to_restoring().expect("reaches Restoring");
    let desc = ClientDesc::new("churn", ClientKind::Custom, ClientFlags::empty()).expect("fits");
    // One that stays: its RESET_END, queued, is not another's to take.
    let stays = h.call(|c, now| c.register(now, desc)).expect("register").id;
    let room = h.c().pending_actions();
    for _ in 0..1_000 {
        let r = h.call(|c, now| c.register(now, desc)).expect("register");
        assert!(r.late, "each gets a RESET_END of its own");
        h.call(|c, now| c.unregister(now, r.id))
            .expect("unregister");
    }
    assert_eq!(h.c().counters().actions_overflowed, 0);
    assert_eq!(h.c().pending_actions(), room, "what left took its events");
    assert_eq!(
        h.c().state(),
        State::Restoring,
        "still waits for a's RESET_END"
    );
    h.deliver_held(held);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
    assert_eq!(h.events_of(stays), [ResetEnd]);
}

#[test]
fn a_queried_client_that_leaves_counts_as_consent() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.call(|c, now| c.unregister(now, v)).expect("unregister");
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn catastrophic_while_preparing_makes_the_reset_fatal_and_proceeds() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.events_of(v), [ResetQuery, Reset]);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.reason, ResetReason::Catastrophic);
    assert!(!r.planned);
    assert_eq!(r.requests, 2);
    h.complete(&[a, v]);
    assert_eq!(h.c().counters().resets_started, 1, "no second reset raised");
    assert_eq!(h.asserts(), 1);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn the_health_poll_watches_a_query_and_makes_the_reset_fatal() {
    let mut h = harness_with(
        Policy {
            query_deadline_ms: 5_000,
            ..policy()
        },
        8,
    );
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing, "the poll found it");
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    h.complete(&[v]);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn another_planned_request_joins_the_query() {
    let mut h = harness();
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.admin(AdminReset::Planned).expect("planned again");
    assert_eq!(h.c().state(), State::Preparing);
    assert_eq!(h.events_of(v), [ResetQuery], "asked once");
    assert_eq!(h.c().last_reset().expect("record").requests, 2);
}

#[test]
fn surprise_removal_while_preparing_ends_the_query_with_device_fatal() {
    let mut h = harness();
    let a = h.reg("a");
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    h.admin(AdminReset::Planned).expect("planned");
    h.hca_mut().remove();
    h.call(|c, now| c.surprise_removal(now));
    h.pump();
    assert_eq!(h.c().state(), State::Removed);
    assert_eq!(h.events_of(v), [ResetQuery, DeviceFatal]);
    assert_eq!(h.events_of(a), [DeviceFatal]);
    assert_eq!(
        h.c().last_reset().expect("record").result,
        Some(ResetResult::Removed)
    );
    assert!(h.timers().is_empty());
}

// ----- throttles and auto_recover (docs/design.md §5 "Storm control") ---------------------------------

#[test]
fn a_noisy_client_is_throttled_and_the_device_stays_up() {
    let mut h = harness();
    let noisy = h.reg("noisy");
    for _ in 0..2 {
        h.request(noisy).expect("within its limit");
        h.complete(&[noisy]);
    }
    assert_eq!(h.c().epoch(), Epoch(3));
    assert_eq!(h.request(noisy), Err(RequestError::Throttled));
    assert_eq!(h.c().state(), State::Operational, "nothing happened");
    assert_eq!(h.c().counters().resets_started, 2);
    assert_eq!(h.c().counters().throttled, 1);
    let name = h.c().recorder().iter().find_map(|r| match r.kind {
        RecordKind::Throttled { client } if client == noisy => Some(r.name),
        _ => None,
    });
    assert_eq!(name.map(|n| n.to_string()), Some("noisy".to_string()));
    // Another client is not throttled for it.
    let other = h.reg("other");
    assert!(h.request(other).is_ok());
    h.complete(&[noisy, other]);
    // The window moves on.
    h.advance(60_000);
    assert!(
        h.request(noisy).is_ok(),
        "a minute later its budget is back"
    );
}

#[test]
fn an_administrator_restart_clears_the_storm_window() {
    let mut h = harness_with(
        Policy {
            max_auto_resets: 1,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a]);
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed, "storm limit");
    h.call(|c, now| c.admin_restart(now)).expect("restart");
    h.pump();
    h.advance(5_000);
    assert_eq!(h.c().state(), State::Operational);
    // Within the old window, but the restart cleared it: one more is allowed.
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn auto_recover_off_quiesces_and_leaves_the_device_failed_for_the_administrator() {
    let mut h = harness_with(
        Policy {
            auto_recover: false,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing, "clients release first");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert_eq!(h.asserts(), 0, "no hardware reset");
    assert_eq!(h.events_of(a), [Reset, ResetFailed]);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::AutoRecoverOff
        }
    )));
    // A client's own request still resets: auto_recover is about errors the device raised.
    h.call(|c, now| c.admin_restart(now)).expect("restart");
    h.pump();
    h.advance(5_000);
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.request(a).is_ok());
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn health_catastrophic_word_starts_a_fatal_reset() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().inject_catastrophic(0xdead);
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    // The reset cleared the error: no second reset at the next polls.
    h.advance(5_000);
    assert_eq!(h.c().counters().resets_started, 1);
}

#[test]
fn health_counter_stalled_for_three_polls_starts_a_hang_reset() {
    let mut h = harness();
    let _a = h.reg("a");
    let now = h.now();
    h.hca_mut().set_now(now);
    h.hca_mut().stall_health();
    h.advance(3_000);
    assert_eq!(
        h.c().state(),
        State::Operational,
        "three equal samples are not yet a hang"
    );
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::HealthStall
    );
}

#[test]
fn command_timeout_starts_a_reset() {
    let mut h = harness();
    let _a = h.reg("a");
    h.call(|c, now| c.command_timeout(now));
    h.pump();
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::CommandTimeout
    );
}

#[test]
fn health_is_polled_while_quiescing_and_not_during_the_hardware_reset() {
    let mut h = harness_with(
        Policy {
            quiesce_deadline_ms: 5_000,
            ..policy()
        },
        8,
    );
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    let reads = |h: &H| {
        h.hw_steps()
            .iter()
            .filter(|s| **s == HwStep::ReadHealth)
            .count()
    };
    let before = reads(&h);
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(
        reads(&h),
        before + 1,
        "the 1 s poll runs on while quiescing"
    );
    h.execute(wedged).expect("ready");
    assert_eq!(reads(&h), before + 2, "one read closes the quiesce");
    assert_eq!(h.c().state(), State::Resetting);
    let at_assert = reads(&h);
    h.advance(150);
    assert_eq!(reads(&h), at_assert, "no poll while the device is in reset");
    h.advance(5_000);
    assert_eq!(h.c().counters().resets_started, 1);
}

// ----- health while quiescing, and the device's error state (docs/design.md §5 "Health") -------------

fn planned_with_wedged_client(quiesce_deadline_ms: u64) -> (H, ClientId, ClientId) {
    let mut h = harness_with(
        Policy {
            abort_on_unresponsive: true,
            quiesce_deadline_ms,
            ..policy()
        },
        8,
    );
    let v = h.reg_flags("vetoer", ClientFlags::CAN_VETO);
    let wedged = h.reg("wedged");
    h.admin(AdminReset::Planned).expect("planned");
    h.consent(v).expect("consent");
    h.execute(v).expect("vetoer ready");
    (h, v, wedged)
}

#[test]
fn catastrophic_found_by_the_poll_while_quiescing_makes_a_planned_reset_fatal() {
    let (mut h, v, wedged) = planned_with_wedged_client(3_000);
    h.advance(100);
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(900);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.reason, ResetReason::Catastrophic);
    assert!(!r.planned, "the poll made it fatal before the deadline");
    assert_eq!(
        h.call(|c, now| c.reset_veto(now, v, Epoch(1), busy())),
        Err(VetoError::NoQueryPending)
    );
    h.advance(2_000 + 5_000);
    assert_eq!(h.c().counters().resets_started, 1, "one reset");
    assert_eq!(h.c().counters().resets_aborted, 0, "no abort");
    assert_eq!(h.asserts(), 1);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(wedged), [Reset, ResetEnd]);
    assert_eq!(h.c().last_reset().expect("record").forced(), [wedged]);
}

#[test]
fn catastrophic_between_polls_is_found_by_the_read_that_closes_the_quiesce() {
    // The deadline comes before the next poll: only the closing read can see the error.
    let (mut h, _v, wedged) = planned_with_wedged_client(500);
    h.advance(100);
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(400 + 5_000);
    assert_eq!(h.c().counters().resets_started, 1);
    assert_eq!(h.c().counters().resets_aborted, 0);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    assert_eq!(h.events_of(wedged), [Reset, ResetEnd]);
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn unresponsive_abort_goes_ahead_when_the_closing_read_is_healthy() {
    let (mut h, v, wedged) = planned_with_wedged_client(500);
    h.advance(500);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 0);
    assert_eq!(h.events_of(v), [ResetQuery, Reset, ResetAborted]);
    assert_eq!(h.events_of(wedged), [Reset, ResetAborted]);
}

#[test]
fn two_causes_at_one_instant_make_one_reset_with_the_graver_reason() {
    let mut h = harness();
    let a = h.reg("a");
    // The command times out and the firmware writes its catastrophic word at one instant;
    // the client releases at once, so the quiesce takes no time at all.
    h.call(|c, now| c.command_timeout(now));
    h.hca_mut().inject_catastrophic(0xbad);
    h.pump();
    h.execute(a).expect("ready");
    h.advance(10_000);
    assert_eq!(
        h.c().counters().resets_started,
        1,
        "the error is not found again"
    );
    assert_eq!(h.asserts(), 1);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::Catastrophic
    );
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
}

#[test]
fn a_hardware_reset_clears_the_device_error_state() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().inject_catastrophic(0xbad);
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Quiescing);
    h.execute(a).expect("ready");
    h.advance(30_000);
    assert_eq!(h.c().counters().resets_started, 1);
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.hca().is_running());
}

// ----- docs/design.md §3 calls ---------------------------------------------------------------------------

#[test]
fn idle_client_gets_reset_and_is_in_the_barrier() {
    let mut h = harness();
    let busy = h.reg("busy");
    let idle = h.reg("idle");
    h.request(busy).expect("request");
    assert_eq!(h.events_of(idle), [Reset]);
    let info = h.c().client(idle).expect("registered");
    assert!(info.in_barrier);
    h.execute(busy).expect("ready");
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "the idle client holds the barrier"
    );
    h.execute(idle).expect("ready");
    assert_eq!(h.c().state(), State::Resetting);
}

#[test]
fn late_registrant_is_not_in_barrier_gets_no_reset_and_first_event_is_reset_end() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    let d = ClientDesc::new("late", ClientKind::Ipoib, ClientFlags::empty()).expect("fits");
    let reg = h
        .call(|c, now| c.register(now, d))
        .expect("register during quiesce");
    h.pump();
    assert!(reg.late);
    assert_eq!(reg.state, State::Quiescing);
    let late = reg.id;
    assert_eq!(h.c().client(late).expect("late").state, ClientState::Late);
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, late, Epoch(1))),
        Err(ExecuteError::NotInBarrier)
    );
    h.complete(&[a]);
    assert_eq!(h.events_of(late), [ResetEnd]);
}

#[test]
fn late_registrant_during_resetting_and_restoring() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    assert_eq!(h.c().state(), State::Resetting);
    let during_reset = h.reg("during-reset");
    h.advance(1_000);
    assert_eq!(h.events_of(during_reset), [ResetEnd]);

    // Register while RESET_END deliveries are still outstanding (Restoring).
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.execute(during_reset).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    let d = ClientDesc::new("in-restore", ClientKind::Srp, ClientFlags::empty()).expect("fits");
    let reg = h.call(|c, now| c.register(now, d)).expect("register");
    assert!(reg.late);
    assert_eq!(reg.state, State::Restoring);
    for (client, event) in held {
        h.deliver(client, event);
    }
    assert_eq!(
        h.c().state(),
        State::Restoring,
        "waits for the late RESET_END too"
    );
    h.pump();
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(reg.id), [ResetEnd]);
}

#[test]
fn execute_with_no_reset_pending_is_refused_and_changes_nothing() {
    let mut h = harness();
    let a = h.reg("a");
    let seq = h.c().recorder().next_seq();
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, Epoch(1))),
        Err(ExecuteError::NoResetPending)
    );
    assert_eq!(h.c().pending_actions(), 0);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(1));
    // Only the refusal is recorded.
    let new: Vec<_> = h.c().recorder().since(seq).collect();
    assert_eq!(new.len(), 1);
    assert!(matches!(
        new[0].kind,
        RecordKind::Refused {
            code: RefusalCode::NoResetPending,
            ..
        }
    ));
}

#[test]
fn execute_twice_is_a_no_op() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.request(a).expect("request");
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::Accepted));
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::AlreadyReady));
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "a second execute does not count twice"
    );
    assert_eq!(h.execute(b), Ok(ExecuteOutcome::Accepted));
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::AlreadyReady));
}

#[test]
fn execute_with_stale_epoch_or_from_outside_the_barrier_is_refused() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
    h.request(a).expect("second reset");
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, Epoch(1))),
        Err(ExecuteError::StaleEpoch)
    );
    let outsider = h.reg("outsider");
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, outsider, Epoch(2))),
        Err(ExecuteError::NotInBarrier)
    );
    assert_eq!(h.c().state(), State::Quiescing);
    assert_eq!(h.execute(a), Ok(ExecuteOutcome::Accepted));
}

#[test]
fn unregister_during_quiesce_counts_as_ready() {
    let mut h = harness();
    let a = h.reg("a");
    let leaver = h.reg("leaver");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.call(|c, now| c.unregister(now, leaver))
        .expect("unregister");
    h.pump();
    assert_eq!(h.c().state(), State::Resetting);
    h.advance(1_000);
    assert_eq!(h.events_of(leaver), [Reset], "gone: no RESET_END");
}

#[test]
fn ids_of_the_previous_coordinator_of_a_device_are_stale_in_the_next() {
    // The KMDF driver builds a coordinator at each start: a child that kept the id the last
    // one gave it must be refused, not taken for whoever holds that slot now.
    let mut first = harness();
    let kept = first.reg("kept");
    let gone = first.reg("gone");
    first
        .call(|c, now| c.unregister(now, gone))
        .expect("unregister");
    let floor = first.c().next_generation();
    assert!(floor > kept.generation && floor > gone.generation + 1);
    let mut next = harness();
    next.call(|c, _| c.retire_ids_before(floor));
    let newcomer = next.reg("newcomer");
    assert_eq!(
        (newcomer.index, newcomer.generation),
        (kept.index, floor),
        "the slot is reused at the floor's generation"
    );
    for old in [kept, gone] {
        assert_eq!(
            next.call(|c, now| c.unregister(now, old)),
            Err(UnregisterError::StaleClient),
            "{old:?}"
        );
    }
    assert!(
        next.c().client(newcomer).is_ok(),
        "the newcomer is untouched"
    );
    // A slot in use keeps its generation: its client registered with this coordinator.
    next.call(|c, _| c.retire_ids_before(floor + 10));
    assert!(next.c().client(newcomer).is_ok());
    assert_eq!(next.c().next_generation(), floor + 11);
}

#[test]
fn stale_ids_are_refused_after_their_slot_is_reused() {
    let mut h = harness();
    let old = h.reg("old");
    h.call(|c, now| c.unregister(now, old)).expect("unregister");
    let new = h.reg("new");
    assert_eq!(new.index, old.index, "slot reused");
    assert_ne!(new, old);
    assert_eq!(
        h.call(|c, now| c.unregister(now, old)),
        Err(UnregisterError::StaleClient)
    );
    assert_eq!(
        h.call(|c, now| c.reset_request(now, old)),
        Err(RequestError::StaleClient)
    );
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, old, Epoch(1))),
        Err(ExecuteError::StaleClient)
    );
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.c().client(new).is_ok(), "the new occupant is untouched");
    let never = ClientId {
        index: 7,
        generation: 0,
    };
    assert_eq!(
        h.call(|c, now| c.unregister(now, never)),
        Err(UnregisterError::UnknownClient)
    );
    let out_of_range = ClientId {
        index: 900,
        generation: 0,
    };
    assert_eq!(
        h.call(|c, now| c.reset_request(now, out_of_range)),
        Err(RequestError::UnknownClient)
    );
}

#[test]
fn registration_beyond_capacity_fails_cleanly_and_harms_nobody() {
    let mut h = harness_with(policy(), 3);
    let ids: Vec<ClientId> = ["a", "b", "c"].iter().map(|n| h.reg(n)).collect();
    let d = ClientDesc::new("d", ClientKind::Custom, ClientFlags::empty()).expect("fits");
    assert_eq!(
        h.call(|c, now| c.register(now, d)),
        Err(RegisterError::CapacityFull)
    );
    assert_eq!(h.c().client_count(), 3);
    h.request(ids[0]).expect("request");
    h.complete(&ids);
    for id in ids {
        assert_eq!(h.events_of(id), [Reset, ResetEnd]);
    }
}

#[test]
fn request_during_quiesce_and_hardware_reset_joins() {
    let mut h = harness_with(
        Policy {
            hw_ready_timeout_ms: 5_000,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    let b = h.reg("b");
    assert_eq!(h.request(a), Ok(Epoch(1)));
    assert_eq!(h.request(b), Ok(Epoch(1)), "joins during quiesce");
    h.complete(&[a, b]);
    assert_eq!(h.c().counters().resets_started, 1);
    h.request(a).expect("second");
    h.execute(a).expect("ready");
    h.execute(b).expect("ready");
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.request(b), Ok(Epoch(2)), "joins the hardware reset");
    h.advance(3_000);
    assert_eq!(h.c().counters().resets_started, 2);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 2);
    assert_eq!(h.c().last_reset().expect("record").requests, 2);
}

#[test]
fn requests_during_restore_cause_exactly_one_follow_up() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.execute(b).expect("ready");
    // Bring the hardware back but hold the RESET_END deliveries: the bus is Restoring.
    let held = h.drive_to_restoring().expect("reaches Restoring");
    assert_eq!(h.call(|c, now| c.reset_request(now, a)), Ok(Epoch(2)));
    assert_eq!(h.call(|c, now| c.reset_request(now, b)), Ok(Epoch(2)));
    h.call(|c, now| c.command_timeout(now));
    h.deliver_held(held);
    assert_eq!(h.c().state(), State::Quiescing, "the follow-up started");
    // The first reset's outcome stays readable for hosts that handle its
    // ResetConcluded after the follow-up began.
    let first = h.c().concluded_reset().expect("concluded");
    assert_eq!(
        (first.epoch, first.reason, first.result),
        (
            Epoch(1),
            ResetReason::ClientRequest,
            Some(ResetResult::Restored(ResetOutcome::Restored))
        )
    );
    assert_eq!(h.c().last_reset().map(|r| r.epoch), Some(Epoch(2)));
    h.complete(&[a, b]);
    assert_eq!(h.c().concluded_reset().map(|r| r.epoch), Some(Epoch(2)));
    assert_eq!(h.c().counters().resets_started, 2, "exactly one follow-up");
    assert_eq!(h.c().epoch(), Epoch(3));
    assert_eq!(h.events_of(a), [Reset, ResetEnd, Reset, ResetEnd]);
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::CommandTimeout,
        "the follow-up carries the most severe reason"
    );
}

#[test]
fn request_and_catastrophic_at_the_same_instant_make_one_hardware_reset() {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    h.call(|c, now| c.reset_request(now, a)).expect("request");
    h.call(|c, now| c.catastrophic_error(now));
    h.pump();
    h.complete(&[a, b]);
    assert_eq!(h.asserts(), 1);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.reason, ResetReason::Catastrophic, "fatal reason recorded");
    assert_eq!(r.requests, 2);
    // Both the requester and everyone else see the outcome.
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
    assert_eq!(h.events_of(b), [Reset, ResetEnd]);
}

// ----- hardware reset ----------------------------------------------------------------------------

#[test]
fn hardware_reset_fails_twice_then_succeeds() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().fail_next_resets(2);
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.asserts(), 3);
    let r = h.c().last_reset().expect("record");
    assert_eq!(r.soft_attempts, 3);
    assert!(!r.flr_used);
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
}

#[test]
fn hardware_reset_failing_always_tries_flr_then_fails_hardware_dead_then_admin_restart() {
    let (mut h, a) = failed_device();
    assert_eq!(
        h.hw_steps()
            .iter()
            .filter(|s| **s == HwStep::FunctionLevelReset)
            .count(),
        1
    );
    assert_eq!(h.hca().stats().soft_resets, 3);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::HardwareDead
        }
    )));
    assert_eq!(h.c().client(a).expect("a").state, ClientState::Failed);
    assert_eq!(h.request(a), Err(RequestError::DeviceFailed));
    // An administrator restart succeeds: RESET_END with no RESET before it.
    assert_eq!(h.call(|c, now| c.admin_restart(now)), Ok(Epoch(1)));
    h.pump();
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.events_of(a), [Reset, ResetFailed, ResetEnd]);
    assert!(h.c().last_reset().expect("record").restart);
    assert!(h.transitions().contains(&(State::Failed, State::Resetting)));
}

/// A planned reset of a Failed device is refused: there is no serving device to plan around,
/// and RESTART is the way out. A forced reset restarts it, as RESTART does.
#[test]
fn a_planned_reset_of_a_failed_device_is_refused_and_a_forced_one_restarts_it() {
    let (mut h, a) = failed_device();
    let refusals = h.c().counters().admin_refusals;
    assert_eq!(
        h.admin(AdminReset::Planned),
        Err(AdminResetError::DeviceFailed)
    );
    assert_eq!(h.c().state(), State::Failed, "nothing started");
    assert_eq!(h.c().counters().admin_refusals, refusals + 1, "counted");
    assert_eq!(h.admin(AdminReset::Forced), Ok(Epoch(1)));
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [Reset, ResetFailed, ResetEnd]);
}

#[test]
fn admin_restart_of_a_healthy_device_is_refused() {
    let mut h = harness();
    assert_eq!(
        h.call(|c, now| c.admin_restart(now)),
        Err(RestartError::NotFailed)
    );
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn device_that_never_returns_is_failed_when_the_auto_restart_window_ends() {
    let mut h = harness_with(
        Policy {
            auto_restart_window_ms: 30_000,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.hca_mut().never_return();
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    // Three soft attempts and the FLR each wait hw_ready_timeout (2 s), then it keeps probing.
    h.advance(8_500);
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.asserts(), 4);
    h.advance(21_000);
    assert_eq!(h.c().state(), State::Resetting, "window not over at 29.5 s");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Failed);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::AutoRestartExpired
        }
    )));
    assert!(h.timers().is_empty(), "every wait ended");
}

#[test]
fn device_returning_late_within_the_window_is_restored() {
    let mut h = harness();
    *h.hca_mut() = SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(20_000),
        ..SimHcaConfig::default()
    });
    let a = h.reg("a");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    h.advance(30_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.events_of(a), [Reset, ResetEnd]);
}

#[test]
fn another_node_guid_after_reset_fails_device_replaced_with_pnp() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().replace_on_next_reset();
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::DeviceReplaced
        }
    )));
    assert_eq!(
        h.pnp(),
        [PnpOp::ReportChildrenMissing, PnpOp::ReenumerateChildren]
    );
    assert_eq!(h.c().last_reset().expect("record").pnp_operations, 2);
    assert_eq!(h.c().epoch(), Epoch(1), "no restore happened");
    assert!(!h.events_of(a).contains(&ResetEnd));
}

#[test]
fn firmware_change_on_activation_is_firmware_changed() {
    let mut h = harness();
    let a = h.reg("a");
    let new_fw = Identity::fw_version(2, 43, 0);
    h.hca_mut().stage_firmware(new_fw);
    h.admin(AdminReset::FirmwareActivate).expect("fw activate");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetEnd {
            epoch: Epoch(2),
            outcome: ResetOutcome::FirmwareChanged
        }
    )));
    assert_eq!(h.c().identity().fw_version, new_fw);
    assert!(h.pnp().is_empty());
    // The record and the history say it as the event does.
    assert_eq!(
        h.c().last_reset().and_then(|r| r.result),
        Some(ResetResult::Restored(ResetOutcome::FirmwareChanged))
    );
    assert!(h.c().recorder().iter().any(|r| matches!(
        r.kind,
        RecordKind::ResetFinished {
            outcome: ResetOutcome::FirmwareChanged,
            ..
        }
    )));
}

#[test]
fn firmware_change_without_activation_is_treated_as_another_device() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().stage_firmware(Identity::fw_version(9, 0, 0));
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::DeviceReplaced
        }
    )));
}

/// Runs `h` until the reset's assert is done and the device is in reset.
fn into_hardware_reset(h: &mut H, ids: &[ClientId]) {
    for id in ids {
        h.execute(*id).expect("ready");
    }
    assert_eq!(h.c().state(), State::Resetting);
    assert_eq!(h.asserts(), 1);
    h.advance(100);
}

#[test]
fn firmware_activation_joining_after_the_assert_schedules_one_follow_up() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    into_hardware_reset(&mut h, &[a]);
    let new_fw = Identity::fw_version(2, 43, 0);
    h.hca_mut().stage_firmware(new_fw);
    h.admin(AdminReset::FirmwareActivate).expect("joins");
    // The running reset ends on the old firmware, the follow-up activates the new one.
    h.advance(200);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.c().state(), State::Quiescing, "follow-up started");
    assert_eq!(
        h.c().last_reset().expect("record").reason,
        ResetReason::FirmwareActivate
    );
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(3));
    assert_eq!(h.c().identity().fw_version, new_fw);
    assert!(h.delivered().contains(&(
        a,
        Event::ResetEnd {
            epoch: Epoch(3),
            outcome: ResetOutcome::FirmwareChanged
        }
    )));
    // The allowance is spent: an ordinary reset later is just a reset.
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(4));
    assert!(h.pnp().is_empty(), "never taken for a replaced device");
    assert_eq!(h.c().counters().resets_started, 3);
}

#[test]
fn firmware_activation_before_the_assert_needs_no_follow_up() {
    let mut h = harness();
    let a = h.reg("a");
    h.admin(AdminReset::Forced).expect("forced");
    h.hca_mut().stage_firmware(Identity::fw_version(2, 43, 0));
    h.admin(AdminReset::FirmwareActivate)
        .expect("joins while quiescing");
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().counters().resets_started, 1);
    assert_eq!(h.c().identity().fw_version, Identity::fw_version(2, 43, 0));
}

#[test]
fn firmware_activation_on_a_failed_device_restarts_it_with_the_allowance() {
    let mut h = harness_with(
        Policy {
            reset_retries: 0,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    h.hca_mut().fail_next_resets(2);
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    let new_fw = Identity::fw_version(3, 0, 0);
    h.hca_mut().stage_firmware(new_fw);
    h.admin(AdminReset::FirmwareActivate).expect("restart");
    h.advance(5_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().identity().fw_version, new_fw);
    assert!(h.pnp().is_empty());
    assert!(h.delivered().contains(&(
        a,
        Event::ResetEnd {
            epoch: Epoch(2),
            outcome: ResetOutcome::FirmwareChanged
        }
    )));
}

#[test]
fn a_replacement_is_reported_to_pnp_once_however_often_it_is_restarted() {
    let mut h = harness();
    let a = h.reg("a");
    h.hca_mut().replace_on_next_reset();
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.pnp().len(), 2);
    for _ in 0..3 {
        h.call(|c, now| c.admin_restart(now)).expect("restart");
        h.pump();
        h.advance(5_000);
        assert_eq!(h.c().state(), State::Failed);
    }
    assert_eq!(
        h.pnp(),
        [PnpOp::ReportChildrenMissing, PnpOp::ReenumerateChildren]
    );
    assert_eq!(h.c().counters().pnp_operations, 2);
    assert_eq!(h.c().last_reset().expect("record").pnp_operations, 0);
}

#[test]
fn soft_reset_performs_zero_pnp_operations() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.complete(&[a]);
    assert_eq!(h.c().epoch(), Epoch(2));
    assert!(h.pnp().is_empty());
    assert_eq!(h.c().counters().pnp_operations, 0);
    assert_eq!(h.c().last_reset().expect("record").pnp_operations, 0);
}

// ----- storm control -------------------------------------------------------------------------

/// Storm control alone: the per-client request limit out of the way.
fn unthrottled() -> H {
    harness_with(
        Policy {
            client_request_limit: 16,
            ..policy()
        },
        8,
    )
}

#[test]
fn fourth_automatic_reset_in_the_storm_window_fails_storm_limit() {
    let mut h = unthrottled();
    let a = h.reg("a");
    for i in 0..3 {
        assert!(h.request(a).is_ok(), "reset {i} allowed");
        h.complete(&[a]);
        assert_eq!(h.c().state(), State::Operational);
    }
    assert_eq!(h.request(a), Err(RequestError::StormLimit));
    assert_eq!(
        h.c().state(),
        State::Quiescing,
        "clients still release first"
    );
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Failed);
    assert_eq!(h.asserts(), 3, "no hardware reset for the refused one");
    assert_eq!(
        h.delivered().last(),
        Some(&(
            a,
            Event::ResetFailed {
                epoch: Epoch(4),
                error: FailReason::StormLimit
            }
        ))
    );
    // An administrator reset is still accepted (here it restarts the failed device).
    assert_eq!(h.admin(AdminReset::Forced), Ok(Epoch(4)));
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
}

#[test]
fn administrator_reset_is_never_refused_by_storm_control() {
    let mut h = unthrottled();
    let a = h.reg("a");
    for _ in 0..3 {
        h.request(a).expect("automatic");
        h.complete(&[a]);
    }
    assert_eq!(h.admin(AdminReset::Forced), Ok(Epoch(4)));
    h.complete(&[a]);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(5));
    assert_eq!(h.c().counters().admin_resets, 1);
}

#[test]
fn storm_window_forgets_old_resets() {
    let mut h = harness_with(
        Policy {
            storm_window_ms: 10_000,
            ..policy()
        },
        8,
    );
    let a = h.reg("a");
    for _ in 0..6 {
        h.request(a).expect("spaced resets are not a storm");
        h.complete(&[a]);
        h.advance(6_000);
    }
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(7));
}

// ----- surprise removal ------------------------------------------------------------------------

fn removal_in(state: State) {
    let mut h = harness();
    let a = h.reg("a");
    let b = h.reg("b");
    match state {
        State::Operational => {}
        State::Quiescing => {
            h.request(a).expect("request");
        }
        State::Resetting => {
            h.request(a).expect("request");
            h.execute(a).expect("ready");
            h.execute(b).expect("ready");
        }
        State::Failed => {
            h.hca_mut().fail_next_resets(10);
            h.request(a).expect("request");
            h.complete(&[a, b]);
        }
        _ => unreachable!(),
    }
    assert_eq!(h.c().state(), state);
    h.hca_mut().remove();
    h.call(|c, now| c.surprise_removal(now));
    h.pump();
    assert_eq!(h.c().state(), State::Removed);
    assert!(h.timers().is_empty(), "every wait ended at once");
    assert_eq!(h.events_of(a).last(), Some(&DeviceFatal));
    assert_eq!(h.events_of(b).last(), Some(&DeviceFatal));
    assert!(h.pnp().contains(&PnpOp::ReportChildrenMissing));
    // Later calls fail cleanly; time passing changes nothing.
    let d = ClientDesc::new("new", ClientKind::Custom, ClientFlags::empty()).expect("fits");
    assert_eq!(
        h.call(|c, now| c.register(now, d)),
        Err(RegisterError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.reset_request(now, a)),
        Err(RequestError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.reset_execute(now, a, Epoch(1))),
        Err(ExecuteError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.admin_reset(now, AdminReset::Forced)),
        Err(AdminResetError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.admin_restart(now)),
        Err(RestartError::DeviceRemoved)
    );
    assert_eq!(
        h.call(|c, now| c.unregister(now, a)),
        Ok(()),
        "clients can still leave"
    );
    let before = h.delivered().len();
    h.advance(120_000);
    assert_eq!(h.delivered().len(), before);
    assert_eq!(h.c().state(), State::Removed);
}

#[test]
fn surprise_removal_while_operational() {
    removal_in(State::Operational);
}

#[test]
fn surprise_removal_during_quiesce() {
    removal_in(State::Quiescing);
}

#[test]
fn surprise_removal_during_hardware_reset() {
    removal_in(State::Resetting);
}

#[test]
fn surprise_removal_during_restore() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    h.execute(a).expect("ready");
    let held = h.drive_to_restoring().expect("reaches Restoring");
    h.call(|c, now| c.surprise_removal(now));
    h.deliver_held(held);
    assert_eq!(h.c().state(), State::Removed);
    assert_eq!(h.events_of(a), [Reset, ResetEnd, DeviceFatal]);
    assert_eq!(
        h.c().last_reset().expect("record").result,
        Some(ResetResult::Removed)
    );
    assert!(h.timers().is_empty());
}

#[test]
fn surprise_removal_of_a_failed_device() {
    removal_in(State::Failed);
}

// ----- misc ------------------------------------------------------------------------------------

#[test]
fn stale_timer_expiry_is_ignored() {
    let mut h = harness();
    let a = h.reg("a");
    h.request(a).expect("request");
    let (_, token) = h
        .timers()
        .armed(TimerId::QuiesceDeadline)
        .expect("deadline armed");
    h.execute(a).expect("ready");
    // The deadline was cancelled; a late expiry with its token must not do anything.
    let state = h.c().state();
    h.call(|c, now| c.timer_expired(now, TimerId::QuiesceDeadline, token));
    assert_eq!(h.c().state(), state);
    assert_eq!(h.c().pending_actions(), 0);
}

#[test]
fn invalid_policy_is_refused_and_the_old_one_kept() {
    let mut h = harness();
    let bad = Policy {
        quiesce_deadline_ms: 0,
        ..policy()
    };
    let err = h
        .call(|c, now| c.set_policy(now, bad))
        .expect_err("zero deadline");
    assert_eq!(err.field, "quiesce_deadline_ms");
    assert_eq!(h.c().policy(), &policy());
    let good = Policy {
        quiesce_deadline_ms: 300,
        ..policy()
    };
    h.call(|c, now| c.set_policy(now, good)).expect("valid");
    let a = h.reg("a");
    h.request(a).expect("request");
    h.advance(300);
    assert_ne!(h.c().state(), State::Quiescing, "new deadline applies");
}

#[test]
fn coordinator_refuses_an_invalid_initial_policy() {
    let hca = SimHca::new(SimHcaConfig::default());
    let r = Coordinator::new(
        Config {
            policy: Policy {
                max_auto_resets: 0,
                ..Policy::default()
            },
            ..Config::default()
        },
        hca.current_identity(),
        Instant::ZERO,
    );
    assert_eq!(r.map(|_| ()).map_err(|e| e.field), Err("max_auto_resets"));
}

#[test]
fn no_clients_reset_goes_straight_through() {
    let mut h = harness();
    h.admin(AdminReset::Forced).expect("forced");
    h.advance(1_000);
    assert_eq!(h.c().state(), State::Operational);
    assert_eq!(h.c().epoch(), Epoch(2));
}

#[test]
fn reset_path_stays_within_reserved_capacity() {
    // Max out the table and make the queue hold a RESET fan-out, an abort and a removal
    // without draining in between: the worst case the queue is sized for.
    let mut h = harness_with(policy(), 16);
    let mut ids = Vec::new();
    for i in 0..16 {
        ids.push(h.reg_flags(&std::format!("c{i}"), ClientFlags::CAN_VETO));
    }
    h.call(|c, now| c.admin_reset(now, AdminReset::Planned))
        .expect("planned");
    h.call(|c, now| c.catastrophic_error(now));
    h.call(|c, now| c.surprise_removal(now));
    assert!(h.c().pending_actions() >= 48);
    h.pump();
    assert_eq!(h.c().counters().actions_overflowed, 0);
    assert_eq!(h.events_of(ids[0]), [ResetQuery, Reset, DeviceFatal]);
}

mod calls;
mod counters;
mod hardware;
mod health;
mod ports;
mod resets;
