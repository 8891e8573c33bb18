//! The faults that strike a whole fleet at once, and what each takes: the links, the
//! disks a recovery waits for, a new master.

use hcabus::{Duration, Instant};

use super::SmSetup;

/// Something that happens to the whole fleet at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FleetFault {
    /// Target `target` (its index) restarts: every connection to it drops, and it answers no
    /// login for `down`.
    TargetRestart { target: usize, down: Duration },
    /// Every port of every host loses its link for `down` (a core switch reboots).
    LinkFlap { down: Duration },
    /// Leaf switch `leaf` reboots: every port cabled to it loses its link for `down` (a
    /// switch's reboot takes minutes).
    LeafReboot { leaf: u32, down: Duration },
    /// A bad cable on leaf switch `leaf`: the port of its first host goes dark for `down`
    /// every `every`, `bounces` times, and the switch traps each change to the master
    /// (`traps.rs`): a storm of traps and sweeps, the switch's ignored past OpenSM's count.
    TrapStorm {
        leaf: u32,
        down: Duration,
        every: Duration,
        bounces: u32,
    },
    /// Every host starts at once (the fleet's power-on, a boot storm): not injected, the
    /// first thing every fleet recovers from.
    PowerOn,
    /// The master subnet manager fails: its standby notices at its last unanswered poll,
    /// sweeps and sets ClientReregister on every port; the SA answers nothing meanwhile.
    SmFailover,
    /// A subnet manager of higher priority comes up: the master hands over to it at once
    /// (HANDOVER) and it sweeps as a new master does, the SA silent and ClientReregister on
    /// every port. The LIDs are kept (OpenSM's `reassign_lids` false), or, with
    /// `reassign_lids`, every port gets a new one as the sweep reaches it: every connection
    /// made under the old ones is gone.
    SmHandover { reassign_lids: bool },
    /// The SA answers nothing for `down` (a master too busy to serve it).
    SaOverload { down: Duration },
    /// A rolling firmware rollout starts: every adapter of every host activates new
    /// firmware, at most `max_per_target` in reset at once among those of one target
    /// (`rollout.rs`).
    Rollout { max_per_target: u32 },
}

impl FleetFault {
    /// Its name in scenario files and reports.
    pub fn name(&self) -> &'static str {
        match self {
            FleetFault::TargetRestart { .. } => "target_restart",
            FleetFault::LinkFlap { .. } => "link_flap",
            FleetFault::LeafReboot { .. } => "leaf_reboot",
            FleetFault::TrapStorm { .. } => "trap_storm",
            FleetFault::PowerOn => "power_on",
            FleetFault::SmFailover => "sm_failover",
            FleetFault::SmHandover { .. } => "sm_handover",
            FleetFault::SaOverload { .. } => "sa_overload",
            FleetFault::Rollout { .. } => "rollout",
        }
    }

    /// Whether it takes the links of every host down, so that its recovery waits for each
    /// interface to be up again. No wildcard: a new fault says.
    pub fn takes_links(&self) -> bool {
        match self {
            FleetFault::LinkFlap { .. }
            | FleetFault::LeafReboot { .. }
            | FleetFault::TrapStorm { .. }
            | FleetFault::PowerOn => true,
            FleetFault::TargetRestart { .. }
            | FleetFault::SmFailover
            | FleetFault::SmHandover { .. }
            | FleetFault::SaOverload { .. }
            | FleetFault::Rollout { .. } => false,
        }
    }

    /// When a new master takes over, for a fault that brings one (its first sweep silences
    /// the SA and sets ClientReregister on every port): a failover's standby at the tick
    /// after its last missed poll, a handover's at once.
    pub fn new_master_at(&self, at: Instant, sm: &SmSetup) -> Option<Instant> {
        match self {
            FleetFault::SmFailover => Some(sm.takeover_at(at)),
            FleetFault::SmHandover { .. } => Some(at),
            FleetFault::TargetRestart { .. }
            | FleetFault::LinkFlap { .. }
            | FleetFault::LeafReboot { .. }
            | FleetFault::TrapStorm { .. }
            | FleetFault::PowerOn
            | FleetFault::SaOverload { .. }
            | FleetFault::Rollout { .. } => None,
        }
    }

    /// Whether it gives every port a new LID (a handover that reassigns them): every disk
    /// logs in again, through a path asked for anew.
    pub fn renumbers(&self) -> bool {
        matches!(
            self,
            FleetFault::SmHandover {
                reassign_lids: true
            }
        )
    }

    /// Which disks of a host its recovery waits for to log in again. No wildcard.
    pub fn disks_waited(&self) -> DisksWaited {
        match self {
            FleetFault::TargetRestart { target, .. } => DisksWaited::OfTarget(*target),
            FleetFault::PowerOn => DisksWaited::EveryFirstLogin,
            FleetFault::LeafReboot { leaf, .. } | FleetFault::TrapStorm { leaf, .. } => {
                DisksWaited::OnLeaf(*leaf)
            }
            FleetFault::LinkFlap { .. }
            | FleetFault::SmFailover
            | FleetFault::SmHandover { .. }
            | FleetFault::SaOverload { .. }
            | FleetFault::Rollout { .. } => DisksWaited::EveryUp,
        }
    }
}

/// The disks a fault's recovery waits for ([`FleetFault::disks_waited`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisksWaited {
    /// Those of one target that were up: they log in again.
    OfTarget(usize),
    /// Every disk that was up.
    EveryUp,
    /// Every disk, from its first login (the fleet powers on).
    EveryFirstLogin,
    /// Those that were up on an adapter cabled to one leaf.
    OnLeaf(u32),
}
