//! The scenario format of SPEC §9: TOML in, a host to run out.
//!
//! Parsing is serde's with `deny_unknown_fields`, so a misspelt key is refused by name;
//! what serde cannot know (a key that does not apply to a client's kind, a port the adapter
//! does not have, an event after the end) is checked here, and every refusal names the key.

use std::fmt;

use hcabus::sim::{Behavior, Fault, SimHcaConfig, SimSetup};
use hcabus::types::{ClientDesc, ClientFlags, ClientKind};
use hcabus::{Duration, Identity, Instant, Policy};
use ibal::disk::DiskConfig;
use ibal::ipoib::IpoibConfig;
use ibal::stack::{ClientSpec, StackSetup};
use ibal::uverbs::UverbsConfig;
use ibal::IbalConfig;
use serde::Deserialize;

/// A scenario the format refused, with the key at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// The key, as a path (`clients[2].iops`), or empty for a syntax error.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "key `{}`: {}", self.key, self.message)
        }
    }
}

impl std::error::Error for ScenarioError {}

fn err(key: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        key: key.into(),
        message: message.into(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default = "one")]
    seed: u64,
    #[serde(default = "five_seconds")]
    duration_ms: u64,
    #[serde(default)]
    hca: Hca,
    #[serde(default)]
    policy: PolicyKeys,
    #[serde(default)]
    clients: Vec<Client>,
    #[serde(default)]
    events: Vec<EventKeys>,
}

fn one() -> u64 {
    1
}

fn five_seconds() -> u64 {
    5_000
}

/// A number, or a string for values TOML's signed integers cannot hold (a GUID).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum NumOrText {
    Num(u64),
    Text(String),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Hca {
    ports: Option<u8>,
    hw_reset_ms: Option<u64>,
    /// "major.minor.subminor".
    fw_version: Option<String>,
    /// An integer or a string ("0x0002c9030010f5e0").
    node_guid: Option<NumOrText>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyKeys {
    quiesce_deadline_ms: Option<u64>,
    hw_ready_timeout_ms: Option<u64>,
    hw_poll_interval_ms: Option<u64>,
    reset_retries: Option<u8>,
    auto_restart_window_ms: Option<u64>,
    max_auto_resets: Option<u8>,
    storm_window_ms: Option<u64>,
    io_hold_timeout_ms: Option<u64>,
    abort_on_unresponsive: Option<bool>,
    health_poll_interval_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Client {
    name: String,
    kind: String,
    // srp and bootdisk
    iops: Option<u32>,
    queue_depth: Option<u16>,
    read_pct: Option<u8>,
    blocks: Option<u64>,
    // srp, bootdisk, ipoib
    port: Option<u8>,
    // ipoib
    pps: Option<u32>,
    // srp, ipoib, custom
    ack_delay_ms: Option<u64>,
    // custom
    never_ack: Option<bool>,
    veto_planned: Option<bool>,
    unregister_on_reset: Option<bool>,
    reregister_on_reset: Option<bool>,
    request_reset_at_ms: Option<u64>,
    request_every_ms: Option<u64>,
    request_on_reset_end: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventKeys {
    at_ms: u64,
    fault: String,
    count: Option<u32>,
    client: Option<String>,
}

/// What a client name must be (the bus's [`hcabus::types::ClientName`] rule).
const NAME_RULE: &str = "must be 1 to 32 bytes of UTF-8 with no control character (NUL, newline)";

/// Parses a scenario.
pub fn parse(text: &str) -> Result<StackSetup, ScenarioError> {
    let file: File = toml::from_str(text).map_err(|e| {
        // toml names the unknown or mistyped key and its line; keep its words.
        err("", e.to_string().trim_end().to_string())
    })?;
    build(file)
}

fn fw_version(text: &str) -> Option<u64> {
    let mut parts = text.split('.').map(|p| p.parse::<u16>().ok());
    let v = Identity::fw_version(parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(v)
}

fn build(file: File) -> Result<StackSetup, ScenarioError> {
    if file.name.is_empty() {
        return Err(err("name", "must not be empty"));
    }
    if file.duration_ms == 0 || file.duration_ms > 24 * 3_600_000 {
        return Err(err("duration_ms", "must be between 1 and 86400000"));
    }
    let mut hca = SimHcaConfig::default();
    if let Some(p) = file.hca.ports {
        if !(1..=2).contains(&p) {
            return Err(err("hca.ports", "the simulated adapter has 1 or 2 ports"));
        }
        hca.ports = p;
    }
    if let Some(ms) = file.hca.hw_reset_ms {
        hca.hw_reset = Duration::from_ms(ms);
    }
    if let Some(v) = &file.hca.fw_version {
        hca.identity.fw_version = fw_version(v)
            .ok_or_else(|| err("hca.fw_version", "expected \"major.minor.subminor\""))?;
    }
    if let Some(g) = &file.hca.node_guid {
        hca.identity.node_guid = match g {
            NumOrText::Num(n) => *n,
            NumOrText::Text(t) => {
                let hex = t.strip_prefix("0x").unwrap_or(t);
                u64::from_str_radix(hex, 16)
                    .map_err(|_| err("hca.node_guid", "expected a hexadecimal GUID"))?
            }
        };
    }
    let p = &file.policy;
    let d = Policy::default();
    let policy = Policy {
        quiesce_deadline_ms: p.quiesce_deadline_ms.unwrap_or(d.quiesce_deadline_ms),
        hw_ready_timeout_ms: p.hw_ready_timeout_ms.unwrap_or(d.hw_ready_timeout_ms),
        hw_poll_interval_ms: p.hw_poll_interval_ms.unwrap_or(d.hw_poll_interval_ms),
        reset_retries: p.reset_retries.unwrap_or(d.reset_retries),
        auto_restart_window_ms: p.auto_restart_window_ms.unwrap_or(d.auto_restart_window_ms),
        max_auto_resets: p.max_auto_resets.unwrap_or(d.max_auto_resets),
        storm_window_ms: p.storm_window_ms.unwrap_or(d.storm_window_ms),
        io_hold_timeout_ms: p.io_hold_timeout_ms.unwrap_or(d.io_hold_timeout_ms),
        abort_on_unresponsive: p.abort_on_unresponsive.unwrap_or(d.abort_on_unresponsive),
        health_poll_interval_ms: p
            .health_poll_interval_ms
            .unwrap_or(d.health_poll_interval_ms),
    };
    policy
        .validate()
        .map_err(|e| err(format!("policy.{}", e.field), e.problem))?;

    let mut names = std::collections::HashSet::new();
    let mut specs = Vec::new();
    // The file's index of each spec: the access layer has none.
    let mut file_index = Vec::new();
    let mut has_ibal = false;
    let mut needs_ibal = false;
    let (mut disks, mut nets) = (0u16, 0u16);
    for (i, c) in file.clients.iter().enumerate() {
        let at = |key: &str| format!("clients[{i}].{key}");
        if !names.insert(c.name.clone()) {
            return Err(err(
                at("name"),
                format!("two clients are called {:?}", c.name),
            ));
        }
        let kind = ClientKind::parse(&c.kind).ok_or_else(|| {
            err(
                at("kind"),
                format!(
                    "unknown kind {:?}; expected ibal, ipoib, srp, bootdisk, uverbs or custom",
                    c.kind
                ),
            )
        })?;
        // Which keys each kind takes: anything else set is an impossible combination.
        let set: [(&str, bool); 16] = [
            ("iops", c.iops.is_some()),
            ("queue_depth", c.queue_depth.is_some()),
            ("read_pct", c.read_pct.is_some()),
            ("blocks", c.blocks.is_some()),
            ("port", c.port.is_some()),
            ("pps", c.pps.is_some()),
            ("ack_delay_ms", c.ack_delay_ms.is_some()),
            ("never_ack", c.never_ack.is_some()),
            ("veto_planned", c.veto_planned.is_some()),
            ("unregister_on_reset", c.unregister_on_reset.is_some()),
            ("reregister_on_reset", c.reregister_on_reset.is_some()),
            ("request_reset_at_ms", c.request_reset_at_ms.is_some()),
            ("request_every_ms", c.request_every_ms.is_some()),
            ("request_on_reset_end", c.request_on_reset_end.is_some()),
            ("kind", true),
            ("name", true),
        ];
        let allowed: &[&str] = match kind {
            ClientKind::Ibal => &[],
            ClientKind::BootDisk => &["iops", "queue_depth", "read_pct", "blocks", "port"],
            ClientKind::Srp => &[
                "iops",
                "queue_depth",
                "read_pct",
                "blocks",
                "port",
                "ack_delay_ms",
            ],
            ClientKind::Ipoib => &["port", "pps", "ack_delay_ms"],
            ClientKind::Uverbs => &[],
            ClientKind::Custom => &[
                "ack_delay_ms",
                "never_ack",
                "veto_planned",
                "unregister_on_reset",
                "reregister_on_reset",
                "request_reset_at_ms",
                "request_every_ms",
                "request_on_reset_end",
            ],
        };
        if let Some((key, _)) = set
            .iter()
            .find(|(k, on)| *on && *k != "kind" && *k != "name" && !allowed.contains(k))
        {
            return Err(err(
                at(key),
                format!("does not apply to a client of kind {}", kind.as_str()),
            ));
        }
        let port = |default: u8| -> Result<u8, ScenarioError> {
            let p = c.port.unwrap_or(default.min(hca.ports));
            if p == 0 || p > hca.ports {
                return Err(err(
                    at("port"),
                    format!("the adapter has {} port(s)", hca.ports),
                ));
            }
            Ok(p)
        };
        let spec = match kind {
            ClientKind::Ibal => {
                if c.name != "ibal" {
                    return Err(err(
                        at("name"),
                        "the access layer is always called \"ibal\"",
                    ));
                }
                has_ibal = true;
                continue;
            }
            ClientKind::BootDisk | ClientKind::Srp => {
                needs_ibal = true;
                let boot = kind == ClientKind::BootDisk;
                let d = DiskConfig::default();
                let config = DiskConfig {
                    boot,
                    iops: c.iops.unwrap_or(d.iops),
                    queue_depth: c.queue_depth.unwrap_or(d.queue_depth),
                    read_pct: c.read_pct.unwrap_or(d.read_pct),
                    n_blocks: c.blocks.unwrap_or(d.n_blocks),
                    port: port(if boot { 1 } else { 2 })?,
                    target_lid: 0x100 + disks,
                    lun_id: u32::from(disks),
                    ack_delay: Duration::from_ms(c.ack_delay_ms.unwrap_or(0)),
                    ..d
                };
                if !(1..=256).contains(&config.queue_depth) {
                    return Err(err(at("queue_depth"), "must be between 1 and 256"));
                }
                if config.iops > 100_000 {
                    return Err(err(at("iops"), "at most 100000"));
                }
                if config.read_pct > 100 {
                    return Err(err(at("read_pct"), "a percentage: 0 to 100"));
                }
                if !(64..=4096).contains(&config.n_blocks) {
                    return Err(err(at("blocks"), "must be between 64 and 4096"));
                }
                disks += 1;
                ClientSpec::Disk {
                    name: c.name.clone(),
                    config,
                }
            }
            ClientKind::Ipoib => {
                needs_ibal = true;
                let config = IpoibConfig {
                    port: port(1 + (nets % 2) as u8)?,
                    pps: c.pps.unwrap_or(IpoibConfig::default().pps),
                    peer_lid: 0x200 + nets,
                    ack_delay: c
                        .ack_delay_ms
                        .map_or(IpoibConfig::default().ack_delay, Duration::from_ms),
                    ..IpoibConfig::default()
                };
                if config.pps > 100_000 {
                    return Err(err(at("pps"), "at most 100000"));
                }
                nets += 1;
                ClientSpec::Ipoib {
                    name: c.name.clone(),
                    config,
                }
            }
            ClientKind::Uverbs => {
                needs_ibal = true;
                ClientSpec::Uverbs {
                    name: c.name.clone(),
                    config: UverbsConfig::default(),
                }
            }
            ClientKind::Custom => {
                let veto = c.veto_planned.unwrap_or(false);
                let flags = if veto {
                    ClientFlags::CAN_VETO
                } else {
                    ClientFlags::empty()
                };
                let desc = ClientDesc::new(&c.name, kind, flags)
                    .ok_or_else(|| err(at("name"), NAME_RULE))?;
                if c.request_every_ms == Some(0) {
                    return Err(err(at("request_every_ms"), "must be positive"));
                }
                ClientSpec::Scripted {
                    desc,
                    behavior: Behavior {
                        ack_delay: Duration::from_ms(c.ack_delay_ms.unwrap_or(0)),
                        never_ack: c.never_ack.unwrap_or(false),
                        veto_planned: veto,
                        unregister_on_reset: c.unregister_on_reset.unwrap_or(false),
                        reregister_on_reset: c.reregister_on_reset.unwrap_or(false),
                        request_reset_at: c.request_reset_at_ms.map(Instant::from_ms),
                        request_every: c.request_every_ms.map(Duration::from_ms),
                        request_on_reset_end: c.request_on_reset_end.unwrap_or(false),
                    },
                }
            }
        };
        if ClientDesc::new(&c.name, kind, ClientFlags::empty()).is_none() {
            return Err(err(at("name"), NAME_RULE));
        }
        specs.push(spec);
        file_index.push(i);
    }
    if specs.len() > 60 {
        return Err(err("clients", "at most 60 clients"));
    }
    let with_ibal = has_ibal || needs_ibal;
    if with_ibal && !has_ibal {
        // The access layer joins implicitly under its own name: nobody else may take it.
        if let Some(i) = file.clients.iter().position(|c| c.name == "ibal") {
            return Err(err(
                format!("clients[{i}].name"),
                "\"ibal\" is the access layer's name (it joins because other clients need it)",
            ));
        }
    }

    let mut faults = Vec::new();
    for (i, e) in file.events.iter().enumerate() {
        let at = |key: &str| format!("events[{i}].{key}");
        if e.at_ms >= file.duration_ms {
            return Err(err(
                at("at_ms"),
                format!(
                    "{} is not before duration_ms ({})",
                    e.at_ms, file.duration_ms
                ),
            ));
        }
        let Some(fault) = Fault::parse(&e.fault, e.count.unwrap_or(1)) else {
            let names: Vec<&str> = Fault::ALL
                .into_iter()
                .filter(|f| f.in_scenarios())
                .map(Fault::name)
                .collect();
            return Err(err(
                at("fault"),
                format!(
                    "unknown fault {:?}; expected one of {}",
                    e.fault,
                    names.join(", ")
                ),
            ));
        };
        if e.count.is_some() && !fault.takes_count() {
            return Err(err(at("count"), "only reset_fails takes a count"));
        }
        if matches!(fault, Fault::ResetFails(0)) {
            return Err(err(at("count"), "must be at least 1"));
        }
        let fault = match &e.client {
            None => fault,
            Some(name) => {
                if fault != Fault::AdminReset {
                    return Err(err(
                        at("client"),
                        "only an admin_reset can come from a client (its reset_request)",
                    ));
                }
                let pos = specs
                    .iter()
                    .position(|s| s.name() == name)
                    .ok_or_else(|| err(at("client"), format!("no client called {name:?}")))?;
                Fault::ClientRequest {
                    agent: (pos + usize::from(with_ibal)) as u16,
                }
            }
        };
        faults.push((Instant::from_ms(e.at_ms), fault));
    }

    let setup = StackSetup {
        sim: SimSetup {
            name: file.name,
            seed: file.seed,
            duration: Duration::from_ms(file.duration_ms),
            hca,
            policy,
            max_clients: 64,
            recorder_capacity: 1 << 14,
            clients: Vec::new(),
            faults,
        },
        ibal: with_ibal.then(IbalConfig::default),
        clients: specs,
    };
    ibal::budget::check(&setup).map_err(|e| {
        let i = file_index[e.client];
        let key = match e.key {
            Some(k) => format!("clients[{i}].{k}"),
            None => format!("clients[{i}]"),
        };
        err(key, e.message)
    })?;
    Ok(setup)
}
