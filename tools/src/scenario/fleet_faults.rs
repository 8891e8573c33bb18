//! The faults a fleet file gives (`[[fleet.events]]`), declared once: each fault's name, the
//! words its errors use, which of the event's keys it takes, and the fault it makes. The
//! parser, its errors and the list of kinds an unknown one is told are made from
//! [`FILE_FAULTS`]; what happens inside a run (a power-on, the reregistration a failover
//! leads to, a rollout's next look) is the fleet's own, never a file's.

use hcabus::Duration;
use hcabus_fleet::{FleetFault, MAX_BOUNCES, MAX_HOSTS};

use super::{err, ScenarioError, MAX_FABRIC_MS};

/// An event's keys besides `at_ms` and `kind`, as the file gave them.
#[derive(Debug, Clone, Copy)]
pub(super) struct EventArgs {
    pub(super) target: Option<usize>,
    pub(super) leaf: Option<u32>,
    pub(super) down_ms: Option<u64>,
    pub(super) max_in_reset_per_target: Option<u32>,
    pub(super) reassign_lids: Option<bool>,
    pub(super) every_ms: Option<u64>,
    pub(super) bounces: Option<u32>,
}

/// What a fault strikes, besides the whole fabric: one target (`target`), or one leaf
/// switch's hosts (`leaf`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aim {
    Fabric,
    Target,
    Leaf,
}

/// How big the fabric is: its targets and its hosts' leaves.
#[derive(Debug, Clone, Copy)]
pub(super) struct FabricSize {
    pub(super) targets: usize,
    pub(super) leaves: u32,
}

/// What a fault does with `down_ms`: needs it, or refuses it and says why.
#[derive(Debug, Clone, Copy)]
enum Down {
    Takes,
    Refuses(&'static str),
}

/// One fault a file may give.
#[derive(Debug)]
pub(super) struct FileFault {
    /// Its `kind` in the file.
    pub(super) name: &'static str,
    /// How its errors name it ("a {phrase} says how long").
    phrase: &'static str,
    /// What it strikes: `target` or `leaf` required for one, both refused otherwise.
    aim: Aim,
    down: Down,
    /// A rollout's limit (`max_in_reset_per_target`): taken by the faults marked so only.
    max_in_reset: bool,
    /// Whether the new master reassigns LIDs (`reassign_lids`): a handover's only.
    lids: bool,
    /// Whether it bounces (`every_ms`, `bounces`): a trap storm's only.
    bounces: bool,
    /// It needs hosts of two adapters (`fleet.host = "multipath"`), and why.
    multipath: Option<&'static str>,
    /// The fault, from arguments the table's checks let through.
    make: fn(Checked) -> FleetFault,
}

/// An event's arguments once checked against its fault's row.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Checked {
    target: usize,
    leaf: u32,
    down: Duration,
    max_in_reset: u32,
    reassign_lids: bool,
    every: Duration,
    bounces: u32,
}

/// Every fault a fleet file may give, in the order an unknown kind is told them.
pub(super) const FILE_FAULTS: &[FileFault] = &[
    FileFault {
        name: "target_restart",
        phrase: "target restart",
        aim: Aim::Target,
        down: Down::Takes,
        max_in_reset: false,
        lids: false,
        bounces: false,
        multipath: None,
        make: |c| FleetFault::TargetRestart {
            target: c.target,
            down: c.down,
        },
    },
    FileFault {
        name: "link_flap",
        phrase: "link flap",
        aim: Aim::Fabric,
        down: Down::Takes,
        max_in_reset: false,
        lids: false,
        bounces: false,
        multipath: None,
        make: |c| FleetFault::LinkFlap { down: c.down },
    },
    FileFault {
        name: "leaf_reboot",
        phrase: "leaf reboot",
        aim: Aim::Leaf,
        down: Down::Takes,
        max_in_reset: false,
        lids: false,
        bounces: false,
        multipath: None,
        make: |c| FleetFault::LeafReboot {
            leaf: c.leaf,
            down: c.down,
        },
    },
    FileFault {
        name: "trap_storm",
        phrase: "trap storm",
        aim: Aim::Leaf,
        down: Down::Takes,
        max_in_reset: false,
        lids: false,
        bounces: true,
        multipath: None,
        make: |c| FleetFault::TrapStorm {
            leaf: c.leaf,
            down: c.down,
            every: c.every,
            bounces: c.bounces,
        },
    },
    FileFault {
        name: "sm_failover",
        phrase: "subnet-manager failover",
        aim: Aim::Fabric,
        down: Down::Refuses(
            "a failover lasts until the standby takes over and sweeps ([fleet.sm])",
        ),
        max_in_reset: false,
        lids: false,
        bounces: false,
        multipath: None,
        make: |_| FleetFault::SmFailover,
    },
    FileFault {
        name: "sm_handover",
        phrase: "subnet-manager handover",
        aim: Aim::Fabric,
        down: Down::Refuses("a handover lasts until the new master has swept ([fleet.sm])"),
        max_in_reset: false,
        lids: true,
        bounces: false,
        multipath: None,
        make: |c| FleetFault::SmHandover {
            reassign_lids: c.reassign_lids,
        },
    },
    FileFault {
        name: "sa_overload",
        phrase: "SA overload",
        aim: Aim::Fabric,
        down: Down::Takes,
        max_in_reset: false,
        lids: false,
        bounces: false,
        multipath: None,
        make: |c| FleetFault::SaOverload { down: c.down },
    },
    FileFault {
        name: "rollout",
        phrase: "rollout",
        aim: Aim::Fabric,
        down: Down::Refuses("a rollout lasts until every adapter is done"),
        max_in_reset: true,
        lids: false,
        bounces: false,
        multipath: Some(
            "a rollout needs hosts of two adapters (fleet.host = \"multipath\"): a boot \
             disk's last-path guard refuses every activation of its only one",
        ),
        make: |c| FleetFault::Rollout {
            max_per_target: c.max_in_reset,
        },
    },
];

/// The fault of event `i` (`kind` with `args`), in a fleet of `targets` targets whose hosts
/// are multipath ones (`multipath`), or the first key that is wrong, named.
pub(super) fn fault(
    i: usize,
    kind: &str,
    args: EventArgs,
    size: FabricSize,
    multipath: bool,
) -> Result<FleetFault, ScenarioError> {
    let at = |key: &str| format!("fleet.events[{i}].{key}");
    let row = FILE_FAULTS.iter().find(|f| f.name == kind);
    if args.max_in_reset_per_target.is_some() && !row.is_some_and(|f| f.max_in_reset) {
        return Err(err(
            at("max_in_reset_per_target"),
            "only a rollout takes it",
        ));
    }
    if args.reassign_lids.is_some() && !row.is_some_and(|f| f.lids) {
        return Err(err(
            at("reassign_lids"),
            "only a handover takes it (its new master's LIDs)",
        ));
    }
    for (key, given) in [
        ("every_ms", args.every_ms.is_some()),
        ("bounces", args.bounces.is_some()),
    ] {
        if given && !row.is_some_and(|f| f.bounces) {
            return Err(err(
                at(key),
                "only a trap storm takes it (its cable's bounces)",
            ));
        }
    }
    let Some(row) = row else {
        let names: Vec<String> = FILE_FAULTS
            .iter()
            .map(|f| format!("{:?}", f.name))
            .collect();
        return Err(err(
            at("kind"),
            format!("{kind:?}: one of {}", names.join(", ")),
        ));
    };
    if let Some(why) = row.multipath.filter(|_| !multipath) {
        return Err(err(at("kind"), why));
    }
    let phrase = row.phrase;
    let mut checked = Checked::default();
    (checked.target, checked.leaf) = aim(row, &at, args, size)?;
    match (row.down, args.down_ms) {
        (Down::Takes, Some(ms)) if (1..=MAX_FABRIC_MS).contains(&ms) => {
            checked.down = Duration::from_ms(ms);
        }
        (Down::Takes, Some(_)) => {
            return Err(err(at("down_ms"), format!("must be 1..={MAX_FABRIC_MS}")))
        }
        (Down::Takes, None) => {
            return Err(err(
                at("down_ms"),
                format!("a {phrase} says how long (down_ms)"),
            ))
        }
        (Down::Refuses(why), Some(_)) => return Err(err(at("down_ms"), why)),
        (Down::Refuses(_), None) => {}
    }
    if row.max_in_reset {
        match args.max_in_reset_per_target {
            Some(n) if (1..=MAX_HOSTS).contains(&n) => checked.max_in_reset = n,
            _ => {
                return Err(err(
                    at("max_in_reset_per_target"),
                    format!(
                        "a rollout says how many adapters of a target may be in reset at \
                         once, 1..={MAX_HOSTS}"
                    ),
                ))
            }
        }
    }
    checked.reassign_lids = args.reassign_lids.unwrap_or(false);
    if row.bounces {
        (checked.every, checked.bounces) = bounces(&at, args, checked.down)?;
    }
    Ok((row.make)(checked))
}

/// What an event of `row` strikes: its target or its leaf (as `(target, leaf)`), each one
/// the fabric has, and nothing the fault does not take.
fn aim(
    row: &FileFault,
    at: &dyn Fn(&str) -> String,
    args: EventArgs,
    size: FabricSize,
) -> Result<(usize, u32), ScenarioError> {
    let phrase = row.phrase;
    let fabric_wide = |key: &str| err(at(key), format!("a {phrase} is fabric-wide: no {key}"));
    match (row.aim, args.target, args.leaf) {
        (Aim::Target, Some(t), None) if t < size.targets => Ok((t, 0)),
        (Aim::Target, Some(t), None) => Err(err(
            at("target"),
            format!("no target {t}: the fleet has {}", size.targets),
        )),
        (Aim::Target, None, None) => Err(err(at("target"), format!("a {phrase} names its target"))),
        (Aim::Leaf, None, Some(l)) if l < size.leaves => Ok((0, l)),
        (Aim::Leaf, None, Some(l)) => Err(err(
            at("leaf"),
            format!("no leaf {l}: the fleet's hosts fill {}", size.leaves),
        )),
        (Aim::Leaf, None, None) => Err(err(at("leaf"), format!("a {phrase} names its leaf"))),
        (Aim::Target, _, Some(_)) => Err(err(
            at("leaf"),
            format!("a {phrase} names a target, not a leaf"),
        )),
        (Aim::Leaf, Some(_), _) => Err(err(
            at("target"),
            format!("a {phrase} names a leaf, not a target"),
        )),
        (Aim::Fabric, Some(_), _) => Err(fabric_wide("target")),
        (Aim::Fabric, None, Some(_)) => Err(fabric_wide("leaf")),
        (Aim::Fabric, None, None) => Ok((0, 0)),
    }
}

/// A trap storm's bounces: every `every_ms`, above its `down_ms` (the cable is back before
/// the next), `bounces` of them.
fn bounces(
    at: &dyn Fn(&str) -> String,
    args: EventArgs,
    down: Duration,
) -> Result<(Duration, u32), ScenarioError> {
    let every = match args.every_ms {
        Some(ms) if (1..=MAX_FABRIC_MS).contains(&ms) && Duration::from_ms(ms) > down => {
            Duration::from_ms(ms)
        }
        Some(_) => {
            return Err(err(
                at("every_ms"),
                format!(
                    "must be above down_ms (the cable is back before its next bounce) and at \
                     most {MAX_FABRIC_MS}"
                ),
            ))
        }
        None => {
            return Err(err(
                at("every_ms"),
                "a trap storm says how often its cable bounces (every_ms)",
            ))
        }
    };
    match args.bounces {
        Some(n) if (1..=MAX_BOUNCES).contains(&n) => Ok((every, n)),
        _ => Err(err(
            at("bounces"),
            format!("a trap storm says how many times its cable bounces, 1..={MAX_BOUNCES}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(target: Option<usize>, down_ms: Option<u64>, max: Option<u32>) -> EventArgs {
        EventArgs {
            target,
            leaf: None,
            down_ms,
            max_in_reset_per_target: max,
            reassign_lids: None,
            every_ms: None,
            bounces: None,
        }
    }

    const SIZE: FabricSize = FabricSize {
        targets: 2,
        leaves: 3,
    };

    fn leaf(leaf: Option<u32>, target: Option<usize>, down_ms: Option<u64>) -> EventArgs {
        EventArgs {
            leaf,
            ..args(target, down_ms, None)
        }
    }

    /// A leaf reboot names its leaf, one the hosts fill, and nothing else names one.
    #[test]
    fn a_leaf_reboot_names_a_leaf_the_hosts_fill() {
        let refused = [
            (
                "leaf_reboot",
                leaf(None, None, Some(5)),
                "leaf",
                "a leaf reboot names its leaf",
            ),
            (
                "leaf_reboot",
                leaf(Some(3), None, Some(5)),
                "leaf",
                "no leaf 3: the fleet's hosts fill 3",
            ),
            (
                "leaf_reboot",
                leaf(Some(0), Some(0), Some(5)),
                "target",
                "a leaf reboot names a leaf, not a target",
            ),
            (
                "target_restart",
                leaf(Some(0), Some(0), Some(5)),
                "leaf",
                "a target restart names a target, not a leaf",
            ),
            (
                "link_flap",
                leaf(Some(0), None, Some(5)),
                "leaf",
                "a link flap is fabric-wide: no leaf",
            ),
            (
                "leaf_reboot",
                leaf(Some(0), None, None),
                "down_ms",
                "a leaf reboot says how long (down_ms)",
            ),
        ];
        for (kind, a, key, message) in refused {
            let e = fault(1, kind, a, SIZE, false).expect_err(kind);
            assert_eq!(
                (e.key.as_str(), e.message.as_str()),
                (format!("fleet.events[1].{key}").as_str(), message)
            );
        }
        let made = fault(
            1,
            "leaf_reboot",
            leaf(Some(2), None, Some(120_000)),
            SIZE,
            false,
        );
        let down = Duration::from_ms(120_000);
        assert_eq!(made, Ok(FleetFault::LeafReboot { leaf: 2, down }));
    }

    /// A trap storm names its leaf, how long each bounce is down, how often and how many;
    /// no other fault takes its bounces.
    #[test]
    fn a_trap_storm_takes_its_bounces_and_nothing_else_does() {
        let storm = |every_ms, bounces| EventArgs {
            every_ms,
            bounces,
            ..leaf(Some(1), None, Some(100))
        };
        let refused = [
            ("trap_storm", storm(None, Some(3)), "every_ms", "a trap storm says how often its cable bounces (every_ms)"),
            ("trap_storm", storm(Some(100), Some(3)), "every_ms", "must be above down_ms (the cable is back before its next bounce) and at most 3600000"),
            ("trap_storm", storm(Some(1_000), None), "bounces", "a trap storm says how many times its cable bounces, 1..=10000"),
            ("trap_storm", storm(Some(1_000), Some(0)), "bounces", "a trap storm says how many times its cable bounces, 1..=10000"),
            ("leaf_reboot", storm(Some(1_000), None), "every_ms", "only a trap storm takes it (its cable's bounces)"),
            ("leaf_reboot", storm(None, Some(2)), "bounces", "only a trap storm takes it (its cable's bounces)"),
        ];
        for (kind, a, key, message) in refused {
            let e = fault(1, kind, a, SIZE, false).expect_err(kind);
            assert_eq!(
                (e.key.as_str(), e.message.as_str()),
                (format!("fleet.events[1].{key}").as_str(), message)
            );
        }
        let made = fault(1, "trap_storm", storm(Some(1_000), Some(40)), SIZE, false);
        let storm = FleetFault::TrapStorm {
            leaf: 1,
            down: Duration::from_ms(100),
            every: Duration::from_ms(1_000),
            bounces: 40,
        };
        assert_eq!(made, Ok(storm));
    }

    /// Each row's checks, with the key and the words its error names, and the fault each
    /// valid event makes.
    #[test]
    fn each_fault_takes_its_keys_and_refuses_the_others_by_name() {
        let refused = [
            (
                "link_flap",
                args(None, Some(5), Some(1)),
                "max_in_reset_per_target",
                "only a rollout takes it",
            ),
            (
                "target_restart",
                args(None, Some(5), None),
                "target",
                "a target restart names its target",
            ),
            (
                "target_restart",
                args(Some(2), Some(5), None),
                "target",
                "no target 2: the fleet has 2",
            ),
            (
                "link_flap",
                args(None, None, None),
                "down_ms",
                "a link flap says how long (down_ms)",
            ),
            (
                "sa_overload",
                args(Some(0), Some(5), None),
                "target",
                "a SA overload is fabric-wide: no target",
            ),
            (
                "sa_overload",
                args(None, Some(0), None),
                "down_ms",
                "must be 1..=3600000",
            ),
            (
                "sm_failover",
                args(None, Some(5), None),
                "down_ms",
                "a failover lasts until the standby takes over and sweeps ([fleet.sm])",
            ),
            (
                "sm_handover",
                args(None, Some(5), None),
                "down_ms",
                "a handover lasts until the new master has swept ([fleet.sm])",
            ),
            (
                "rollout",
                args(None, None, Some(0)),
                "max_in_reset_per_target",
                "a rollout says how many adapters of a target may be in reset at once, 1..=10000",
            ),
        ];
        // An unknown kind is told every kind of the table, in its order.
        let e = fault(3, "reboot", args(None, None, None), SIZE, true).expect_err("unknown");
        assert_eq!(e.key, "fleet.events[3].kind");
        let kinds: Vec<String> = FILE_FAULTS
            .iter()
            .map(|f| format!("{:?}", f.name))
            .collect();
        assert_eq!(
            e.message,
            format!("\"reboot\": one of {}", kinds.join(", "))
        );
        assert!(
            kinds.len() >= 5 && e.message.contains("\"sm_failover\""),
            "{e:?}"
        );
        for (kind, a, key, message) in refused {
            let e = fault(3, kind, a, SIZE, true).expect_err(kind);
            assert_eq!(e.key, format!("fleet.events[3].{key}"), "{kind}");
            assert_eq!(e.message, message, "{kind}");
        }
        let e = fault(0, "rollout", args(None, None, Some(1)), SIZE, false).expect_err("single");
        assert!(
            e.message
                .starts_with("a rollout needs hosts of two adapters"),
            "{e:?}"
        );
        let made = [
            ("target_restart", args(Some(1), Some(5), None)),
            ("link_flap", args(None, Some(5), None)),
            ("sm_failover", args(None, None, None)),
            ("sm_handover", args(None, None, None)),
            ("sa_overload", args(None, Some(5), None)),
            ("rollout", args(None, None, Some(4))),
        ];
        let ms5 = Duration::from_ms(5);
        let want = [
            FleetFault::TargetRestart {
                target: 1,
                down: ms5,
            },
            FleetFault::LinkFlap { down: ms5 },
            FleetFault::SmFailover,
            FleetFault::SmHandover {
                reassign_lids: false,
            },
            FleetFault::SaOverload { down: ms5 },
            FleetFault::Rollout { max_per_target: 4 },
        ];
        for ((kind, a), want) in made.into_iter().zip(want) {
            assert_eq!(fault(0, kind, a, SIZE, true), Ok(want), "{kind}");
            assert_eq!(want.name(), kind, "the name a report gives it");
        }
    }

    /// docs/hcasim.md's row for `[[fleet.events]]` names every fault a file may give.
    #[test]
    fn the_documented_fleet_events_name_every_file_fault() {
        let doc = include_str!("../../../docs/hcasim.md");
        let row = doc
            .lines()
            .find(|l| l.starts_with("| `[[fleet.events]]`"))
            .expect("the row");
        for f in FILE_FAULTS {
            assert!(
                row.contains(&format!("\"{}\"", f.name)),
                "{} missing",
                f.name
            );
        }
    }
}
