//! The access layer and its clients on the threaded host, the model of the KMDF glue: IBAL,
//! IPoIB on both ports, the boot disk, a data LUN and a user-verbs process (the stack of the
//! default run) under load on real threads, through a catastrophic firmware error. Nothing
//! is lost, duplicated or corrupted, and nothing allocates from the first RESET to the last
//! RESET_END, every thread counted. It runs as its own `main` (no libtest harness) so that
//! the only threads are the host's, the clients' workers and this one.
//!
//! Nothing here asserts how fast anything happens: every wait is for a condition, with a
//! deadline only to turn a hang into a failure.

use std::alloc::System;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use hcabus::bus::ClientReport;
use hcabus::coordinator::Config;
use hcabus::host::{ClientView, EventCallback, StdPlatform, ThreadedBus, ThreadedHost};
use hcabus::types::State;
use hcabus::types::*;
use hcabus::{Duration, Instant, Policy};
use hcabus_lab::stack::{self, ClientSpec};
use hcabus_sim::{Hosted, SharedSimHca, SimHca, SimHcaConfig, Wake, Workers};
use hcabus_tests::{desc, wait_for};
use ibal::disk::SrpClient;
use ibal::io::IoStats;
use ibal::ipoib::IpoibClient;
use ibal::uverbs::UverbsClient;
use ibal::{Ibal, IbalClient, SharedIbal};
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

static AT_RESET: AtomicU64 = AtomicU64::new(u64::MAX);
static AT_RESET_END: AtomicU64 = AtomicU64::new(u64::MAX);
static RESET_ENDS: AtomicU32 = AtomicU32::new(0);

/// Registered last: it hears RESET first and RESET_END last (docs/design.md §4), so its two
/// readings of the allocation counter bracket every other client's.
struct Probe;

impl EventCallback for Probe {
    fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        match event {
            Event::Reset { epoch, .. } => {
                AT_RESET.store(allocations(), Ordering::SeqCst);
                let _ = bus.reset_execute(id, epoch);
            }
            Event::ResetEnd { .. } => {
                AT_RESET_END.store(allocations(), Ordering::SeqCst);
                RESET_ENDS.fetch_add(1, Ordering::SeqCst);
            }
            _ => {}
        }
    }
}

type Disk = Arc<Hosted<SrpClient, SharedSimHca>>;
type Net = Arc<Hosted<IpoibClient, SharedSimHca>>;

/// The clients of the default run, each on its own worker.
struct Stack {
    ibal: Arc<Hosted<IbalClient, SharedSimHca>>,
    disks: Vec<Disk>,
    nets: Vec<Net>,
    uverbs: Vec<Arc<Hosted<UverbsClient, SharedSimHca>>>,
}

impl Stack {
    fn start(bus: &ThreadedBus, hca: &SharedSimHca) -> Stack {
        let setup = stack::boot_from_san();
        let shared = SharedIbal::new(Ibal::new(setup.ibal.expect("the default has IBAL")));
        // Registered first, as on every host: RESET last, RESET_END first.
        let ibal = Hosted::start(bus, IbalClient::new(shared.clone()), hca.clone(), 1);
        let mut s = Stack {
            ibal,
            disks: Vec::new(),
            nets: Vec::new(),
            uverbs: Vec::new(),
        };
        for (i, spec) in setup.clients.iter().enumerate() {
            let seed = 2 + i as u64;
            match spec {
                ClientSpec::Disk { name, config } => {
                    let c =
                        hcabus_lab::stack::disk(name, config, shared.clone(), &[], Instant::ZERO)
                            .expect("name fits");
                    s.disks.push(Hosted::start(bus, c, hca.clone(), seed));
                }
                ClientSpec::Ipoib { name, config } => {
                    let c = hcabus_lab::stack::ipoib(name, config, shared.clone(), Instant::ZERO)
                        .expect("name fits");
                    s.nets.push(Hosted::start(bus, c, hca.clone(), seed));
                }
                ClientSpec::Uverbs { name, config } => {
                    let c = hcabus_lab::stack::uverbs(name, config, shared.clone(), Instant::ZERO)
                        .expect("name fits");
                    s.uverbs.push(Hosted::start(bus, c, hca.clone(), seed));
                }
                // The default's clients are the three above; a client of another kind
                // there would need its threaded form here.
                other => panic!(
                    "the default has a client {} of no threaded form",
                    other.name()
                ),
            }
        }
        s
    }

    fn wakeables(&self) -> Vec<Arc<dyn Wake>> {
        let mut all: Vec<Arc<dyn Wake>> = vec![self.ibal.clone()];
        all.extend(self.disks.iter().map(|d| d.clone() as Arc<dyn Wake>));
        all.extend(self.nets.iter().map(|n| n.clone() as Arc<dyn Wake>));
        all.extend(self.uverbs.iter().map(|u| u.clone() as Arc<dyn Wake>));
        all
    }

    /// Commands the disks have completed upward; reads counters only (no allocation).
    fn commands_sent(&self) -> u64 {
        self.disks
            .iter()
            .map(|d| d.inspect(|c| c.disk().stats().commands_sent))
            .sum()
    }

    fn io(&self) -> IoStats {
        let mut total = IoStats::default();
        for d in &self.disks {
            total.add(&d.inspect(SrpClient::io_stats));
        }
        total
    }

    fn events(&self) -> Vec<(String, Vec<EventKind>)> {
        let mut all = vec![self.ibal.inspect(named)];
        all.extend(self.disks.iter().map(|d| d.inspect(named)));
        all.extend(self.nets.iter().map(|n| n.inspect(named)));
        all.extend(self.uverbs.iter().map(|u| u.inspect(named)));
        all
    }
}

fn named(c: &impl ClientReport) -> (String, Vec<EventKind>) {
    (c.name().to_string(), c.events().to_vec())
}

/// The threaded host on `hca`, polling fast: it runs in real time.
fn start_host(hca: &SharedSimHca) -> ThreadedHost {
    ThreadedHost::start(
        Config {
            max_clients: 64,
            recorder_capacity: 8192,
            policy: Policy {
                hw_poll_interval_ms: 1,
                health_poll_interval_ms: 20,
                ..Policy::default()
            },
        },
        hca.clone(),
    )
    .expect("start")
}

/// Every disk took its commands back and logged in again; every interface went down once,
/// dropped nothing and came back up.
fn every_client_came_back(stack: &Stack) {
    for d in &stack.disks {
        let (name, taken_back, in_flight_at_reset, logins) = d.inspect(|c| {
            let s = c.disk().stats();
            (
                c.name().to_string(),
                s.taken_back,
                s.max_in_flight_at_reset,
                s.logins,
            )
        });
        assert_eq!(
            taken_back, in_flight_at_reset,
            "{name}: every command taken back"
        );
        assert_eq!(logins, 2, "{name}: logged in again after the reset");
    }
    for n in &stack.nets {
        let (name, s) = n.inspect(|c| (c.name().to_string(), *c.stats()));
        assert_eq!((s.link_downs, s.dropped), (1, 0), "{name}: {s:?}");
        assert!(s.link_ups >= 2, "{name} came back up: {s:?}");
    }
}

fn ibal_ipoib_and_the_boot_disk_ride_through_a_catastrophic_error_on_real_threads() {
    // The default's adapter with a quick device and fabric: this host runs in real time.
    let config = SimHcaConfig {
        hw_reset: Duration::from_ms(200),
        link_up: Duration::ZERO,
        sm_sweep: Duration::ZERO,
        ..stack::boot_from_san().sim.hca
    };
    let hca = SharedSimHca::new(SimHca::new(config));
    let host = start_host(&hca);
    let bus = host.bus().clone();
    let stack = Stack::start(&bus, &hca);
    bus.register(
        desc("probe", ClientKind::Custom, ClientFlags::empty()),
        Arc::new(Probe),
    )
    .expect("probe");
    let workers = Workers::spawn(&bus, stack.wakeables()).expect("workers");

    wait_for("both disks up", || {
        stack.disks.iter().all(|d| d.inspect(|c| c.disk().is_up()))
    });
    wait_for("I/O under way", || stack.commands_sent() >= 2_000);
    let before = stack.io();
    assert_eq!(before.failed, 0, "{before:?}");

    // From here to the probe's RESET_END this thread only reads atomics and sleeps.
    hca.with(|h| h.inject_catastrophic(0x0bad_0001));
    wait_for("the reset to end", || {
        RESET_ENDS.load(Ordering::SeqCst) == 1
    });
    let (first, last) = (
        AT_RESET.load(Ordering::SeqCst),
        AT_RESET_END.load(Ordering::SeqCst),
    );
    assert_eq!(
        last - first,
        0,
        "allocations from the first RESET to the last RESET_END"
    );
    wait_for("operational", || bus.state() == State::Operational);
    let resumed_from = stack.commands_sent();
    wait_for("I/O after the reset", || {
        stack.commands_sent() >= resumed_from + 2_000
    });
    drop(workers);

    assert_eq!(bus.epoch(), Epoch(2), "one reset");
    assert_eq!(bus.pnp_operations(), 0);
    assert_eq!(bus.callback_panics(), 0);
    for (name, events) in stack.events() {
        assert_eq!(
            events,
            [EventKind::Reset, EventKind::ResetEnd],
            "{name} rode through one reset"
        );
    }
    let io = stack.io();
    assert_eq!(io.unaccounted(), 0, "the accounting closes: {io:?}");
    assert_eq!((io.lost, io.duplicated, io.failed), (0, 0, 0), "{io:?}");
    assert_eq!(io.read_mismatches, 0, "{io:?}");
    assert!(io.reads_verified > before.reads_verified, "{io:?}");
    every_client_came_back(&stack);
    // The counter is live: the report above allocated.
    assert!(allocations() > last);
}

/// The suite's entry point (`harness = false`, see tests/Cargo.toml): a failed check panics,
/// which fails `cargo test`; the closing line is in libtest's form so totals count it.
fn main() {
    ibal_ipoib_and_the_boot_disk_ride_through_a_catastrophic_error_on_real_threads();
    println!(
        "test ibal_ipoib_and_the_boot_disk_ride_through_a_catastrophic_error_on_real_threads ... ok"
    );
    println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
}
