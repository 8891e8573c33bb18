//! Property test: any sequence of bus calls, stale ids, faults, policy changes and time
//! never panics the coordinator and never breaks its invariants or the event guarantees.

use hcabus::coordinator::*;
use hcabus::hca::execute;
use hcabus::sim::{InvariantChecker, SimHca, SimHcaConfig};
use hcabus::types::*;
use hcabus::{Duration, Instant, Policy};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Register { veto: bool },
    Unregister(usize),
    Request(usize),
    Execute(usize, i8),
    Veto(usize),
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
    c: Coordinator,
    hca: SimHca,
    now: Instant,
    timers: [Option<(Instant, u32)>; TimerId::COUNT],
    ids: Vec<ClientId>,
    checker: InvariantChecker,
    epoch_seen: Epoch,
}

impl Model {
    fn new() -> Model {
        let hca = SimHca::new(SimHcaConfig::default());
        let c = Coordinator::new(
            Config {
                max_clients: 6,
                recorder_capacity: 256,
                policy: Policy {
                    quiesce_deadline_ms: 800,
                    hw_ready_timeout_ms: 1_000,
                    auto_restart_window_ms: 20_000,
                    storm_window_ms: 10_000,
                    ..Policy::default()
                },
            },
            hca.current_identity(),
            Instant::ZERO,
        )
        .expect("policy");
        Model {
            checker: InvariantChecker::new(c.max_clients()),
            c,
            hca,
            now: Instant::ZERO,
            timers: [None; TimerId::COUNT],
            ids: Vec::new(),
            epoch_seen: Epoch(1),
        }
    }

    fn pick(&self, k: usize) -> Option<ClientId> {
        (!self.ids.is_empty()).then(|| self.ids[k % self.ids.len()])
    }

    fn pump(&mut self) {
        while let Some(a) = self.c.pop_action() {
            match a {
                Action::Deliver { client, event } => {
                    if self.c.client(client).is_ok() {
                        self.checker.on_deliver(client, event);
                    }
                    self.c.event_delivered(self.now, client, event.kind());
                }
                Action::ArmTimer { timer, at, token } => {
                    self.timers[timer as usize] = Some((at, token))
                }
                Action::CancelTimer { timer } => self.timers[timer as usize] = None,
                Action::Hw(step) => {
                    self.hca.set_now(self.now);
                    let done = execute(&mut self.hca, step);
                    self.c.hw_complete(self.now, done);
                }
                Action::Pnp(_) => {}
                Action::ResetConcluded { .. } => self.checker.on_reset_concluded(&self.c),
            }
        }
    }

    fn advance(&mut self, ms: u64) {
        let end = self.now + Duration::from_ms(ms);
        while let Some((at, i, tok)) = self
            .timers
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.map(|(at, tok)| (at, i, tok)))
            .filter(|(at, _, _)| *at <= end)
            .min()
        {
            self.now = self.now.max(at);
            self.timers[i] = None;
            self.c.timer_expired(self.now, TimerId::ALL[i], tok);
            self.pump();
        }
        self.now = end;
    }

    fn last_reset_epoch(&self) -> Epoch {
        self.c.last_reset().map_or(self.c.epoch(), |r| r.epoch)
    }

    fn apply(&mut self, op: &Op) {
        let now = self.now;
        match *op {
            Op::Register { veto } => {
                let flags = if veto {
                    ClientFlags::CAN_VETO
                } else {
                    ClientFlags::empty()
                };
                let d = ClientDesc::new("c", ClientKind::Custom, flags).expect("fits");
                if let Ok(r) = self.c.register(now, d) {
                    self.checker
                        .on_register(r.id, r.late, r.state == State::Failed);
                    self.ids.push(r.id);
                }
            }
            Op::Unregister(k) => {
                if let Some(id) = self.pick(k) {
                    if self.c.unregister(now, id).is_ok() {
                        self.checker.on_unregister(id);
                    }
                }
            }
            Op::Request(k) => {
                if let Some(id) = self.pick(k) {
                    let _ = self.c.reset_request(now, id);
                }
            }
            Op::Execute(k, d) => {
                if let Some(id) = self.pick(k) {
                    let e = Epoch(self.last_reset_epoch().0.saturating_add_signed(d.into()));
                    let _ = self.c.reset_execute(now, id, e);
                }
            }
            Op::Veto(k) => {
                if let Some(id) = self.pick(k) {
                    let e = self.last_reset_epoch();
                    let _ = self.c.reset_veto(now, id, e);
                }
            }
            Op::Admin(kind) => {
                let kind = [
                    AdminReset::Forced,
                    AdminReset::Planned,
                    AdminReset::FirmwareActivate,
                ][kind as usize];
                if kind == AdminReset::FirmwareActivate {
                    let fw = self.hca.current_identity().fw_version + 1;
                    self.hca.stage_firmware(fw);
                }
                let _ = self.c.admin_reset(now, kind);
            }
            Op::Restart => {
                let _ = self.c.admin_restart(now);
            }
            Op::Advance(ms) => self.advance(ms.into()),
            Op::Catastrophic => self.c.catastrophic_error(now),
            Op::CommandTimeout => self.c.command_timeout(now),
            Op::HwFails(n) => self.hca.fail_next_resets(n.into()),
            Op::NeverReturns => self.hca.never_return(),
            Op::Replace => self.hca.replace_on_next_reset(),
            Op::Removal => {
                self.hca.remove();
                self.c.surprise_removal(now);
            }
            Op::BogusId(index, generation) => {
                let id = ClientId { index, generation };
                if self.c.client(id).is_err() {
                    assert!(self.c.unregister(now, id).is_err());
                    assert!(self.c.reset_request(now, id).is_err());
                    assert!(self.c.reset_execute(now, id, self.c.epoch()).is_err());
                    assert!(self.c.reset_veto(now, id, self.c.epoch()).is_err());
                }
            }
            Op::SetDeadline(ms) => {
                let p = Policy {
                    quiesce_deadline_ms: ms,
                    ..*self.c.policy()
                };
                let r = self.c.set_policy(now, p);
                assert_eq!(r.is_ok(), ms > 0);
            }
        }
        self.pump();
    }

    fn check(&mut self) -> Result<(), TestCaseError> {
        let c = &self.c;
        let busy = matches!(
            c.state(),
            State::Quiescing | State::Resetting | State::Restoring
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
            if c.state() == State::Resetting {
                prop_assert!(s != ClientState::Quiescing, "barrier complete in Resetting");
            }
        }
        prop_assert!(
            self.checker.violations.is_empty(),
            "{:?}",
            self.checker.violations
        );
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_call_sequence_keeps_the_invariants(ops in prop::collection::vec(op(), 1..80)) {
        let mut m = Model::new();
        m.pump();
        for op in &ops {
            m.apply(op);
            m.check()?;
        }
        // Let every pending wait run out: the bus must settle.
        m.advance(700_000);
        m.check()?;
        prop_assert!(!m.c.reset_in_progress(), "stuck in {}", m.c.state());
    }
}
