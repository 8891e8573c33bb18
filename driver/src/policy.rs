//! Reset policy: deadlines, windows and limits, with the defaults of docs/design.md §5.

use crate::time::Duration;

/// Upper bound of `max_auto_resets`: the storm window keeps one start time per allowed reset
/// in a fixed array, so the bound is what keeps storm control allocation-free.
pub const MAX_AUTO_RESETS_LIMIT: u8 = 16;
/// Upper bound of `reset_retries`: more soft retries than this only delay the function-level
/// reset that actually helps a wedged device.
pub const RESET_RETRIES_LIMIT: u8 = 8;
/// Upper bound of `client_request_limit`: each client keeps one request time per allowed
/// request in a fixed array.
pub const CLIENT_REQUEST_LIMIT_MAX: u8 = 16;
/// Upper bound of `health_stall_polls`: sixteen polls at the default interval is a firmware
/// silent for sixteen seconds, past which waiting longer only delays the reset.
pub const HEALTH_STALL_POLLS_MAX: u8 = 16;

/// The longest any duration may be: ten days. Anything longer is a typo, and the bound keeps
/// every sum of deadlines far from overflow in microseconds; it also keeps a value to nine
/// digits, which the texts that quote one are sized for (SET_POLICY's `problem`).
pub const MAX_MS: u64 = 10 * 24 * 3600 * 1000;

/// A rule between two keys, and what is wrong with each when it is broken: the first is
/// named unless only the second changed (the administrator set that one). Each problem
/// names the other key, so a refusal says what the value conflicts with.
struct Rule {
    holds: fn(&Policy) -> bool,
    keys: [(&'static str, &'static str); 2],
}

const RULES: [Rule; 2] = [
    // A probe at least as slow as the wait it belongs to would never see the device back.
    Rule {
        holds: |p| p.hw_poll_interval_ms < p.hw_ready_timeout_ms,
        keys: [
            (
                "hw_poll_interval_ms",
                "must be shorter than hw_ready_timeout_ms",
            ),
            (
                "hw_ready_timeout_ms",
                "must be longer than hw_poll_interval_ms",
            ),
        ],
    },
    // Otherwise the window closes before one wait for the hardware can end: no reset could
    // ever finish.
    Rule {
        holds: |p| p.hw_ready_timeout_ms <= p.auto_restart_window_ms,
        keys: [
            (
                "auto_restart_window_ms",
                "must be at least hw_ready_timeout_ms",
            ),
            (
                "hw_ready_timeout_ms",
                "must not exceed auto_restart_window_ms",
            ),
        ],
    },
];

/// The one table of the policy's keys: each line is a key (its field, and its name in scenario
/// files, hcactl, the registry and the flight recorder, whose record index is its place
/// here), its type, its default and its limit. Everything that lists the keys is made from
/// it: [`Policy`] and its default, [`Policy::KEYS`], [`Policy::values`], [`Policy::set`], the
/// range checks, the IOCTL structure's conversions (ioctl/codec.rs), the scenario format's
/// `[policy]` table and hcactl's rows. It hands the lines to the macro `$m`, which takes
/// what it needs of each. The keys of ABI versions 1 to 7 have a field of their own in the
/// IOCTL structure (`PolicyAbi`); every later key names its slot there (`slot N`), so that a
/// new key is a line here (and its entry in hcactl's JSON schema and in docs/hcasim.md),
/// with no new layout and no new ABI version.
#[macro_export]
macro_rules! with_policy_keys {
    ($m:ident) => {
        $m! {
            /// How long a client in the barrier has to execute; it cannot extend it.
            quiesce_deadline_ms: u64 = 5_000, $crate::policy::Limit::MS;
            /// Bound of one wait for the device to come back after asserting reset.
            hw_ready_timeout_ms: u64 = 10_000, $crate::policy::Limit::MS;
            /// Interval of readiness probes while waiting for the device.
            hw_poll_interval_ms: u64 = 10, $crate::policy::Limit::MS;
            /// Soft-reset retries after the first attempt, before the function-level reset.
            reset_retries: u8 = 2,
                $crate::policy::Limit::count(0, $crate::policy::RESET_RETRIES_LIMIT, "must be at most 8");
            /// A device not back within this window after the hardware reset began is left
            /// Failed.
            auto_restart_window_ms: u64 = 600_000, $crate::policy::Limit::MS;
            /// Automatic resets allowed within `storm_window_ms`.
            max_auto_resets: u8 = 3,
                $crate::policy::Limit::count(1, $crate::policy::MAX_AUTO_RESETS_LIMIT, "must be at most 16");
            storm_window_ms: u64 = 60_000, $crate::policy::Limit::MS;
            /// How long a client may hold I/O during a reset before failing it upward (SRP's
            /// fast_io_fail). The coordinator only carries it to the clients.
            io_hold_timeout_ms: u64 = 30_000, $crate::policy::Limit::MS;
            /// A planned reset with an unresponsive client aborts instead of forcing it.
            abort_on_unresponsive: bool = false, $crate::policy::Limit::Flag;
            /// Interval of the health monitor's polls of the catastrophic buffer and counter.
            health_poll_interval_ms: u64 = 1_000, $crate::policy::Limit::MS;
            /// How long the CAN_VETO clients have to answer RESET_QUERY; silence is consent.
            query_deadline_ms: u64 = 1_000, $crate::policy::Limit::MS;
            /// Reset requests one client may make within `storm_window_ms`; past it a request
            /// is refused with `Throttled` and nothing happens.
            client_request_limit: u8 = 2,
                $crate::policy::Limit::count(1, $crate::policy::CLIENT_REQUEST_LIMIT_MAX, "must be at most 16");
            /// Reset automatically on a fatal error (catastrophic error, hang, command
            /// timeout). When false the device is quiesced and left Failed for the
            /// administrator (devlink health's `auto_recover`).
            auto_recover: bool = true, $crate::policy::Limit::Flag;
            /// How long a PAGING_PATH client holds I/O instead of `io_hold_timeout_ms`; 0 holds
            /// until the device is Failed or Removed (a failed paging I/O is a bugcheck on
            /// Windows). The coordinator only carries it to the clients.
            paging_io_hold_timeout_ms: u64 = 0, $crate::policy::Limit::Ms { zero_ok: true };
            // From here on each key names its slot in `PolicyAbi::slots` (ABI version 8):
            // a key added is a line here, with no new layout and no new ABI version.
            /// Health polls in a row that must find the firmware's counter unchanged before
            /// it is declared hung (mlx5's health poll allows 3 misses). More tolerates a
            /// firmware that stops its counter for a while under load, at the price of a
            /// later reset of one that is really hung.
            health_stall_polls: u8 = 3,
                $crate::policy::Limit::count(1, $crate::policy::HEALTH_STALL_POLLS_MAX, "must be at most 16"),
                slot 0;
        }
    };
}

/// What values a key takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// A duration: 1..=[`MAX_MS`], or from 0 where 0 means something.
    Ms { zero_ok: bool },
    /// A count in `min..=max`; `too_big` is the problem a larger one is refused with.
    Count {
        min: u8,
        max: u8,
        too_big: &'static str,
    },
    /// 0 or 1 (false or true).
    Flag,
}

impl Limit {
    /// A duration that must be set.
    pub const MS: Limit = Limit::Ms { zero_ok: false };

    pub const fn count(min: u8, max: u8, too_big: &'static str) -> Limit {
        Limit::Count { min, max, too_big }
    }
}

/// A key's value as the table's types hold it, and as one number (flags 0 or 1).
pub trait KeyValue: Sized + Copy {
    fn to_u64(self) -> u64;
    fn from_u64(value: u64) -> Result<Self, SetKeyError>;
}

impl KeyValue for u64 {
    fn to_u64(self) -> u64 {
        self
    }
    fn from_u64(value: u64) -> Result<Self, SetKeyError> {
        Ok(value)
    }
}

impl KeyValue for u8 {
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(value: u64) -> Result<Self, SetKeyError> {
        u8::try_from(value).map_err(|_| SetKeyError::OutOfRange)
    }
}

impl KeyValue for bool {
    fn to_u64(self) -> u64 {
        u64::from(self)
    }
    fn from_u64(value: u64) -> Result<Self, SetKeyError> {
        match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(SetKeyError::OutOfRange),
        }
    }
}

macro_rules! define_policy {
    ($( $(#[$doc:meta])* $key:ident : $ty:ty = $default:expr, $limit:expr $(, slot $slot:literal)?; )+) => {
        /// The reset policy: one field per line of [`with_policy_keys!`](crate::with_policy_keys).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Policy {
            $( $(#[$doc])* pub $key: $ty, )+
        }

        impl Default for Policy {
            fn default() -> Self {
                Policy { $( $key: $default, )+ }
            }
        }

        impl Policy {
            /// Every key, as the scenario format, hcactl and the driver's registry Parameters
            /// name them; a flight-recorder record names a key by its place here.
            pub const KEYS: [&'static str; KEY_COUNT] = [$( stringify!($key), )+];
            /// What each key takes, in the order of [`Policy::KEYS`].
            pub const LIMITS: [Limit; KEY_COUNT] = [$( $limit, )+];

            /// Every key's value, in the order of [`Policy::KEYS`] (flags as 0 or 1).
            pub fn values(&self) -> [u64; KEY_COUNT] {
                [$( KeyValue::to_u64(self.$key), )+]
            }

            /// Sets the field `key` names (flags take 0 or 1). Nothing is validated as a
            /// whole here: [`Policy::validate`] does that once every key is set.
            pub fn set(&mut self, key: &str, value: u64) -> Result<(), SetKeyError> {
                match key {
                    $( stringify!($key) => self.$key = KeyValue::from_u64(value)?, )+
                    _ => return Err(SetKeyError::UnknownKey),
                }
                Ok(())
            }
        }

        /// Keys in the table.
        const KEY_COUNT: usize = [$( stringify!($key), )+].len();
    };
}

crate::with_policy_keys!(define_policy);

/// A policy value that was refused; names the field so a person can fix it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("policy field `{field}`: {problem}")]
pub struct PolicyError {
    pub field: &'static str,
    pub problem: &'static str,
}

/// A `key=value` that does not set a policy field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SetKeyError {
    /// Not one of [`Policy::KEYS`].
    #[error("unknown policy key")]
    UnknownKey,
    /// Too large for the field (a count above 255, a flag other than 0 or 1).
    #[error("value out of range for this key")]
    OutOfRange,
}

impl Policy {
    /// Every value in range and every rule between two keys kept. A rule that is broken
    /// names its first key ([`Rule`]): nothing says which of the two was meant.
    pub fn validate(&self) -> Result<(), PolicyError> {
        self.check(|_| false)
    }

    /// [`Policy::validate`] for a change from `from`: a rule between two keys that is broken
    /// names the key that changed, the one the administrator set, and the other key in its
    /// problem ("must not exceed auto_restart_window_ms" for `hw_ready_timeout_ms`).
    pub fn validate_change(&self, from: &Policy) -> Result<(), PolicyError> {
        self.check(|key| self.value(key) != from.value(key))
    }

    /// The value of `key` (flags as 0 or 1); `None` for a key that is not one.
    pub fn value(&self, key: &str) -> Option<u64> {
        let i = Policy::KEYS.iter().position(|k| *k == key)?;
        Some(self.values()[i])
    }

    /// For a refusal of a rule between two keys: the other key and its value here; `None`
    /// for a refusal of one key's value alone.
    pub fn conflict(&self, e: &PolicyError) -> Option<(&'static str, u64)> {
        RULES.iter().find_map(|rule| {
            let [a, b] = rule.keys;
            let other = if (e.field, e.problem) == a {
                b.0
            } else if (e.field, e.problem) == b {
                a.0
            } else {
                return None;
            };
            Some((other, self.value(other)?))
        })
    }

    fn check(&self, changed: impl Fn(&str) -> bool) -> Result<(), PolicyError> {
        self.check_values()?;
        for rule in &RULES {
            if (rule.holds)(self) {
                continue;
            }
            let [first, second] = rule.keys;
            let (field, problem) = if changed(second.0) && !changed(first.0) {
                second
            } else {
                first
            };
            return Err(PolicyError { field, problem });
        }
        Ok(())
    }

    /// Each value on its own, by its line of the table: nonzero where it must be, within
    /// its bound. Four passes, so that of several values out of range the one named is the
    /// same as it always was: durations that must be set, then every duration's bound, then
    /// the counts that must be set, then the others.
    fn check_values(&self) -> Result<(), PolicyError> {
        const ZERO: &str = "must be greater than zero";
        let values = self.values();
        let keys = || Policy::KEYS.into_iter().zip(Policy::LIMITS).zip(values);
        let refuse = |field, problem| Err(PolicyError { field, problem });
        for ((field, limit), value) in keys() {
            if limit == Limit::MS && value == 0 {
                return refuse(field, ZERO);
            }
        }
        for ((field, limit), value) in keys() {
            if matches!(limit, Limit::Ms { .. }) && value > MAX_MS {
                return refuse(field, "must be at most 864000000 (ten days)");
            }
        }
        for min_first in [1, 0] {
            for ((field, limit), value) in keys() {
                let Limit::Count { min, max, too_big } = limit else {
                    continue;
                };
                if min != min_first {
                    continue;
                }
                if value < u64::from(min) {
                    return refuse(field, ZERO);
                }
                if value > u64::from(max) {
                    return refuse(field, too_big);
                }
            }
        }
        Ok(())
    }

    pub fn quiesce_deadline(&self) -> Duration {
        Duration::from_ms(self.quiesce_deadline_ms)
    }
    pub fn hw_ready_timeout(&self) -> Duration {
        Duration::from_ms(self.hw_ready_timeout_ms)
    }
    pub fn hw_poll_interval(&self) -> Duration {
        Duration::from_ms(self.hw_poll_interval_ms)
    }
    pub fn auto_restart_window(&self) -> Duration {
        Duration::from_ms(self.auto_restart_window_ms)
    }
    pub fn storm_window(&self) -> Duration {
        Duration::from_ms(self.storm_window_ms)
    }
    pub fn health_poll_interval(&self) -> Duration {
        Duration::from_ms(self.health_poll_interval_ms)
    }
    pub fn query_deadline(&self) -> Duration {
        Duration::from_ms(self.query_deadline_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each bound is where the policy says it is: the last value it takes is taken and the
    /// next one refused, naming its field.
    #[test]
    fn every_bound_of_validate_is_exactly_where_it_is_documented() {
        let ten_days = MAX_MS;
        let field = |p: Policy| p.validate().err().map(|e| e.field);
        let with = |f: &dyn Fn(&mut Policy)| {
            let mut p = Policy {
                auto_restart_window_ms: ten_days,
                ..Policy::default()
            };
            f(&mut p);
            p
        };
        assert_eq!(field(with(&|p| p.io_hold_timeout_ms = ten_days)), None);
        assert_eq!(
            field(with(&|p| p.io_hold_timeout_ms = ten_days + 1)),
            Some("io_hold_timeout_ms")
        );
        assert_eq!(field(with(&|p| p.max_auto_resets = 16)), None);
        assert_eq!(
            field(with(&|p| p.max_auto_resets = 17)),
            Some("max_auto_resets")
        );
        assert_eq!(field(with(&|p| p.client_request_limit = 16)), None);
        assert_eq!(field(with(&|p| p.reset_retries = 8)), None);
        assert_eq!(field(with(&|p| p.reset_retries = 9)), Some("reset_retries"));
        // The poll must be shorter than the ready bound; the restart window at least it.
        let ready = Policy::default().hw_ready_timeout_ms;
        assert_eq!(field(with(&|p| p.hw_poll_interval_ms = ready - 1)), None);
        assert_eq!(
            field(with(&|p| p.hw_poll_interval_ms = ready)),
            Some("hw_poll_interval_ms")
        );
        assert_eq!(field(with(&|p| p.auto_restart_window_ms = ready)), None);
        assert_eq!(
            field(with(&|p| p.auto_restart_window_ms = ready - 1)),
            Some("auto_restart_window_ms")
        );
    }

    /// The case: `hw_ready_timeout_ms=700000` against a window of 600000 names the key
    /// the administrator set, not the window, and the window with its value; each rule so,
    /// from either side.
    #[test]
    fn a_broken_rule_names_the_key_that_was_set_and_the_one_it_conflicts_with() {
        let from = Policy::default();
        for (key, value, other, other_value) in [
            (
                "hw_ready_timeout_ms",
                700_000,
                "auto_restart_window_ms",
                600_000,
            ),
            (
                "auto_restart_window_ms",
                5_000,
                "hw_ready_timeout_ms",
                10_000,
            ),
            ("hw_poll_interval_ms", 20_000, "hw_ready_timeout_ms", 10_000),
            ("hw_ready_timeout_ms", 5, "hw_poll_interval_ms", 10),
        ] {
            let mut p = from;
            p.set(key, value).expect("a key");
            let e = p.validate_change(&from).expect_err(key);
            assert_eq!(e.field, key, "{key}={value}: {e}");
            assert!(e.problem.contains(other), "{key}={value}: {e}");
            assert_eq!(p.conflict(&e), Some((other, other_value)), "{key}={value}");
        }
        // Both keys set: the rule's first key, as `validate` names it.
        let both = Policy {
            hw_ready_timeout_ms: 700_000,
            auto_restart_window_ms: 650_000,
            ..from
        };
        let e = both.validate_change(&from).expect_err("both");
        assert_eq!(e, both.validate().expect_err("the same"));
        assert_eq!(e.field, "auto_restart_window_ms");
        // A value refused on its own conflicts with nothing.
        let zero = Policy {
            quiesce_deadline_ms: 0,
            ..from
        };
        let e = zero.validate_change(&from).expect_err("zero");
        assert_eq!(zero.conflict(&e), None);
    }

    #[test]
    fn values_name_each_key_in_the_order_of_keys() {
        for (i, key) in Policy::KEYS.iter().enumerate() {
            let mut p = Policy::default();
            let v = p.values()[i];
            let other = if matches!(*key, "abort_on_unresponsive" | "auto_recover") {
                1 - v
            } else {
                v + 1
            };
            p.set(key, other).expect("a key");
            assert_eq!(p.values()[i], other, "{key} is value {i}");
        }
    }

    #[test]
    fn every_key_sets_its_field_and_nothing_else_is_a_key() {
        for key in Policy::KEYS {
            let mut p = Policy::default();
            let flag = matches!(key, "abort_on_unresponsive" | "auto_recover");
            let value = if flag {
                u64::from(!matches!(key, "auto_recover"))
            } else {
                7
            };
            assert_eq!(p.set(key, value), Ok(()), "{key}");
            assert_ne!(p, Policy::default(), "{key} changed nothing");
        }
        let mut p = Policy::default();
        assert_eq!(p.set("quiesce_deadline", 1), Err(SetKeyError::UnknownKey));
        assert_eq!(p.set("max_auto_resets", 256), Err(SetKeyError::OutOfRange));
        assert_eq!(p.set("auto_recover", 2), Err(SetKeyError::OutOfRange));
        assert_eq!(p, Policy::default(), "a refused key changes nothing");
    }

    #[test]
    fn defaults_are_those_of_the_spec_and_valid() {
        let p = Policy::default();
        assert_eq!(p.quiesce_deadline_ms, 5_000);
        assert_eq!(p.hw_ready_timeout_ms, 10_000);
        assert_eq!(p.reset_retries, 2);
        assert_eq!(p.auto_restart_window_ms, 600_000);
        assert_eq!(p.max_auto_resets, 3);
        assert_eq!(p.storm_window_ms, 60_000);
        assert_eq!(p.io_hold_timeout_ms, 30_000);
        assert!(!p.abort_on_unresponsive);
        assert_eq!(p.query_deadline_ms, 1_000);
        assert_eq!(p.client_request_limit, 2);
        assert!(p.auto_recover);
        assert_eq!(
            p.paging_io_hold_timeout_ms, 0,
            "hold until Failed or Removed"
        );
        assert_eq!(p.validate(), Ok(()));
    }

    /// A count's refusal says the bound its line of the table gives, so the two cannot
    /// drift apart.
    #[test]
    fn a_counts_refusal_names_its_own_bound() {
        for (key, limit) in Policy::KEYS.into_iter().zip(Policy::LIMITS) {
            if let Limit::Count { max, too_big, .. } = limit {
                assert_eq!(too_big, alloc::format!("must be at most {max}"), "{key}");
                let mut p = Policy::default();
                p.set(key, u64::from(max) + 1)
                    .expect("a count takes one past its bound");
                let e = p.validate().expect_err("past its bound");
                assert_eq!((e.field, e.problem), (key, too_big));
            }
        }
    }

    /// Of several values out of range, the one named is the first of: a duration that must
    /// be set, a duration's bound, a count that must be set or is too large, then the
    /// others (the order the checks have always had, whatever the keys' order).
    #[test]
    fn of_several_bad_values_the_one_named_is_the_first_check_that_fails() {
        let field = |p: Policy| p.validate().err().map(|e| (e.field, e.problem));
        let bad = Policy {
            reset_retries: RESET_RETRIES_LIMIT + 1,
            max_auto_resets: 0,
            ..Policy::default()
        };
        assert_eq!(
            field(bad),
            Some(("max_auto_resets", "must be greater than zero"))
        );
        let bad = Policy {
            storm_window_ms: 0,
            max_auto_resets: 0,
            ..bad
        };
        assert_eq!(
            field(bad),
            Some(("storm_window_ms", "must be greater than zero"))
        );
        let bad = Policy {
            reset_retries: RESET_RETRIES_LIMIT + 1,
            ..Policy::default()
        };
        assert_eq!(field(bad), Some(("reset_retries", "must be at most 8")));
    }

    #[test]
    fn zero_values_are_refused_by_name() {
        type Spoil = fn(&mut Policy);
        let fields: [(&str, Spoil); 10] = [
            ("quiesce_deadline_ms", |p| p.quiesce_deadline_ms = 0),
            ("hw_ready_timeout_ms", |p| p.hw_ready_timeout_ms = 0),
            ("hw_poll_interval_ms", |p| p.hw_poll_interval_ms = 0),
            ("auto_restart_window_ms", |p| p.auto_restart_window_ms = 0),
            ("storm_window_ms", |p| p.storm_window_ms = 0),
            ("io_hold_timeout_ms", |p| p.io_hold_timeout_ms = 0),
            ("health_poll_interval_ms", |p| p.health_poll_interval_ms = 0),
            ("max_auto_resets", |p| p.max_auto_resets = 0),
            ("query_deadline_ms", |p| p.query_deadline_ms = 0),
            ("client_request_limit", |p| p.client_request_limit = 0),
        ];
        for (name, spoil) in fields {
            let mut p = Policy::default();
            spoil(&mut p);
            let err = p.validate().expect_err(name);
            assert_eq!(err.field, name);
        }
    }

    #[test]
    fn contradictions_are_refused_by_name() {
        let p = Policy {
            hw_poll_interval_ms: 20_000,
            ..Policy::default()
        };
        assert_eq!(
            p.validate().map_err(|e| e.field),
            Err("hw_poll_interval_ms")
        );
        let p = Policy {
            auto_restart_window_ms: 1_000,
            ..Policy::default()
        };
        assert_eq!(
            p.validate().map_err(|e| e.field),
            Err("auto_restart_window_ms")
        );
        let p = Policy {
            max_auto_resets: 17,
            ..Policy::default()
        };
        assert_eq!(p.validate().map_err(|e| e.field), Err("max_auto_resets"));
        let p = Policy {
            reset_retries: 9,
            ..Policy::default()
        };
        assert_eq!(p.validate().map_err(|e| e.field), Err("reset_retries"));
        let p = Policy {
            storm_window_ms: u64::MAX,
            ..Policy::default()
        };
        assert_eq!(p.validate().map_err(|e| e.field), Err("storm_window_ms"));
        let p = Policy {
            client_request_limit: 17,
            ..Policy::default()
        };
        assert_eq!(
            p.validate().map_err(|e| e.field),
            Err("client_request_limit")
        );
        let p = Policy {
            paging_io_hold_timeout_ms: u64::MAX,
            ..Policy::default()
        };
        assert_eq!(
            p.validate().map_err(|e| e.field),
            Err("paging_io_hold_timeout_ms")
        );
    }
}
