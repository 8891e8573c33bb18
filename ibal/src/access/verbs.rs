//! The verbs consumers call: creates gated on where the device and IBAL are, and the
//! data path (posts and polls), which keeps a shadow of every outstanding work request so
//! that a reset can flush it.

use hcabus::verbs::*;

use crate::errors::*;
use crate::handle::*;

use super::slab::{AhData, Found, MrData, PdData};
use super::{Dest, Ibal, MrFlags, MrSpec, QpSpec, Send, VerbsBus};

impl Ibal {
    pub fn alloc_pd<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
    ) -> Result<PdHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.gates::<_, CreateError>(lower)?;
        let i = self.pds.free().ok_or(CreateError::NoResources)?;
        let pdn = lower.device().alloc_pd().map_err(CreateError::Hardware)?;
        let (index, generation) = self.pds.occupy(i, c.index, self.epoch);
        self.pds.slots[i].data = PdData {
            hw: Some(pdn),
            pins: 0,
        };
        Ok(Handle::new(index, generation, self.epoch))
    }

    pub fn create_cq<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        entries: u32,
    ) -> Result<CqHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.gates::<_, CreateError>(lower)?;
        if entries > self.config.max_cq_entries {
            return Err(CreateError::Hardware(VerbsError::InvalidArgument));
        }
        let i = self.cqs.free().ok_or(CreateError::NoResources)?;
        let cqn = lower
            .device()
            .create_cq(entries)
            .map_err(CreateError::Hardware)?;
        let (index, generation) = self.cqs.occupy(i, c.index, self.epoch);
        let d = &mut self.cqs.slots[i].data;
        d.hw = Some(cqn);
        d.entries = entries;
        d.ready.clear();
        Ok(Handle::new(index, generation, self.epoch))
    }

    pub fn create_qp<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        spec: QpSpec,
    ) -> Result<QpHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let pd = current!(self, pds, spec.pd, c, CreateError);
        let scq = current!(self, cqs, spec.send_cq, c, CreateError);
        let rcq = current!(self, cqs, spec.recv_cq, c, CreateError);
        self.resetting(lower)?;
        if spec.max_send_wr > self.config.max_wr || spec.max_recv_wr > self.config.max_wr {
            return Err(CreateError::Hardware(VerbsError::InvalidArgument));
        }
        let i = self.qps.free().ok_or(CreateError::NoResources)?;
        let (Some(pdn), Some(send_cq), Some(recv_cq)) = (
            self.pds.slots[pd].data.hw,
            self.cqs.slots[scq].data.hw,
            self.cqs.slots[rcq].data.hw,
        ) else {
            return Err(CreateError::StaleHandle(self.stale(spec.pd.epoch)));
        };
        let qpn = lower
            .device()
            .create_qp(QpAttr {
                pd: pdn,
                qp_type: spec.qp_type,
                send_cq,
                recv_cq,
                port: spec.port,
                max_send_wr: spec.max_send_wr,
                max_recv_wr: spec.max_recv_wr,
            })
            .map_err(CreateError::Hardware)?;
        let (index, generation) = self.qps.occupy(i, c.index, self.epoch);
        let d = &mut self.qps.slots[i].data;
        d.hw = Some(qpn);
        d.pd = pd;
        d.send_cq = scq;
        d.recv_cq = rcq;
        d.max_send_wr = spec.max_send_wr;
        d.max_recv_wr = spec.max_recv_wr;
        d.sends.clear();
        d.recvs.clear();
        Ok(Handle::new(index, generation, self.epoch))
    }

    /// The device QP behind `qp` for a modify-class call, once every check of the table
    /// has passed.
    fn qp_for_modify<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &L,
        c: ConsumerId,
        qp: QpHandle,
    ) -> Result<Qpn, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let i = current!(self, qps, qp, c, CreateError);
        self.resetting(lower)?;
        self.qps.slots[i].data.hw.ok_or(CreateError::InvalidHandle)
    }

    pub fn modify_qp<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        to: QpState,
        remote: Option<RemoteQp>,
    ) -> Result<(), CreateError> {
        let qpn = self.qp_for_modify(lower, c, qp)?;
        lower
            .device()
            .modify_qp(qpn, to, remote)
            .map_err(CreateError::Hardware)
    }

    /// Takes a new queue pair through Init to RTR (ready to receive), connected to `remote`
    /// for a reliable connection: the walk every consumer makes before it can receive.
    pub fn ready_to_receive<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        remote: Option<RemoteQp>,
    ) -> Result<(), CreateError> {
        self.modify_qp(lower, c, qp, QpState::Init, None)?;
        self.modify_qp(lower, c, qp, QpState::Rtr, remote)
    }

    pub fn attach_mcast<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        mgid: Mgid,
        mlid: Lid,
    ) -> Result<(), CreateError> {
        let qpn = self.qp_for_modify(lower, c, qp)?;
        lower
            .device()
            .attach_mcast(qpn, mgid, mlid)
            .map_err(CreateError::Hardware)
    }

    /// Leaves a multicast group. Like a destroy, it always succeeds: during a reset, or on
    /// a stale queue pair, the membership is gone with the hardware anyway.
    pub fn detach_mcast<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        mgid: Mgid,
    ) -> Result<(), DestroyError> {
        if !self.known(c) {
            return Err(DestroyError::UnknownConsumer);
        }
        match self.qps.find(qp, c.index) {
            Found::NotOwner => Err(DestroyError::NotOwner),
            Found::Gone => Ok(()),
            Found::At(i) => {
                if let Some(qpn) = self.qps.slots[i].data.hw {
                    if !self.qps.slots[i].released && self.can_command(lower) {
                        let _ = lower.device().detach_mcast(qpn, mgid);
                    }
                }
                Ok(())
            }
        }
    }

    pub fn reg_mr<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        spec: MrSpec,
    ) -> Result<(MrHandle, MrKeys), CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let p = current!(self, pds, spec.pd, c, CreateError);
        self.resetting(lower)?;
        let i = self.mrs.free().ok_or(CreateError::NoResources)?;
        let pdn = self.pds.slots[p]
            .data
            .hw
            .ok_or(CreateError::InvalidHandle)?;
        let MrSpec {
            addr,
            len,
            access,
            flags,
            ..
        } = spec;
        let keys = lower
            .device()
            .reg_mr(
                MrAttr {
                    pd: pdn,
                    addr,
                    len,
                    access,
                },
                None,
            )
            .map_err(CreateError::Hardware)?;
        let preserve = flags.contains(MrFlags::PRESERVE_KEYS);
        let (index, generation) = self.mrs.occupy(i, c.index, self.epoch);
        self.mrs.slots[i].data = MrData {
            hw: Some(keys),
            keys,
            pd: p,
            addr,
            len,
            access,
            preserve,
        };
        if preserve {
            self.pds.slots[p].data.pins += 1;
        }
        Ok((Handle::new(index, generation, self.epoch), keys))
    }

    pub fn create_ah<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        pd: PdHandle,
        port: u8,
        dlid: Lid,
    ) -> Result<AhHandle, CreateError> {
        if !self.known(c) {
            return Err(CreateError::UnknownConsumer);
        }
        self.failed(lower)?;
        let p = current!(self, pds, pd, c, CreateError);
        self.resetting(lower)?;
        let i = self.ahs.free().ok_or(CreateError::NoResources)?;
        let pdn = self.pds.slots[p]
            .data
            .hw
            .ok_or(CreateError::InvalidHandle)?;
        let ahn = lower
            .device()
            .create_ah(pdn, port, dlid)
            .map_err(CreateError::Hardware)?;
        let (index, generation) = self.ahs.occupy(i, c.index, self.epoch);
        self.ahs.slots[i].data = AhData {
            hw: Some(ahn),
            pd: p,
        };
        Ok(Handle::new(index, generation, self.epoch))
    }

    // ----- posts and polls -----

    pub fn post_send<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        wr: &Send,
    ) -> Result<(), PostError> {
        if !self.known(c) {
            return Err(PostError::UnknownConsumer);
        }
        self.failed(lower)?;
        let i = current!(self, qps, qp, c, PostError);
        let dest = match wr.dest {
            Dest::Connected => SendDest::Connected,
            Dest::Datagram { ah, qpn } => {
                let a = current!(self, ahs, ah, c, PostError);
                SendDest::Datagram {
                    ah: self.ahs.slots[a].data.hw.ok_or(PostError::InvalidHandle)?,
                    qpn,
                }
            }
        };
        self.resetting(lower)?;
        let d = &self.qps.slots[i].data;
        if d.sends.len() >= d.max_send_wr as usize {
            return Err(PostError::QueueFull);
        }
        let qpn = d.hw.ok_or(PostError::InvalidHandle)?;
        lower
            .device()
            .post_send(
                qpn,
                &SendWr {
                    wr_id: wr.wr_id,
                    sge: wr.sge,
                    dest,
                },
            )
            .map_err(PostError::Hardware)?;
        self.qps.slots[i].data.sends.push_back(wr.wr_id);
        Ok(())
    }

    pub fn post_recv<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        qp: QpHandle,
        wr: &RecvWr,
    ) -> Result<(), PostError> {
        if !self.known(c) {
            return Err(PostError::UnknownConsumer);
        }
        self.failed(lower)?;
        let i = current!(self, qps, qp, c, PostError);
        self.resetting(lower)?;
        let d = &self.qps.slots[i].data;
        if d.recvs.len() >= d.max_recv_wr as usize {
            return Err(PostError::QueueFull);
        }
        let qpn = d.hw.ok_or(PostError::InvalidHandle)?;
        lower
            .device()
            .post_recv(qpn, wr)
            .map_err(PostError::Hardware)?;
        self.qps.slots[i].data.recvs.push_back(wr.wr_id);
        Ok(())
    }

    /// The next completion: flushed or drained ones first, then the hardware's while the
    /// CQ is current. A stale CQ gives its flushed completions, then `None`.
    pub fn poll_cq<L: VerbsBus + ?Sized>(
        &mut self,
        lower: &mut L,
        c: ConsumerId,
        cq: CqHandle,
    ) -> Result<Option<Cqe>, PollError> {
        if !self.known(c) {
            return Err(PollError::UnknownConsumer);
        }
        let i = match self.cqs.find(cq, c.index) {
            Found::NotOwner => return Err(PollError::NotOwner),
            // Destroyed during a reset: nothing left to give.
            Found::Gone if cq.epoch != self.epoch => return Ok(None),
            Found::Gone => return Err(PollError::InvalidHandle),
            Found::At(i) => i,
        };
        if let Some(cqe) = self.cqs.slots[i].data.ready.pop_front() {
            return Ok(Some(cqe));
        }
        let s = &self.cqs.slots[i];
        let Some(cqn) = s.data.hw.filter(|_| !s.released) else {
            return Ok(None);
        };
        match lower.device().poll_cq(cqn) {
            Ok(Some(cqe)) => {
                self.account(&cqe);
                Ok(Some(cqe))
            }
            _ => Ok(None),
        }
    }

    /// A hardware completion retires the oldest outstanding request of its queue.
    pub(super) fn account(&mut self, cqe: &Cqe) {
        let owner = self
            .qps
            .slots
            .iter_mut()
            .find(|s| s.live && !s.released && s.data.hw == Some(cqe.qpn));
        if let Some(q) = owner {
            let queue = match cqe.opcode {
                WcOpcode::Send => &mut q.data.sends,
                WcOpcode::Recv => &mut q.data.recvs,
            };
            let front = queue.pop_front();
            debug_assert_eq!(front, Some(cqe.wr_id), "completions come in order");
        }
    }
}
