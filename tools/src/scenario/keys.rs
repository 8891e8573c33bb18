//! The keys of a scenario file as serde reads them, and which keys each client kind takes.
//! Every table refuses an unknown key by name (`deny_unknown_fields`).

use hcabus::types::ClientKind;
use hcabus_lab::stack::ClientSpec;
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

/// A `[[clients]]` table's keys besides `name` and `kind`, each with the client kinds that
/// take it: the one list the table's fields, the per-kind rule and the check for a key the
/// kind does not take are made from (a key given to a kind that does not take it is an
/// impossible combination, refused by name). In the table's order, which serde's message
/// for an unknown key lists.
/// The kinds a key of `client_keys!` is for: `ANY`, or a list.
macro_rules! kinds {
    (ANY) => {
        ClientKind::ALL.as_slice()
    };
    ([$($kind:ident),+]) => {
        [$(ClientKind::$kind),+].as_slice()
    };
}

macro_rules! client_keys {
    ($( $(#[$doc:meta])* $key:ident : $ty:ty => $kinds:tt; )+) => {
        #[derive(Debug, Default, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub(super) struct Client {
            pub(super) name: String,
            pub(super) kind: String,
            $( $(#[$doc])* pub(super) $key: Option<$ty>, )+
        }

        impl Client {
            /// The first key set that a client of `kind` does not take.
            pub(super) fn stray_key(&self, kind: ClientKind) -> Option<&'static str> {
                $( if self.$key.is_some() && !kinds!($kinds).contains(&kind) {
                    return Some(stringify!($key));
                } )+
                None
            }
        }
    };
}

client_keys! {
    iops: u32 => [BootDisk, Srp];
    queue_depth: u16 => [BootDisk, Srp];
    read_pct: u8 => [BootDisk, Srp];
    blocks: u64 => [BootDisk, Srp];
    /// With `large_blocks`: the percentage of I/Os that move `large_blocks` blocks at once
    /// (the rest move one); each slot's buffer is sized for them.
    large_pct: u8 => [BootDisk, Srp];
    large_blocks: u16 => [BootDisk, Srp];
    port: u8 => [BootDisk, Srp, Ipoib];
    pps: u32 => [Ipoib];
    ack_delay_ms: u64 => [Srp, Ipoib, Custom];
    never_ack: bool => [Custom];
    /// Registers with CAN_VETO: it is asked before a planned reset (and consents unless
    /// `veto_planned`, or stays silent with `never_ack`).
    can_veto: bool => [Custom];
    veto_planned: bool => [Custom];
    unregister_on_reset: bool => [Custom];
    reregister_on_reset: bool => [Custom];
    request_reset_at_ms: u64 => [Custom];
    request_every_ms: u64 => [Custom];
    request_on_reset_end: bool => [Custom];
    /// Its adapter, with several (`[[hcas]]`).
    hca: String => ANY;
    /// With several adapters: one path through each adapter named.
    paths: Vec<String> => [BootDisk, Srp];
    /// The last-path guard (default: on for a boot disk, off otherwise).
    guard_last_path: bool => [BootDisk, Srp];
    /// With `paths`: fast path failover's fixed timeout (0: off); without it the timeout
    /// is learned per path within `path_timeout_min_ms..=path_timeout_max_ms`.
    path_io_timeout_ms: u64 => [BootDisk, Srp];
    path_timeout_min_ms: u64 => [BootDisk, Srp];
    path_timeout_max_ms: u64 => [BootDisk, Srp];
    /// The command bound's ceiling (docs/design.md §7 "Every command ends").
    command_timeout_ms: u64 => [BootDisk, Srp];
    /// With `paths`: each path's group, 0 the best (docs/design.md §7 "Path groups").
    path_groups: Vec<u8> => [BootDisk, Srp];
    /// With `paths`: how long a path of a better group must be back before I/O returns
    /// to it (0: at once).
    failback_ms: u64 => [BootDisk, Srp];
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

/// How a scenario makes a client of one kind from its keys (which keys it takes is
/// `client_keys!`'s): its spec, `None` for the access layer, which the stack adds itself.
pub(super) struct KindRule {
    pub(super) make: fn(&mut Clients, usize, &Client) -> Result<Option<ClientSpec>, ScenarioError>,
}

/// Each kind's rule: a new kind of client is one arm here and its keys in `client_keys!`.
pub(super) fn rule(kind: ClientKind) -> KindRule {
    let make: fn(&mut Clients, usize, &Client) -> _ = match kind {
        ClientKind::Ibal => Clients::ibal,
        ClientKind::BootDisk => |s, i, c| s.disk(i, c, true),
        ClientKind::Srp => |s, i, c| s.disk(i, c, false),
        ClientKind::Ipoib => Clients::ipoib,
        ClientKind::Uverbs => Clients::uverbs,
        ClientKind::Custom => |_, i, c| super::custom(i, c),
    };
    KindRule { make }
}

#[cfg(test)]
mod tests {
    use hcabus::policy::Limit;
    use hcabus::Policy;

    /// A scenario of one client of `kind` with `extra` keys, as the parser sees it.
    fn client(kind: &str, extra: &str) -> Result<(), super::super::ScenarioError> {
        let text = format!(
            "name = \"t\"\n[[clients]]\nname = \"ibal\"\nkind = \"ibal\"\n\
             [[clients]]\nname = \"c\"\nkind = \"{kind}\"\n{extra}\n"
        );
        super::super::parse(&text).map(|_| ())
    }

    /// The table of client keys decides, for each kind, which keys are taken and which are
    /// refused by name; of several keys a kind does not take, the table's first is named.
    #[test]
    fn a_key_a_clients_kind_does_not_take_is_refused_by_name() {
        for (kind, key) in [
            ("srp", "pps = 10"),
            ("bootdisk", "ack_delay_ms = 5"),
            ("ipoib", "iops = 10"),
            ("custom", "iops = 10"),
            ("uverbs", "port = 1"),
        ] {
            let e = client(kind, key).expect_err(key);
            let name = key.split(' ').next().unwrap_or_default();
            assert_eq!(e.key, format!("clients[1].{name}"), "{kind}: {e:?}");
            assert!(e.message.contains(kind), "{e:?}");
        }
        for (kind, key) in [
            ("srp", "ack_delay_ms = 5"),
            ("ipoib", "port = 1"),
            ("custom", "can_veto = true"),
        ] {
            assert!(client(kind, key).is_ok(), "{kind} takes {key}");
        }
        let e = client("srp", "never_ack = true\npps = 3").expect_err("two stray keys");
        assert_eq!(e.key, "clients[1].pps", "the table's first: {e:?}");
    }

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
    pub(super) write_extra_us: Option<u64>,
    pub(super) pause_every_ms: Option<u64>,
    pub(super) pause_ms: Option<u64>,
    pub(super) loss_per_million: Option<u32>,
    pub(super) tail_us: Option<u64>,
    pub(super) tail_shape: Option<f64>,
    /// The link's data rate in MB/s: a command's data crosses it in its size over this,
    /// after the data before it (a link trained down to a reduced width or speed).
    pub(super) bandwidth_mb_s: Option<u32>,
    /// The disk client (by name) whose commands alone the phase applies to: one slow LUN
    /// behind a port that serves the others as before. Every other disk keeps the phase
    /// before it.
    pub(super) disk: Option<String>,
}
