//! The scenario format of docs/design.md §9: TOML in, a host to run out.
//!
//! Parsing is serde's with `deny_unknown_fields`, so a misspelt key is refused by name;
//! what serde cannot know (a key that does not apply to a client's kind, a port the adapter
//! does not have, an event after the end) is checked here, and every refusal names the key.

use hcabus::types::{ClientDesc, ClientFlags, ClientKind};
use hcabus::verbs::{RcTransport, TransportError};
use hcabus::{Duration, Identity, Instant, Policy};
use hcabus_lab::stack::{
    ClientSpec, DiskSpec, IpoibSpec, LargeIo, Load, ScriptedConfig, StackSetup,
};
use hcabus_sim::{Behavior, Fault, FaultArgs, SimHcaConfig, SimSetup};
use ibal::disk::DiskConfig;
use ibal::ipoib::IpoibConfig;
use ibal::IbalConfig;

pub mod fleet;
mod fleet_faults;
mod keys;
mod multi;
mod paths;

use keys::{Client, EventKeys, File, Hca, NumOrText, PolicyKeys};

/// A scenario the format refused, with the key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{message}", if key.is_empty() { String::new() } else { format!("key `{key}`: ") })]
pub struct ScenarioError {
    /// The key, as a path (`clients[2].iops`), or empty for a syntax error.
    pub key: String,
    pub message: String,
}

fn err(key: impl Into<String>, message: impl Into<String>) -> ScenarioError {
    ScenarioError {
        key: key.into(),
        message: message.into(),
    }
}

/// The longest link training, subnet-manager sweep or cable pull a scenario may ask for
/// (an hour: longer is a dead fabric, which `duration_ms` of the run says better).
const MAX_FABRIC_MS: u64 = 3_600_000;

/// The least command bound a disk takes: a ceiling under one round trip of a loaded route
/// would give every command up.
const MIN_COMMAND_TIMEOUT_MS: u64 = 100;

/// What a client name must be (the bus's [`hcabus::types::ClientName`] rule).
const NAME_RULE: &str = "must be 1 to 32 bytes of UTF-8 with no control character (NUL, newline)";

/// A scenario: one adapter (`[hca]` or none) or several (`[[hcas]]`).
// Parsed once per run and moved, never stored in bulk: boxing buys nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Scenario {
    One(StackSetup),
    Many(hcabus_lab::stack::MultiSetup),
}

/// Parses a scenario of one adapter or several.
pub fn parse_any(text: &str) -> Result<Scenario, ScenarioError> {
    if fleet::is_fleet(text) {
        return Err(err(
            "fleet",
            "a fleet of hosts: `hcasim fleet FILE` runs it (docs/design.md §11)",
        ));
    }
    let file: File = toml::from_str(text).map_err(|e| {
        // toml names the unknown or mistyped key and its line; keep its words.
        err("", e.to_string().trim_end().to_string())
    })?;
    if file.hcas.is_empty() {
        build(file).map(Scenario::One)
    } else {
        multi::build(file).map(Scenario::Many)
    }
}

/// Parses a scenario of one adapter; one of several (`[[hcas]]`) is refused by key.
pub fn parse(text: &str) -> Result<StackSetup, ScenarioError> {
    match parse_any(text)? {
        Scenario::One(setup) => Ok(setup),
        Scenario::Many(_) => Err(err(
            "hcas",
            "several adapters: this command runs a host of one (`[hca]`)",
        )),
    }
}

fn fw_version(text: &str) -> Option<u64> {
    let mut parts = text.split('.').map(|p| p.parse::<u16>().ok());
    let v = Identity::fw_version(parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(v)
}

/// The checks of the run's own keys, whatever its adapters.
fn check_run(file: &File) -> Result<(), ScenarioError> {
    if file.name.is_empty() {
        return Err(err("name", "must not be empty"));
    }
    if file.duration_ms == 0 || file.duration_ms > 24 * 3_600_000 {
        return Err(err("duration_ms", "must be between 1 and 86400000"));
    }
    Ok(())
}

fn build(file: File) -> Result<StackSetup, ScenarioError> {
    check_run(&file)?;
    // The keys that name adapters mean nothing in a host of one.
    for (i, c) in file.clients.iter().enumerate() {
        for (key, set) in [("hca", c.hca.is_some()), ("paths", c.paths.is_some())] {
            if set {
                return Err(err(
                    format!("clients[{i}].{key}"),
                    "names adapters, but the scenario has none ([[hcas]])",
                ));
            }
        }
    }
    if let Some(i) = file.events.iter().position(|e| e.hca.is_some()) {
        return Err(err(
            format!("events[{i}].hca"),
            "names an adapter, but the scenario has none ([[hcas]])",
        ));
    }
    let keys = file.hca.clone().unwrap_or_default();
    if keys.name.is_some() {
        return Err(err(
            "hca.name",
            "only an adapter of several ([[hcas]]) has a name",
        ));
    }
    let hca = hca_config(&keys, "hca")?;
    let route = paths::route(&keys, "hca")?;
    let policy = policy(&file.policy)?;
    let clients: Vec<(usize, &Client)> = file.clients.iter().enumerate().collect();
    let mut clients = Clients::build(&clients, (hca.ports, route))?;
    let disks: Vec<&str> = file
        .clients
        .iter()
        .filter(|c| matches!(c.kind.as_str(), "srp" | "bootdisk"))
        .map(|c| c.name.as_str())
        .collect();
    paths::check_disks(&keys, "hca", &disks)?;
    for spec in &mut clients.specs {
        if let ClientSpec::Disk { name, config } = spec {
            config.route = paths::route_for(&keys, "hca", name)?.with_login(config.route.login());
        }
    }
    let with_ibal = clients.with_ibal();
    let events: Vec<(usize, &EventKeys)> = file.events.iter().enumerate().collect();
    let faults = faults(&file, &events, &clients.specs, with_ibal, hca.ports)?;
    let setup = stack(&file, hca, policy, faults, with_ibal, clients.specs);
    budget(&setup, &clients.file_index)?;
    Ok(setup)
}

/// One adapter's stack: the run's keys, the adapter, its faults and its clients.
fn stack(
    file: &File,
    hca: SimHcaConfig,
    policy: Policy,
    faults: Vec<(Instant, Fault)>,
    with_ibal: bool,
    clients: Vec<ClientSpec>,
) -> StackSetup {
    StackSetup {
        sim: SimSetup {
            name: file.name.clone(),
            seed: file.seed,
            duration: Duration::from_ms(file.duration_ms),
            hca,
            policy,
            max_clients: 64,
            recorder_capacity: 1 << 14,
            reported_resets: hcabus_sim::REPORTED_RESETS,
            derived_faults: hcabus_sim::DERIVED_FAULTS,
            clients: Vec::new(),
            faults,
            start: Instant::ZERO,
        },
        ibal: with_ibal.then(IbalConfig::default),
        clients,
    }
}

/// The budget check of one adapter's stack, its refusal keyed by the file's client index.
fn budget(setup: &StackSetup, file_index: &[usize]) -> Result<(), ScenarioError> {
    setup.budget().map_err(|e| {
        let i = file_index[e.client];
        let key = match e.key {
            Some(k) => format!("clients[{i}].{k}"),
            None => format!("clients[{i}]"),
        };
        err(key, e.message)
    })
}

/// The adapter of `keys`, whose keys are named under `at` (`hca`, `hcas[1]`).
fn hca_config(keys: &Hca, at: &str) -> Result<SimHcaConfig, ScenarioError> {
    let mut hca = SimHcaConfig::default();
    if let Some(p) = keys.ports {
        if !(1..=2).contains(&p) {
            return Err(err(
                format!("{at}.ports"),
                "the simulated adapter has 1 or 2 ports",
            ));
        }
        hca.ports = p;
    }
    if let Some(ms) = keys.hw_reset_ms {
        hca.hw_reset = Duration::from_ms(ms);
    }
    for (key, value, to) in [
        ("link_up_ms", keys.link_up_ms, &mut hca.link_up),
        ("sm_sweep_ms", keys.sm_sweep_ms, &mut hca.sm_sweep),
    ] {
        if let Some(ms) = value {
            if ms > MAX_FABRIC_MS {
                return Err(err(
                    format!("{at}.{key}"),
                    format!("must be at most {MAX_FABRIC_MS}"),
                ));
            }
            *to = Duration::from_ms(ms);
        }
    }
    hca.transport = transport(
        (keys.local_ack_timeout, keys.retry_count),
        hca.transport,
        at,
    )?;
    if let Some(v) = &keys.fw_version {
        hca.identity.fw_version = fw_version(v).ok_or_else(|| {
            err(
                format!("{at}.fw_version"),
                "expected \"major.minor.subminor\"",
            )
        })?;
    }
    if let Some(g) = &keys.node_guid {
        hca.identity.node_guid = match g {
            NumOrText::Num(n) => *n,
            NumOrText::Text(t) => {
                let hex = t.strip_prefix("0x").unwrap_or(t);
                u64::from_str_radix(hex, 16)
                    .map_err(|_| err(format!("{at}.node_guid"), "expected a hexadecimal GUID"))?
            }
        };
    }
    Ok(hca)
}

/// An adapter's transport timer from its keys under table `at` (`hca`, `fleet`), what they
/// leave out `default`'s; refused by the key that is wrong.
pub(super) fn transport(
    (ack_timeout, retry_count): (Option<u8>, Option<u8>),
    default: RcTransport,
    at: &str,
) -> Result<RcTransport, ScenarioError> {
    RcTransport::new(
        ack_timeout.unwrap_or(default.local_ack_timeout),
        retry_count.unwrap_or(default.retry_count),
    )
    .map_err(|e| {
        let key = match e {
            TransportError::AckTimeout => "local_ack_timeout",
            TransportError::RetryCount => "retry_count",
        };
        err(format!("{at}.{key}"), e.to_string())
    })
}

fn policy(p: &PolicyKeys) -> Result<Policy, ScenarioError> {
    let mut policy = Policy::default();
    p.apply(&mut policy);
    policy
        .validate()
        .map_err(|e| err(format!("policy.{}", e.field), e.problem))?;
    Ok(policy)
}

/// The `clients` section, built into the stack's client specs.
struct Clients {
    specs: Vec<ClientSpec>,
    /// The file's index of each spec: the access layer has none.
    file_index: Vec<usize>,
    has_ibal: bool,
    needs_ibal: bool,
    disks: u16,
    nets: u16,
    ports: u8,
    /// The fabric route from the targets to this adapter.
    route: hcabus_lab::srp_target::Route,
}

impl Clients {
    /// The clients of one adapter (of `ports` ports, `route` from its targets), each with
    /// its index in the file.
    fn build(
        clients: &[(usize, &Client)],
        (ports, route): (u8, hcabus_lab::srp_target::Route),
    ) -> Result<Self, ScenarioError> {
        let mut out = Clients {
            route,
            specs: Vec::new(),
            file_index: Vec::new(),
            has_ibal: false,
            needs_ibal: false,
            disks: 0,
            nets: 0,
            ports,
        };
        let mut names = std::collections::HashSet::new();
        for &(i, c) in clients {
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
                        "unknown kind {:?}; expected {}",
                        c.kind,
                        words(&ClientKind::ALL.map(ClientKind::as_str), "or")
                    ),
                )
            })?;
            if let Some(key) = c.stray_key(kind) {
                return Err(err(
                    at(key),
                    format!("does not apply to a client of kind {}", kind.as_str()),
                ));
            }
            let Some(spec) = (keys::rule(kind).make)(&mut out, i, c)? else {
                continue;
            };
            if ClientDesc::new(&c.name, kind, ClientFlags::empty()).is_none() {
                return Err(err(at("name"), NAME_RULE));
            }
            out.specs.push(spec);
            out.file_index.push(i);
        }
        if out.specs.len() > 60 {
            return Err(err("clients", "at most 60 clients"));
        }
        if out.needs_ibal && !out.has_ibal {
            // The access layer joins implicitly under its own name: nobody else may take it.
            if let Some((i, _)) = clients.iter().find(|(_, c)| c.name == "ibal") {
                return Err(err(
                    format!("clients[{i}].name"),
                    "\"ibal\" is the access layer's name (it joins because other clients need it)",
                ));
            }
        }
        Ok(out)
    }

    fn with_ibal(&self) -> bool {
        self.has_ibal || self.needs_ibal
    }

    /// The access layer: always called "ibal", and added by the stack itself (no spec).
    fn ibal(&mut self, i: usize, c: &Client) -> Result<Option<ClientSpec>, ScenarioError> {
        if c.name != "ibal" {
            return Err(err(
                format!("clients[{i}].name"),
                "the access layer is always called \"ibal\"",
            ));
        }
        self.has_ibal = true;
        Ok(None)
    }

    fn uverbs(&mut self, _: usize, c: &Client) -> Result<Option<ClientSpec>, ScenarioError> {
        self.needs_ibal = true;
        let config = hcabus_lab::user_process::UverbsSpec::default();
        let name = c.name.clone();
        Ok(Some(ClientSpec::Uverbs { name, config }))
    }

    /// The port a client asks for (`default` when it does not), checked against the adapter.
    fn port(&self, i: usize, c: &Client, default: u8) -> Result<u8, ScenarioError> {
        let p = c.port.unwrap_or(default.min(self.ports));
        if p == 0 || p > self.ports {
            return Err(err(
                format!("clients[{i}].port"),
                format!("the adapter has {} port(s)", self.ports),
            ));
        }
        Ok(p)
    }

    fn disk(
        &mut self,
        i: usize,
        c: &Client,
        boot: bool,
    ) -> Result<Option<ClientSpec>, ScenarioError> {
        let at = |key: &str| format!("clients[{i}].{key}");
        self.needs_ibal = true;
        let d = DiskConfig::default();
        let l = Load::default();
        let load = Load {
            iops: c.iops.unwrap_or(l.iops),
            read_pct: c.read_pct.unwrap_or(l.read_pct),
            n_blocks: c.blocks.unwrap_or(l.n_blocks),
            large: large_io(c).map_err(|(k, e)| err(at(k), e))?,
            series_buckets: l.series_buckets,
        };
        let config = DiskConfig {
            boot,
            queue_depth: c.queue_depth.unwrap_or(d.queue_depth),
            port: self.port(i, c, if boot { 1 } else { 2 })?,
            target_lid: 0x100 + self.disks,
            lun_id: u32::from(self.disks),
            ack_delay: Duration::from_ms(c.ack_delay_ms.unwrap_or(0)),
            guard_last_path: c.guard_last_path.unwrap_or(boot),
            path_timeout: paths::path_timeout(c).map_err(|(k, e)| err(at(k), e))?,
            command_timeout: c
                .command_timeout_ms
                .map_or(d.command_timeout, Duration::from_ms),
            path_groups: paths::path_groups(c).map_err(|(k, e)| err(at(k), e))?,
            max_blocks: load.large.max_blocks(),
            ..d
        };
        if !(MIN_COMMAND_TIMEOUT_MS..=600_000).contains(&config.command_timeout.as_ms()) {
            return Err(err(
                at("command_timeout_ms"),
                format!("must be between {MIN_COMMAND_TIMEOUT_MS} and 600000"),
            ));
        }
        if !(1..=256).contains(&config.queue_depth) {
            return Err(err(at("queue_depth"), "must be between 1 and 256"));
        }
        if load.iops > 100_000 {
            return Err(err(at("iops"), "at most 100000"));
        }
        if load.read_pct > 100 {
            return Err(err(at("read_pct"), "a percentage: 0 to 100"));
        }
        if !(64..=4096).contains(&load.n_blocks) {
            return Err(err(at("blocks"), "must be between 64 and 4096"));
        }
        if u64::from(load.large.blocks) * 4 > load.n_blocks {
            return Err(err(at("large_blocks"), "at most a quarter of blocks"));
        }
        self.disks += 1;
        let name = c.name.clone();
        let config = DiskSpec {
            initiator: config,
            load,
            route: self.route,
        };
        Ok(Some(ClientSpec::Disk { name, config }))
    }

    fn ipoib(&mut self, i: usize, c: &Client) -> Result<Option<ClientSpec>, ScenarioError> {
        self.needs_ibal = true;
        let d = IpoibConfig::default();
        let interface = IpoibConfig {
            port: self.port(i, c, 1 + (self.nets % 2) as u8)?,
            peer_lid: 0x200 + self.nets,
            ack_delay: c.ack_delay_ms.map_or(d.ack_delay, Duration::from_ms),
            ..d
        };
        let lab = IpoibSpec::default();
        let pps = c.pps.unwrap_or(lab.pps);
        if pps > 100_000 {
            return Err(err(format!("clients[{i}].pps"), "at most 100000"));
        }
        self.nets += 1;
        let name = c.name.clone();
        let config = IpoibSpec {
            interface,
            pps,
            ..lab
        };
        Ok(Some(ClientSpec::Ipoib { name, config }))
    }
}

/// A disk client's large transfers: `large_pct` and `large_blocks`, both or neither.
fn large_io(c: &Client) -> Result<LargeIo, (&'static str, String)> {
    match (c.large_pct, c.large_blocks) {
        (None, None) => Ok(LargeIo::NONE),
        (Some(_), None) => Err(("large_pct", "takes large_blocks".into())),
        (None, Some(_)) => Err(("large_blocks", "takes large_pct".into())),
        (Some(pct), _) if !(1..=100).contains(&pct) => {
            Err(("large_pct", "a percentage: 1 to 100".into()))
        }
        // 256 blocks: 1 MiB, SRP's usual largest transfer.
        (_, Some(blocks)) if !(2..=256).contains(&blocks) => {
            Err(("large_blocks", "between 2 and 256".into()))
        }
        (Some(pct), Some(blocks)) => Ok(LargeIo { pct, blocks }),
    }
}

/// A scripted client of kind `custom`.
fn custom(i: usize, c: &Client) -> Result<Option<ClientSpec>, ScenarioError> {
    let at = |key: &str| format!("clients[{i}].{key}");
    let veto = c.veto_planned.unwrap_or(false);
    let flags = if veto || c.can_veto.unwrap_or(false) {
        ClientFlags::CAN_VETO
    } else {
        ClientFlags::empty()
    };
    // Checked here so that a bad name is refused by its key, not when the host is built.
    ClientDesc::new(&c.name, ClientKind::Custom, flags)
        .ok_or_else(|| err(at("name"), NAME_RULE))?;
    if c.request_every_ms == Some(0) {
        return Err(err(at("request_every_ms"), "must be positive"));
    }
    let config = ScriptedConfig {
        kind: ClientKind::Custom,
        flags,
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
    };
    let name = c.name.clone();
    Ok(Some(ClientSpec::Scripted { name, config }))
}

/// The `events` section: when each fault strikes. A client-made reset names its client,
/// which becomes the agent index the host gives it (after the access layer, if any).
fn faults(
    file: &File,
    events: &[(usize, &EventKeys)],
    specs: &[ClientSpec],
    with_ibal: bool,
    ports: u8,
) -> Result<Vec<(Instant, Fault)>, ScenarioError> {
    let mut faults = Vec::new();
    for &(i, e) in events {
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
        let fault = event_fault(i, e, ports)?;
        let fault = match &e.client {
            None => fault,
            Some(name) => {
                if fault != Fault::AdminReset {
                    return Err(err(
                        at("client"),
                        "only an admin_reset can come from a client (its reset_request)",
                    ));
                }
                let pos = specs.iter().position(|s| s.name() == name).ok_or_else(|| {
                    err(
                        at("client"),
                        format!("no client called {name:?} on this adapter"),
                    )
                })?;
                Fault::ClientRequest {
                    agent: (pos + usize::from(with_ibal)) as u16,
                }
            }
        };
        faults.push((Instant::from_ms(e.at_ms), fault));
    }
    Ok(faults)
}

/// A `port_down` event: its port and duration, both required.
fn port_down(i: usize, e: &EventKeys, ports: u8) -> Result<Fault, ScenarioError> {
    let at = |key: &str| format!("events[{i}].{key}");
    let port = e
        .port
        .ok_or_else(|| err(at("port"), "a port_down names its port"))?;
    if port == 0 || port > ports {
        return Err(err(at("port"), format!("the adapter has {ports} port(s)")));
    }
    let ms = e.duration_ms.ok_or_else(|| {
        err(
            at("duration_ms"),
            "a port_down says how long the cable is out",
        )
    })?;
    Ok(Fault::PortDown {
        port,
        duration: Duration::from_ms(ms),
    })
}

/// A fault the device is given is checked by INJECT_FAULT's own rule (`FaultRequest::check`),
/// so a scenario and `hcactl inject` take the same ranges, refused with the key named.
fn in_range(i: usize, fault: Fault) -> Result<Fault, ScenarioError> {
    match fault.request().map(|r| r.check()) {
        Some(Err(e)) => Err(err(format!("events[{i}].{}", e.field), e.to_string())),
        _ => Ok(fault),
    }
}

/// The fault an event names, with the keys its kind takes (`count`; `port` and
/// `duration_ms`) and no others, in INJECT_FAULT's ranges.
fn event_fault(i: usize, e: &EventKeys, ports: u8) -> Result<Fault, ScenarioError> {
    let at = |key: &str| format!("events[{i}].{key}");
    let kind = Fault::named(&e.fault).filter(|f| f.in_scenarios());
    if kind.map(Fault::args) != Some(FaultArgs::PortAndDuration) {
        for (key, set) in [
            ("port", e.port.is_some()),
            ("duration_ms", e.duration_ms.is_some()),
        ] {
            if set {
                return Err(err(
                    at(key),
                    "only a port_down takes a port and a duration_ms",
                ));
            }
        }
    }
    let Some(kind) = kind else {
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
    if e.count.is_some() && !kind.takes_count() {
        let counted: Vec<&str> = Fault::ALL
            .into_iter()
            .filter(|f| f.in_scenarios() && f.takes_count())
            .map(Fault::name)
            .collect();
        return Err(err(
            at("count"),
            format!("only {} take a count", words(&counted, "and")),
        ));
    }
    let fault = match kind.args() {
        FaultArgs::PortAndDuration => port_down(i, e, ports)?,
        FaultArgs::None | FaultArgs::Count | FaultArgs::Client => {
            kind.with_count(e.count.unwrap_or(1))
        }
    };
    in_range(i, fault)
}

/// `a, b and c` (or `a, b or c`): a list the vocabulary gives, for an error to name.
fn words(names: &[&str], last: &str) -> String {
    match names.split_last() {
        None => String::new(),
        Some((tail, [])) => (*tail).to_string(),
        Some((tail, rest)) => format!("{} {last} {tail}", rest.join(", ")),
    }
}
