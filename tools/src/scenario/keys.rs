//! The keys of a scenario file as serde reads them, and which keys each client kind takes.
//! Every table refuses an unknown key by name (`deny_unknown_fields`).

use hcabus::types::ClientKind;
use ibal::stack::ClientSpec;
use serde::Deserialize;

use super::{Clients, ScenarioError};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) name: String,
    #[serde(default = "one")]
    pub(super) seed: u64,
    #[serde(default = "five_seconds")]
    pub(super) duration_ms: u64,
    pub(super) hca: Option<Hca>,
    /// Several adapters, instead of `hca` (docs/design.md §9).
    #[serde(default)]
    pub(super) hcas: Vec<Hca>,
    #[serde(default)]
    pub(super) policy: PolicyKeys,
    #[serde(default)]
    pub(super) clients: Vec<Client>,
    #[serde(default)]
    pub(super) events: Vec<EventKeys>,
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
pub(super) enum NumOrText {
    Num(u64),
    Text(String),
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Hca {
    /// An adapter of several (`[[hcas]]`) only: its name.
    pub(super) name: Option<String>,
    pub(super) ports: Option<u8>,
    pub(super) hw_reset_ms: Option<u64>,
    /// Link training after the device is back (or a cable is plugged in).
    pub(super) link_up_ms: Option<u64>,
    /// The subnet manager's sweep, from Init to Active.
    pub(super) sm_sweep_ms: Option<u64>,
    /// The fabric route from this adapter to the SRP targets: their answers take this long
    /// to come back (a congested or long route; a slow path that is not a dead one).
    pub(super) target_latency_ms: Option<u64>,
    /// How the route behaves from given instants on: the fail-slow phases.
    #[serde(default)]
    pub(super) route: Vec<RouteKeys>,
    /// The transport timer of its reliable connections: T_tr = 4.096 us x 2^this (0: none).
    pub(super) local_ack_timeout: Option<u8>,
    /// Retransmissions of an unacknowledged send before it completes in error (0 to 7).
    pub(super) retry_count: Option<u8>,
    /// "major.minor.subminor".
    pub(super) fw_version: Option<String>,
    /// An integer or a string ("0x0002c9030010f5e0").
    pub(super) node_guid: Option<NumOrText>,
}

/// The `[policy]` table: every key of the policy's table (`hcabus::with_policy_keys!`), each
/// optional, of its field's type; what is not given keeps its default.
macro_rules! policy_keys {
    ($( $(#[$doc:meta])* $key:ident : $ty:ty = $default:expr, $limit:expr $(, slot $slot:literal)?; )+) => {
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct PolicyKeys {
            $( pub(super) $key: Option<$ty>, )+
        }

        impl PolicyKeys {
            /// `policy` with every key this table gives.
            pub(super) fn apply(&self, policy: &mut hcabus::Policy) {
                $( if let Some(v) = self.$key {
                    policy.$key = v;
                } )+
            }
        }
    };
}
hcabus::with_policy_keys!(policy_keys);

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Client {
    pub(super) name: String,
    pub(super) kind: String,
    // srp and bootdisk
    pub(super) iops: Option<u32>,
    pub(super) queue_depth: Option<u16>,
    pub(super) read_pct: Option<u8>,
    pub(super) blocks: Option<u64>,
    // srp, bootdisk, ipoib
    pub(super) port: Option<u8>,
    // ipoib
    pub(super) pps: Option<u32>,
    // srp, ipoib, custom
    pub(super) ack_delay_ms: Option<u64>,
    // custom
    pub(super) never_ack: Option<bool>,
    /// Registers with CAN_VETO: it is asked before a planned reset (and consents unless
    /// `veto_planned`, or stays silent with `never_ack`).
    pub(super) can_veto: Option<bool>,
    pub(super) veto_planned: Option<bool>,
    pub(super) unregister_on_reset: Option<bool>,
    pub(super) reregister_on_reset: Option<bool>,
    pub(super) request_reset_at_ms: Option<u64>,
    pub(super) request_every_ms: Option<u64>,
    pub(super) request_on_reset_end: Option<bool>,
    /// Its adapter, with several (`[[hcas]]`).
    pub(super) hca: Option<String>,
    /// srp and bootdisk with several adapters: one path through each adapter named.
    pub(super) paths: Option<Vec<String>>,
    /// srp and bootdisk: the last-path guard (default: on for a boot disk, off otherwise).
    pub(super) guard_last_path: Option<bool>,
    /// srp and bootdisk with `paths`: fast path failover's fixed timeout (0: off); without
    /// it the timeout is learned per path within `path_timeout_min_ms..=path_timeout_max_ms`.
    pub(super) path_io_timeout_ms: Option<u64>,
    pub(super) path_timeout_min_ms: Option<u64>,
    pub(super) path_timeout_max_ms: Option<u64>,
    /// srp and bootdisk: the command bound's ceiling (docs/design.md §7 "Every command ends").
    pub(super) command_timeout_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EventKeys {
    pub(super) at_ms: u64,
    pub(super) fault: String,
    pub(super) count: Option<u32>,
    pub(super) client: Option<String>,
    /// `port_down`: which port.
    pub(super) port: Option<u8>,
    /// `port_down`: how long the cable stays out.
    pub(super) duration_ms: Option<u64>,
    /// The adapter it strikes, with several (`[[hcas]]`).
    pub(super) hca: Option<String>,
}

/// How a scenario makes a client of one kind: the keys it takes besides `name` and `kind`
/// (anything else set is an impossible combination), and its spec from them (`None` for
/// the access layer, which the stack adds itself).
pub(super) struct KindRule {
    keys: &'static [&'static str],
    pub(super) make: fn(&mut Clients, usize, &Client) -> Result<Option<ClientSpec>, ScenarioError>,
}

/// Each kind's rule: a new kind of client is one arm here.
pub(super) fn rule(kind: ClientKind) -> KindRule {
    let (keys, make): (_, fn(&mut Clients, usize, &Client) -> _) = match kind {
        ClientKind::Ibal => (&[][..], Clients::ibal),
        ClientKind::BootDisk => (
            &[
                "iops",
                "queue_depth",
                "read_pct",
                "blocks",
                "port",
                "paths",
                "guard_last_path",
                "path_io_timeout_ms",
                "path_timeout_min_ms",
                "path_timeout_max_ms",
                "command_timeout_ms",
            ][..],
            |s, i, c| s.disk(i, c, true),
        ),
        ClientKind::Srp => (
            &[
                "paths",
                "guard_last_path",
                "path_io_timeout_ms",
                "path_timeout_min_ms",
                "path_timeout_max_ms",
                "command_timeout_ms",
                "iops",
                "queue_depth",
                "read_pct",
                "blocks",
                "port",
                "ack_delay_ms",
            ][..],
            |s, i, c| s.disk(i, c, false),
        ),
        ClientKind::Ipoib => (&["port", "pps", "ack_delay_ms"][..], Clients::ipoib),
        ClientKind::Uverbs => (&[][..], Clients::uverbs),
        ClientKind::Custom => (
            &[
                "ack_delay_ms",
                "never_ack",
                "can_veto",
                "veto_planned",
                "unregister_on_reset",
                "reregister_on_reset",
                "request_reset_at_ms",
                "request_every_ms",
                "request_on_reset_end",
            ][..],
            |_, i, c| super::custom(i, c),
        ),
    };
    KindRule { keys, make }
}

impl Client {
    /// The first key set that a client of `kind` does not take.
    pub(super) fn stray_key(&self, kind: ClientKind) -> Option<&'static str> {
        let set: [(&str, bool); 21] = [
            ("iops", self.iops.is_some()),
            ("queue_depth", self.queue_depth.is_some()),
            ("read_pct", self.read_pct.is_some()),
            ("blocks", self.blocks.is_some()),
            ("port", self.port.is_some()),
            ("pps", self.pps.is_some()),
            ("ack_delay_ms", self.ack_delay_ms.is_some()),
            ("never_ack", self.never_ack.is_some()),
            ("can_veto", self.can_veto.is_some()),
            ("veto_planned", self.veto_planned.is_some()),
            ("unregister_on_reset", self.unregister_on_reset.is_some()),
            ("reregister_on_reset", self.reregister_on_reset.is_some()),
            ("request_reset_at_ms", self.request_reset_at_ms.is_some()),
            ("request_every_ms", self.request_every_ms.is_some()),
            ("request_on_reset_end", self.request_on_reset_end.is_some()),
            ("paths", self.paths.is_some()),
            ("guard_last_path", self.guard_last_path.is_some()),
            ("path_io_timeout_ms", self.path_io_timeout_ms.is_some()),
            ("path_timeout_min_ms", self.path_timeout_min_ms.is_some()),
            ("path_timeout_max_ms", self.path_timeout_max_ms.is_some()),
            ("command_timeout_ms", self.command_timeout_ms.is_some()),
        ];
        let allowed = rule(kind).keys;
        set.into_iter()
            .find(|(k, on)| *on && !allowed.contains(k))
            .map(|(k, _)| k)
    }
}

#[cfg(test)]
mod tests {
    use hcabus::policy::Limit;
    use hcabus::Policy;

    /// docs/hcasim.md's `[policy]` block is the table as a user reads it: every key, in the
    /// table's order, each commented with its default first.
    #[test]
    fn the_documented_policy_block_lists_every_key_with_its_default() {
        let doc = include_str!("../../../docs/hcasim.md");
        let block: Vec<&str> = doc
            .lines()
            .skip_while(|l| !l.starts_with("[policy]"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .collect();
        let keys: Vec<&str> = block
            .iter()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
            .collect();
        assert_eq!(keys, Policy::KEYS, "docs/hcasim.md's [policy] block");
        let defaults = Policy::default().values();
        for ((line, default), limit) in block.iter().zip(defaults).zip(Policy::LIMITS) {
            let said = line.split_once('#').map(|(_, c)| c.trim()).unwrap_or("");
            let word = said.split([':', ' ']).next().unwrap_or("");
            let want = match limit {
                Limit::Flag => (default == 1).to_string(),
                Limit::Ms { .. } | Limit::Count { .. } => default.to_string(),
            };
            assert_eq!(word, want, "the documented default of {line:?}");
        }
    }
}

/// One `[[hcas.route]]` phase: what the route to the targets does from `at_ms` on (every
/// key it leaves out is a healthy route's).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteKeys {
    pub(super) at_ms: u64,
    pub(super) latency_us: Option<u64>,
    pub(super) service_max_us: Option<u64>,
    pub(super) load_us: Option<u64>,
    pub(super) spike_ms: Option<u64>,
    pub(super) spike_per_million: Option<u32>,
    pub(super) blackhole: Option<bool>,
}
