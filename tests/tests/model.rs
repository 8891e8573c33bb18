//! Property test: any sequence of bus calls, stale ids, faults, policy changes and time
//! never panics the coordinator and never breaks its invariants or the event guarantees.

use hcabus::coordinator::*;
use hcabus::types::*;
use hcabus::Policy;
use hcabus_sim::{SimHca, SimHcaConfig, Stepper};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Register { veto: bool },
    Unregister(usize),
    Request(usize),
    Execute(usize, i8),
    Veto(usize),
    Consent(usize),
    Admin(u8),
    Restart,
    Advance(u16),
    Catastrophic,
    CommandTimeout,
    HwFails(u8),
    NeverReturns,
    Replace,
    Removal,
    BogusId(u16, u32),
    SetDeadline(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<bool>().prop_map(|veto| Op::Register { veto }),
        2 => any::<usize>().prop_map(Op::Unregister),
        3 => any::<usize>().prop_map(Op::Request),
        8 => (any::<usize>(), -1i8..=1).prop_map(|(k, d)| Op::Execute(k, d)),
        2 => any::<usize>().prop_map(Op::Veto),
        2 => any::<usize>().prop_map(Op::Consent),
        2 => (0u8..3).prop_map(Op::Admin),
        1 => Just(Op::Restart),
        8 => (1u16..3000).prop_map(Op::Advance),
        1 => Just(Op::Catastrophic),
        1 => Just(Op::CommandTimeout),
        1 => (1u8..6).prop_map(Op::HwFails),
        1 => Just(Op::NeverReturns),
        1 => Just(Op::Replace),
        1 => prop::bool::weighted(0.15).prop_map(|b| if b { Op::Removal } else { Op::Advance(10) }),
        1 => (any::<u16>(), any::<u32>()).prop_map(|(i, g)| Op::BogusId(i, g)),
        1 => (0u64..4000).prop_map(Op::SetDeadline),
    ]
}

struct Model {
    s: Stepper,
    ids: Vec<ClientId>,
    epoch_seen: Epoch,
}

impl Model {
    fn new() -> Model {
        let config = Config {
            max_clients: 6,
            recorder_capacity: 256,
            policy: Policy {
                quiesce_deadline_ms: 800,
                hw_ready_timeout_ms: 1_000,
                auto_restart_window_ms: 20_000,
                storm_window_ms: 10_000,
                ..Policy::default()
            },
        };
        Model {
            s: Stepper::new(config, SimHca::new(SimHcaConfig::default())).expect("policy"),
            ids: Vec::new(),
            epoch_seen: Epoch(1),
        }
    }

    /// The epoch the current (or last) reset tears down: what its answers must name.
    fn reset_epoch(&self) -> Epoch {
        let c = self.s.c();
        c.last_reset().map_or(c.epoch(), |r| r.epoch)
    }

    fn pick(&self, k: usize) -> Option<ClientId> {
        (!self.ids.is_empty()).then(|| self.ids[k % self.ids.len()])
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Register { .. }
            | Op::Unregister(_)
            | Op::Request(_)
            | Op::Execute(..)
            | Op::Veto(_)
            | Op::Consent(_) => self.apply_client(op),
            _ => self.apply_world(op),
        }
        self.s.pump();
    }

    /// A client's call, made by a registered client (picked by index) or a bogus one.
    fn apply_client(&mut self, op: &Op) {
        match *op {
            Op::Register { veto } => {
                let flags = if veto {
                    ClientFlags::CAN_VETO
                } else {
                    ClientFlags::empty()
                };
                let d = ClientDesc::new("c", ClientKind::Custom, flags).expect("fits");
                if let Ok(r) = self.s.call(|c, now| c.register(now, d)) {
                    self.ids.push(r.id);
                }
            }
            Op::Unregister(k) => {
                if let Some(id) = self.pick(k) {
                    let _ = self.s.call(|c, now| c.unregister(now, id));
                }
            }
            Op::Request(k) => {
                if let Some(id) = self.pick(k) {
                    let _ = self.s.call(|c, now| c.reset_request(now, id));
                }
            }
            Op::Execute(k, d) => {
                if let Some(id) = self.pick(k) {
                    let base = self
                        .s
                        .c()
                        .last_reset()
                        .map_or(self.s.c().epoch(), |r| r.epoch);
                    let e = Epoch(base.0.saturating_add_signed(d.into()));
                    let _ = self.s.call(|c, now| c.reset_execute(now, id, e));
                }
            }
            Op::Veto(k) => {
                if let Some(id) = self.pick(k) {
                    let e = self.reset_epoch();
                    let _ = self
                        .s
                        .call(|c, now| c.reset_veto(now, id, e, VetoReason::cut("model")));
                }
            }
            Op::Consent(k) => {
                if let Some(id) = self.pick(k) {
                    let e = self.reset_epoch();
                    let _ = self.s.call(|c, now| c.reset_consent(now, id, e));
                }
            }
            _ => unreachable!("not a client's call: {op:?}"),
        }
    }

    /// The administrator, the device, time, the policy, and calls with ids no one holds.
    fn apply_world(&mut self, op: &Op) {
        match *op {
            Op::Admin(kind) => {
                let kind = [
                    AdminReset::Forced,
                    AdminReset::Planned,
                    AdminReset::FirmwareActivate,
                ][kind as usize];
                if kind == AdminReset::FirmwareActivate {
                    let fw = self.s.hca().current_identity().fw_version + 1;
                    self.s.hca_mut().stage_firmware(fw);
                }
                let _ = self.s.call(|c, now| c.admin_reset(now, kind));
            }
            Op::Restart => {
                let _ = self.s.call(|c, now| c.admin_restart(now));
            }
            Op::Advance(ms) => self.s.advance(ms.into()),
            Op::Catastrophic => self.s.call(|c, now| c.catastrophic_error(now)),
            Op::CommandTimeout => self.s.call(|c, now| c.command_timeout(now)),
            Op::HwFails(n) => self.s.hca_mut().fail_next_resets(n.into()),
            Op::NeverReturns => self.s.hca_mut().never_return(),
            Op::Replace => self.s.hca_mut().replace_on_next_reset(),
            Op::Removal => {
                self.s.hca_mut().remove();
                self.s.call(|c, now| c.surprise_removal(now));
            }
            Op::BogusId(index, generation) => {
                let id = ClientId { index, generation };
                if self.s.c().client(id).is_err() {
                    let e = self.s.c().epoch();
                    assert!(self.s.call(|c, now| c.unregister(now, id)).is_err());
                    assert!(self.s.call(|c, now| c.reset_request(now, id)).is_err());
                    assert!(self.s.call(|c, now| c.reset_execute(now, id, e)).is_err());
                    assert!(self
                        .s
                        .call(|c, now| c.reset_veto(now, id, e, VetoReason::cut("model")))
                        .is_err());
                }
            }
            Op::SetDeadline(ms) => {
                let p = Policy {
                    quiesce_deadline_ms: ms,
                    ..*self.s.c().policy()
                };
                let r = self.s.call(|c, now| c.set_policy(now, p));
                assert_eq!(r.is_ok(), ms > 0);
            }
            _ => unreachable!("not the world's: {op:?}"),
        }
    }

    fn check(&mut self) -> Result<(), TestCaseError> {
        let c = &self.s.c();
        let busy = matches!(
            c.state(),
            State::Preparing | State::Quiescing | State::Resetting | State::Restoring
        );
        prop_assert_eq!(c.reset_in_progress(), busy, "state {}", c.state());
        prop_assert!(c.epoch() >= self.epoch_seen, "epoch went backwards");
        self.epoch_seen = c.epoch();
        prop_assert_eq!(c.counters().actions_overflowed, 0);
        prop_assert_eq!(c.pending_actions(), 0);
        for info in c.clients() {
            let s = info.state;
            match c.state() {
                State::Operational => prop_assert_eq!(s, ClientState::Active),
                State::Preparing => prop_assert!(
                    matches!(s, ClientState::Active | ClientState::Queried),
                    "{s} while Preparing"
                ),
                State::Failed => prop_assert_eq!(s, ClientState::Failed),
                State::Removed => prop_assert_eq!(s, ClientState::Fatal),
                State::Quiescing | State::Resetting => prop_assert!(
                    matches!(
                        s,
                        ClientState::Quiescing
                            | ClientState::Ready
                            | ClientState::Unresponsive
                            | ClientState::Late
                    ) || (s == ClientState::Failed && c.last_reset().is_some_and(|r| r.restart))
                ),
                State::Restoring => {}
            }
            if c.state() != State::Preparing {
                prop_assert!(s != ClientState::Queried, "a query outlived Preparing");
            }
            if c.state() == State::Resetting {
                prop_assert!(s != ClientState::Quiescing, "barrier complete in Resetting");
            }
        }
        prop_assert_eq!(&self.s.checker().violations, &Vec::<String>::new());
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_call_sequence_keeps_the_invariants(ops in prop::collection::vec(op(), 1..80)) {
        let mut m = Model::new();
        for op in &ops {
            m.apply(op);
            m.check()?;
        }
        // Let every pending wait run out: the bus must settle.
        m.s.advance(700_000);
        m.check()?;
        prop_assert!(!m.s.c().reset_in_progress(), "stuck in {}", m.s.c().state());
    }
}
