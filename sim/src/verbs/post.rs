//! The data path: doorbells for sends and receives, what a send puts on the wire, and what
//! a port without a link does to it.

use hcabus::fabric::*;
use hcabus::verbs::*;

use super::{index_of, SimVerbs};

impl SimVerbs {
    /// Counts a doorbell on a dead device (the request is never executed).
    pub(crate) fn lose_doorbell(&mut self) {
        self.stats.lost_doorbells += 1;
    }

    pub(crate) fn post_send(&mut self, qp: Qpn, wr: &SendWr) -> Result<(), VerbsError> {
        let i = self.qp_index(qp)?;
        let q = &self.qps[i];
        let (attr, state, remote, n) = (q.attr, q.state, q.remote, q.number);
        let cqe = |status, byte_len| Cqe {
            wr_id: wr.wr_id,
            qpn: qp,
            opcode: WcOpcode::Send,
            status,
            byte_len,
        };
        match state {
            QpState::Rts => {}
            QpState::Error => {
                self.complete(attr.send_cq, cqe(WcStatus::Flushed, 0));
                return Ok(());
            }
            _ => return Err(VerbsError::InvalidState),
        }
        // The wire stands for the send queue here: a datagram with no room on it is refused,
        // as a full send queue refuses a post, and its sender keeps it (IPoIB's stack queue
        // sends its backlog at once after a long outage). A reliable send has its own room
        // check (`send_reliable`).
        let full = self.wire.len() >= self.wire.capacity();
        if attr.qp_type == QpType::Ud && full && self.link(attr.port) {
            self.stats.sends_refused += 1;
            return Err(VerbsError::NoResources);
        }
        self.stats.sends_posted += 1;
        let len = wr.sge.len as usize;
        if len > WIRE_MTU || !self.local_buffer(attr.pd, &wr.sge, Access::empty()) {
            // What it sent before completes first (flushed), in order.
            self.flush_sends(i);
            self.complete(attr.send_cq, cqe(WcStatus::LocalProtection, 0));
            self.qps[i].state = QpState::Error;
            return Ok(());
        }
        if !self.link(attr.port) {
            // Nothing leaves the port. A datagram is simply lost, and its send completes. A
            // reliable send goes on the wire all the same: its requester transmits it again
            // at each timeout, and the peer takes the first transmission after the port's
            // return (`Fabric::carries`), or none, and the budget fails the queue pair.
            self.stats.no_link_sends += 1;
            if attr.qp_type == QpType::Ud {
                self.complete(attr.send_cq, cqe(WcStatus::Success, len as u32));
                return Ok(());
            }
        }
        let (dlid, dqpn) = match (attr.qp_type, wr.dest) {
            (QpType::Rc, SendDest::Connected) => match remote {
                Some(r) => (r.lid, r.qpn),
                None => return Err(VerbsError::InvalidState),
            },
            (QpType::Ud, SendDest::Datagram { ah, qpn }) => match self.ahs.get(index_of(ah.0)) {
                Some(a)
                    if a.live && a.number == ah.0 && a.pd == attr.pd.0 && a.port == attr.port =>
                {
                    (a.dlid, qpn)
                }
                _ => return Err(VerbsError::InvalidArgument),
            },
            _ => return Err(VerbsError::InvalidArgument),
        };
        let mut msg = WireMsg {
            src_lid: HOST_LID_BASE + Lid::from(attr.port.saturating_sub(1)),
            src_qpn: Qpn(n),
            dlid,
            dqpn,
            len: len as u16,
            data: [0; WIRE_MTU],
            seq: 0,
            sent_at: self.now,
        };
        if let Some(src) = self.mem(wr.sge.addr, len as u64) {
            msg.data[..len].copy_from_slice(src);
        }
        self.qps[i].sends += 1;
        if attr.qp_type == QpType::Rc {
            // Completes when its responder acknowledges it, or in error when none does.
            self.send_reliable(i, wr.wr_id, msg);
            return Ok(());
        }
        self.wire.push_back(msg);
        self.complete(attr.send_cq, cqe(WcStatus::Success, len as u32));
        Ok(())
    }

    pub(crate) fn post_recv(&mut self, qp: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        let i = self.qp_index(qp)?;
        let q = &mut self.qps[i];
        if q.state == QpState::Reset {
            return Err(VerbsError::InvalidState);
        }
        if q.recvs.len() >= q.attr.max_recv_wr as usize {
            return Err(VerbsError::NoResources);
        }
        q.recvs.push_back(*wr);
        self.stats.recvs_posted += 1;
        Ok(())
    }
}
