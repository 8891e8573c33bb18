//! A fleet scenario (docs/design.md §11): the `[fleet]` table instead of a host's `[hca]` and
//! `[[clients]]`. Every key is refused by name when unknown or out of range, as a host's.

use hcabus::{Duration, Instant};
use ibal::fleet::{boot_host, FleetFault, FleetSetup, TargetSetup, MAX_HOSTS, MAX_TARGETS};
use ibal::retry::RetryPolicy;
use ibal::srp_target::{Admission, LoginCapacity};
use ibal::stack::ClientSpec;
use serde::Deserialize;

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
    login_concurrency: u16,
    logins_per_second: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetEventKeys {
    at_ms: u64,
    kind: String,
    target: Option<usize>,
    down_ms: u64,
}

/// A fleet scenario: the fleet, and the retry policies to run it under side by side.
#[derive(Debug, Clone)]
pub struct FleetScenario {
    pub setup: FleetSetup,
    pub policies: Vec<RetryPolicy>,
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
    if keys.host != "boot" {
        return Err(err(
            "fleet.host",
            format!(
                "{:?}: a fleet's hosts are \"boot\" (the default boot host)",
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
    };
    Ok(FleetScenario {
        policies: policies(keys)?,
        setup,
    })
}

fn host(keys: &FleetKeys) -> Result<ibal::stack::StackSetup, ScenarioError> {
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
    if keys.login_ms == 0 || keys.login_ms > 60_000 {
        return Err(err("fleet.login_ms", "must be 1..=60000"));
    }
    let mut host = boot_host(keys.iops, keys.pps);
    for c in &mut host.clients {
        if let ClientSpec::Disk { config, .. } = c {
            config.login_delay = Duration::from_ms(keys.login_ms);
        }
    }
    Ok(host)
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
        let capacity = LoginCapacity {
            concurrent: t.login_concurrency,
            per_second: t.logins_per_second,
        };
        if let Err(e) = Admission::new(capacity) {
            let key = match e {
                ibal::srp_target::CapacityError::Concurrent(_) => "login_concurrency",
                ibal::srp_target::CapacityError::PerSecond(_) => "logins_per_second",
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
        if e.down_ms == 0 || e.down_ms > MAX_FABRIC_MS {
            return Err(err(at("down_ms"), format!("must be 1..={MAX_FABRIC_MS}")));
        }
        let down = Duration::from_ms(e.down_ms);
        let fault = match (e.kind.as_str(), e.target) {
            ("target_restart", Some(target)) if target < keys.targets.len() => {
                FleetFault::TargetRestart { target, down }
            }
            ("target_restart", Some(t)) => {
                return Err(err(
                    at("target"),
                    format!("no target {t}: the fleet has {}", keys.targets.len()),
                ))
            }
            ("target_restart", None) => {
                return Err(err(at("target"), "a target restart names its target"))
            }
            ("link_flap", None) => FleetFault::LinkFlap { down },
            ("link_flap", Some(_)) => {
                return Err(err(at("target"), "a link flap is fabric-wide: no target"))
            }
            (other, _) => {
                return Err(err(
                    at("kind"),
                    format!("{other:?}: one of \"target_restart\", \"link_flap\""),
                ))
            }
        };
        out.push((Instant::from_ms(e.at_ms), fault));
    }
    Ok(out)
}

fn policies(keys: &FleetKeys) -> Result<Vec<RetryPolicy>, ScenarioError> {
    if keys.fixed_retry_ms == 0 || keys.fixed_retry_ms > MAX_FABRIC_MS {
        return Err(err(
            "fleet.fixed_retry_ms",
            format!("must be 1..={MAX_FABRIC_MS}"),
        ));
    }
    if keys.compare.is_empty() {
        return Err(err("fleet.compare", "names at least one retry policy"));
    }
    let mut out: Vec<RetryPolicy> = Vec::with_capacity(keys.compare.len());
    for (i, name) in keys.compare.iter().enumerate() {
        let p = match name.as_str() {
            "backoff" => RetryPolicy::Backoff,
            "no_jitter" => RetryPolicy::NoJitter,
            "fixed" => RetryPolicy::Fixed(Duration::from_ms(keys.fixed_retry_ms)),
            other => {
                return Err(err(
                    format!("fleet.compare[{i}]"),
                    format!("{other:?}: one of \"backoff\", \"no_jitter\", \"fixed\""),
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
