//! docs/design.md §6 with the access layer and every client under load: from the first RESET to the
//! end of the run (re-creation, re-login, re-issue and steady traffic after it included)
//! nothing allocates, on one adapter and with a multipath boot disk on two. It runs as its
//! own `main` (no libtest harness) so that no other thread's allocations are counted.

use std::alloc::System;

use hcabus::Instant;
use hcabus_lab::stack;
use hcabus_lab::stack::Node;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

fn in_flight(host: &Node) -> u64 {
    hcabus_lab::stack::disks(host)
        .map(|d| u64::from(d.disk().in_flight()))
        .sum()
}

fn ibal_and_every_client_under_load_allocate_nothing_from_reset_on() {
    let setup = stack::boot_from_san();
    let mut host = stack::build(&setup).expect("stack");
    host.set_alloc_probe(allocations);
    // Just before the health poll that finds the catastrophic error of 1.4 s.
    host.run_until(Instant::from_ms(1_999));
    assert!(
        in_flight(&host) >= 64,
        "both disks have their queue full on the dead device: {}",
        in_flight(&host)
    );
    assert!(!host.coordinator().reset_in_progress());
    let before = allocations();
    host.run();
    let during_and_after = allocations() - before;

    let resets = host.resets();
    assert_eq!(resets.len(), 1);
    assert_eq!(resets[0].outcome(), "Restored");
    assert_eq!(resets[0].allocations, Some(0), "RESET to last RESET_END");
    assert_eq!(
        during_and_after, 0,
        "RESET through re-login, re-issue and 3 s of traffic after it"
    );
    assert_eq!(host.stats().dispatch_allocations, 0);
    assert_eq!(host.checker().violations, Vec::<String>::new());
    let io = stack::io_stats(&host);
    assert_eq!((io.lost, io.duplicated, io.failed), (0, 0, 0), "{io:?}");
}

/// The same with two adapters and the boot disk on a path through each, from before the
/// catastrophic error at 1.4 s: fast path failover giving the stuck commands up (the ABORT
/// TASKs, the write fence, the probes and their backoff), the path asking for its adapter's
/// reset, the seconds of one path carrying everything, the ports coming back and both paths
/// in use again. Under the adaptive timeout (the default) everything stuck is given up
/// before the RESET; under a fixed 100 ms one the RESET takes the younger commands back and
/// gives them to the other adapter's path: both are measured.
fn multipath_failover_allocates_nothing_from_reset_on() {
    let fixed = |mut setup: stack::MultiSetup| {
        let mode = ibal::disk::PathTimeout::Fixed(hcabus::Duration::from_ms(100));
        for d in &mut setup.disks {
            d.config.path_timeout = mode;
        }
        for a in &mut setup.adapters {
            // A transport that completes every send within 67 ms: a send out 100 ms is
            // the dead adapter's stall, and the path asks for its reset before the abort
            // timeout drops its connection, so the RESET has commands to move.
            a.stack.sim.hca.transport = hcabus::verbs::RcTransport {
                local_ack_timeout: 9,
                retry_count: 7,
            };
            for c in &mut a.stack.clients {
                if let stack::ClientSpec::DiskPath { config, .. } = c {
                    config.initiator.path_timeout = mode;
                }
            }
        }
        setup
    };
    let adaptive = stack::boot_from_san_multipath();
    let stats = failover_allocates_nothing(&adaptive);
    assert_eq!(stats.slow_failovers, 1, "{stats:?}");
    assert!(
        stats.given_up >= 5,
        "every stuck command given up: {stats:?}"
    );
    let stats = failover_allocates_nothing(&fixed(adaptive));
    assert_eq!(
        (stats.slow_failovers, stats.failovers),
        (1, 1),
        "it gave commands up, then failed over at RESET: {stats:?}"
    );
}

/// Runs `setup` from just before its fault with the allocation probe on; path 0's figures.
fn failover_allocates_nothing(setup: &stack::MultiSetup) -> ibal::multipath::PathStats {
    let mut world = stack::build_multi(setup).expect("host");
    world.set_alloc_probe(allocations);
    world.run_until(Instant::from_ms(1_399));
    assert!(!world.reset_in_progress());
    let before = allocations();
    world.run();
    let during_and_after = allocations() - before;

    let resets = world.resets();
    assert_eq!(resets.len(), 1);
    assert_eq!(resets[0].outcome(), "Restored");
    assert_eq!(resets[0].allocations, Some(0), "RESET to last RESET_END");
    assert_eq!(
        during_and_after, 0,
        "fast failover, RESET, failover, re-login, the ports and both paths after it"
    );
    let (_, violated) = world.invariants();
    assert!(violated.is_empty(), "{violated:?}");
    let io = stack::io_stats_all(&world);
    assert_eq!((io.lost, io.duplicated, io.failed), (0, 0, 0), "{io:?}");
    let disks = stack::multipath_disks(&world);
    let stats = disks[0].0.lock().path_stats(0).expect("path 0");
    stats
}

/// The suite's entry point (`harness = false`, see tests/Cargo.toml): a failed check panics,
/// which fails `cargo test`; the closing line is in libtest's form so totals count it.
fn main() {
    ibal_and_every_client_under_load_allocate_nothing_from_reset_on();
    println!("test ibal_and_every_client_under_load_allocate_nothing_from_reset_on ... ok");
    multipath_failover_allocates_nothing_from_reset_on();
    println!("test multipath_failover_allocates_nothing_from_reset_on ... ok");
    println!("test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}
