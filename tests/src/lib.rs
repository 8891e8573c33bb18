//! Helpers shared by the hcabus integration suites (scenarios, simulation, model checking).

use hcabus::types::{Call, ClientDesc, ClientFlags, ClientKind, EventKind};
use hcabus::Duration;
use hcabus_sim::{Behavior, SimHost, SimSetup};

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

/// Waits on real threads until `cond` holds. The deadline only turns a hang into a failure
/// (no test asserts how fast anything happens); waiting never allocates, so the
/// allocation-counting suites may wait inside their measured windows.
pub fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cond() {
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A client's call as the model checks and the protocol table make them: the alphabet their
/// walks share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientMove {
    Register,
    Unregister,
    Request,
    Execute,
    Consent,
    Veto,
}

impl ClientMove {
    pub const ALL: [ClientMove; 6] = [
        ClientMove::Register,
        ClientMove::Unregister,
        ClientMove::Request,
        ClientMove::Execute,
        ClientMove::Consent,
        ClientMove::Veto,
    ];

    /// The call as the flight recorder names it.
    pub fn call(self) -> Call {
        match self {
            ClientMove::Register => Call::Register,
            ClientMove::Unregister => Call::Unregister,
            ClientMove::Request => Call::ResetRequest,
            ClientMove::Execute => Call::ResetExecute,
            ClientMove::Consent => Call::ResetConsent,
            ClientMove::Veto => Call::ResetVeto,
        }
    }
}
