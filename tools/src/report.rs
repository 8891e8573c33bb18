//! The JSON report of SPEC §9. Field names and their order are a contract with outside
//! tools: keep them exactly.

use hcabus::sim::{ResetReport, SimHost};
use ibal::stack;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Report {
    pub scenario: String,
    pub seed: u64,
    pub final_state: String,
    pub epoch: u64,
    pub resets: Vec<ResetReport>,
    pub clients: Vec<ClientJson>,
    pub io: IoJson,
    pub net: NetJson,
    pub invariants: InvariantsJson,
}

#[derive(Debug, Serialize)]
pub struct ClientJson {
    pub name: String,
    pub kind: String,
    pub events: Vec<String>,
    pub state: String,
    /// Why the client is not doing its job (could not start, gave up a login); else null.
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct IoJson {
    pub submitted: u64,
    pub completed: u64,
    pub failed: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub max_latency_us: u64,
    pub in_flight: u64,
    pub paging_failed: u64,
    /// SRP logins that succeeded, over every disk.
    pub logins: u64,
    /// Login attempts refused (target busy, device not ready), each retried after a backoff.
    pub logins_refused: u64,
}

#[derive(Debug, Serialize)]
pub struct NetJson {
    pub sent: u64,
    pub completed_back: u64,
    pub dropped: u64,
}

#[derive(Debug, Serialize)]
pub struct InvariantsJson {
    pub checked: u64,
    pub violated: Vec<String>,
}

/// The report of a finished run.
pub fn build(host: &SimHost) -> Report {
    let coord = host.coordinator();
    let resets = host.resets();
    let clients = host
        .agents()
        .iter()
        .map(|a| {
            let info = a.id().and_then(|id| coord.client(id).ok());
            ClientJson {
                name: a.name().into(),
                kind: a.kind().as_str().into(),
                events: a.events().iter().map(|e| e.as_str().into()).collect(),
                state: info.map_or("unregistered", |c| c.state.as_str()).into(),
                error: a.error(),
            }
        })
        .collect();
    let io = stack::io_stats(host);
    let (logins, logins_refused) = host
        .agents_of::<ibal::disk::SrpClient>()
        .map(|d| d.disk().stats())
        .fold((0, 0), |(l, r), s| {
            (l + u64::from(s.logins), r + u64::from(s.login_retries))
        });
    let net = stack::net_stats(host);
    let checker = host.checker();
    Report {
        scenario: host.name().into(),
        seed: host.seed(),
        final_state: coord.state().as_str().into(),
        epoch: coord.epoch().0,
        resets,
        clients,
        io: IoJson {
            submitted: io.submitted,
            completed: io.completed,
            failed: io.failed,
            lost: io.lost,
            duplicated: io.duplicated,
            max_latency_us: io.max_latency_us,
            in_flight: io.in_flight,
            paging_failed: io.paging_failed,
            logins,
            logins_refused,
        },
        net: NetJson {
            sent: net.sent,
            completed_back: net.completed_back,
            dropped: net.dropped,
        },
        invariants: InvariantsJson {
            checked: checker.checked,
            violated: checker.violations.clone(),
        },
    }
}

/// The report as pretty-printed JSON.
pub fn to_json(host: &SimHost) -> String {
    // Serializing plain structs of strings and numbers cannot fail.
    serde_json::to_string_pretty(&build(host)).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}
