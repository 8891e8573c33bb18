//! The JSON report of docs/design.md §9. Field names and their order are a contract with outside
//! tools: keep them exactly.

use hcabus_lab::stack;
use hcabus_lab::stack::{MultiNode, Node};
use hcabus_sim::ResetReport;
use serde::Serialize;

use hcactl::contract::{schema, state_word};
use ibal::disk::PathTimeout;

#[derive(Debug, Serialize)]
pub struct Report {
    /// `hcasim.report/1` (docs/json.md).
    pub schema: String,
    pub scenario: String,
    pub seed: u64,
    pub final_state: String,
    pub epoch: u64,
    pub resets: Vec<ResetReport>,
    pub clients: Vec<ClientJson>,
    pub io: IoJson,
    pub net: NetJson,
    pub invariants: InvariantsJson,
    /// Each adapter's state, in a host of several (`final_state` and `epoch` are the first's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hcas: Option<Vec<HcaJson>>,
    /// Each multipath disk: its paths and how long it had none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multipath: Option<Vec<MultipathJson>>,
}

#[derive(Debug, Serialize)]
pub struct HcaJson {
    pub name: String,
    pub final_state: String,
    pub epoch: u64,
}

#[derive(Debug, Serialize)]
pub struct MultipathJson {
    pub name: String,
    /// What its callers waited, each I/O still owed at the end counted at its age (stuck
    /// commands included): the median, the 99th percentile (each within 1/16 of its value)
    /// and the worst.
    pub p50_latency_us: u64,
    pub p99_latency_us: u64,
    pub max_latency_us: u64,
    /// Time with no path up: the only time its I/O waited for the device.
    pub no_path_us: u64,
    /// The most I/Os its hold queue held at once (while no path was up).
    pub max_held: u64,
    /// Fast path failover's fixed timeout; null when the timeout is not fixed (see
    /// `path_timeout`).
    pub path_io_timeout_ms: Option<u64>,
    /// The timeout's mode: "adaptive", "fixed", "off" or "checker".
    pub path_timeout: &'static str,
    /// The adaptive timeout's bounds; null in the other modes.
    pub path_timeout_min_ms: Option<u64>,
    pub path_timeout_max_ms: Option<u64>,
    pub paths: Vec<PathJson>,
}

#[derive(Debug, Serialize)]
pub struct PathJson {
    pub hca: String,
    /// Its path group, 0 the best.
    pub group: u8,
    /// I/Os completed through this path.
    pub ios: u64,
    /// Times it went down with commands that another path took over.
    pub failovers: u32,
    /// Commands taken back from it and re-issued on another path.
    pub moved: u64,
    /// Of those, commands given up for being slow while another path answered (fast path
    /// failover), each with an ABORT TASK to the target.
    pub given_up: u64,
    /// Answers that came for commands taken back: discarded, never completed twice.
    pub late_discarded: u64,
    /// ABORT TASKs for given-up commands its adapter would not take (a stalled data path):
    /// their slots wait for the adapter's reset instead.
    pub aborts_unsent: u64,
    /// Times an ABORT TASK went unanswered so long that the path dropped its connection.
    pub abort_timeouts: u32,
    /// Single commands it sent while given up (probes), and times it served again.
    pub probes: u64,
    pub restored: u32,
    /// Idle checks it sent (nothing out for a second: a TEST UNIT READY), and answered.
    pub checks: u64,
    pub checks_answered: u64,
    /// Its timeout at the end (null when off) and its smoothed round trip (null before
    /// any answer).
    pub timeout_us: Option<u64>,
    pub srtt_us: Option<u64>,
    pub down_us: u64,
}

#[derive(Debug, Serialize)]
pub struct ClientJson {
    pub name: String,
    pub kind: String,
    pub events: Vec<String>,
    pub state: String,
    /// Why the client is not doing its job (could not start, gave up a login); else null.
    pub error: Option<String>,
    /// Its adapter, in a host of several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hca: Option<String>,
}

#[derive(Debug, Default, Serialize)]
pub struct IoJson {
    pub submitted: u64,
    pub completed: u64,
    pub failed: u64,
    pub lost: u64,
    pub duplicated: u64,
    /// The longest any I/O waited, failed ones included.
    pub max_latency_us: u64,
    /// The longest a failed I/O waited before it failed (0 when none failed).
    pub max_failed_latency_us: u64,
    pub in_flight: u64,
    pub paging_failed: u64,
    /// Of those in flight, commands out on the wire past their bound and the abort after
    /// it (docs/design.md §7 "Every command ends"): a run that ends with any is not clean.
    pub overdue: u64,
    /// SRP logins that succeeded, over every disk.
    pub logins: u64,
    /// Login attempts refused (target busy, device not ready), each retried after a backoff.
    pub logins_refused: u64,
    /// Login REQs nobody answered (a target restarting, a route cut), each sent again by the
    /// CM after its timeout (docs/design.md §7 "A login's REQ").
    pub req_retries: u64,
}

#[derive(Debug, Default, Serialize)]
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

fn clients(host: &Node, hca: Option<&str>) -> Vec<ClientJson> {
    let coord = host.coordinator();
    let hca = hca.map(String::from);
    host.agents()
        .iter()
        .map(|a| {
            let info = a.id().and_then(|id| coord.client(id).ok());
            ClientJson {
                name: a.name().into(),
                kind: a.kind().as_str().into(),
                events: a.events().iter().map(|e| e.as_str().into()).collect(),
                state: state_word(info.map_or("unregistered", |c| c.state.as_str())),
                error: a.error(),
                hca: hca.clone(),
            }
        })
        .collect()
}

/// SRP logins that succeeded, were refused, and REQs sent again unanswered, over every
/// disk of `host`.
fn logins(host: &Node) -> (u64, u64, u64) {
    hcabus_lab::stack::disks(host)
        .map(|d| d.disk().stats())
        .fold((0, 0, 0), |(l, r, q), s| {
            (
                l + u64::from(s.logins),
                r + u64::from(s.login_retries),
                q + s.req_retries,
            )
        })
}

/// The report of a finished run.
pub fn build(host: &Node) -> Report {
    let coord = host.coordinator();
    let checker = host.checker();
    totals(
        Report {
            schema: schema("hcasim", "report"),
            scenario: host.name().into(),
            seed: host.seed(),
            final_state: coord.state().as_str().into(),
            epoch: coord.epoch().0,
            resets: host.resets(),
            clients: clients(host, None),
            io: IoJson::default(),
            net: NetJson::default(),
            invariants: InvariantsJson {
                checked: checker.checked,
                violated: checker.violations.clone(),
            },
            hcas: None,
            multipath: None,
        },
        &stack::io_stats(host),
        &stack::net_stats(host),
        logins(host),
    )
}

/// The report of a finished run of several adapters.
pub fn build_many(world: &MultiNode) -> Report {
    let several = world.hosts().len() > 1;
    let hca = |name: &str| several.then_some(name.to_string());
    let first = world.hosts().first().map(|(_, h)| h.coordinator());
    let (checked, violated) = world.invariants();
    let login_totals = world.hosts().iter().fold((0, 0, 0), |(l, r, q), (_, h)| {
        let (a, b, c) = logins(h);
        (l + a, r + b, q + c)
    });
    totals(
        Report {
            schema: schema("hcasim", "report"),
            scenario: world.name().into(),
            seed: world.seed(),
            final_state: first.map_or("-", |c| c.state().as_str()).into(),
            epoch: first.map_or(0, |c| c.epoch().0),
            resets: world.resets(),
            clients: world
                .hosts()
                .iter()
                .flat_map(|(name, h)| clients(h, hca(name).as_deref()))
                .collect(),
            io: IoJson::default(),
            net: NetJson::default(),
            invariants: InvariantsJson { checked, violated },
            hcas: Some(
                world
                    .hosts()
                    .iter()
                    .map(|(name, h)| HcaJson {
                        name: name.clone(),
                        final_state: h.coordinator().state().as_str().into(),
                        epoch: h.coordinator().epoch().0,
                    })
                    .collect(),
            ),
            multipath: Some(multipath(world)).filter(|m| !m.is_empty()),
        },
        &stack::io_stats_all(world),
        &stack::net_stats_all(world),
        login_totals,
    )
}

/// Each multipath disk of `world`, as the report shows it.
pub fn multipath(world: &MultiNode) -> Vec<MultipathJson> {
    stack::multipath_disks(world)
        .into_iter()
        .map(|(mp, paths)| {
            let mp = mp.lock();
            let waited = stack::multipath_workload(&mp).waited(world.now());
            MultipathJson {
                name: mp.name().into(),
                p50_latency_us: waited.percentile(500_000),
                p99_latency_us: waited.percentile(990_000),
                max_latency_us: waited.max(),
                no_path_us: mp.stats().no_path_us,
                max_held: mp.stats().max_held,
                path_io_timeout_ms: match mp.config().path_timeout {
                    PathTimeout::Fixed(t) => Some(t.as_ms()),
                    _ => None,
                },
                path_timeout: match mp.config().path_timeout {
                    PathTimeout::Off => "off",
                    PathTimeout::Fixed(_) => "fixed",
                    PathTimeout::Adaptive { .. } => "adaptive",
                    PathTimeout::Polled(r) => r.name,
                },
                path_timeout_min_ms: match mp.config().path_timeout {
                    PathTimeout::Adaptive { min, .. } => Some(min.as_ms()),
                    _ => None,
                },
                path_timeout_max_ms: match mp.config().path_timeout {
                    PathTimeout::Adaptive { max, .. } => Some(max.as_ms()),
                    _ => None,
                },
                paths: paths
                    .iter()
                    .filter_map(|(hca, c)| {
                        let index = c.multipath()?.1;
                        let s = mp.path_stats(index)?;
                        Some(PathJson {
                            hca: (*hca).into(),
                            group: mp.path_group(index),
                            ios: s.ios,
                            failovers: s.failovers,
                            moved: s.moved,
                            given_up: s.given_up,
                            late_discarded: c.disk().stats().late_discarded,
                            aborts_unsent: c.disk().stats().aborts_unsent,
                            abort_timeouts: c.disk().stats().abort_timeouts,
                            probes: s.probes,
                            restored: s.restored,
                            checks: c.disk().stats().checks_sent,
                            checks_answered: c.disk().stats().checks_answered,
                            timeout_us: c.disk().path_timeout().map(|t| t.as_us()),
                            srtt_us: c.disk().timing().estimator().srtt().map(|t| t.as_us()),
                            down_us: s.down_us,
                        })
                    })
                    .collect(),
            }
        })
        .collect()
}

/// `report` with its I/O and network totals filled in.
fn totals(
    report: Report,
    io: &ibal::io::IoStats,
    net: &ibal::ipoib::NetStats,
    (logins, logins_refused, req_retries): (u64, u64, u64),
) -> Report {
    Report {
        io: IoJson {
            submitted: io.submitted,
            completed: io.completed,
            failed: io.failed,
            lost: io.lost,
            duplicated: io.duplicated,
            max_latency_us: io.max_latency_us,
            max_failed_latency_us: io.max_failed_latency_us,
            in_flight: io.in_flight,
            paging_failed: io.paging_failed,
            overdue: io.overdue,
            logins,
            logins_refused,
            req_retries,
        },
        net: NetJson {
            sent: net.sent,
            completed_back: net.completed_back,
            dropped: net.dropped,
        },
        ..report
    }
}

/// Whether a run ended clean: no invariant violated (`violated`), and every I/O accounted
/// for, none lost, duplicated or corrupted, and no command left out past its bound,
/// whatever kept it there. `hcasim` exits 1 otherwise.
pub fn clean(io: &ibal::io::IoStats, violated: bool) -> bool {
    !violated
        && io.closes()
        && io.lost == 0
        && io.duplicated == 0
        && io.read_mismatches == 0
        && io.overdue == 0
}

/// The report as pretty-printed JSON.
pub fn to_json(host: &Node) -> String {
    json(&build(host))
}

/// `report` as pretty-printed JSON.
pub fn json(report: &Report) -> String {
    // Serializing plain structs of strings and numbers cannot fail.
    serde_json::to_string_pretty(report).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::clean;
    use ibal::io::IoStats;

    #[test]
    fn a_run_with_a_command_out_past_its_bound_is_not_clean_whatever_else_held() {
        let io = IoStats {
            submitted: 10,
            completed: 7,
            in_flight: 3,
            ..IoStats::default()
        };
        assert!(
            clean(&io, false),
            "commands in flight on a live path are fine"
        );
        assert!(!clean(&io, true), "a violated invariant");
        for broken in [
            IoStats { overdue: 1, ..io },
            IoStats { lost: 1, ..io },
            IoStats {
                duplicated: 1,
                ..io
            },
            IoStats {
                read_mismatches: 1,
                ..io
            },
            // One I/O neither completed, failed, in flight nor lost: the accounting open.
            IoStats { completed: 6, ..io },
        ] {
            assert!(!clean(&broken, false), "{broken:?}");
        }
    }
}
