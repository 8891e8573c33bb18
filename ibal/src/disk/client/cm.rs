//! A login's CM REQ (docs/design.md §7 "A login's REQ"): the initiator learns that nobody
//! answered its REQ only when the REQ's timeout passes, and its communication manager sends
//! the REQ again, up to `MAX_CM_RETRIES` times (16 REQs in all), before the login fails, or
//! sooner at the login's own deadline (a data LUN's hold timeout). A target that is
//! restarting, or a route that swallows the REQ, costs the initiator those waits: a target
//! back in the meantime answers the next retransmission, not at once.
//!
//! The timeout is the CM's (IBA 12.6.4, kernel `cm.c` `ib_send_cm_req()`): twice the path's
//! packet lifetime and the response time the initiator grants the target, each an IBA time
//! (4.096 us x 2^n), as the CM rounds it to milliseconds (`cm_convert_to_ms`: 2^(n - 8)).
//! ib_srp grants the target the subnet timeout plus two (20: 4.1 s), 6.1 s a REQ with the
//! packet lifetime OpenSM puts in its PathRecords (its subnet timeout, 18); the target's CM
//! answers a REQ from its handler, so this initiator grants 16 (256 ms): 2.3 s a REQ. The
//! model re-creates the queue pair for each REQ sent again (a real CM resends the MAD).

use hcabus::{Duration, Instant};

use super::SrpClient;
use crate::access::FabricBus;

/// The CM's retransmissions of an unanswered REQ after the first: ib_srp's
/// `max_cm_retries`, and the most the REQ's 4-bit field allows.
pub const MAX_CM_RETRIES: u8 = 15;

/// The packet lifetime of the path: OpenSM's PathRecords carry its subnet timeout (18).
pub const PACKET_LIFE: u8 = 18;

/// The response time this initiator grants the target's CM (an IBA time).
pub const CM_RESPONSE_TIMEOUT: u8 = 16;

/// An IBA time as the kernel's CM turns it into milliseconds.
const fn cm_ms(iba_time: u8) -> u64 {
    1 << iba_time.saturating_sub(8)
}

/// How long the CM waits for the answer to a REQ before it sends it again.
pub const REQ_TIMEOUT: Duration =
    Duration::from_ms(2 * cm_ms(PACKET_LIFE) + cm_ms(CM_RESPONSE_TIMEOUT));

/// A REQ out with no answer yet: how many times the CM has sent it again, and, when the
/// target's answer is known to come after the CM's last REQ has timed out, when that is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ReqOut {
    pub(super) retries: u8,
    pub(super) gives_up_at: Option<Instant>,
}

impl SrpClient {
    /// The login's REQ went unanswered at `now` (a target restarting, a route cut): the CM
    /// sends it again after its timeout; `false` once it has sent it again as often as it
    /// may, or once the login's own deadline (a data LUN's hold timeout, counted from the
    /// first REQ nobody answered) has passed: the login has then failed.
    pub(super) fn req_unanswered<B: FabricBus + ?Sized>(&mut self, bus: &mut B) -> bool {
        let now = bus.now();
        let retries = self.req.map_or(0, |r| r.retries);
        self.login
            .unanswered(now, crate::errors::CreateError::Unreachable);
        let deadline = self.login.deadline(self.login_limit(bus));
        if retries >= MAX_CM_RETRIES || deadline.is_some_and(|d| d <= now) {
            self.req = None;
            return false;
        }
        self.req = Some(ReqOut {
            retries: retries + 1,
            gives_up_at: None,
        });
        // Its hold ends no later than it would after a refusal.
        let next = now + REQ_TIMEOUT;
        self.connect_at = Some(deadline.map_or(next, |d| d.min(next)));
        true
    }
}

/// When the CM gives up on a REQ sent at `now` after `retries` sent before it: at its last
/// REQ's timeout, or at the login's `deadline` if that is still to come and sooner, but
/// never before this REQ's own timeout (a login past its deadline is a probe, answered
/// whenever the target does).
pub(super) fn cm_gives_up(now: Instant, retries: u8, deadline: Option<Instant>) -> Instant {
    let left = u64::from(MAX_CM_RETRIES.saturating_sub(retries)) + 1;
    let last = now + Duration::from_us(REQ_TIMEOUT.as_us() * left);
    match deadline {
        Some(d) if d > now => last.min(d.max(now + REQ_TIMEOUT)),
        _ => last,
    }
}

/// The times the CM sends a REQ again while it waits `wait` for the answer: at each of its
/// timeouts strictly before the answer comes (or it gives up).
pub(super) fn resent_before(wait: Duration) -> u64 {
    wait.as_us().saturating_sub(1) / REQ_TIMEOUT.as_us().max(1)
}

impl SrpClient {
    /// Until when the CM waits for the answer to the REQ it sends at `now`: to its last
    /// REQ's timeout, or the login's own deadline if that is still to come and sooner (a
    /// login past it is a probe, answered whenever the target does).
    pub(super) fn cm_until<B: FabricBus + ?Sized>(&self, bus: &B, now: Instant) -> Instant {
        let retries = self.req.map_or(0, |r| r.retries);
        // A series not refused or unanswered yet holds from this REQ on.
        let limit = self.login_limit(bus);
        let deadline = self.login.deadline(limit).unwrap_or(now + limit);
        cm_gives_up(now, retries, Some(deadline))
    }

    /// The target will answer the REQ sent at `now` only after the CM's last timeout (or
    /// the login's deadline): the CM sends it again at each timeout (the target drops the
    /// copies) and gives the login up then.
    pub(super) fn answered_late<B: FabricBus + ?Sized>(&mut self, bus: &B, now: Instant) {
        // Nobody answers meanwhile: the login is retrying, its hold counted from now, and a
        // data LUN's hold ends the REQs sooner than their last timeout.
        self.login
            .unanswered(now, crate::errors::CreateError::AnsweredLate);
        let until = self.cm_until(bus, now);
        self.disk.stats.req_retries += resent_before(until.saturating_since(now));
        self.disk.stats.logins_answered_late += 1;
        self.req = Some(ReqOut {
            retries: MAX_CM_RETRIES,
            gives_up_at: Some(until),
        });
        self.connect_at = Some(until);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_req_waits_twice_the_packet_lifetime_and_the_response_time() {
        assert_eq!(REQ_TIMEOUT, Duration::from_ms(2 * 1_024 + 256));
        // ib_srp's grant (the subnet timeout 18, plus two) gives the 6.1 s docs/fleet.md
        // sources.
        assert_eq!(2 * cm_ms(18) + cm_ms(20), 6_144);
        assert_eq!(cm_ms(5), 1, "below 2^8 x 4.096 us, a millisecond");
    }

    /// The CM waits out its sixteen REQs, or the login's deadline, never less than one REQ.
    #[test]
    fn the_cm_gives_up_at_its_last_timeout_or_the_deadline_never_within_one_req() {
        let t = REQ_TIMEOUT.as_us();
        let at = Instant::from_us;
        let now = at(1_000_000);
        assert_eq!(cm_gives_up(now, 0, None), at(1_000_000 + 16 * t));
        assert_eq!(
            cm_gives_up(now, 15, None),
            at(1_000_000 + t),
            "the last REQ"
        );
        assert_eq!(cm_gives_up(now, 40, None), at(1_000_000 + t), "never none");
        // A deadline 10 s on cuts the series there; one a millisecond on leaves this REQ
        // its whole timeout; one past is no deadline (a probe).
        assert_eq!(cm_gives_up(now, 0, Some(at(11_000_000))), at(11_000_000));
        assert_eq!(cm_gives_up(now, 0, Some(at(1_001_000))), at(1_000_000 + t));
        assert_eq!(cm_gives_up(now, 3, Some(now)), at(1_000_000 + 13 * t));
    }

    /// A REQ is sent again at each timeout strictly before its answer: none for an answer
    /// within the first, fifteen over the CM's whole series of sixteen.
    #[test]
    fn a_req_is_sent_again_at_each_timeout_before_its_answer() {
        let t = REQ_TIMEOUT;
        assert_eq!(resent_before(Duration::ZERO), 0);
        assert_eq!(resent_before(t), 0, "answered as the first times out");
        assert_eq!(resent_before(t + Duration::from_us(1)), 1);
        let series = Duration::from_us(t.as_us() * (u64::from(MAX_CM_RETRIES) + 1));
        assert_eq!(resent_before(series), u64::from(MAX_CM_RETRIES));
    }
}
