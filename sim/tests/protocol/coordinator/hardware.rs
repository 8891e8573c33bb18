//! The wait for the device after an assert (docs/design.md §5 "Hardware reset": a bounded poll): when
//! the coordinator looks, and that a device back at once is found at once.

use std::vec::Vec;

use hcabus::coordinator::Config;
use hcabus::hca::{Hca, HealthSample, HwError, HwStep, Identity, Readiness};
use hcabus::policy::Policy;
use hcabus::time::{Duration, Instant};
use hcabus::types::*;
use hcabus_sim::hca::{SimHca, SimHcaConfig};
use hcabus_sim::stepper::{SimDevice, Stepper};

/// A SimHca that names a settle time after each assert, as the register-level ConnectX
/// reset does, and whose config save may fail.
struct Settling {
    hca: SimHca,
    settle: Duration,
    save: Option<HwError>,
}

impl Hca for Settling {
    fn save_config(&mut self) -> Result<(), HwError> {
        match self.save {
            Some(e) => Err(e),
            None => self.hca.save_config(),
        }
    }
    fn restore_config(&mut self) -> Result<(), HwError> {
        self.hca.restore_config()
    }
    fn assert_reset(&mut self) -> Result<(), HwError> {
        self.hca.assert_reset()
    }
    fn function_level_reset(&mut self) -> Result<(), HwError> {
        self.hca.function_level_reset()
    }
    fn probe_ready(&mut self) -> Result<Readiness, HwError> {
        self.hca.probe_ready()
    }
    fn init_command_interface(&mut self) -> Result<(), HwError> {
        self.hca.init_command_interface()
    }
    fn identity(&mut self) -> Result<Identity, HwError> {
        self.hca.identity()
    }
    fn read_health(&mut self) -> Result<HealthSample, HwError> {
        self.hca.read_health()
    }
    fn settle_after_reset(&self) -> Duration {
        self.settle
    }
}

impl SimDevice for Settling {
    fn set_now(&mut self, now: Instant) {
        self.hca.set_now(now);
    }
}

fn device(back_after_ms: u64) -> SimHca {
    SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(back_after_ms),
        ..SimHcaConfig::default()
    })
}

/// One client, an administrator's forced reset, the client executing at once; returns the
/// instant the reset was asserted (the quiesce ends on the execute, and the hardware
/// steps up to the assert run at that instant).
fn asserted<H: SimDevice>(s: &mut Stepper<H>) -> Instant {
    s.set_strict(true);
    forced_and_executed(s);
    assert_eq!(
        s.c().state(),
        State::Resetting,
        "asserted, waiting for the device"
    );
    s.now()
}

/// One client registers, an administrator forces a reset, and the client executes at once.
fn forced_and_executed<H: SimDevice>(s: &mut Stepper<H>) {
    let id = one_client(s);
    force_executed(s, id);
}

/// Registers one client.
fn one_client<H: SimDevice>(s: &mut Stepper<H>) -> ClientId {
    let d = ClientDesc::new("c", ClientKind::Custom, ClientFlags::empty()).expect("name fits");
    let id = s.call(|c, now| c.register(now, d)).expect("register").id;
    s.pump();
    id
}

/// An administrator forces a reset, and client `id` executes at once.
fn force_executed<H: SimDevice>(s: &mut Stepper<H>, id: ClientId) {
    let epoch = s
        .call(|c, now| c.admin_reset(now, AdminReset::Forced))
        .expect("reset");
    s.pump();
    s.call(|c, now| c.reset_execute(now, id, epoch))
        .expect("execute");
    s.pump();
}

/// Each probe's time after `t0`, in µs, until the device is found (or 1 s passes).
fn probes_after<H: SimDevice>(s: &mut Stepper<H>, t0: Instant) -> Vec<u64> {
    let mut at = Vec::new();
    for _ in 0..1_000 {
        if let Some((due, _)) = s.timers().armed(TimerId::HwPoll) {
            let offset = due.saturating_since(t0).as_us();
            if at.last() != Some(&offset) {
                at.push(offset);
            }
        }
        if s.c().state() != State::Resetting {
            break;
        }
        s.advance(1);
    }
    at
}

fn stepper<H: SimDevice>(hca: H) -> Stepper<H> {
    stepper_with(Policy::default(), hca)
}

/// A device that never comes back, under a ready bound of `ready_ms` and no retry: a soft
/// reset, then one FLR.
fn silent_device(ready_ms: u64) -> Stepper<SimHca> {
    let policy = Policy {
        hw_ready_timeout_ms: ready_ms,
        reset_retries: 0,
        ..Policy::default()
    };
    let mut hca = device(1);
    hca.never_return();
    stepper_with(policy, hca)
}

fn stepper_with<H: SimDevice>(policy: Policy, hca: H) -> Stepper<H> {
    let config = Config {
        max_clients: 4,
        recorder_capacity: 256,
        policy,
    };
    Stepper::with_device(config, hca).expect("valid policy")
}

#[test]
fn a_device_back_at_once_is_found_an_eighth_of_a_poll_interval_after_the_assert() {
    let mut s = stepper(device(1));
    let t0 = asserted(&mut s);
    assert_eq!(Policy::default().hw_poll_interval(), Duration::from_ms(10));
    assert_eq!(
        probes_after(&mut s, t0),
        [1_250],
        "one look, and it is back"
    );
    assert_eq!(s.c().state(), State::Operational);
    let r = s.c().last_reset().expect("a reset");
    assert_eq!(
        r.hw_done_at.map(|t| t.saturating_since(t0)),
        Some(Duration::from_us(1_250)),
        "restored as soon as it was found"
    );
}

#[test]
fn the_early_looks_double_up_to_the_interval_then_keep_to_its_grid() {
    let mut s = stepper(device(35));
    let t0 = asserted(&mut s);
    assert_eq!(
        probes_after(&mut s, t0),
        [1_250, 2_500, 5_000, 10_000, 20_000, 30_000, 40_000],
        "found on the first probe of the grid after it is back"
    );
    assert_eq!(s.c().state(), State::Operational);
}

#[test]
fn a_slow_device_is_found_when_it_was_before_the_early_looks() {
    // Back at 200 ms, on the grid: found at 200 ms, as one probe per interval found it.
    let mut s = stepper(device(200));
    let t0 = asserted(&mut s);
    let probes = probes_after(&mut s, t0);
    assert_eq!(probes.last(), Some(&200_000));
    assert_eq!(
        probes.len(),
        3 + 20,
        "three early looks, then one per interval"
    );
}

#[test]
fn a_device_that_names_its_settle_is_left_alone_until_it_is_over() {
    let hca = Settling {
        hca: device(35),
        settle: Duration::from_ms(30),
        save: None,
    };
    let mut s = stepper(hca);
    let t0 = asserted(&mut s);
    assert_eq!(
        probes_after(&mut s, t0),
        [30_000, 40_000],
        "no early look inside the settle, then every interval"
    );
    assert_eq!(s.c().state(), State::Operational);
}

#[test]
fn each_attempt_looks_early_again_and_the_bound_still_holds() {
    let mut s = silent_device(40);
    let t0 = asserted(&mut s);
    // The first attempt: early looks, then the grid, up to the 40 ms bound (watched until
    // just before it; the last step moves time onto it).
    let mut first = Vec::new();
    for _ in 0..40 {
        if let Some((due, _)) = s.timers().armed(TimerId::HwPoll) {
            let offset = due.saturating_since(t0).as_us();
            if first.last() != Some(&offset) {
                first.push(offset);
            }
        }
        s.advance(1);
    }
    assert_eq!(first, [1_250, 2_500, 5_000, 10_000, 20_000, 30_000, 40_000]);
    let flr_at = t0 + Duration::from_ms(40);
    let (due, _) = s
        .timers()
        .armed(TimerId::HwPoll)
        .expect("probing after the FLR");
    assert_eq!(
        due.saturating_since(flr_at),
        Duration::from_us(1_250),
        "the FLR's wait looks early too"
    );
    assert!(s.c().last_reset().is_some_and(|r| r.flr_used));
}

/// docs/design.md §5 "Hardware reset": without saved config space there is nothing to
/// restore the device to, so a failed save fails the reset at once (HardwareDead) and no
/// reset is ever asserted: a retry would assert a device it could not bring back.
#[test]
fn a_config_save_that_fails_fails_the_reset_at_once_and_asserts_nothing() {
    let hca = Settling {
        hca: device(1),
        settle: Duration::ZERO,
        save: Some(HwError::DeviceError),
    };
    let mut s = stepper(hca);
    forced_and_executed(&mut s);
    assert_eq!(s.c().state(), State::Failed);
    let r = s.c().last_reset().expect("a reset");
    assert_eq!(
        r.result,
        Some(hcabus::coordinator::ResetResult::Failed(
            FailReason::HardwareDead
        ))
    );
    assert_eq!(r.soft_attempts, 0, "nothing asserted");
    assert!(
        !s.hw_steps()
            .iter()
            .any(|h| matches!(h, HwStep::AssertReset | HwStep::FunctionLevelReset)),
        "{:?}",
        s.hw_steps()
    );
}

/// The ready bound is counted from the end of the settle: a device that names 30 ms and
/// never comes back is given up on exactly `hw_ready_timeout` after it, not before.
#[test]
fn the_ready_bound_runs_from_the_end_of_the_settle() {
    let mut hca = device(1);
    hca.never_return();
    let mut s = stepper(Settling {
        hca,
        settle: Duration::from_ms(30),
        save: None,
    });
    let t0 = asserted(&mut s);
    let (due, _) = s
        .timers()
        .armed(TimerId::HwReadyTimeout)
        .expect("the ready bound is armed");
    let bound = Policy::default().hw_ready_timeout().as_us();
    assert_eq!(due.saturating_since(t0).as_us(), 30_000 + bound);
}

/// Past its last attempt a device that stays silent is waited for (the long wait), probed
/// once a second from the moment the last bound ran out: not probed again at once, not
/// abandoned.
#[test]
fn a_silent_device_past_its_attempts_is_probed_once_a_second() {
    let mut s = silent_device(45);
    let t0 = asserted(&mut s);
    let probes = |s: &Stepper<SimHca>| {
        s.hw_steps()
            .iter()
            .filter(|h| **h == HwStep::ProbeReady)
            .count()
    };
    // A soft reset and an FLR, each bounded at 45 ms and looked at 1.25, 2.5, 5, 10, 20, 30
    // and 40 ms after its assert: seven probes each. At 90 ms the FLR's bound runs out.
    s.advance(90);
    assert_eq!(s.c().state(), State::Resetting, "still waited for");
    assert!(s.c().last_reset().is_some_and(|r| r.flr_used));
    assert_eq!(probes(&s), 14, "no probe as the long wait begins");
    let (due, _) = s.timers().armed(TimerId::HwPoll).expect("a probe armed");
    assert_eq!(due.saturating_since(t0), Duration::from_ms(1_090));
    s.advance(999);
    assert_eq!(probes(&s), 14, "none inside the second");
    s.advance(1);
    assert_eq!(probes(&s), 15, "one a second later");
}

/// The history keeps the newest 16 summaries, oldest first, whatever how many concluded:
/// the ring's index wraps at its length.
#[test]
fn the_reset_history_keeps_the_newest_sixteen_in_order_after_wrapping() {
    let mut s = stepper(device(1));
    let id = one_client(&mut s);
    for _ in 0..40 {
        force_executed(&mut s, id);
        s.advance(50);
        assert_eq!(s.c().state(), State::Operational);
    }
    let h = s.c().history();
    assert_eq!(h.written(), 40);
    let ordinals: Vec<u64> = h.iter().map(|r| r.ordinal).collect();
    assert_eq!(ordinals, (25..=40).collect::<Vec<_>>());
    assert_eq!(h.newest().map(|r| r.ordinal), Some(40));
}

/// A completion of a step the reset is not waiting for (a host's stray, or a late one from
/// an attempt given up) is recorded and ignored: the reset stays where it was.
#[test]
fn a_completion_of_a_step_not_awaited_is_ignored() {
    use hcabus::hca::{HwCompletion, HwResult};
    let mut s = silent_device(40);
    asserted(&mut s);
    let steps = s.hw_steps().len();
    let armed = *s.timers();
    assert!(
        armed.armed(TimerId::HwReadyTimeout).is_some(),
        "waiting for the device"
    );
    assert_eq!(s.c().stage_name(), "Resetting: probe_ready");
    s.call(|c, now| {
        c.hw_complete(
            now,
            HwCompletion {
                step: HwStep::RestoreConfig,
                result: HwResult::Done,
            },
        )
    });
    s.pump();
    assert_eq!(
        *s.timers(),
        armed,
        "still waiting for the device, on the same deadlines"
    );
    assert_eq!(s.hw_steps().len(), steps, "no step issued");
    assert_eq!(s.c().stage_name(), "Resetting: probe_ready");
}
