//! The reliable transport of the simulated adapter's RC queue pairs (docs/clients.md "The
//! wire"): a reliable send completes when its responder acknowledges it (a remote peer took
//! it off the wire), and a send no responder acknowledges in the adapter's retry budget
//! ([`RcTransport::retry_budget`]) completes with `RetryExceeded`, which moves its queue pair
//! to the error state and flushes everything else it holds, as an HCA's requester does.
//!
//! Where the route loses what is sent, the peer leaves the message on the wire: it stands
//! for the transmissions the requester repeats until one gets through (the peer takes it
//! at the first retransmission the route carries) or the budget runs out.

use hcabus::fabric::WireMsg;
use hcabus::time::Instant;
use hcabus::verbs::*;

use super::SimVerbs;

/// A reliable send on the wire that no responder acknowledged yet.
#[derive(Debug, Clone, Copy)]
pub(super) struct Unacked {
    seq: u64,
    /// Its queue pair's slot and number.
    qp: usize,
    qpn: u32,
    wr_id: u64,
    len: u32,
    sent_at: Instant,
}

impl SimVerbs {
    /// The adapter's time: sends whose budget ran out by `now` fail their queue pairs. The
    /// device calls it only while its data path moves (a dead adapter runs no timer).
    pub(crate) fn run_transport(&mut self, now: Instant) {
        self.now = now;
        let Some(budget) = self.transport.retry_budget() else {
            return;
        };
        // Sends go on in order of their first transmission, and every one has the same
        // budget: the oldest is the first due.
        while let Some(u) = self.unacked.front().copied() {
            if u.sent_at + budget > now {
                break;
            }
            self.qp_error(u.qp, WcStatus::RetryExceeded);
        }
    }

    pub(crate) fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    /// When the next send would run out of its budget, if any is waiting.
    pub fn transport_due(&self) -> Option<Instant> {
        let budget = self.transport.retry_budget()?;
        self.unacked.front().map(|u| u.sent_at + budget)
    }

    /// Reliable sends on the wire no responder acknowledged yet.
    pub fn unacked(&self) -> usize {
        self.unacked.len()
    }

    /// Puts a reliable send of queue pair slot `i` on the wire, waiting for its
    /// acknowledgement; a full wire fails it at once (the queue pair in error).
    pub(super) fn send_reliable(&mut self, i: usize, wr_id: u64, mut msg: WireMsg) {
        self.next_seq += 1;
        let u = Unacked {
            seq: self.next_seq,
            qp: i,
            qpn: self.qps[i].number,
            wr_id,
            len: u32::from(msg.len),
            sent_at: self.now,
        };
        msg.seq = u.seq;
        msg.sent_at = u.sent_at;
        let room =
            self.wire.len() < self.wire.capacity() && self.unacked.len() < self.unacked.capacity();
        if !room {
            self.stats.wire_drops += 1;
            self.stats.retries_exceeded += 1;
            self.flush_sends(i);
            let cqe = self.send_cqe(&u, WcStatus::RetryExceeded);
            self.complete(self.qps[i].attr.send_cq, cqe);
            self.enter_error(i);
            return;
        }
        self.wire.push_back(msg);
        self.unacked.push_back(u);
    }

    /// The responder took message `seq` off the wire: its send completes.
    pub(crate) fn acknowledge(&mut self, seq: u64) {
        let Some(k) = self.unacked.iter().position(|u| u.seq == seq) else {
            return;
        };
        let Some(u) = self.unacked.remove(k) else {
            return;
        };
        if self.qp_live(u.qp, u.qpn) {
            let cqe = self.send_cqe(&u, WcStatus::Success);
            self.complete(self.qps[u.qp].attr.send_cq, cqe);
        }
    }

    /// The acknowledgement of `seq` reached a device that moves nothing: no completion,
    /// ever (its reset forgets the send).
    pub(crate) fn lose_acknowledgement(&mut self, seq: u64) {
        self.unacked.retain(|u| u.seq != seq);
    }

    /// Queue pair slot `i` enters the error state, its oldest waiting send with `first`,
    /// the rest flushed, in order; nothing of it stays on the wire.
    fn qp_error(&mut self, i: usize, first: WcStatus) {
        if first == WcStatus::RetryExceeded {
            self.stats.retries_exceeded += 1;
        }
        let cq = self.qps[i].attr.send_cq;
        let mut status = first;
        while let Some(k) = self.unacked.iter().position(|u| u.qp == i) {
            let Some(u) = self.unacked.remove(k) else {
                break;
            };
            self.wire.retain(|m| m.seq != u.seq);
            if self.qp_live(u.qp, u.qpn) {
                let cqe = self.send_cqe(&u, status);
                self.complete(cq, cqe);
            }
            status = WcStatus::Flushed;
        }
        self.enter_error(i);
    }

    /// Flushes every send queue pair slot `i` still waits on (before a failure of its own).
    pub(super) fn flush_sends(&mut self, i: usize) {
        if self.unacked.iter().any(|u| u.qp == i) {
            self.qp_error(i, WcStatus::Flushed);
        }
    }

    /// Moves queue pair slot `i` to the error state (which flushes its receives).
    fn enter_error(&mut self, i: usize) {
        let qpn = Qpn(self.qps[i].number);
        if self.qps[i].live && self.qps[i].state != QpState::Error {
            // A live queue pair may always enter the error state.
            let _ = self.modify_qp(qpn, QpState::Error, None);
        }
    }

    /// Queue pair slot `i` is gone (destroyed, or the device reset): it sends nothing more,
    /// and nothing completes for it.
    pub(super) fn forget_sends(&mut self, i: usize) {
        let (unacked, wire) = (&mut self.unacked, &mut self.wire);
        unacked.retain(|u| {
            let keep = u.qp != i;
            if !keep {
                wire.retain(|m| m.seq != u.seq);
            }
            keep
        });
    }

    fn qp_live(&self, i: usize, qpn: u32) -> bool {
        self.qps.get(i).is_some_and(|q| q.live && q.number == qpn)
    }

    fn send_cqe(&self, u: &Unacked, status: WcStatus) -> Cqe {
        let byte_len = if status == WcStatus::Success {
            u.len
        } else {
            0
        };
        Cqe {
            wr_id: u.wr_id,
            qpn: Qpn(u.qpn),
            opcode: WcOpcode::Send,
            status,
            byte_len,
        }
    }
}
