//! The disk's connection to its target: the resources it holds on the adapter and the SRP
//! login that makes them a connection, and their teardown.

use hcabus::fabric::HOST_LID_BASE;
use hcabus::verbs::*;
use hcabus::{Duration, Instant};

use super::{Link, SrpDisk, NO_RESOURCES};
use crate::access::{FabricBus, MrFlags, MrSpec, QpSpec};
use crate::ibal_client::SharedIbal;
use crate::srp::IU_SIZE;
use crate::target::{LoginRejected, Target};

impl SrpDisk {
    pub(super) fn post_recv<B: FabricBus + ?Sized>(
        &mut self,
        ibal: &SharedIbal,
        bus: &mut B,
        index: u64,
    ) {
        let (Some(c), Some(qp), Some((_, keys))) = (self.consumer, self.res.qp, self.res.mr) else {
            return;
        };
        let wr = RecvWr {
            wr_id: index,
            sge: Sge {
                addr: self.recv_iu_addr(index),
                len: IU_SIZE as u32,
                lkey: keys.lkey,
            },
        };
        // Refused during a reset: the login after it posts every receive again.
        let _ = ibal.lock().post_recv(bus, c, qp, &wr);
    }

    /// Creates the resources and logs in to `target`. On a refusal, tears down what it
    /// made and reports it; the caller retries.
    pub(super) fn connect<B: FabricBus + ?Sized>(
        &mut self,
        ibal: &SharedIbal,
        bus: &mut B,
        target: &mut dyn Target,
        cm_until: Instant,
    ) -> Result<Duration, crate::errors::CreateError> {
        let Some(c) = self.consumer else {
            return Ok(Duration::ZERO);
        };
        self.teardown(ibal, bus);
        // The connection's transport timer, as the adapter runs it: what bounds a command
        // first, and what the initiator's own bounds must exceed.
        self.transport = bus.device().rc_transport();
        let qd = u32::from(self.config.queue_depth);
        let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let result = (|| {
            let mut al = ibal.lock();
            let pd = al.alloc_pd(bus, c)?;
            self.res.pd = Some(pd);
            let cq = al.create_cq(bus, c, self.config.cq_entries())?;
            self.res.cq = Some(cq);
            let qp = al.create_qp(
                bus,
                c,
                QpSpec {
                    pd,
                    qp_type: QpType::Rc,
                    send_cq: cq,
                    recv_cq: cq,
                    port: self.config.port,
                    max_send_wr: qd,
                    max_recv_wr: qd,
                },
            )?;
            self.res.qp = Some(qp);
            let mr = al.reg_mr(
                bus,
                c,
                MrSpec {
                    pd,
                    addr: self.data_base,
                    len: self.dma_len,
                    access: all,
                    flags: MrFlags::empty(),
                },
            )?;
            self.res.mr = Some(mr);
            al.modify_qp(bus, c, qp, QpState::Init, None)?;
            let qpn = al
                .qpn(c, qp)
                .ok_or(crate::errors::CreateError::InvalidHandle)?;
            let me = RemoteQp {
                lid: HOST_LID_BASE + Lid::from(self.config.port - 1),
                qpn,
            };
            // SRP_LOGIN_REJ "insufficient resources" is retried as a busy target is; a
            // restarting target answers nothing, as an unreachable one.
            let now = bus.now();
            let takes = target.admit(bus.device(), now).map_err(|e| match e {
                LoginRejected::Busy(_) => crate::errors::CreateError::TargetBusy,
                LoginRejected::Restarting | LoginRejected::Unreachable => {
                    crate::errors::CreateError::Unreachable
                }
            })?;
            // The answer comes when the target has served the login; the CM waits for it
            // only until its last REQ times out (`cm_until`).
            if now + takes > cm_until {
                return Err(crate::errors::CreateError::AnsweredLate);
            }
            let peer = target.login(me);
            al.modify_qp(bus, c, qp, QpState::Rtr, Some(peer))?;
            al.modify_qp(bus, c, qp, QpState::Rts, None)?;
            Ok(takes)
        })();
        let takes = match result {
            Ok(takes) => takes,
            Err(e) => {
                self.teardown(ibal, bus);
                return Err(e);
            }
        };
        for i in 0..u64::from(self.config.queue_depth) {
            self.post_recv(ibal, bus, i);
        }
        self.stats.logins += 1;
        self.link = Link::LoggingIn {
            ready_at: bus.now() + takes,
        };
        Ok(takes)
    }

    /// Destroys every resource. Software only during a reset: it never fails.
    pub(super) fn teardown<B: FabricBus + ?Sized>(&mut self, ibal: &SharedIbal, bus: &mut B) {
        let Some(c) = self.consumer else {
            return;
        };
        let mut al = ibal.lock();
        let r = core::mem::replace(&mut self.res, NO_RESOURCES);
        // Our own handles, in dependency order: these can only fail on a programming
        // error, which the log names.
        let results = [
            r.qp.map(|h| al.destroy_qp(bus, c, h)),
            r.mr.map(|(h, _)| al.dereg_mr(bus, c, h)),
            r.cq.map(|h| al.destroy_cq(bus, c, h)),
            r.pd.map(|h| al.dealloc_pd(bus, c, h)),
        ];
        for e in results.into_iter().flatten().filter_map(Result::err) {
            log::error!("disk teardown: {e}");
        }
        self.link = Link::Down;
    }
}
