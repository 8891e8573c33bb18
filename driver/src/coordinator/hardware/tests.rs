//! The wait for the device after an assert (docs/design.md §5 "Hardware reset": a bounded poll): when
//! the coordinator looks, and that a device back at once is found at once.

use std::vec::Vec;

use crate::coordinator::{AdminReset, Config, TimerId};
use crate::hca::{Hca, HealthSample, HwError, Identity, Readiness};
use crate::policy::Policy;
use crate::sim::hca::{SimHca, SimHcaConfig};
use crate::sim::stepper::{SimDevice, Stepper};
use crate::time::{Duration, Instant};
use crate::types::*;

/// A SimHca that names a settle time after each assert, as the register-level ConnectX
/// reset does.
struct Settling {
    hca: SimHca,
    settle: Duration,
}

impl Hca for Settling {
    fn save_config(&mut self) -> Result<(), HwError> {
        self.hca.save_config()
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
    let d = ClientDesc::new("c", ClientKind::Custom, ClientFlags::empty()).expect("name fits");
    let id = s.call(|c, now| c.register(now, d)).expect("register").id;
    s.pump();
    let epoch = s
        .call(|c, now| c.admin_reset(now, AdminReset::Forced))
        .expect("reset");
    s.pump();
    s.call(|c, now| c.reset_execute(now, id, epoch))
        .expect("execute");
    s.pump();
    assert_eq!(
        s.c().state(),
        State::Resetting,
        "asserted, waiting for the device"
    );
    s.now()
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
    let config = Config {
        max_clients: 4,
        recorder_capacity: 256,
        policy: Policy::default(),
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
    let policy = Policy {
        hw_ready_timeout_ms: 40,
        reset_retries: 0,
        ..Policy::default()
    };
    let config = Config {
        max_clients: 4,
        recorder_capacity: 256,
        policy,
    };
    let mut hca = device(1);
    hca.never_return();
    let mut s = Stepper::new(config, hca).expect("valid policy");
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
