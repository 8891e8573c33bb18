//! docs/design.md §6 on the virtual-time host: from the first RESET to the last RESET_END nothing
//! allocates, the host's own work (deliveries, callbacks, invariant checks, hardware steps,
//! timers) included. It runs as its own `main` (no libtest harness) so that no other
//! thread's allocations are counted.

use std::alloc::System;

use hcabus::types::*;
use hcabus::{Duration, Instant, Policy};
use hcabus_sim::{Behavior, Fault, SimHcaConfig, SimHost, SimSetup};
use hcabus_tests::{acks_after, desc};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

fn no_allocation_from_first_reset_to_last_reset_end() {
    let kinds = ClientKind::ALL;
    let mut clients = Vec::new();
    for i in 0..20u64 {
        let behavior = match i {
            // Every way of leaving the barrier: inline, delayed, unregister, re-register,
            // and one client forced through its deadline.
            0..=7 => acks_after(0),
            8..=15 => acks_after(1 + i),
            16 => Behavior {
                unregister_on_reset: true,
                ..Behavior::default()
            },
            17 => Behavior {
                reregister_on_reset: true,
                ..Behavior::default()
            },
            18 => Behavior {
                never_ack: true,
                ..Behavior::default()
            },
            _ => acks_after(0),
        };
        let kind = kinds[(i as usize) % kinds.len()];
        clients.push((
            desc(&format!("client{i:02}"), kind, ClientFlags::empty()),
            behavior,
        ));
    }
    let setup = SimSetup {
        name: "no-alloc".into(),
        duration: Duration::from_ms(30_000),
        policy: Policy {
            quiesce_deadline_ms: 500,
            // Four resets in 20 s must not be a storm here.
            storm_window_ms: 5_000,
            ..Policy::default()
        },
        clients,
        faults: vec![
            (Instant::from_ms(2_500), Fault::Catastrophic),
            (Instant::from_ms(8_000), Fault::ResetFails(2)),
            (Instant::from_ms(8_000), Fault::AdminReset),
            (Instant::from_ms(14_000), Fault::FwActivate),
            (Instant::from_ms(20_000), Fault::CommandTimeout),
        ],
        ..SimSetup::default()
    };
    let mut host = SimHost::new(&setup).expect("setup");
    host.set_alloc_probe(allocations);
    // Warm up: health polls, timers, the first deliveries of the run.
    host.run_until(Instant::from_ms(2_000));
    host.run();

    assert_eq!(host.checker().violations, Vec::<String>::new());
    let resets = host.resets();
    assert_eq!(resets.len(), 4, "{resets:#?}");
    for r in &resets {
        assert!(
            r.outcome() == "Restored" || r.outcome() == "FirmwareChanged",
            "{r:#?}"
        );
        assert_eq!(
            r.allocations,
            Some(0),
            "allocations during reset of {}: {r:#?}",
            r.epoch
        );
        assert_eq!(r.pnp_operations, 0);
    }
    assert!(resets.iter().any(|r| r.forced_clients == ["client18"]));
    assert!(
        resets.iter().any(|r| r.soft_attempts == 3),
        "the retry path was measured"
    );
    // The probe is live: the run as a whole did allocate (reports, setup), so zero above is
    // a measurement, not a dead counter.
    assert!(allocations() > 0);
}

/// Ports too (issue 14): a cable pull, then a reset on a fabric that takes time to come back,
/// with every PORT_DOWN and PORT_ACTIVE delivered. Measured over the whole stretch, not only
/// the reset windows: nothing from the first fault to the last PORT_ACTIVE allocates.
fn no_allocation_through_port_changes() {
    let clients = (0..8u64)
        .map(|i| {
            let name = format!("client{i}");
            (
                desc(&name, ClientKind::Custom, ClientFlags::empty()),
                acks_after(i),
            )
        })
        .collect();
    let setup = SimSetup {
        name: "no-alloc-ports".into(),
        duration: Duration::from_ms(20_000),
        hca: SimHcaConfig {
            link_up: Duration::from_ms(300),
            sm_sweep: Duration::from_ms(700),
            ..SimHcaConfig::default()
        },
        clients,
        faults: vec![
            (
                Instant::from_ms(3_000),
                Fault::PortDown {
                    port: 2,
                    duration: Duration::from_ms(500),
                },
            ),
            (Instant::from_ms(6_000), Fault::Catastrophic),
            (
                Instant::from_ms(12_000),
                Fault::PortDown {
                    port: 1,
                    duration: Duration::from_ms(100),
                },
            ),
        ],
        ..SimSetup::default()
    };
    let mut host = SimHost::new(&setup).expect("setup");
    host.run_until(Instant::from_ms(2_000));
    let before = allocations();
    host.run_until(Instant::from_ms(15_000));
    let during = allocations() - before;
    host.run();
    assert_eq!(host.checker().violations, Vec::<String>::new());
    let resets = host.resets();
    assert_eq!(resets.len(), 1, "{resets:#?}");
    assert_eq!(resets[0].outcome(), "Restored");
    let ports = |name: &str| {
        host.agents()
            .iter()
            .find(|a| a.name() == name)
            .expect("agent")
            .events()
            .iter()
            .filter(|e| e.is_port())
            .count()
    };
    // Port 2 down and back, both ports back after the reset, port 1 down and back.
    assert_eq!(ports("client0"), 6);
    assert_eq!(
        during, 0,
        "allocations from the first fault to the last PORT_ACTIVE"
    );
}

/// A reset that fails (every assertion refused) freezes the diagnostic bundle on the way to
/// Failed (issue 65): in the room reserved at start, so the failed reset allocates nothing
/// either, and the bundle is there after.
fn no_allocation_on_the_way_to_failed() {
    let clients = (0..4u64)
        .map(|i| {
            let kind = ClientKind::ALL[(i as usize) % ClientKind::ALL.len()];
            (
                desc(&format!("client{i}"), kind, ClientFlags::empty()),
                acks_after(i),
            )
        })
        .collect();
    let setup = SimSetup {
        name: "no-alloc-failed".into(),
        duration: Duration::from_ms(10_000),
        clients,
        faults: vec![
            (Instant::from_ms(2_500), Fault::ResetFails(4)),
            (Instant::from_ms(2_500), Fault::AdminReset),
        ],
        ..SimSetup::default()
    };
    let mut host = SimHost::new(&setup).expect("setup");
    host.set_alloc_probe(allocations);
    host.run_until(Instant::from_ms(2_000));
    assert!(host.coordinator().kept_bundle().is_none());
    host.run();
    let resets = host.resets();
    assert_eq!(resets.len(), 1, "{resets:#?}");
    assert_eq!(resets[0].outcome(), "HardwareDead", "{resets:#?}");
    assert_eq!(resets[0].allocations, Some(0), "{resets:#?}");
    assert_eq!(host.coordinator().state(), State::Failed);
    let kept = host.coordinator().kept_bundle().expect("a bundle kept");
    let bundle = hcabus::coordinator::bundle::read_bundle(kept).expect("reads back");
    assert_eq!(bundle.state(), Some(State::Failed));
}

/// The suite's entry point (`harness = false`, see tests/Cargo.toml): a failed check panics,
/// which fails `cargo test`; the closing line is in libtest's form so totals count it.
fn main() {
    no_allocation_from_first_reset_to_last_reset_end();
    println!("test no_allocation_from_first_reset_to_last_reset_end ... ok");
    no_allocation_through_port_changes();
    println!("test no_allocation_through_port_changes ... ok");
    no_allocation_on_the_way_to_failed();
    println!("test no_allocation_on_the_way_to_failed ... ok");
    println!("test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}
