//! The faults a fleet file gives (`[[fleet.events]]`), declared once: each fault's name, the
//! words its errors use, which of the event's keys it takes, and the fault it makes. The
//! parser, its errors and the list of kinds an unknown one is told are made from
//! [`FILE_FAULTS`]; what happens inside a run (a power-on, the reregistration a failover
//! leads to, a rollout's next look) is the fleet's own, never a file's.

use hcabus::Duration;
use hcabus_fleet::{FleetFault, MAX_HOSTS};

use super::{err, ScenarioError, MAX_FABRIC_MS};

/// An event's keys besides `at_ms` and `kind`, as the file gave them.
#[derive(Debug, Clone, Copy)]
pub(super) struct EventArgs {
    pub(super) target: Option<usize>,
    pub(super) down_ms: Option<u64>,
    pub(super) max_in_reset_per_target: Option<u32>,
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
    /// It strikes one target (`target` required), or the whole fabric (refused).
    target: bool,
    down: Down,
    /// A rollout's limit (`max_in_reset_per_target`): taken by the faults marked so only.
    max_in_reset: bool,
    /// It needs hosts of two adapters (`fleet.host = "multipath"`), and why.
    multipath: Option<&'static str>,
    /// The fault, from arguments the table's checks let through.
    make: fn(Checked) -> FleetFault,
}

/// An event's arguments once checked against its fault's row.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Checked {
    target: usize,
    down: Duration,
    max_in_reset: u32,
}

/// Every fault a fleet file may give, in the order an unknown kind is told them.
pub(super) const FILE_FAULTS: &[FileFault] = &[
    FileFault {
        name: "target_restart",
        phrase: "target restart",
        target: true,
        down: Down::Takes,
        max_in_reset: false,
        multipath: None,
        make: |c| FleetFault::TargetRestart {
            target: c.target,
            down: c.down,
        },
    },
    FileFault {
        name: "link_flap",
        phrase: "link flap",
        target: false,
        down: Down::Takes,
        max_in_reset: false,
        multipath: None,
        make: |c| FleetFault::LinkFlap { down: c.down },
    },
    FileFault {
        name: "sm_failover",
        phrase: "subnet-manager failover",
        target: false,
        down: Down::Refuses(
            "a failover lasts until the standby takes over and sweeps ([fleet.sm])",
        ),
        max_in_reset: false,
        multipath: None,
        make: |_| FleetFault::SmFailover,
    },
    FileFault {
        name: "sa_overload",
        phrase: "SA overload",
        target: false,
        down: Down::Takes,
        max_in_reset: false,
        multipath: None,
        make: |c| FleetFault::SaOverload { down: c.down },
    },
    FileFault {
        name: "rollout",
        phrase: "rollout",
        target: false,
        down: Down::Refuses("a rollout lasts until every adapter is done"),
        max_in_reset: true,
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
    targets: usize,
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
    match (row.target, args.target) {
        (true, Some(t)) if t < targets => checked.target = t,
        (true, Some(t)) => {
            return Err(err(
                at("target"),
                format!("no target {t}: the fleet has {targets}"),
            ))
        }
        (true, None) => return Err(err(at("target"), format!("a {phrase} names its target"))),
        (false, Some(_)) => {
            return Err(err(
                at("target"),
                format!("a {phrase} is fabric-wide: no target"),
            ))
        }
        (false, None) => {}
    }
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
    Ok((row.make)(checked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(target: Option<usize>, down_ms: Option<u64>, max: Option<u32>) -> EventArgs {
        EventArgs {
            target,
            down_ms,
            max_in_reset_per_target: max,
        }
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
                "rollout",
                args(None, None, Some(0)),
                "max_in_reset_per_target",
                "a rollout says how many adapters of a target may be in reset at once, 1..=10000",
            ),
        ];
        // An unknown kind is told every kind of the table, in its order.
        let e = fault(3, "reboot", args(None, None, None), 2, true).expect_err("unknown");
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
            let e = fault(3, kind, a, 2, true).expect_err(kind);
            assert_eq!(e.key, format!("fleet.events[3].{key}"), "{kind}");
            assert_eq!(e.message, message, "{kind}");
        }
        let e = fault(0, "rollout", args(None, None, Some(1)), 2, false).expect_err("single");
        assert!(
            e.message
                .starts_with("a rollout needs hosts of two adapters"),
            "{e:?}"
        );
        let made = [
            ("target_restart", args(Some(1), Some(5), None)),
            ("link_flap", args(None, Some(5), None)),
            ("sm_failover", args(None, None, None)),
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
            FleetFault::SaOverload { down: ms5 },
            FleetFault::Rollout { max_per_target: 4 },
        ];
        for ((kind, a), want) in made.into_iter().zip(want) {
            assert_eq!(fault(0, kind, a, 2, true), Ok(want), "{kind}");
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
