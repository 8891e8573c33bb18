//! What every operator's view shares (docs/json.md): the wall-clock time of an instant of the
//! bus, one duration format, one spelling of states, one shape of a port, and the `schema`
//! that every JSON output carries.

use std::net::Ipv6Addr;
use std::sync::atomic::{AtomicBool, Ordering};

use hcabus::ioctl::{PortInfoOut, StateOut, NONE_U64};
use hcabus::types::{LinkSpeed, PhysState, PortState};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Map, Value};

pub(crate) use hcactl::contract::state_word;

/// `hcactl.NAME/1`: what a JSON document is and which layout it has.
pub(crate) fn schema(name: &str) -> String {
    hcactl::contract::schema("hcactl", name)
}

/// `v` (an object) with its `schema` first.
pub(crate) fn document(name: &str, v: Value) -> Value {
    let mut out = Map::new();
    out.insert("schema".into(), schema(name).into());
    if let Value::Object(fields) = v {
        out.extend(fields);
    }
    Value::Object(out)
}

/// A duration in microseconds, as every view prints one.
pub(crate) fn us(v: u64) -> String {
    duration_us(v)
}

/// A reset's result code by name ("?" for a code this hcactl does not know).
pub(crate) fn result(code: u32) -> &'static str {
    hcabus::ioctl::result_name(code).unwrap_or("?")
}

/// A reset's reason code by name ("-" for none or one this hcactl does not know).
pub(crate) fn reason_name(code: u32) -> &'static str {
    hcabus::types::ResetReason::try_from(code).map_or("-", |r| r.as_str())
}

/// A duration in the one format every view uses (jiff's friendly format: `3s 496ms`);
/// `-` for none.
pub(crate) fn duration_us(us: u64) -> String {
    if us == NONE_U64 {
        return "-".into();
    }
    let d = i64::try_from(us).map_or(SignedDuration::MAX, SignedDuration::from_micros);
    format!("{d:#}")
}

pub(crate) fn duration_ms(ms: u64) -> String {
    duration_us(ms.saturating_mul(1000))
}

/// `--utc`: every wall-clock time in UTC instead of the local time zone. Set once, before
/// anything is printed.
static UTC: AtomicBool = AtomicBool::new(false);

pub(crate) fn set_utc(utc: bool) {
    UTC.store(utc, Ordering::Relaxed);
}

pub(crate) fn utc() -> bool {
    UTC.load(Ordering::Relaxed)
}

/// How times are said: the wall clock of the bus's time zero, and whether in UTC.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// The bus's time zero in Unix milliseconds; `None`: the bus has no wall clock.
    zero_unix_ms: Option<u64>,
    utc: bool,
}

impl Clock {
    /// The clock QUERY_STATE gives (time zero 0: the host has none).
    pub(crate) fn of(state: &StateOut) -> Self {
        let zero = (state.time_zero_unix_ms != 0).then_some(state.time_zero_unix_ms);
        Clock::at_zero(zero, utc())
    }

    pub(crate) fn at_zero(zero_unix_ms: Option<u64>, utc: bool) -> Self {
        Clock { zero_unix_ms, utc }
    }

    /// The wall clock's RFC 3339 time of Unix milliseconds `unix_ms` (local, or UTC).
    pub(crate) fn wall(&self, unix_ms: u64) -> Option<String> {
        let ts = Timestamp::from_millisecond(i64::try_from(unix_ms).ok()?).ok()?;
        Some(if self.utc {
            ts.to_zoned_datetime(TimeZone::UTC)
                .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string()
        } else {
            ts.to_zoned_datetime(TimeZone::system())
                .strftime("%Y-%m-%dT%H:%M:%S%.3f%:z")
                .to_string()
        })
    }

    /// The RFC 3339 time of the bus's instant `at_us`; `None` without a wall clock (or for
    /// no instant).
    pub(crate) fn at(&self, at_us: u64) -> Option<String> {
        if at_us == NONE_U64 {
            return None;
        }
        self.wall(self.zero_unix_ms?.checked_add(at_us / 1000)?)
    }

    pub(crate) fn zero(&self) -> Option<String> {
        self.wall(self.zero_unix_ms?)
    }

    /// The bus's time zero in Unix milliseconds, if known.
    pub(crate) fn zero_unix_ms(&self) -> Option<u64> {
        self.zero_unix_ms
    }

    /// `at_us` as text: the wall-clock time and the bus's own (`2026-11-25T20:40:01.234Z
    /// (bus 2s 500ms)`), or the bus's alone without a wall clock.
    pub(crate) fn text(&self, at_us: u64) -> String {
        match self.at(at_us) {
            Some(wall) => format!("{wall} (bus {})", duration_us(at_us)),
            None => format!("bus {}", duration_us(at_us)),
        }
    }
}

/// The ports the bus knows (a port never reported is left out), with their number.
pub(crate) fn ports(s: &StateOut) -> impl Iterator<Item = (u8, &PortInfoOut)> + '_ {
    (1u8..)
        .zip(s.port_info.iter())
        .filter(|(_, p)| PortState::try_from(p.state).is_ok())
}

fn port_state(p: &PortInfoOut) -> String {
    PortState::try_from(p.state).map_or("Unknown".into(), |s| state_word(s.as_str()))
}

fn phys_state(p: &PortInfoOut) -> String {
    PhysState::try_from(p.phys_state).map_or("Unknown".into(), |s| state_word(s.as_str()))
}

fn speed(p: &PortInfoOut) -> Option<&'static str> {
    LinkSpeed::try_from(p.speed).ok().map(LinkSpeed::as_str)
}

/// `100 Gb/s`, `2.5 Gb/s`.
fn rate(mbps: u32) -> String {
    if mbps.is_multiple_of(1000) {
        format!("{} Gb/s", mbps / 1000)
    } else {
        format!("{} Gb/s", f64::from(mbps) / 1000.0)
    }
}

/// The one shape of a port in every JSON document (as `ibstat` names its fields).
pub(crate) fn port_json(port: u8, p: &PortInfoOut) -> Value {
    let up = speed(p).is_some();
    json!({
        "port": port,
        "state": port_state(p),
        "physical_state": phys_state(p),
        "lid": (p.lid != 0).then_some(p.lid),
        "sm_lid": (p.sm_lid != 0).then_some(p.sm_lid),
        "width": up.then(|| format!("{}X", p.width)),
        "speed": speed(p),
        "rate_gbps": up.then(|| f64::from(p.rate_mbps) / 1000.0),
        "gid": Ipv6Addr::from(p.gid).to_string(),
    })
}

pub(crate) fn ports_json(s: &StateOut) -> Vec<Value> {
    ports(s).map(|(n, p)| port_json(n, p)).collect()
}

/// A port as a line says it: `1 Active (LinkUp, 4X EDR 100 Gb/s, LID 0x10, SM LID 0x1,
/// GID fe80::2:c903:10:f5e1)`.
pub(crate) fn port_text(port: u8, p: &PortInfoOut) -> String {
    let mut parts = vec![phys_state(p)];
    if let Some(speed) = speed(p) {
        parts.push(format!("{}X {speed} {}", p.width, rate(p.rate_mbps)));
    }
    if p.lid != 0 {
        parts.push(format!("LID {:#x}, SM LID {:#x}", p.lid, p.sm_lid));
    }
    parts.push(format!("GID {}", Ipv6Addr::from(p.gid)));
    format!("{port} {} ({})", port_state(p), parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_one_format_and_none_is_a_dash() {
        assert_eq!(duration_us(3_496_123), "3s 496ms 123µs");
        assert_eq!(duration_ms(60_000), "1m");
        assert_eq!(duration_us(0), "0s");
        assert_eq!(duration_us(NONE_U64), "-");
    }

    #[test]
    fn a_bus_instant_reads_as_rfc_3339_from_the_wall_clock_of_time_zero() {
        let clock = Clock::at_zero(Some(1_795_564_800_000), true);
        assert_eq!(
            clock.at(2_500_000).as_deref(),
            Some("2026-11-25T00:00:02.500Z")
        );
        assert_eq!(
            clock.text(2_500_000),
            "2026-11-25T00:00:02.500Z (bus 2s 500ms)"
        );
        assert_eq!(clock.at(NONE_U64), None);
        let none = Clock::at_zero(None, true);
        assert_eq!((none.at(5), none.text(2_000_000)), (None, "bus 2s".into()));
    }

    #[test]
    fn a_port_has_one_shape() {
        let p = PortInfoOut {
            state: PortState::Active as u32,
            phys_state: PhysState::LinkUp as u32,
            lid: 0x10,
            sm_lid: 1,
            width: 4,
            speed: LinkSpeed::Edr as u32,
            rate_mbps: 100_000,
            reserved: 0,
            gid: hcabus::types::default_gid(0x0002_c903_0010_f5e0, 1),
        };
        assert_eq!(
            port_json(1, &p),
            json!({ "port": 1, "state": "Active", "physical_state": "LinkUp", "lid": 16,
                    "sm_lid": 1, "width": "4X", "speed": "EDR", "rate_gbps": 100.0,
                    "gid": "fe80::2:c903:10:f5e1" })
        );
        assert_eq!(
            port_text(1, &p),
            "1 Active (LinkUp, 4X EDR 100 Gb/s, LID 0x10, SM LID 0x1, GID fe80::2:c903:10:f5e1)"
        );
    }
}
