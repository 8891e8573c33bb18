//! Helpers shared by the hcabus integration suites (scenarios, simulation, model checking).

use hcabus::sim::{Behavior, SimHost, SimSetup};
use hcabus::types::{ClientDesc, ClientFlags, ClientKind, EventKind};
use hcabus::Duration;

/// A client description; panics on a name that does not fit (test inputs are literals).
pub fn desc(name: &str, kind: ClientKind, flags: ClientFlags) -> ClientDesc {
    ClientDesc::new(name, kind, flags).expect("test client name fits")
}

/// A scripted client that executes `ms` after RESET (0: inside the callback).
pub fn acks_after(ms: u64) -> Behavior {
    Behavior {
        ack_delay: Duration::from_ms(ms),
        ..Behavior::default()
    }
}

/// Builds and runs a setup to its end.
pub fn run(setup: &SimSetup) -> SimHost {
    let mut host = SimHost::new(setup).expect("valid setup");
    host.run();
    host
}

/// Events received by the agent called `name`.
pub fn events_of(host: &SimHost, name: &str) -> Vec<EventKind> {
    host.agents()
        .iter()
        .find(|a| a.name() == name)
        .unwrap_or_else(|| panic!("no agent {name}"))
        .events()
        .to_vec()
}
