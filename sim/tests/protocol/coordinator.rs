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
    /// Health reads so far.
    fn health_reads(&self) -> usize;
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

    fn health_reads(&self) -> usize {
        self.hw_steps()
            .iter()
            .filter(|s| **s == HwStep::ReadHealth)
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
mod hold;
mod ports;
mod query;
mod removal;
mod resets;
mod storm;
mod transitions;
