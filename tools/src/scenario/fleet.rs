//! A fleet scenario (docs/design.md §11): the `[fleet]` table instead of a host's `[hca]` and
//! `[[clients]]`. Every key is refused by name when unknown or out of range, as a host's.

use hcabus::verbs::RcTransport;
use hcabus::{Duration, Instant};
use hcabus_fleet::{
    boot_host, multipath_host, FleetFault, FleetSetup, FleetTemplate, LinuxSetup, PowerOnSetup,
    SmSetup, SrpDaemonSetup, TargetSetup, Topology, LINUX_CH_COUNT, MAX_HOSTS, MAX_HOSTS_PER_LEAF,
    MAX_LINUX_CHANNELS, MAX_LINUX_HOSTS, MAX_TARGETS,
};
use hcabus_lab::baselines;
use hcabus_lab::srp_target::{Admission, LoginCapacity};
use hcabus_lab::stack::ClientSpec;
use ibal::retry::RetryPolicy;
use serde::Deserialize;

use super::fleet_faults::{self, EventArgs, FabricSize};
use super::{err, ScenarioError, MAX_FABRIC_MS};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    name: String,
    #[serde(default = "one")]
    seed: u64,
    #[serde(default = "five_minutes")]
    duration_ms: u64,
    fleet: FleetKeys,
}

fn one() -> u64 {
    1
}

fn five_minutes() -> u64 {
    300_000
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetKeys {
    hosts: u32,
    /// What every host is: "boot" (the default boot host).
    #[serde(default = "boot")]
    host: String,
    /// Each disk's I/Os per second.
    #[serde(default = "two")]
    iops: u32,
    /// IPoIB's packets and the user-verbs process's calls per second.
    #[serde(default = "one_u32")]
    pps: u32,
    /// How long a login takes (the CM exchange and SRP_LOGIN).
    #[serde(default = "twenty")]
    login_ms: u64,
    /// The retry policies to run side by side, the first the shipped one by default.
    #[serde(default = "all_policies")]
    compare: Vec<String>,
    /// The wait of the `fixed` policy.
    #[serde(default = "ten_seconds")]
    fixed_retry_ms: u64,
    targets: Vec<TargetKeys>,
    #[serde(default)]
    events: Vec<FleetEventKeys>,
    #[serde(default)]
    sm: SmKeys,
    /// Hosts a leaf switch (the fleet's topology).
    #[serde(default = "twenty_u32")]
    hosts_per_leaf: u32,
    /// Every adapter's transport timer (as `[hca]`'s): what a link flap it rides.
    local_ack_timeout: Option<u8>,
    retry_count: Option<u8>,
    /// Each host's power-restore delay, drawn from [least, most] (none by default).
    #[serde(default)]
    power_on_delay_ms: [u64; 2],
    /// The boot firmware logs each host's boot disk in and loads the OS this long.
    firmware_boot_ms: Option<u64>,
    /// Every host runs srp_daemon, rescanning this often (a fleet of Linux initiators).
    srp_daemon_rescan_ms: Option<u64>,
    /// Linux SRP initiators beside the hosts, and the channels each login opens.
    #[serde(default)]
    linux_initiators: u32,
    linux_ch_count: Option<u32>,
}

/// `[fleet.sm]`: the subnet manager and its SA; what is not given keeps OpenSM's default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SmKeys {
    poll_interval_ms: Option<u64>,
    polls_missed: Option<u32>,
    sweep_base_ms: Option<u64>,
    sweep_per_host_us: Option<u64>,
    sa_queries_per_second: Option<u32>,
    sa_receive_queue: Option<u32>,
    sa_receive_us: Option<u64>,
    sa_backlog_limit: Option<u32>,
    sa_max_wait_ms: Option<u64>,
    sa_busy_answers: Option<bool>,
}

fn boot() -> String {
    "boot".into()
}
fn two() -> u32 {
    2
}
fn one_u32() -> u32 {
    1
}
fn twenty() -> u64 {
    20
}
fn twenty_u32() -> u32 {
    20
}
fn ten_seconds() -> u64 {
    10_000
}
fn all_policies() -> Vec<String> {
    ["backoff", "no_jitter", "fixed"].map(String::from).to_vec()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetKeys {
    lid: u16,
    /// An array's admission control: past these it refuses a login. Neither given: the
    /// Linux target, which takes one login at a time and refuses none.
    login_concurrency: Option<u16>,
    logins_per_second: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetEventKeys {
    at_ms: u64,
    kind: String,
    target: Option<usize>,
    /// A leaf reboot's leaf switch (its index: hosts fill the leaves in order).
    leaf: Option<u32>,
    down_ms: Option<u64>,
    /// A rollout's limit: adapters in reset at once among those of one target.
    max_in_reset_per_target: Option<u32>,
    /// A handover's new master gives every port a new LID.
    reassign_lids: Option<bool>,
    /// A trap storm's cable: a bounce every `every_ms`, `bounces` of them.
    every_ms: Option<u64>,
    bounces: Option<u32>,
}

/// What a run compares: how disks retry a refused login, and whether IPoIB takes an SA
/// timeout for a hung adapter (the naive policy of the reset-storm cascade).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPolicy {
    pub retry: RetryPolicy,
    pub naive_ipoib: bool,
}

impl FleetPolicy {
    /// What hcabus ships: the backoff with jitter, and an SA timeout retried.
    pub const SHIPPED: FleetPolicy = FleetPolicy {
        retry: RetryPolicy::Backoff,
        naive_ipoib: false,
    };
}

/// A fleet scenario: the fleet, and the policies to run it under side by side.
#[derive(Debug, Clone)]
pub struct FleetScenario {
    pub setup: FleetSetup,
    pub policies: Vec<FleetPolicy>,
}

/// Whether `text` is a fleet scenario (it has a `[fleet]` table): `hcasim fleet` runs it,
/// `hcasim run` refuses it by that key.
pub(super) fn is_fleet(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("fleet"))
}

/// Parses a fleet scenario.
pub fn parse(text: &str) -> Result<FleetScenario, ScenarioError> {
    let file: FleetFile =
        toml::from_str(text).map_err(|e| err("", e.to_string().trim_end().to_string()))?;
    if file.name.is_empty() {
        return Err(err("name", "must not be empty"));
    }
    if file.duration_ms == 0 || file.duration_ms > 24 * 3_600_000 {
        return Err(err("duration_ms", "must be between 1 and 86400000"));
    }
    let keys = &file.fleet;
    if keys.hosts == 0 || keys.hosts > MAX_HOSTS {
        return Err(err("fleet.hosts", format!("must be 1..={MAX_HOSTS}")));
    }
    if keys.hosts_per_leaf == 0 || keys.hosts_per_leaf > MAX_HOSTS_PER_LEAF {
        return Err(err(
            "fleet.hosts_per_leaf",
            format!("must be 1..={MAX_HOSTS_PER_LEAF} (a leaf switch's ports)"),
        ));
    }
    if keys.host != "boot" && keys.host != "multipath" {
        return Err(err(
            "fleet.host",
            format!(
                "{:?}: a fleet's hosts are \"boot\" (the default boot host) or \"multipath\" \
                 (its boot disk on a path through each of two adapters)",
                keys.host
            ),
        ));
    }
    let duration = Duration::from_ms(file.duration_ms);
    let setup = FleetSetup {
        name: file.name.clone(),
        seed: file.seed,
        duration,
        hosts: keys.hosts,
        host: host(keys)?,
        targets: targets(keys)?,
        faults: events(keys, file.duration_ms)?,
        retry: RetryPolicy::Backoff,
        sm: sm(&keys.sm)?,
        hosts_per_leaf: keys.hosts_per_leaf,
        naive_ipoib: false,
        power_on: power_on(keys)?,
        srp_daemon: srp_daemon(keys)?,
        linux: linux(keys)?,
    };
    Ok(FleetScenario {
        policies: policies(keys)?,
        setup,
    })
}

/// srp_daemon on every host, when the file asks for it.
fn srp_daemon(keys: &FleetKeys) -> Result<Option<SrpDaemonSetup>, ScenarioError> {
    let Some(ms) = keys.srp_daemon_rescan_ms else {
        return Ok(None);
    };
    if !(15_000..=3_600_000).contains(&ms) {
        return Err(err(
            "fleet.srp_daemon_rescan_ms",
            "must be 15000..=3600000, longer than a rescan's three tries (the shipped unit \
             rescans every 60000)",
        ));
    }
    Ok(Some(SrpDaemonSetup {
        rescan: Duration::from_ms(ms),
    }))
}

/// Linux initiators beside the hosts, when the file has some (`linux_ch_count` alone is
/// refused: it would change nothing).
fn linux(keys: &FleetKeys) -> Result<Option<LinuxSetup>, ScenarioError> {
    if keys.linux_initiators > MAX_LINUX_HOSTS {
        return Err(err(
            "fleet.linux_initiators",
            format!("must be at most {MAX_LINUX_HOSTS}"),
        ));
    }
    let ch_count = keys.linux_ch_count.unwrap_or(u32::from(LINUX_CH_COUNT));
    let Some(ch_count) = u8::try_from(ch_count).ok().filter(|c| *c > 0) else {
        return Err(err("fleet.linux_ch_count", "must be 1..=255"));
    };
    if u64::from(keys.linux_initiators) * u64::from(ch_count) > MAX_LINUX_CHANNELS {
        return Err(err(
            "fleet.linux_ch_count",
            format!(
                "linux_initiators x linux_ch_count must be at most {MAX_LINUX_CHANNELS} (each \
                 channel's login is steps of the fleet)"
            ),
        ));
    }
    match (keys.linux_initiators, keys.linux_ch_count) {
        (0, Some(_)) => Err(err(
            "fleet.linux_ch_count",
            "needs fleet.linux_initiators (the Linux hosts whose logins it counts)",
        )),
        (0, None) => Ok(None),
        (hosts, _) => Ok(Some(LinuxSetup { hosts, ch_count })),
    }
}

/// How the hosts power on: all at once unless a delay or the boot firmware is given.
fn power_on(keys: &FleetKeys) -> Result<PowerOnSetup, ScenarioError> {
    let [least, most] = keys.power_on_delay_ms;
    const HOUR_MS: u64 = 3_600_000;
    if least > most || most > HOUR_MS {
        return Err(err(
            "fleet.power_on_delay_ms",
            "must be [least, most] with least <= most <= 3600000",
        ));
    }
    if keys
        .firmware_boot_ms
        .is_some_and(|ms| ms == 0 || ms > HOUR_MS)
    {
        return Err(err("fleet.firmware_boot_ms", "must be 1..=3600000"));
    }
    // The firmware waits 15 s for a login's answer: a longer login never boots a host.
    let waits = hcabus_fleet::FIRMWARE_COMMAND_TIMEOUT.as_ms();
    if keys.firmware_boot_ms.is_some() && keys.login_ms > waits {
        return Err(err(
            "fleet.login_ms",
            format!("must be at most {waits} with fleet.firmware_boot_ms (the firmware's wait)"),
        ));
    }
    Ok(PowerOnSetup {
        delay: (Duration::from_ms(least), Duration::from_ms(most)),
        firmware: keys.firmware_boot_ms.map(Duration::from_ms),
    })
}

fn host(keys: &FleetKeys) -> Result<FleetTemplate, ScenarioError> {
    // A disk notices a dropped connection at its next command, as an initiator whose
    // target restarted in silence does: a fleet's disks must have commands to send.
    if keys.iops == 0 || keys.iops > 10_000 {
        return Err(err(
            "fleet.iops",
            "must be 1..=10000 a disk (a disk notices a target's restart at its next command)",
        ));
    }
    if keys.pps > 10_000 {
        return Err(err("fleet.pps", "must be at most 10000"));
    }
    // The initiator's CM waits 16 x 2.3 s for a login's answer: a longer login never ends.
    if keys.login_ms == 0 || keys.login_ms > 30_000 {
        return Err(err(
            "fleet.login_ms",
            "must be 1..=30000 (a login the CM waits out its REQs for)",
        ));
    }
    let login = Duration::from_ms(keys.login_ms);
    let transport = super::transport(
        (keys.local_ack_timeout, keys.retry_count),
        RcTransport::DEFAULT,
        "fleet",
    )?;
    let with_login = |stack: &mut hcabus_lab::stack::StackSetup| {
        stack.sim.hca.transport = transport;
        for c in &mut stack.clients {
            match c {
                ClientSpec::Disk { config, .. } => config.route = config.route.with_login(login),
                ClientSpec::DiskPath { config, .. } => {
                    config.route = config.route.with_login(login)
                }
                _ => {}
            }
        }
    };
    Ok(if keys.host == "multipath" {
        let mut m = multipath_host(keys.iops, keys.pps);
        for a in &mut m.adapters {
            with_login(&mut a.stack);
        }
        FleetTemplate::Many(m)
    } else {
        let mut s = boot_host(keys.iops, keys.pps);
        with_login(&mut s);
        FleetTemplate::One(s)
    })
}

fn targets(keys: &FleetKeys) -> Result<Vec<TargetSetup>, ScenarioError> {
    if keys.targets.is_empty() || keys.targets.len() > MAX_TARGETS {
        return Err(err(
            "fleet.targets",
            format!("a fleet has 1..={MAX_TARGETS} targets"),
        ));
    }
    let mut out: Vec<TargetSetup> = Vec::with_capacity(keys.targets.len());
    for (i, t) in keys.targets.iter().enumerate() {
        let capacity = match (t.login_concurrency, t.logins_per_second) {
            (None, None) => LoginCapacity::IB_SRPT,
            (Some(c), Some(r)) => LoginCapacity::refusing(c, r),
            (Some(_), None) | (None, Some(_)) => {
                let missing = if t.login_concurrency.is_none() {
                    "login_concurrency"
                } else {
                    "logins_per_second"
                };
                return Err(err(
                    format!("fleet.targets[{i}].{missing}"),
                    "login_concurrency and logins_per_second go together (an array that \
                     refuses past them); neither: the Linux target, one login at a time",
                ));
            }
        };
        if let Err(e) = Admission::new(capacity) {
            let key = match e {
                hcabus_lab::srp_target::CapacityError::Concurrent(_) => "login_concurrency",
                hcabus_lab::srp_target::CapacityError::PerSecond(_) => "logins_per_second",
            };
            return Err(err(format!("fleet.targets[{i}].{key}"), e.to_string()));
        }
        if t.lid == 0 || t.lid >= 0xc000 {
            return Err(err(
                format!("fleet.targets[{i}].lid"),
                "must be a unicast LID, 0x1..=0xbfff",
            ));
        }
        if let Some(j) = out.iter().position(|o| o.lid == t.lid) {
            return Err(err(
                format!("fleet.targets[{i}].lid"),
                format!("{:#x} is also fleet.targets[{j}]'s", t.lid),
            ));
        }
        out.push(TargetSetup {
            lid: t.lid,
            capacity,
        });
    }
    Ok(out)
}

fn events(keys: &FleetKeys, duration_ms: u64) -> Result<Vec<(Instant, FleetFault)>, ScenarioError> {
    let mut out = Vec::with_capacity(keys.events.len());
    for (i, e) in keys.events.iter().enumerate() {
        let at = |key: &str| format!("fleet.events[{i}].{key}");
        if e.at_ms >= duration_ms {
            return Err(err(at("at_ms"), "at or after the run's end (duration_ms)"));
        }
        let args = EventArgs {
            target: e.target,
            leaf: e.leaf,
            down_ms: e.down_ms,
            max_in_reset_per_target: e.max_in_reset_per_target,
            reassign_lids: e.reassign_lids,
            every_ms: e.every_ms,
            bounces: e.bounces,
        };
        let multipath = keys.host == "multipath";
        let size = FabricSize {
            targets: keys.targets.len(),
            leaves: Topology::new(keys.hosts, keys.hosts_per_leaf).leaves,
        };
        let fault = fleet_faults::fault(i, &e.kind, args, size, multipath)?;
        if let FleetFault::TrapStorm { every, bounces, .. } = fault {
            if out
                .iter()
                .any(|(_, f)| matches!(f, FleetFault::TrapStorm { .. }))
            {
                return Err(err(
                    at("kind"),
                    "one trap storm a run (the master's plan is one)",
                ));
            }
            let last_ms = every.as_ms().saturating_mul(u64::from(bounces - 1));
            if e.at_ms.saturating_add(last_ms) >= duration_ms {
                return Err(err(
                    at("bounces"),
                    "its last bounce is at or after the run's end (duration_ms)",
                ));
            }
        }
        out.push((Instant::from_ms(e.at_ms), fault));
    }
    Ok(out)
}

fn policies(keys: &FleetKeys) -> Result<Vec<FleetPolicy>, ScenarioError> {
    if keys.fixed_retry_ms == 0 || keys.fixed_retry_ms > MAX_FABRIC_MS {
        return Err(err(
            "fleet.fixed_retry_ms",
            format!("must be 1..={MAX_FABRIC_MS}"),
        ));
    }
    if keys.compare.is_empty() {
        return Err(err("fleet.compare", "names at least one retry policy"));
    }
    let mut out: Vec<FleetPolicy> = Vec::with_capacity(keys.compare.len());
    for (i, name) in keys.compare.iter().enumerate() {
        let retry = |retry| FleetPolicy {
            retry,
            naive_ipoib: false,
        };
        let p = match name.as_str() {
            "backoff" => FleetPolicy::SHIPPED,
            "no_jitter" => retry(baselines::NO_JITTER),
            "fixed" => retry(baselines::fixed(Duration::from_ms(keys.fixed_retry_ms))),
            "naive_ipoib" => FleetPolicy {
                naive_ipoib: true,
                ..FleetPolicy::SHIPPED
            },
            other => {
                return Err(err(
                    format!("fleet.compare[{i}]"),
                    format!(
                        "{other:?}: one of \"backoff\", \"no_jitter\", \"fixed\", \"naive_ipoib\""
                    ),
                ))
            }
        };
        if out.contains(&p) {
            return Err(err(format!("fleet.compare[{i}]"), "named twice"));
        }
        out.push(p);
    }
    Ok(out)
}

/// A duration under `fleet.sm`, in milliseconds from `min`, into `to` when given.
fn ms(key: &str, v: Option<u64>, min: u64, to: &mut Duration) -> Result<(), ScenarioError> {
    match v {
        Some(v) if (min..=MAX_FABRIC_MS).contains(&v) => {
            *to = Duration::from_ms(v);
            Ok(())
        }
        Some(_) => Err(err(
            format!("fleet.sm.{key}"),
            format!("must be {min}..={MAX_FABRIC_MS}"),
        )),
        None => Ok(()),
    }
}

fn sm(keys: &SmKeys) -> Result<SmSetup, ScenarioError> {
    let mut sm = SmSetup::default();
    ms(
        "poll_interval_ms",
        keys.poll_interval_ms,
        1,
        &mut sm.poll_interval,
    )?;
    ms("sweep_base_ms", keys.sweep_base_ms, 0, &mut sm.sweep_base)?;
    if let Some(n) = keys.polls_missed {
        if !(1..=100).contains(&n) {
            return Err(err("fleet.sm.polls_missed", "must be 1..=100"));
        }
        sm.polls_missed = n;
    }
    if let Some(us) = keys.sweep_per_host_us {
        if us > 1_000_000 {
            return Err(err("fleet.sm.sweep_per_host_us", "must be at most 1000000"));
        }
        sm.sweep_per_host = Duration::from_us(us);
    }
    sm.sa = sa(keys)?;
    Ok(sm)
}

/// The SA's keys, checked by the SA's own rules and named under `fleet.sm`.
fn sa(keys: &SmKeys) -> Result<hcabus_lab::subnet::SaSetup, ScenarioError> {
    let mut sa = hcabus_lab::subnet::SaSetup::default();
    if let Some(q) = keys.sa_queries_per_second {
        sa.queries_per_second = q;
    }
    if let Some(n) = keys.sa_receive_queue {
        sa.receive_queue = n;
    }
    if let Some(us) = keys.sa_receive_us {
        sa.receive = Duration::from_us(us);
    }
    if let Some(n) = keys.sa_backlog_limit {
        sa.backlog_limit = n;
    }
    if let Some(b) = keys.sa_busy_answers {
        sa.busy_answers = b;
    }
    ms("sa_max_wait_ms", keys.sa_max_wait_ms, 1, &mut sa.max_wait)?;
    sa.check()
        .map_err(|e| err(format!("fleet.sm.{}", e.key()), e.to_string()))?;
    Ok(sa)
}
