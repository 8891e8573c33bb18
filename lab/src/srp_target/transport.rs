//! The target port's side of the reliable transport (docs/clients.md "The reliable
//! transport"): which transmission of a message its route carries, its answers sent in order
//! and retried the same way, and a connection its queue pair gives up.

use hcabus::verbs::{Lid, RcTransport, RemoteQp};

use hcabus::{Duration, Instant};
use ibal::target::Wire;

use super::{SrpTarget, IU_SIZE};

/// When a message first sent at `first` gets through: `Ok` at the first of its transmissions
/// (each [`RcTransport::retransmission`] after it) by `now` that is not `swallowed` (by the
/// route, or by the initiator's port gone dark), `Err(Some(t))` the next one to try,
/// `Err(None)` when the transport gave up.
pub(super) fn carried(
    first: Instant,
    rc: RcTransport,
    now: Instant,
    swallowed: impl Fn(Instant) -> bool,
) -> Result<Instant, Option<Instant>> {
    for k in 0..=rc.retry_count {
        let Some(after) = (if k == 0 {
            Some(Duration::ZERO)
        } else {
            rc.retransmission(k)
        }) else {
            // No timer: a transmission that was swallowed is never sent again.
            break;
        };
        let at = first + after;
        if at > now {
            return Err(Some(at));
        }
        if !swallowed(at) {
            return Ok(at);
        }
    }
    Err(None)
}

impl SrpTarget {
    /// Whether a transmission to or from `initiator` at `at` is lost: the route swallows
    /// it, or the initiator's port carried nothing then.
    pub(super) fn swallowed(&self, hca: &dyn Wire, initiator: Lid, at: Instant) -> bool {
        self.route.at(at).blackhole || !hca.carries(initiator, self.conn_since, at)
    }

    /// The target's queue pair gave an answer up (retry exceeded): the connection is gone,
    /// with every command and answer on it. The initiator learns it when what it sends next
    /// is never acknowledged.
    pub(super) fn transport_failed(&mut self) {
        log::warn!(
            "SRP target {:#x}: an answer unacknowledged past the retry budget: connection lost",
            self.lid
        );
        self.stats.transport_failures += 1;
        self.conn = None;
        self.queue.clear();
        self.stats.undeliverable += self.outbox.len() as u64;
        self.outbox.clear();
        self.retransmit_out = None;
    }

    /// Sends the answers that are due, in the order they were made. One the route swallows
    /// is sent again by the target's own transport and holds those behind it; past its
    /// retry budget the target's queue pair is in error and the connection is gone.
    pub(super) fn send_due(&mut self, hca: &mut dyn Wire, now: Instant) {
        let rc = hca.rc_transport();
        self.retransmit_out = None;
        while let Some(o) = self.outbox.front().copied().filter(|o| o.due <= now) {
            // An answer for a connection gone is dropped below, whatever its route does.
            let to = self.conn.filter(|(q, _)| *q == o.via).map(|(_, i)| i.lid);
            let lost = |at| to.is_some_and(|lid| self.swallowed(hca, lid, at));
            match carried(o.due, rc, now, lost) {
                Ok(at) if at > o.due => self.count_retransmitted(hca, to, o.due),
                Ok(_) => {}
                Err(Some(next)) => {
                    self.retransmit_out = Some(next);
                    return;
                }
                Err(None) => {
                    self.stats.blackholed += 1;
                    self.transport_failed();
                    return;
                }
            }
            self.outbox.pop_front();
            let Some((qpn, initiator)) = self.conn.filter(|(q, _)| *q == o.via) else {
                self.stats.undeliverable += 1;
                continue;
            };
            let mut iu = [0u8; IU_SIZE];
            let n = o.rsp.encode(&mut iu);
            let me = RemoteQp { lid: self.lid, qpn };
            if hca.remote_send(me, initiator.qpn, &iu[..n]).is_err() {
                self.stats.undeliverable += 1;
            }
        }
    }

    /// A message that got through on a retransmission: counted as ridden out over the
    /// initiator's port gone dark, or as blackholed by the route.
    pub(super) fn count_retransmitted(
        &mut self,
        hca: &dyn Wire,
        initiator: Option<Lid>,
        first: Instant,
    ) {
        if initiator.is_some_and(|lid| !hca.carries(lid, self.conn_since, first)) {
            self.stats.port_dark_retransmits += 1;
        } else {
            self.stats.blackholed += 1;
        }
    }
}
