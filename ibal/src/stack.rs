//! Assembles a host: the access layer first (so it gets RESET last and RESET_END first),
//! then the clients a scenario names, and sums up their I/O and network accounting.

use std::boxed::Box;
use std::string::String;
use std::vec::Vec;

use hcabus::sim::{Agent, Behavior, ScriptedAgent, SimHost, SimSetup};
use hcabus::types::ClientDesc;
use hcabus::PolicyError;

use crate::access::{Ibal, IbalConfig};
use crate::block::IoStats;
use crate::disk::{DiskConfig, SrpClient};
use crate::ibal_client::{IbalClient, SharedIbal};
use crate::ipoib::{IpoibClient, IpoibConfig, NetStats};
use crate::uverbs::{UverbsClient, UverbsConfig};

/// One client of a stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientSpec {
    /// An SRP data LUN or the boot disk, with its workload and target.
    Disk {
        name: String,
        config: DiskConfig,
    },
    Ipoib {
        name: String,
        config: IpoibConfig,
    },
    Uverbs {
        name: String,
        config: UverbsConfig,
    },
    /// A scripted client (kind `custom`, or any kind the scenario only scripts).
    Scripted {
        desc: ClientDesc,
        behavior: Behavior,
    },
}

impl ClientSpec {
    pub fn name(&self) -> &str {
        match self {
            ClientSpec::Disk { name, .. }
            | ClientSpec::Ipoib { name, .. }
            | ClientSpec::Uverbs { name, .. } => name,
            ClientSpec::Scripted { desc, .. } => desc.name.as_str(),
        }
    }
}

/// A host to build: the run (name, seed, duration, adapter, policy, faults) and its
/// clients. `sim.clients` is ignored: clients come from `clients`.
#[derive(Debug, Clone)]
pub struct StackSetup {
    pub sim: SimSetup,
    /// The access layer; `None` only for a host of scripted clients alone.
    pub ibal: Option<IbalConfig>,
    pub clients: Vec<ClientSpec>,
}

/// Why a stack could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    Policy(PolicyError),
    /// A client name is empty or longer than the bus allows.
    BadName(String),
    /// A client that uses verbs, in a host without the access layer.
    NeedsIbal(String),
    /// A client the adapter or the access layer cannot serve.
    Budget(crate::budget::BudgetError),
}

impl core::fmt::Display for BuildError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            BuildError::Policy(e) => write!(f, "policy: {e}"),
            BuildError::BadName(n) => write!(f, "client name {n:?} is empty or too long"),
            BuildError::NeedsIbal(n) => write!(f, "client {n:?} needs the access layer (ibal)"),
            BuildError::Budget(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for BuildError {}

/// Builds the host with IBAL and every client of `setup`.
pub fn build(setup: &StackSetup) -> Result<SimHost, BuildError> {
    crate::budget::check(setup).map_err(BuildError::Budget)?;
    build_unchecked(setup)
}

/// Builds without the budget check: for tests that show what a stack the budget refuses
/// would do at run time (a client that cannot come up, recorded).
pub fn build_unchecked(setup: &StackSetup) -> Result<SimHost, BuildError> {
    let ibal = SharedIbal::new(Ibal::new(setup.ibal.unwrap_or_default()));
    let mut agents: Vec<Box<dyn Agent>> = Vec::with_capacity(setup.clients.len() + 1);
    if setup.ibal.is_some() {
        agents.push(Box::new(IbalClient::new(ibal.clone())));
    } else if let Some(spec) = setup
        .clients
        .iter()
        .find(|c| !matches!(c, ClientSpec::Scripted { .. }))
    {
        return Err(BuildError::NeedsIbal(spec.name().into()));
    }
    for spec in &setup.clients {
        let bad = || BuildError::BadName(spec.name().into());
        let agent: Box<dyn Agent> = match spec {
            ClientSpec::Disk { name, config } => {
                Box::new(SrpClient::new(name, *config, ibal.clone()).ok_or_else(bad)?)
            }
            ClientSpec::Ipoib { name, config } => {
                Box::new(IpoibClient::new(name, *config, ibal.clone()).ok_or_else(bad)?)
            }
            ClientSpec::Uverbs { name, config } => {
                Box::new(UverbsClient::new(name, *config, ibal.clone()).ok_or_else(bad)?)
            }
            ClientSpec::Scripted { desc, behavior } => {
                Box::new(ScriptedAgent::new(*desc, *behavior))
            }
        };
        agents.push(agent);
    }
    SimHost::with_agents(&setup.sim, agents).map_err(BuildError::Policy)
}

/// The I/O accounting of every disk of `host`, summed.
pub fn io_stats(host: &SimHost) -> IoStats {
    let mut total = IoStats::default();
    for d in host.agents_of::<SrpClient>() {
        total.add(&d.io_stats());
    }
    total
}

/// The network accounting of every IPoIB interface of `host`, summed.
pub fn net_stats(host: &SimHost) -> NetStats {
    let mut total = NetStats::default();
    for n in host.agents_of::<IpoibClient>() {
        total.add(n.stats());
    }
    total
}

/// The embedded default of SPEC §9: a boot-from-SAN host under load — the access layer,
/// IPoIB on both ports, the boot disk on the paging path and a data LUN, both busy, and a
/// user-verbs process — on the run of [`hcabus::sim::scenarios::boot_from_san_run`]
/// (a catastrophic firmware error at 1.4 s), which it rides through.
pub fn boot_from_san() -> StackSetup {
    use hcabus::Duration;

    let disk = |boot, port, target_lid, lun_id, iops, ack_ms| DiskConfig {
        boot,
        iops,
        port,
        target_lid,
        lun_id,
        ack_delay: Duration::from_ms(ack_ms),
        ..DiskConfig::default()
    };
    let ipoib = |port, peer_lid| IpoibConfig {
        port,
        peer_lid,
        ..IpoibConfig::default()
    };
    StackSetup {
        sim: hcabus::sim::scenarios::boot_from_san_run(),
        ibal: Some(IbalConfig::default()),
        clients: std::vec![
            ClientSpec::Ipoib {
                name: "ipoib-port1".into(),
                config: ipoib(1, 0x200),
            },
            ClientSpec::Ipoib {
                name: "ipoib-port2".into(),
                config: ipoib(2, 0x201),
            },
            ClientSpec::Disk {
                name: "bootdisk".into(),
                config: disk(true, 1, 0x100, 0, 2_000, 0),
            },
            ClientSpec::Disk {
                name: "data-lun".into(),
                config: disk(false, 2, 0x101, 1, 1_500, 2),
            },
            ClientSpec::Uverbs {
                name: "uverbs".into(),
                config: UverbsConfig::default(),
            },
        ],
    }
}

/// The default host under a random fault plan and policy from `seed`: used to hunt for
/// lost, duplicated or corrupted I/O under every fault; any failure replays from its seed.
pub fn random_stack(seed: u64) -> StackSetup {
    use hcabus::sim::Fault;
    use hcabus::{Duration, Instant};
    use rand::{Rng, SeedableRng};

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut setup = boot_from_san();
    setup.sim.name = std::format!("random-stack-{seed}");
    setup.sim.seed = seed;
    setup.sim.duration = Duration::from_ms(8_000);
    // Every kind but a health stall, which on its own only delays the next reset.
    let kinds: Vec<Fault> = Fault::DRAWN
        .into_iter()
        .filter(|f| *f != Fault::HealthStall)
        .collect();
    setup.sim.faults.clear();
    // At least one fault that starts a reset; the others may change how it goes.
    let triggers = Fault::TRIGGERS;
    setup.sim.faults.push((
        Instant::from_ms(rng.gen_range(300..5_000)),
        triggers[rng.gen_range(0..triggers.len())],
    ));
    for _ in 0..rng.gen_range(0..4) {
        let f = kinds[rng.gen_range(0..kinds.len())];
        if f == Fault::SurpriseRemoval && rng.gen_bool(0.7) {
            continue;
        }
        setup
            .sim
            .faults
            .push((Instant::from_ms(rng.gen_range(300..6_000)), f));
    }
    let p = &mut setup.sim.policy;
    p.quiesce_deadline_ms = rng.gen_range(50..3_000);
    p.hw_ready_timeout_ms = rng.gen_range(500..3_000);
    p.io_hold_timeout_ms = if rng.gen_bool(0.3) {
        rng.gen_range(20..500)
    } else {
        30_000
    };
    p.auto_restart_window_ms = rng.gen_range(3_000..20_000);
    p.abort_on_unresponsive = rng.gen_bool(0.3);
    hcabus::sim::draw_recovery_policy(&mut rng, p);
    setup.sim.hca.hw_reset = Duration::from_ms(rng.gen_range(10..1_500));
    // One run in three also gets a shaped pair aimed at the phases of one reset.
    if rng.gen_bool(1.0 / 3.0) {
        let start = Instant::from_ms(rng.gen_range(300..4_000));
        let quiesce_ms = setup.sim.policy.quiesce_deadline_ms;
        let hw_reset_ms = setup.sim.hca.hw_reset.as_ms();
        let pair = hcabus::sim::shaped_faults(&mut rng, start, quiesce_ms, hw_reset_ms);
        setup.sim.faults.extend(pair);
    }
    for c in &mut setup.clients {
        if let ClientSpec::Disk { config, .. } = c {
            config.iops = rng.gen_range(200..4_000);
            config.read_pct = rng.gen_range(0..=100);
            if !config.boot {
                config.ack_delay = Duration::from_ms(rng.gen_range(0..50));
            }
        }
    }
    // Sometimes a client that vetoes planned resets, or one that never answers.
    if rng.gen_bool(0.4) {
        setup.clients.extend(awkward_client(rng.gen_bool(0.5)));
    }
    // One run in three models the fabric: slow links and subnet manager, cables pulled, a
    // busy target. Drawn last, so the draws above give the setups they always gave.
    if rng.gen_bool(1.0 / 3.0) {
        random_fabric(&mut rng, &mut setup);
    }
    setup
}

fn random_fabric(rng: &mut impl rand::Rng, setup: &mut StackSetup) {
    use hcabus::sim::Fault;
    use hcabus::{Duration, Instant};
    let hca = &mut setup.sim.hca;
    hca.link_up = Duration::from_ms(rng.gen_range(0..1_500));
    hca.sm_sweep = Duration::from_ms(rng.gen_range(0..3_000));
    let ports = hca.ports;
    for _ in 0..rng.gen_range(0..3) {
        let fault = Fault::PortDown {
            port: rng.gen_range(1..=ports),
            duration: Duration::from_ms(rng.gen_range(10..2_000)),
        };
        let at = Instant::from_ms(rng.gen_range(300..7_000));
        setup.sim.faults.push((at, fault));
    }
    if rng.gen_bool(0.5) {
        let at = Instant::from_ms(rng.gen_range(300..6_000));
        setup
            .sim
            .faults
            .push((at, Fault::TargetBusy(rng.gen_range(1..20))));
    }
}

/// A scripted client that vetoes every planned reset, or one that never answers anything.
fn awkward_client(veto: bool) -> Option<ClientSpec> {
    use hcabus::types::{ClientFlags, ClientKind};
    let (name, flags) = if veto {
        ("vetoer", ClientFlags::CAN_VETO)
    } else {
        ("wedged", ClientFlags::empty())
    };
    Some(ClientSpec::Scripted {
        desc: ClientDesc::new(name, ClientKind::Custom, flags)?,
        behavior: Behavior {
            veto_planned: veto,
            never_ack: !veto,
            ..Behavior::default()
        },
    })
}
