//! The embedded hosts: the `hcasim` default (one adapter), the same host with a second
//! adapter and a multipath boot disk (`hcasim --multipath`), and the random stacks the hunt
//! draws.

use std::vec::Vec;

use hcabus::{Duration, Instant};
use hcabus_sim::{Behavior, SimHcaConfig};

use super::{
    AdapterSetup, ClientSpec, DiskSpec, IpoibSpec, Load, MultiSetup, MultipathSpec, PathConfig,
    ScriptedConfig, StackSetup,
};
use crate::srp_target::{Route, RoutePhase};
use crate::user_process::UverbsSpec;
use ibal::access::IbalConfig;
use ibal::disk::{DiskConfig, PathTimeout};
use ibal::ipoib::IpoibConfig;

/// How long a ConnectX adapter and its fabric take to come back, as the defaults model them
/// (docs/hcasim.md cites the sources): the device may be touched 1 s after the reset is
/// asserted (mlx4 `reset.c`), each port then trains its link, and the subnet manager,
/// told by a trap, sweeps and gives it a LID.
pub const REALISTIC: Realistic = Realistic {
    hw_reset_ms: 1_000,
    link_up_ms: 1_500,
    sm_sweep_ms: 2_000,
};

/// Fabric and device timings, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Realistic {
    pub hw_reset_ms: u64,
    pub link_up_ms: u64,
    pub sm_sweep_ms: u64,
}

impl Realistic {
    /// `hca` with these timings.
    pub fn apply(&self, hca: SimHcaConfig) -> SimHcaConfig {
        SimHcaConfig {
            hw_reset: Duration::from_ms(self.hw_reset_ms),
            link_up: Duration::from_ms(self.link_up_ms),
            sm_sweep: Duration::from_ms(self.sm_sweep_ms),
            ..hca
        }
    }
}

/// How long the embedded runs last: the error at 1.4 s, its detection at the next health
/// poll, a 1 s hardware reset and 3.5 s of link training and sweep, and time to show the
/// host back at full speed.
const EMBEDDED_RUN_MS: u64 = 10_000;

fn disk(boot: bool, port: u8, target_lid: u16, lun_id: u32, iops: u32, ack_ms: u64) -> DiskSpec {
    DiskSpec {
        initiator: DiskConfig {
            boot,
            port,
            target_lid,
            lun_id,
            ack_delay: Duration::from_ms(ack_ms),
            guard_last_path: boot,
            ..DiskConfig::default()
        },
        load: Load {
            iops,
            ..Load::default()
        },
        route: Route::default(),
    }
}

fn ipoib(port: u8, peer_lid: u16) -> IpoibSpec {
    IpoibSpec {
        interface: IpoibConfig {
            port,
            peer_lid,
            ..IpoibConfig::default()
        },
        ..IpoibSpec::default()
    }
}

/// The embedded default of docs/design.md §9: a boot-from-SAN host under load — the access layer,
/// IPoIB on both ports, the boot disk on the paging path and a data LUN, both busy, and a
/// user-verbs process — on the run of [`hcabus_sim::scenarios::boot_from_san_run`]
/// (a catastrophic firmware error at 1.4 s), which it rides through, with the device and
/// fabric timings of [`REALISTIC`] and ten seconds to show it.
pub fn boot_from_san() -> StackSetup {
    let mut sim = hcabus_sim::scenarios::boot_from_san_run();
    sim.hca = REALISTIC.apply(sim.hca);
    sim.duration = Duration::from_ms(EMBEDDED_RUN_MS);
    StackSetup {
        sim,
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
                config: UverbsSpec::default(),
            },
        ],
    }
}

/// The default host as the suites use it: the same clients and fault on a device that is
/// back in 200 ms with its ports active at once, over five seconds, so that a suite spends
/// its time on the clients rather than waiting for a fabric.
pub fn boot_from_san_fast() -> StackSetup {
    StackSetup {
        sim: hcabus_sim::scenarios::boot_from_san_run(),
        ..boot_from_san()
    }
}

/// `hcasim --multipath`: the default host with a second adapter, `hca1`, and the boot disk
/// on two paths, one through each. The catastrophic error strikes `hca0` as in the default;
/// the boot disk's commands move to `hca1` at RESET instead of waiting seconds for the
/// device, the link and the subnet manager. IPoIB and the data LUN stay on `hca0` alone and
/// ride through as in the default.
pub fn boot_from_san_multipath() -> MultiSetup {
    let base = boot_from_san();
    let boot = disk(true, 1, 0x100, 0, 2_000, 0);
    let boot = DiskSpec {
        initiator: DiskConfig {
            path_timeout: ibal::disk::PathTimeout::DEFAULT,
            ..boot.initiator
        },
        ..boot
    };
    let path = |path| ClientSpec::DiskPath {
        name: "bootdisk".into(),
        config: PathConfig {
            initiator: boot.initiator,
            route: boot.route,
            disk: 0,
            path,
        },
    };
    let mut hca0 = base.clone();
    for c in &mut hca0.clients {
        if c.name() == "bootdisk" {
            *c = path(0);
        }
    }
    let mut hca1 = base.clone();
    hca1.sim.faults.clear();
    hca1.sim.hca.identity.node_guid += 0x10;
    hca1.sim.hca.identity.serial += 1;
    hca1.clients = std::vec![path(1)];
    MultiSetup {
        name: "boot-from-san-multipath".into(),
        seed: base.sim.seed,
        adapters: std::vec![
            AdapterSetup {
                name: "hca0".into(),
                stack: hca0,
            },
            AdapterSetup {
                name: "hca1".into(),
                stack: hca1,
            },
        ],
        disks: std::vec![MultipathSpec {
            name: "bootdisk".into(),
            config: boot.initiator,
            load: boot.load,
            paths: 2,
        }],
    }
}

/// The multipath host under random faults on both adapters, from `seed`: the hunt for
/// lost, duplicated or corrupted I/O across failovers. Any failure replays from its seed.
pub fn random_multipath(seed: u64) -> MultiSetup {
    use hcabus::Instant;
    use hcabus_sim::Fault;
    use rand::{Rng, SeedableRng};

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut setup = boot_from_san_multipath();
    setup.name = std::format!("random-multipath-{seed}");
    setup.seed = seed;
    let kinds: Vec<Fault> = Fault::DRAWN
        .into_iter()
        .filter(|f| !matches!(f, Fault::HealthStall | Fault::SurpriseRemoval))
        .collect();
    let io_hold_timeout_ms = if rng.gen_bool(0.3) {
        rng.gen_range(20..2_000)
    } else {
        30_000
    };
    let trigger_on = rng.gen_range(0..setup.adapters.len());
    for (i, a) in setup.adapters.iter_mut().enumerate() {
        let sim = &mut a.stack.sim;
        sim.duration = Duration::from_ms(8_000);
        sim.faults.clear();
        sim.policy.io_hold_timeout_ms = io_hold_timeout_ms;
        sim.hca.hw_reset = Duration::from_ms(rng.gen_range(10..1_500));
        sim.hca.link_up = Duration::from_ms(rng.gen_range(0..1_500));
        sim.hca.sm_sweep = Duration::from_ms(rng.gen_range(0..2_500));
        if i == trigger_on {
            let triggers = Fault::TRIGGERS;
            let f = triggers[rng.gen_range(0..triggers.len())];
            sim.faults
                .push((Instant::from_ms(rng.gen_range(300..5_000)), f));
        }
        for _ in 0..rng.gen_range(0..3) {
            let f = kinds[rng.gen_range(0..kinds.len())];
            sim.faults
                .push((Instant::from_ms(rng.gen_range(300..6_000)), f));
        }
        if rng.gen_bool(1.0 / 3.0) {
            let fault = Fault::PortDown {
                port: 1,
                duration: Duration::from_ms(rng.gen_range(10..2_000)),
            };
            sim.faults
                .push((Instant::from_ms(rng.gen_range(300..7_000)), fault));
        }
        if rng.gen_bool(0.02) {
            sim.faults.push((
                Instant::from_ms(rng.gen_range(300..7_000)),
                Fault::SurpriseRemoval,
            ));
        }
    }
    // Fast path failover off, fixed at a hair trigger or anywhere between, or adaptive
    // within random bounds: the take-back, the late answer, the probe and the adapter's
    // reset in every order.
    let timeout = match rng.gen_range(0..5) {
        0 => PathTimeout::Off,
        1 => PathTimeout::Fixed(Duration::from_ms(1)),
        2 => PathTimeout::Fixed(Duration::from_ms(rng.gen_range(2..800))),
        _ => {
            let min = rng.gen_range(1..50);
            PathTimeout::Adaptive {
                min: Duration::from_ms(min),
                max: Duration::from_ms(min + rng.gen_range(0..3_000)),
            }
        }
    };
    // A slow or failing route to the target on no path, one, or every path (a slow target:
    // nothing may move then), so answers come late, after their command was given up.
    let slow = rng.gen_range(0..4);
    for d in &mut setup.disks {
        d.config.path_timeout = timeout;
    }
    for (i, a) in setup.adapters.iter_mut().enumerate() {
        let route = match slow {
            1 if i == 0 => random_route(&mut rng),
            3 => random_route(&mut rng),
            _ => Route::default(),
        };
        for c in &mut a.stack.clients {
            if let ClientSpec::DiskPath { config, .. } = c {
                config.initiator.path_timeout = timeout;
                config.route = route;
            }
        }
    }
    setup
}

/// A slow route (1 to 400 ms), or a healthy one that turns to one of the fail-slow trace
/// set's faults (a slowdown, stragglers, slow under load, a blackhole) for a while.
fn random_route(rng: &mut impl rand::Rng) -> Route {
    if rng.gen_bool(0.5) {
        return Route::constant(Duration::from_ms(rng.gen_range(1..400)));
    }
    let start = Instant::from_ms(rng.gen_range(100..2_000));
    let mut phase = RoutePhase::plain(start, Duration::ZERO);
    match rng.gen_range(0..4) {
        0 => phase.latency = Duration::from_ms(rng.gen_range(1..100)),
        1 => {
            phase.spike = Duration::from_ms(rng.gen_range(1..100));
            phase.spike_per_million = rng.gen_range(1..100_000);
        }
        2 => phase.load = Duration::from_us(rng.gen_range(10..2_000)),
        _ => phase.blackhole = true,
    }
    let mut route = Route::default();
    let end = start + Duration::from_ms(rng.gen_range(50..3_000));
    for p in [phase, RoutePhase::plain(end, Duration::ZERO)] {
        // Cannot fail: two phases in order.
        let _ = route.push(p);
    }
    route
}

/// The default host under a random fault plan and policy from `seed`: used to hunt for
/// lost, duplicated or corrupted I/O under every fault; any failure replays from its seed.
pub fn random_stack(seed: u64) -> StackSetup {
    use hcabus::Instant;
    use hcabus_sim::Fault;
    use rand::{Rng, SeedableRng};

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut setup = boot_from_san();
    // The fabric is drawn below, one run in three; the draws before it give the setups
    // they always gave.
    setup.sim.hca.link_up = Duration::ZERO;
    setup.sim.hca.sm_sweep = Duration::ZERO;
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
    hcabus_sim::draw_recovery_policy(&mut rng, p);
    setup.sim.hca.hw_reset = Duration::from_ms(rng.gen_range(10..1_500));
    // One run in three also gets a shaped pair aimed at the phases of one reset.
    if rng.gen_bool(1.0 / 3.0) {
        let start = Instant::from_ms(rng.gen_range(300..4_000));
        let quiesce_ms = setup.sim.policy.quiesce_deadline_ms;
        let hw_reset_ms = setup.sim.hca.hw_reset.as_ms();
        let pair = hcabus_sim::shaped_faults(&mut rng, start, quiesce_ms, hw_reset_ms);
        setup.sim.faults.extend(pair);
    }
    for c in &mut setup.clients {
        if let ClientSpec::Disk { config, .. } = c {
            config.load.iops = rng.gen_range(200..4_000);
            config.load.read_pct = rng.gen_range(0..=100);
            if !config.initiator.boot {
                config.initiator.ack_delay = Duration::from_ms(rng.gen_range(0..50));
            }
        }
    }
    // Sometimes a client that vetoes planned resets, or one that never answers.
    if rng.gen_bool(0.4) {
        setup.clients.push(awkward_client(rng.gen_bool(0.5)));
    }
    // One run in three models the fabric: slow links and subnet manager, cables pulled, a
    // busy target. Drawn last, so the draws above give the setups they always gave.
    if rng.gen_bool(1.0 / 3.0) {
        random_fabric(&mut rng, &mut setup);
    }
    setup
}

fn random_fabric(rng: &mut impl rand::Rng, setup: &mut StackSetup) {
    use hcabus::Instant;
    use hcabus_sim::Fault;
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
fn awkward_client(veto: bool) -> ClientSpec {
    use hcabus::types::{ClientFlags, ClientKind};
    let (name, flags) = if veto {
        ("vetoer", ClientFlags::CAN_VETO)
    } else {
        ("wedged", ClientFlags::empty())
    };
    ClientSpec::Scripted {
        name: name.into(),
        config: ScriptedConfig {
            kind: ClientKind::Custom,
            flags,
            behavior: Behavior {
                veto_planned: veto,
                never_ack: !veto,
                ..Behavior::default()
            },
        },
    }
}
