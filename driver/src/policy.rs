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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// How long a client in the barrier has to execute; it cannot extend it.
    pub quiesce_deadline_ms: u64,
    /// Bound of one wait for the device to come back after asserting reset.
    pub hw_ready_timeout_ms: u64,
    /// Interval of readiness probes while waiting for the device.
    pub hw_poll_interval_ms: u64,
    /// Soft-reset retries after the first attempt, before the function-level reset.
    pub reset_retries: u8,
    /// A device not back within this window after the hardware reset began is left Failed.
    pub auto_restart_window_ms: u64,
    /// Automatic resets allowed within `storm_window_ms`.
    pub max_auto_resets: u8,
    pub storm_window_ms: u64,
    /// How long a client may hold I/O during a reset before failing it upward (SRP's
    /// fast_io_fail). The coordinator only carries it to the clients.
    pub io_hold_timeout_ms: u64,
    /// A planned reset with an unresponsive client aborts instead of forcing it.
    pub abort_on_unresponsive: bool,
    /// Interval of the health monitor's polls of the catastrophic buffer and counter.
    pub health_poll_interval_ms: u64,
    /// How long the CAN_VETO clients have to answer RESET_QUERY; silence is consent.
    pub query_deadline_ms: u64,
    /// Reset requests one client may make within `storm_window_ms`; past it a request is
    /// refused with `Throttled` and nothing happens.
    pub client_request_limit: u8,
    /// Reset automatically on a fatal error (catastrophic error, hang, command timeout).
    /// When false the device is quiesced and left Failed for the administrator (devlink
    /// health's `auto_recover`).
    pub auto_recover: bool,
    /// How long a PAGING_PATH client holds I/O instead of `io_hold_timeout_ms`; 0 holds until
    /// the device is Failed or Removed (a failed paging I/O is a bugcheck on Windows). The
    /// coordinator only carries it to the clients.
    pub paging_io_hold_timeout_ms: u64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            quiesce_deadline_ms: 5_000,
            hw_ready_timeout_ms: 10_000,
            hw_poll_interval_ms: 10,
            reset_retries: 2,
            auto_restart_window_ms: 600_000,
            max_auto_resets: 3,
            storm_window_ms: 60_000,
            io_hold_timeout_ms: 30_000,
            abort_on_unresponsive: false,
            health_poll_interval_ms: 1_000,
            query_deadline_ms: 1_000,
            client_request_limit: 2,
            auto_recover: true,
            paging_io_hold_timeout_ms: 0,
        }
    }
}

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
    /// Every key, as the scenario format, hcactl and the driver's registry Parameters name
    /// them.
    pub const KEYS: [&'static str; 14] = [
        "quiesce_deadline_ms",
        "hw_ready_timeout_ms",
        "hw_poll_interval_ms",
        "reset_retries",
        "auto_restart_window_ms",
        "max_auto_resets",
        "storm_window_ms",
        "io_hold_timeout_ms",
        "abort_on_unresponsive",
        "health_poll_interval_ms",
        "query_deadline_ms",
        "client_request_limit",
        "auto_recover",
        "paging_io_hold_timeout_ms",
    ];

    /// Every key's value, in the order of [`Policy::KEYS`] (flags as 0 or 1).
    pub fn values(&self) -> [u64; Policy::KEYS.len()] {
        [
            self.quiesce_deadline_ms,
            self.hw_ready_timeout_ms,
            self.hw_poll_interval_ms,
            u64::from(self.reset_retries),
            self.auto_restart_window_ms,
            u64::from(self.max_auto_resets),
            self.storm_window_ms,
            self.io_hold_timeout_ms,
            u64::from(self.abort_on_unresponsive),
            self.health_poll_interval_ms,
            self.query_deadline_ms,
            u64::from(self.client_request_limit),
            u64::from(self.auto_recover),
            self.paging_io_hold_timeout_ms,
        ]
    }

    /// Sets the field `key` names (flags take 0 or 1). Nothing is validated as a whole here:
    /// [`Policy::validate`] does that once every key is set.
    pub fn set(&mut self, key: &str, value: u64) -> Result<(), SetKeyError> {
        let count = || u8::try_from(value).map_err(|_| SetKeyError::OutOfRange);
        let flag = || match value {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(SetKeyError::OutOfRange),
        };
        match key {
            "quiesce_deadline_ms" => self.quiesce_deadline_ms = value,
            "hw_ready_timeout_ms" => self.hw_ready_timeout_ms = value,
            "hw_poll_interval_ms" => self.hw_poll_interval_ms = value,
            "reset_retries" => self.reset_retries = count()?,
            "auto_restart_window_ms" => self.auto_restart_window_ms = value,
            "max_auto_resets" => self.max_auto_resets = count()?,
            "storm_window_ms" => self.storm_window_ms = value,
            "io_hold_timeout_ms" => self.io_hold_timeout_ms = value,
            "abort_on_unresponsive" => self.abort_on_unresponsive = flag()?,
            "health_poll_interval_ms" => self.health_poll_interval_ms = value,
            "query_deadline_ms" => self.query_deadline_ms = value,
            "client_request_limit" => self.client_request_limit = count()?,
            "auto_recover" => self.auto_recover = flag()?,
            "paging_io_hold_timeout_ms" => self.paging_io_hold_timeout_ms = value,
            _ => return Err(SetKeyError::UnknownKey),
        }
        Ok(())
    }

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

    /// Each value on its own: nonzero where it must be, within its bound.
    fn check_values(&self) -> Result<(), PolicyError> {
        let nonzero: [(&'static str, u64); 8] = [
            ("quiesce_deadline_ms", self.quiesce_deadline_ms),
            ("hw_ready_timeout_ms", self.hw_ready_timeout_ms),
            ("hw_poll_interval_ms", self.hw_poll_interval_ms),
            ("auto_restart_window_ms", self.auto_restart_window_ms),
            ("storm_window_ms", self.storm_window_ms),
            ("io_hold_timeout_ms", self.io_hold_timeout_ms),
            ("health_poll_interval_ms", self.health_poll_interval_ms),
            ("query_deadline_ms", self.query_deadline_ms),
        ];
        for (field, value) in nonzero {
            if value == 0 {
                return Err(PolicyError {
                    field,
                    problem: "must be greater than zero",
                });
            }
        }
        let bounded = nonzero
            .into_iter()
            .chain([("paging_io_hold_timeout_ms", self.paging_io_hold_timeout_ms)]);
        for (field, value) in bounded {
            if value > MAX_MS {
                return Err(PolicyError {
                    field,
                    problem: "must be at most 864000000 (ten days)",
                });
            }
        }
        // Both are kept in fixed arrays of 16 slots.
        let counts = [
            (
                "max_auto_resets",
                self.max_auto_resets,
                MAX_AUTO_RESETS_LIMIT,
            ),
            (
                "client_request_limit",
                self.client_request_limit,
                CLIENT_REQUEST_LIMIT_MAX,
            ),
        ];
        for (field, value, max) in counts {
            let problem = match value {
                0 => "must be greater than zero",
                v if v > max => "must be at most 16",
                _ => continue,
            };
            return Err(PolicyError { field, problem });
        }
        if self.reset_retries > RESET_RETRIES_LIMIT {
            return Err(PolicyError {
                field: "reset_retries",
                problem: "must be at most 8",
            });
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
