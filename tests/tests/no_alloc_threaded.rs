//! docs/design.md §6 on the threaded host: at least 16 clients, executes from callbacks and from other
//! threads, timers on their own thread; zero allocations from the first RESET to the last
//! RESET_END, every thread counted. It runs as its own `main` (no libtest harness) so nothing else is counted.

use std::alloc::System;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use hcabus::coordinator::Config;
use hcabus::host::{ClientView, EventCallback, StdPlatform, ThreadedBus, ThreadedHost};
use hcabus::types::*;
use hcabus::types::{AdminReset, State};
use hcabus::{Duration, Policy};
use hcabus_sim::{SharedSimHca, SimHca, SimHcaConfig};
use hcabus_tests::{desc, wait_for};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

const CLIENTS: u32 = 18;
const REMOTE: u32 = 4;

static FIRST_RESET_ALLOCS: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_END_ALLOCS: AtomicU64 = AtomicU64::new(0);
static ENDS: AtomicU32 = AtomicU32::new(0);

struct Probe {
    /// Execute from another thread instead of inside the callback.
    remote: bool,
    pending: AtomicU64,
}

impl EventCallback for Probe {
    fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        match event {
            Event::Reset { epoch, .. } => {
                let _ = FIRST_RESET_ALLOCS.compare_exchange(
                    u64::MAX,
                    allocations(),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                if self.remote {
                    self.pending.store(epoch.0, Ordering::SeqCst);
                } else {
                    bus.reset_execute(id, epoch).expect("execute");
                }
            }
            Event::ResetEnd { .. } if ENDS.fetch_add(1, Ordering::SeqCst) + 1 == CLIENTS => {
                LAST_END_ALLOCS.store(allocations(), Ordering::SeqCst);
            }
            _ => {}
        }
    }
}

/// Registers the probes; the remote ones execute from worker threads, returned running.
fn register_probes(
    bus: &Arc<ThreadedBus>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    let mut remotes = Vec::new();
    for i in 0..CLIENTS {
        let probe = Arc::new(Probe {
            remote: i < REMOTE,
            pending: AtomicU64::new(0),
        });
        let id = bus
            .register(
                desc(
                    &format!("p{i:02}"),
                    ClientKind::Custom,
                    ClientFlags::empty(),
                ),
                probe.clone(),
            )
            .expect("register")
            .id;
        if probe.remote {
            remotes.push((id, probe));
        }
    }
    // Worker threads that execute for the remote clients, spawned before any measurement.
    remotes
        .into_iter()
        .map(|(id, probe)| {
            let (bus, stop) = (Arc::clone(bus), Arc::clone(stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let e = probe.pending.swap(0, Ordering::SeqCst);
                    if e != 0 {
                        bus.reset_execute(id, Epoch(e)).expect("remote execute");
                    }
                    std::thread::yield_now();
                }
            })
        })
        .collect()
}

fn no_allocation_from_first_reset_to_last_reset_end_on_real_threads() {
    let hca = SharedSimHca::new(SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(20),
        ..SimHcaConfig::default()
    }));
    let host = ThreadedHost::start(
        Config {
            max_clients: 32,
            recorder_capacity: 4096,
            policy: Policy {
                hw_poll_interval_ms: 1,
                health_poll_interval_ms: 5,
                ..Policy::default()
            },
        },
        hca,
    )
    .expect("start");
    let bus = host.bus().clone();
    let stop = Arc::new(AtomicBool::new(false));
    let workers = register_probes(&bus, &stop);

    // Warm-up reset: every path runs once before the measured one.
    bus.admin_reset(AdminReset::Forced).expect("warm-up");
    wait_for("warm-up", || ENDS.load(Ordering::SeqCst) == CLIENTS);
    wait_for("operational", || bus.state() == State::Operational);
    ENDS.store(0, Ordering::SeqCst);
    FIRST_RESET_ALLOCS.store(u64::MAX, Ordering::SeqCst);

    let before = allocations();
    bus.admin_reset(AdminReset::Forced).expect("measured reset");
    wait_for("measured reset", || ENDS.load(Ordering::SeqCst) == CLIENTS);
    let after = allocations();

    let first = FIRST_RESET_ALLOCS.load(Ordering::SeqCst);
    let last = LAST_END_ALLOCS.load(Ordering::SeqCst);
    assert_ne!(first, u64::MAX, "RESET was observed");
    assert_eq!(
        last - first,
        0,
        "allocations from first RESET to last RESET_END"
    );
    assert_eq!(
        after - before,
        0,
        "allocations from the request to the last RESET_END"
    );
    assert_eq!(bus.epoch(), Epoch(3));
    assert_eq!(bus.pnp_operations(), 0);

    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().expect("worker");
    }
    // The counter is live: tearing down and this formatting allocate.
    let _ = format!("{:?}", bus.state());
    assert!(allocations() > after);
}

/// The suite's entry point (`harness = false`, see tests/Cargo.toml): a failed check panics,
/// which fails `cargo test`; the closing line is in libtest's form so totals count it.
fn main() {
    no_allocation_from_first_reset_to_last_reset_end_on_real_threads();
    println!("test no_allocation_from_first_reset_to_last_reset_end_on_real_threads ... ok");
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}
