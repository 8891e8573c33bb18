//! The wire seen from the remote peers (the SRP target, the IPoIB peer): what the adapter
//! sent, and what peers send, write and read through it, checked as a responder would.

use hcabus::fabric::*;
use hcabus::verbs::*;

use super::SimVerbs;

impl SimVerbs {
    /// Takes the oldest message on the wire that `wanted` accepts. A reliable send's
    /// acknowledgement is the device's business ([`SimVerbs::acknowledge`]): a dead device
    /// completes nothing.
    pub fn wire_take(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        let i = self.wire.iter().position(wanted)?;
        self.wire.remove(i)
    }

    /// A copy of the oldest message on the wire that `wanted` accepts, left there.
    pub fn wire_front(&self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        self.wire.iter().find(|m| wanted(m)).copied()
    }

    pub fn wire_len(&self) -> usize {
        self.wire.len()
    }

    fn responder(&mut self, from: RemoteQp, to: Qpn) -> Result<usize, RemoteError> {
        let i = self.qp_index(to).map_err(|_| RemoteError::NoSuchQp)?;
        if !self.link(self.qps[i].attr.port) {
            self.stats.no_link_remote += 1;
            return Err(RemoteError::LinkDown);
        }
        let q = &self.qps[i];
        if !matches!(q.state, QpState::Rtr | QpState::Rts) {
            return Err(RemoteError::NotConnected);
        }
        if q.attr.qp_type == QpType::Rc && q.remote != Some(from) {
            return Err(RemoteError::NotConnected);
        }
        Ok(i)
    }

    /// A remote peer sends `data` to host queue pair `to`: it lands in the oldest posted
    /// receive, which completes.
    pub(crate) fn remote_send(
        &mut self,
        from: RemoteQp,
        to: Qpn,
        data: &[u8],
    ) -> Result<(), RemoteError> {
        let i = self.responder(from, to)?;
        self.deliver(i, data)
    }

    /// A remote peer sends to a multicast group: every attached queue pair gets a copy.
    /// Returns how many did.
    /// Never fails: a group without members simply reaches nobody (`Ok(0)`).
    pub(crate) fn remote_send_mcast(
        &mut self,
        mgid: Mgid,
        data: &[u8],
    ) -> Result<u32, RemoteError> {
        let mut delivered = 0;
        for i in 0..self.qps.len() {
            let q = &self.qps[i];
            let member = q.live
                && self.link(q.attr.port)
                && matches!(q.state, QpState::Rtr | QpState::Rts)
                && q.mcast.iter().flatten().any(|(g, _)| *g == mgid);
            if member && self.deliver(i, data).is_ok() {
                delivered += 1;
            }
        }
        Ok(delivered)
    }

    fn deliver(&mut self, i: usize, data: &[u8]) -> Result<(), RemoteError> {
        self.stats.remote_sends += 1;
        let q = &self.qps[i];
        let (qpn, pd, recv_cq) = (Qpn(q.number), q.attr.pd, q.attr.recv_cq);
        let Some(wr) = self.qps[i].recvs.front().copied() else {
            return Err(RemoteError::ReceiverNotReady);
        };
        self.qps[i].recvs.pop_front();
        let status = if !self.local_buffer(pd, &wr.sge, Access::LOCAL_WRITE) {
            WcStatus::LocalProtection
        } else if data.len() > wr.sge.len as usize {
            WcStatus::LocalLength
        } else {
            if let Some(buf) = self.mem_mut(wr.sge.addr, data.len() as u64) {
                buf.copy_from_slice(data);
            }
            WcStatus::Success
        };
        self.complete(
            recv_cq,
            Cqe {
                wr_id: wr.wr_id,
                qpn,
                opcode: WcOpcode::Recv,
                status,
                byte_len: data.len() as u32,
            },
        );
        match status {
            WcStatus::Success => Ok(()),
            WcStatus::LocalLength => Err(RemoteError::LengthError),
            _ => Err(RemoteError::AccessError),
        }
    }

    /// The remote MR behind `rkey`, checked for the responder queue pair's PD, the range
    /// and the right.
    fn remote_region(
        &mut self,
        rdma: RemoteRdma,
        len: u64,
        need: Access,
    ) -> Result<core::ops::Range<usize>, RemoteError> {
        let qp = self.responder(rdma.from, rdma.to)?;
        let RemoteRdma { rkey, addr, .. } = rdma;
        let pd = self.qps[qp].attr.pd;
        let ok = self.mr_by_key(rkey, true).is_some_and(|m| {
            m.pd == pd
                && m.access.contains(need)
                && addr >= m.addr
                && addr
                    .checked_add(len)
                    .is_some_and(|end| end <= m.addr + m.len)
        });
        match (ok, self.range(addr, len)) {
            (true, Some(r)) => Ok(r),
            _ => {
                self.stats.remote_access_errors += 1;
                Err(RemoteError::AccessError)
            }
        }
    }

    /// A remote peer writes `data` at `rdma.addr` through `rdma.rkey`.
    pub(crate) fn remote_rdma_write(
        &mut self,
        rdma: RemoteRdma,
        data: &[u8],
    ) -> Result<(), RemoteError> {
        let len = data.len() as u64;
        let r = self.remote_region(rdma, len, Access::REMOTE_WRITE)?;
        self.memory[r].copy_from_slice(data);
        self.stats.remote_rdma_writes += 1;
        Ok(())
    }

    /// A remote peer reads `out.len()` bytes at `rdma.addr` through `rdma.rkey`.
    pub(crate) fn remote_rdma_read(
        &mut self,
        rdma: RemoteRdma,
        out: &mut [u8],
    ) -> Result<(), RemoteError> {
        let len = out.len() as u64;
        let r = self.remote_region(rdma, len, Access::REMOTE_READ)?;
        out.copy_from_slice(&self.memory[r]);
        self.stats.remote_rdma_reads += 1;
        Ok(())
    }
}
