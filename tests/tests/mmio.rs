//! The coordinator end to end on `MmioHca` and the fake register file, with the invariant
//! checker strict (the same guarantees as on SimHca): a device that behaves, one that never
//! comes back, one that comes back as another adapter, one whose catastrophic buffer is set,
//! one whose semaphore is never released. Every wait is bounded by the policy.

use std::collections::BTreeSet;

use hcabus::coordinator::*;
use hcabus::hca::{HwStep, Identity};
use hcabus::mmio::{MmioHca, FLR_SETTLE, SOFT_RESET_SETTLE};
use hcabus::types::*;
use hcabus_sim::fixtures::policy;
use hcabus_sim::{FakeConnectX, FakeFaults, Stepper};

type Rig = Stepper<MmioHca<FakeConnectX>>;

fn identity() -> Identity {
    Identity {
        node_guid: 0x0002_c903_0011_2233,
        vendor_id: 0x15B3,
        device_id: 0x1003,
        subsys_vendor_id: 0x15B3,
        subsys_id: 0x0050,
        serial: 0xA1B2_C3D4,
        fw_version: Identity::fw_version(2, 42, 5000),
    }
}

/// The bus over the fake device, with three clients registered.
fn rig(faults: FakeFaults) -> (Rig, Vec<ClientId>) {
    let config = Config {
        max_clients: 8,
        recorder_capacity: 4096,
        policy: policy(),
    };
    let hca = MmioHca::new(FakeConnectX::with_faults(identity(), faults));
    let mut s = Stepper::with_device(config, hca).expect("starts");
    s.set_strict(true);
    let mut ids = Vec::new();
    for (name, kind) in [
        ("ibal", ClientKind::Ibal),
        ("ipoib0", ClientKind::Ipoib),
        ("bootdisk", ClientKind::BootDisk),
    ] {
        let desc = ClientDesc::new(name, kind, ClientFlags::empty()).expect("fits");
        ids.push(s.call(|c, now| c.register(now, desc)).expect("register").id);
        s.pump();
    }
    (s, ids)
}

/// Runs `ms` of virtual time in 10 ms steps; every client executes each RESET it receives.
fn run(s: &mut Rig, ids: &[ClientId], ms: u64) {
    let mut executed = BTreeSet::new();
    for _ in 0..ms / 10 {
        s.advance(10);
        for &id in ids {
            let resets: Vec<Epoch> = s
                .delivered()
                .iter()
                .filter_map(|(c, e)| match e {
                    Event::Reset { epoch, .. } if *c == id => Some(*epoch),
                    _ => None,
                })
                .collect();
            for epoch in resets {
                if executed.insert((id, epoch)) {
                    let _ = s.call(|c, now| c.reset_execute(now, id, epoch));
                    s.pump();
                }
            }
        }
    }
}

/// Steps of this kind that failed, as the flight recorder has them.
fn failed(s: &Rig, step: HwStep) -> usize {
    s.c()
        .recorder()
        .iter()
        .filter(|r| {
            matches!(r.kind, hcabus::recorder::RecordKind::Hw { step: s, outcome, .. }
                if s == step && !outcome.is_ok())
        })
        .map(|r| r.count as usize)
        .sum()
}

fn kinds(s: &Rig, id: ClientId) -> Vec<EventKind> {
    s.events_of(id)
}

#[test]
fn a_forced_reset_goes_through_the_register_sequence_and_restores_the_device() {
    let (mut s, ids) = rig(FakeFaults::default());
    let e = s.call(|c, now| c.admin_reset(now, AdminReset::Forced));
    assert_eq!(e, Ok(Epoch(1)));
    s.pump();
    run(&mut s, &ids, 3_000);
    assert_eq!(s.c().state(), State::Operational);
    assert_eq!(s.c().epoch(), Epoch(2));
    for &id in &ids {
        assert_eq!(kinds(&s, id), [EventKind::Reset, EventKind::ResetEnd]);
    }
    let r = s.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Restored(ResetOutcome::Restored))
    );
    let hw = r.hw_reset().expect("hardware phase");
    assert!(
        hw >= SOFT_RESET_SETTLE,
        "the device was left alone 1 s: {hw:?}"
    );
    let fake = s.hca().regs();
    assert_eq!(
        fake.touched_while_settling, 0,
        "nothing touched it while it settled"
    );
    assert_eq!(fake.resets_asserted, 1);
    assert_eq!(
        fake.config_word(1) & 0x6,
        0x6,
        "COMMAND restored: decoding and mastering"
    );
    assert!(s.checker().violations.is_empty());
}

#[test]
fn a_device_that_never_returns_ends_failed_within_the_policy_bound() {
    let (mut s, ids) = rig(FakeFaults {
        never_returns: true,
        ..FakeFaults::default()
    });
    let _ = s.call(|c, now| c.admin_reset(now, AdminReset::Forced));
    s.pump();
    // Three soft resets and one FLR, each its settle plus the whole hw_ready_timeout.
    let p = policy();
    let attempts = u64::from(p.reset_retries) + 1;
    let bound_ms = attempts * (SOFT_RESET_SETTLE.as_ms() + p.hw_ready_timeout_ms)
        + FLR_SETTLE.as_ms()
        + p.hw_ready_timeout_ms
        + 1_000;
    run(&mut s, &ids, bound_ms);
    assert_eq!(s.c().state(), State::Failed, "failed within {bound_ms} ms");
    let r = s.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Failed(FailReason::HardwareDead))
    );
    assert!(r.flr_used);
    // The retries find the device still off the bus (all-ones) and fail at once; so does the
    // FLR, whose capability reads all-ones too.
    assert_eq!(s.hca().regs().resets_asserted, 1);
    assert_eq!(s.hca().regs().flrs, 0);
    assert_eq!(failed(&s, HwStep::AssertReset), 2);
    assert_eq!(failed(&s, HwStep::FunctionLevelReset), 1);
    for &id in &ids {
        assert_eq!(kinds(&s, id), [EventKind::Reset, EventKind::ResetFailed]);
    }
    assert_eq!(s.hca().regs().touched_while_settling, 0);
}

#[test]
fn a_device_that_comes_back_as_another_adapter_is_reported_replaced() {
    let (mut s, ids) = rig(FakeFaults {
        guid_after_reset: Some(0xBAD_0000),
        ..FakeFaults::default()
    });
    let _ = s.call(|c, now| c.admin_reset(now, AdminReset::Forced));
    s.pump();
    run(&mut s, &ids, 3_000);
    assert_eq!(s.c().state(), State::Failed);
    let r = s.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Failed(FailReason::DeviceReplaced))
    );
    assert!(!s.pnp().is_empty(), "a replaced device is re-enumerated");
}

#[test]
fn a_catastrophic_buffer_found_by_the_health_poll_resets_the_device_once() {
    let (mut s, ids) = rig(FakeFaults {
        catastrophic: 0x0301,
        ..FakeFaults::default()
    });
    run(&mut s, &ids, 5_000);
    let r = s.c().last_reset().expect("a reset");
    assert_eq!(r.reason, ResetReason::Catastrophic);
    assert_eq!(
        r.result,
        Some(ResetResult::Restored(ResetOutcome::Restored))
    );
    assert_eq!(
        s.c().epoch(),
        Epoch(2),
        "the reset cleared the error: one reset only"
    );
    assert_eq!(s.c().state(), State::Operational);
}

#[test]
fn a_semaphore_never_released_leads_to_the_function_level_reset() {
    let (mut s, ids) = rig(FakeFaults {
        semaphore_stuck: true,
        ..FakeFaults::default()
    });
    let _ = s.call(|c, now| c.admin_reset(now, AdminReset::Forced));
    s.pump();
    run(&mut s, &ids, 5_000);
    let r = s.c().last_reset().expect("record");
    assert_eq!(
        r.result,
        Some(ResetResult::Restored(ResetOutcome::Restored))
    );
    assert!(r.flr_used, "every soft reset failed on the semaphore");
    assert_eq!(s.hca().regs().resets_asserted, 0);
    assert_eq!(s.hca().regs().flrs, 1);
    assert_eq!(failed(&s, HwStep::AssertReset), 3, "each attempt recorded");
}
