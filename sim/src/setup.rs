//! What a run is made of: the fault vocabulary, the scenario a host runs, and random
//! scenarios for hunting violations.

use crate::report::REPORTED_RESETS;
use std::string::String;
use std::vec::Vec;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::agent::Behavior;
pub use crate::fault::Fault;
use crate::hca::SimHcaConfig;
use hcabus::policy::Policy;
use hcabus::time::{Duration, Instant};
use hcabus::types::*;

/// How long a hung firmware takes to be noticed by a command that never completes.
pub const COMMAND_TIMEOUT: Duration = Duration::from_ms(2_500);

/// Room for faults the harness adds at run time beyond those of the plan's own hangs, unless
/// a setup says otherwise (`SimSetup::derived_faults`): a hang injected by IOCTL adds its
/// command timeout. A run that injects more grows the plan, and a reset that the growth
/// lands in reports the allocation: nothing is hidden.
pub const DERIVED_FAULTS: usize = 256;

/// A scenario the host can run.
#[derive(Debug, Clone)]
pub struct SimSetup {
    pub name: String,
    pub seed: u64,
    pub duration: Duration,
    pub hca: SimHcaConfig,
    pub policy: Policy,
    pub max_clients: u16,
    pub recorder_capacity: usize,
    /// Finished resets the run's report keeps, reserved at start (`REPORTED_RESETS` unless
    /// a host of many, such as a fleet's, keeps fewer); past it they are counted, not kept.
    pub reported_resets: usize,
    /// Room reserved for faults the harness adds while it runs (`DERIVED_FAULTS` unless a
    /// host of many keeps less); past it the plan grows, and a reset it lands in reports
    /// the allocation.
    pub derived_faults: usize,
    pub clients: Vec<(ClientDesc, Behavior)>,
    pub faults: Vec<(Instant, Fault)>,
    /// When the host powers on: its driver starts then, and nothing of it runs before (a
    /// fleet's host that boots late). Its faults and its end are instants of the run.
    pub start: Instant,
}

impl Default for SimSetup {
    fn default() -> Self {
        SimSetup {
            name: "unnamed".into(),
            seed: 1,
            duration: Duration::from_ms(5_000),
            hca: SimHcaConfig::default(),
            policy: Policy::default(),
            max_clients: 64,
            recorder_capacity: 8192,
            reported_resets: REPORTED_RESETS,
            derived_faults: DERIVED_FAULTS,
            clients: Vec::new(),
            faults: Vec::new(),
            start: Instant::ZERO,
        }
    }
}

/// A reset's trigger and a second cause aimed at one phase of it: the shapes hand-made
/// scenarios found bugs with and uniform draws rarely reach (two causes at one instant, a
/// fault inside the query, the quiesce, the hardware reset or the restore, planned + fatal,
/// firmware activation during a reset). `quiesce_ms` and `hw_reset_ms` are the plan's own.
pub fn shaped_faults(
    rng: &mut impl Rng,
    start: Instant,
    quiesce_ms: u64,
    hw_reset_ms: u64,
) -> [(Instant, Fault); 2] {
    const SECOND: [Fault; 8] = [
        Fault::Catastrophic,
        Fault::CommandTimeout,
        Fault::AdminReset,
        Fault::PlannedReset,
        Fault::FwActivate,
        Fault::ResetFails(1),
        Fault::DeviceReplaced,
        Fault::SurpriseRemoval,
    ];
    // Same instant; inside the query or early quiesce; late quiesce; the hardware reset;
    // just after it (the restore).
    let offsets_ms = [
        0,
        1,
        quiesce_ms / 2,
        quiesce_ms + hw_reset_ms / 2,
        quiesce_ms + hw_reset_ms + 1,
    ];
    let trigger = Fault::TRIGGERS[rng.gen_range(0..Fault::TRIGGERS.len())];
    let second = SECOND[rng.gen_range(0..SECOND.len())];
    let at = start + Duration::from_ms(offsets_ms[rng.gen_range(0..offsets_ms.len())]);
    [(start, trigger), (at, second)]
}

/// Draws the keys that decide whether and how a device comes back: the query of a planned
/// reset, the throttles, `auto_recover` and the paging path's hold. Every random generator
/// draws them here, so none of them leaves one at its default.
pub fn draw_recovery_policy(rng: &mut impl Rng, p: &mut Policy) {
    p.query_deadline_ms = rng.gen_range(20..2_000);
    p.client_request_limit = rng.gen_range(1..=4);
    p.max_auto_resets = rng.gen_range(1..=5);
    // Off now and then: the device is left Failed for an administrator who never comes.
    p.auto_recover = rng.gen_bool(0.85);
    p.paging_io_hold_timeout_ms = if rng.gen_bool(0.7) {
        0
    } else {
        rng.gen_range(200..10_000)
    };
    debug_assert!(p.validate().is_ok(), "drawn policy out of range: {p:?}");
}

/// Link training, the subnet manager's sweep and one to four cable pulls, some of them
/// overlapping on one port, at moments anywhere in the run.
fn draw_fabric(rng: &mut impl Rng, hca: &mut SimHcaConfig, faults: &mut Vec<(Instant, Fault)>) {
    hca.link_up = Duration::from_ms(rng.gen_range(0..2_000));
    hca.sm_sweep = Duration::from_ms(rng.gen_range(0..2_000));
    for _ in 0..rng.gen_range(1..=4) {
        let port = rng.gen_range(1..=hca.ports.max(1));
        let duration = Duration::from_ms(rng.gen_range(1..10_000));
        faults.push((
            Instant::from_ms(rng.gen_range(0..30_000)),
            Fault::PortDown { port, duration },
        ));
    }
}

/// A random scenario from a seed: clients with random behaviours and a random fault plan.
/// Used to hunt for invariant violations; any failure replays from its seed.
pub fn random_setup(seed: u64) -> SimSetup {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n_clients = rng.gen_range(1..=12);
    let kinds = ClientKind::ALL;
    let mut clients = Vec::new();
    for i in 0..n_clients {
        let kind = kinds[rng.gen_range(0..kinds.len())];
        let mut flags = ClientFlags::empty();
        if rng.gen_bool(0.3) {
            flags |= ClientFlags::CAN_VETO;
        }
        let behavior = Behavior {
            ack_delay: Duration::from_ms(if rng.gen_bool(0.5) {
                0
            } else {
                rng.gen_range(1..800)
            }),
            never_ack: rng.gen_bool(0.1),
            veto_planned: rng.gen_bool(0.15),
            unregister_on_reset: rng.gen_bool(0.05),
            reregister_on_reset: rng.gen_bool(0.1),
            request_reset_at: rng
                .gen_bool(0.2)
                .then(|| Instant::from_ms(rng.gen_range(0..20_000))),
            request_every: None,
            request_on_reset_end: false,
        };
        let name = std::format!("{}{}", kind.as_str(), i);
        if let Some(desc) = ClientDesc::new(&name, kind, flags) {
            clients.push((desc, behavior));
        }
    }
    let fault_kinds = Fault::DRAWN;
    let mut faults = Vec::new();
    for _ in 0..rng.gen_range(1..8) {
        let f = fault_kinds[rng.gen_range(0..fault_kinds.len())];
        // Removal ends everything; make it rare so that the rest gets exercised.
        if f == Fault::SurpriseRemoval && rng.gen_bool(0.7) {
            continue;
        }
        faults.push((Instant::from_ms(rng.gen_range(0..30_000)), f));
    }
    let mut policy = Policy {
        quiesce_deadline_ms: rng.gen_range(100..3_000),
        hw_ready_timeout_ms: rng.gen_range(500..3_000),
        auto_restart_window_ms: rng.gen_range(3_000..60_000),
        abort_on_unresponsive: rng.gen_bool(0.3),
        storm_window_ms: rng.gen_range(1_000..60_000),
        ..Policy::default()
    };
    draw_recovery_policy(&mut rng, &mut policy);
    let hw_reset_ms = rng.gen_range(10..2_000);
    // One run in three also gets a shaped pair aimed at the phases of one reset.
    if rng.gen_bool(1.0 / 3.0) {
        let start = Instant::from_ms(rng.gen_range(0..20_000));
        faults.extend(shaped_faults(
            &mut rng,
            start,
            policy.quiesce_deadline_ms,
            hw_reset_ms,
        ));
    }
    // Drawn last, so that every draw above is what it was for the same seed. One run in
    // three models the fabric and pulls cables at random moments, so that a pull lands in
    // every state (docs/design.md §5 "Ports": the cable stays out through any reset).
    let mut hca = SimHcaConfig {
        hw_reset: Duration::from_ms(hw_reset_ms),
        ..SimHcaConfig::default()
    };
    if rng.gen_bool(1.0 / 3.0) {
        draw_fabric(&mut rng, &mut hca, &mut faults);
    }
    SimSetup {
        name: std::format!("random-{seed}"),
        seed,
        duration: Duration::from_ms(40_000),
        hca,
        policy,
        max_clients: 16,
        recorder_capacity: 1 << 14,
        reported_resets: REPORTED_RESETS,
        derived_faults: DERIVED_FAULTS,
        clients,
        faults,
        start: Instant::ZERO,
    }
}
