//! The verifier: a callback that allocates or blocks at DISPATCH_LEVEL is caught and named.
//! One test in this binary: the allocation probe is global.

use std::alloc::System;
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use hcabus::bus::{BusHandle, Client, ClientReport};
use hcabus::coordinator::Config;
use hcabus::host::irql::{self, BlockAtDispatch, Irql};
use hcabus::host::{ClientView, EventCallback, StdPlatform, ThreadedBus, ThreadedHost};
use hcabus::types::AdminReset;
use hcabus::types::*;
use hcabus::{Duration, Instant, Policy};
use hcabus_sim::{Agent, Behavior, Fault, SharedSimHca, SimHca, SimHcaConfig, SimHost, SimSetup};
use hcabus_tests::desc;
use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn allocations() -> u64 {
    let s = GLOBAL.stats();
    (s.allocations + s.reallocations) as u64
}

/// Allocates in its RESET callback, as a careless client would (a Vec per event).
#[derive(Debug)]
struct Careless {
    id: Option<ClientId>,
    events: Vec<EventKind>,
    irql_in_callback: Vec<Irql>,
}

impl<B: BusHandle + ?Sized> Client<B> for Careless {
    fn start(&mut self, bus: &mut B) {
        let d = desc("careless", ClientKind::Custom, ClientFlags::empty());
        self.id = Some(bus.register(d).expect("register").id);
    }

    fn on_event(&mut self, bus: &mut B, id: ClientId, event: Event) {
        self.events.push(event.kind());
        self.irql_in_callback.push(irql::current());
        if let Event::Reset { epoch, .. } = event {
            let scratch: Vec<u64> = (0..64).collect();
            std::hint::black_box(&scratch);
            bus.reset_execute(id, epoch).expect("execute");
        }
    }
}

impl ClientReport for Careless {
    fn name(&self) -> &str {
        "careless"
    }

    fn events(&self) -> &[EventKind] {
        &self.events
    }

    fn id(&self) -> Option<ClientId> {
        self.id
    }
}

/// A child that kept the host's bus (a callback is given only the client's view of it) and
/// blocks on it from its callback.
struct Impatient {
    host_bus: std::sync::Weak<ThreadedBus>,
    result: Mutex<Option<Result<bool, BlockAtDispatch>>>,
}

impl EventCallback for Impatient {
    fn on_event(&self, bus: ClientView<'_, StdPlatform>, id: ClientId, event: Event) {
        if let Event::Reset { epoch, .. } = event {
            // Waiting for the reset from inside its own callback would deadlock a kernel.
            let host_bus = self.host_bus.upgrade().expect("the host runs");
            let r = host_bus.wait_idle(StdDuration::from_secs(5));
            *self.result.lock().expect("result") = Some(r);
            bus.reset_execute(id, epoch).expect("execute");
        }
    }
}

#[test]
fn verifier_catches_allocation_and_blocking_at_dispatch_level() {
    // Virtual-time host: the careless client is named; a well-behaved one is not.
    let setup = SimSetup {
        name: "verifier".into(),
        duration: Duration::from_ms(3_000),
        clients: vec![(
            desc("tidy", ClientKind::Custom, ClientFlags::empty()),
            Behavior::default(),
        )],
        faults: vec![(Instant::from_ms(500), Fault::AdminReset)],
        ..SimSetup::default()
    };
    let careless = Careless {
        id: None,
        events: Vec::with_capacity(8),
        irql_in_callback: Vec::with_capacity(8),
    };
    let mut agents: Vec<Box<dyn Agent>> = vec![Box::new(careless)];
    agents.extend(
        setup
            .clients
            .iter()
            .map(|(d, b)| Box::new(hcabus_sim::ScriptedAgent::new(*d, *b)) as Box<dyn Agent>),
    );
    let mut host = SimHost::with_agents(&setup, agents).expect("setup");
    host.set_alloc_probe(allocations);
    host.run();
    let v = &host.checker().violations;
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].starts_with("careless allocated"), "{v:?}");
    assert!(v[0].contains("RESET callback"), "{v:?}");
    assert!(host.stats().dispatch_allocations > 0);
    assert_eq!(
        host.agents()[0].events(),
        [EventKind::Reset, EventKind::ResetEnd]
    );
    assert_eq!(
        irql::current(),
        Irql::Passive,
        "lowered after the callbacks"
    );

    // Threaded host: a blocking wait from a callback is refused, not deadlocked.
    let hca = SharedSimHca::new(SimHca::new(SimHcaConfig {
        hw_reset: Duration::from_ms(5),
        ..SimHcaConfig::default()
    }));
    let host = ThreadedHost::start(
        Config {
            policy: Policy {
                hw_poll_interval_ms: 1,
                ..Policy::default()
            },
            ..Config::default()
        },
        hca,
    )
    .expect("start");
    let bus = host.bus();
    let impatient = Arc::new(Impatient {
        host_bus: Arc::downgrade(bus),
        result: Mutex::new(None),
    });
    bus.register(
        desc("impatient", ClientKind::Custom, ClientFlags::empty()),
        impatient.clone(),
    )
    .expect("register");
    let blocked_before = irql::block_violations();
    bus.admin_reset(AdminReset::Forced).expect("reset");
    assert_eq!(
        bus.wait_idle(StdDuration::from_secs(20)),
        Ok(true),
        "from PASSIVE it waits"
    );
    assert_eq!(bus.epoch(), Epoch(2));
    let r = impatient.result.lock().expect("result").take();
    assert_eq!(
        r,
        Some(Err(BlockAtDispatch {
            what: "ThreadedBus::wait_idle"
        }))
    );
    assert_eq!(irql::block_violations(), blocked_before + 1);
}
