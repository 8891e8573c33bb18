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

/// A state's fingerprint for the model checks: every byte fed to it collected, then hashed
/// once. SipHash per small write (the `Debug` output of a coordinator arrives a few bytes at a
/// time) cost a third of a model check; one pass over the whole keeps SipHash's spread, so
/// two states are no likelier to share a fingerprint.
#[derive(Debug, Default)]
pub struct Fingerprint {
    bytes: Vec<u8>,
}

impl std::hash::Hasher for Fingerprint {
    fn write(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        h.write(&self.bytes);
        h.finish()
    }
}

/// `write!` into a fingerprint, without a `String` between.
impl std::fmt::Write for Fingerprint {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.bytes.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The moves from the start to node `at` of a breadth-first search that keeps each state as
/// its (parent, move) node: replayed to expand a state, and the counterexample's trace.
pub fn path_to<M: Copy>(nodes: &[(u32, Option<M>)], mut at: u32) -> Vec<M> {
    let mut trace = Vec::new();
    while let (parent, Some(m)) = nodes[at as usize] {
        trace.push(m);
        at = parent;
    }
    trace.reverse();
    trace
}
