//! `SimHca`: a ConnectX-like device in virtual time with injectable faults.

use crate::fabric::{Fabric, RemoteError, WireMsg};
use crate::hca::{Hca, HealthSample, HwError, Identity, Readiness};
use crate::sim::verbs::SimVerbs;
use crate::time::{Duration, Instant};
use crate::verbs::*;

/// What the simulated adapter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimHcaConfig {
    pub identity: Identity,
    pub ports: u8,
    /// Time the device takes to come back after a reset is asserted.
    pub hw_reset: Duration,
    pub verbs: VerbsLimits,
}

impl Default for SimHcaConfig {
    fn default() -> Self {
        SimHcaConfig {
            identity: Identity {
                node_guid: 0x0002_c903_0010_f5e0,
                vendor_id: 0x15b3, // Mellanox
                device_id: 0x1003, // ConnectX-3
                subsys_vendor_id: 0x15b3,
                subsys_id: 0x0050,
                serial: 0x5a5a_0000_1234_0001,
                fw_version: Identity::fw_version(2, 42, 5000),
            },
            ports: 2,
            hw_reset: Duration::from_ms(200),
            verbs: VerbsLimits::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    InReset { ready_at: Instant },
    Removed,
}

/// Counts of what was done to the device, for tests and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimHcaStats {
    pub soft_resets: u32,
    pub function_level_resets: u32,
    pub failed_resets: u32,
    pub probes: u32,
    pub config_saves: u32,
    pub config_restores: u32,
}

/// The simulated adapter. Time is handed in by the host with [`SimHca::set_now`].
#[derive(Debug, Clone)]
pub struct SimHca {
    now: Instant,
    config: SimHcaConfig,
    identity: Identity,
    phase: Phase,
    catastrophic: u32,
    /// Counter value frozen by a stall, if stalled.
    stalled_at: Option<u32>,
    reset_failures_left: u32,
    never_returns: bool,
    replace_with: Option<Identity>,
    staged_fw: Option<u64>,
    config_saved: bool,
    cmd_ready: bool,
    stats: SimHcaStats,
    verbs: SimVerbs,
}

impl SimHca {
    pub fn new(config: SimHcaConfig) -> Self {
        SimHca {
            now: Instant::ZERO,
            config,
            identity: config.identity,
            phase: Phase::Running,
            catastrophic: 0,
            stalled_at: None,
            reset_failures_left: 0,
            never_returns: false,
            replace_with: None,
            staged_fw: None,
            config_saved: false,
            cmd_ready: true,
            stats: SimHcaStats::default(),
            verbs: SimVerbs::new(config.verbs),
        }
    }

    /// The verbs model: host memory, the wire, data-path counters.
    pub fn verbs(&self) -> &SimVerbs {
        &self.verbs
    }

    /// The verbs model, for host memory and the wire (remote peers take messages there).
    pub fn verbs_mut(&mut self) -> &mut SimVerbs {
        &mut self.verbs
    }

    pub fn set_now(&mut self, now: Instant) {
        self.now = now;
    }

    pub fn config(&self) -> &SimHcaConfig {
        &self.config
    }

    pub fn stats(&self) -> &SimHcaStats {
        &self.stats
    }

    /// The identity the device presents now.
    pub fn current_identity(&self) -> Identity {
        self.identity
    }

    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    // ----- fault injection -----

    /// Firmware writes a catastrophic error into the health buffer.
    /// A device held in reset runs no firmware, so it cannot raise one: ignored then.
    pub fn inject_catastrophic(&mut self, syndrome: u32) {
        if self.phase == Phase::Running {
            self.catastrophic = syndrome.max(1);
        } else {
            log::info!("catastrophic error on a device in reset or removed: nothing runs");
        }
    }

    /// The firmware health counter stops advancing.
    pub fn stall_health(&mut self) {
        if self.stalled_at.is_none() {
            self.stalled_at = Some(self.counter());
        }
    }

    /// The next `count` reset assertions (soft or FLR) fail.
    pub fn fail_next_resets(&mut self, count: u32) {
        self.reset_failures_left = self.reset_failures_left.saturating_add(count);
    }

    /// After the next reset the device never becomes ready again.
    pub fn never_return(&mut self) {
        self.never_returns = true;
    }

    /// After the next reset another adapter answers (another node GUID and serial).
    pub fn replace_on_next_reset(&mut self) {
        let mut other = self.identity;
        other.node_guid ^= 0x0000_0000_00ff_ff00;
        other.serial = other.serial.wrapping_add(0x100);
        self.replace_with = Some(other);
    }

    /// After the next reset the device runs `fw_version`.
    pub fn stage_firmware(&mut self, fw_version: u64) {
        self.staged_fw = Some(fw_version);
    }

    /// The device leaves the bus.
    pub fn remove(&mut self) {
        self.phase = Phase::Removed;
    }

    fn counter(&self) -> u32 {
        // Advances every millisecond while the firmware runs.
        self.stalled_at
            .unwrap_or((self.now.as_ms() & u64::from(u32::MAX)) as u32)
    }

    fn start_reset(&mut self) -> Result<(), HwError> {
        if self.phase == Phase::Removed {
            return Err(HwError::Absent);
        }
        if self.reset_failures_left > 0 {
            self.reset_failures_left -= 1;
            self.stats.failed_resets += 1;
            return Err(HwError::DeviceError);
        }
        // The device forgets everything: errors, stalls, command interface, every resource.
        self.verbs.forget_all();
        self.catastrophic = 0;
        self.stalled_at = None;
        self.cmd_ready = false;
        if let Some(other) = self.replace_with.take() {
            self.identity = other;
        }
        if let Some(fw) = self.staged_fw.take() {
            self.identity.fw_version = fw;
        }
        self.phase = Phase::InReset {
            ready_at: self.now + self.config.hw_reset,
        };
        Ok(())
    }

    /// Firmware that takes commands: running, no catastrophic error, not hung.
    fn commands(&self) -> Result<(), VerbsError> {
        match self.phase {
            Phase::Removed => Err(VerbsError::Absent),
            Phase::InReset { .. } => Err(VerbsError::DeviceError),
            Phase::Running if self.catastrophic != 0 || self.stalled_at.is_some() => {
                Err(VerbsError::DeviceError)
            }
            Phase::Running if !self.cmd_ready => Err(VerbsError::DeviceError),
            Phase::Running => Ok(()),
        }
    }

    /// Whether the data path moves: the same as taking commands.
    fn alive(&self) -> bool {
        self.commands().is_ok()
    }

    /// Rings a doorbell: `Ok(true)` to execute, `Ok(false)` when a dead device swallows it.
    fn doorbell(&mut self) -> Result<bool, VerbsError> {
        match self.phase {
            Phase::Removed => Err(VerbsError::Absent),
            _ if self.alive() => Ok(true),
            _ => {
                self.verbs.lose_doorbell();
                Ok(false)
            }
        }
    }

    // ----- remote peers on the fabric -----

    fn reachable(&self) -> Result<(), RemoteError> {
        if self.alive() {
            Ok(())
        } else {
            Err(RemoteError::HostDown)
        }
    }

    fn running(&self) -> Result<(), HwError> {
        match self.phase {
            Phase::Running => Ok(()),
            Phase::InReset { .. } => Err(HwError::DeviceError),
            Phase::Removed => Err(HwError::Absent),
        }
    }
}

/// Fabric operations of a remote peer: refused with `HostDown` while the adapter does not
/// answer, otherwise carried out by the verbs model. One line per operation.
macro_rules! peer_ops {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(fn $name(&mut self, $($arg: $ty),*) -> Result<$ret, RemoteError> {
            self.reachable()?;
            self.verbs.$name($($arg),*)
        })*
    };
}

impl Fabric for SimHca {
    fn wire_take(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        self.verbs.wire_take(wanted)
    }

    peer_ops! {
        fn remote_send(from: RemoteQp, to: Qpn, data: &[u8]) -> ();
        fn remote_send_mcast(mgid: Mgid, data: &[u8]) -> u32;
        fn remote_rdma_write(from: RemoteQp, to: Qpn, rkey: u32, addr: u64, data: &[u8]) -> ();
        fn remote_rdma_read(from: RemoteQp, to: Qpn, rkey: u32, addr: u64, out: &mut [u8]) -> ();
    }
}

impl DmaMemory for SimHca {
    fn dma_alloc(&mut self, len: u64) -> Option<u64> {
        self.verbs.dma_alloc(len)
    }
    fn with_dma<R>(&mut self, addr: u64, len: u64, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        self.verbs.mem_mut(addr, len).map(f)
    }
}

impl Hca for SimHca {
    fn save_config(&mut self) -> Result<(), HwError> {
        if self.phase == Phase::Removed {
            return Err(HwError::Absent);
        }
        self.config_saved = true;
        self.stats.config_saves += 1;
        Ok(())
    }

    fn restore_config(&mut self) -> Result<(), HwError> {
        self.running()?;
        if !self.config_saved {
            return Err(HwError::DeviceError);
        }
        self.stats.config_restores += 1;
        Ok(())
    }

    fn assert_reset(&mut self) -> Result<(), HwError> {
        self.stats.soft_resets += 1;
        self.start_reset()
    }

    fn function_level_reset(&mut self) -> Result<(), HwError> {
        self.stats.function_level_resets += 1;
        self.start_reset()
    }

    fn probe_ready(&mut self) -> Result<Readiness, HwError> {
        self.stats.probes += 1;
        match self.phase {
            Phase::Removed => Err(HwError::Absent),
            Phase::Running => Ok(Readiness::Ready),
            Phase::InReset { ready_at } => {
                if self.never_returns || self.now < ready_at {
                    Ok(Readiness::NotReady)
                } else {
                    self.phase = Phase::Running;
                    Ok(Readiness::Ready)
                }
            }
        }
    }

    fn init_command_interface(&mut self) -> Result<(), HwError> {
        self.running()?;
        self.cmd_ready = true;
        Ok(())
    }

    fn identity(&mut self) -> Result<Identity, HwError> {
        self.running()?;
        Ok(self.identity)
    }

    fn read_health(&mut self) -> Result<HealthSample, HwError> {
        self.running()?;
        Ok(HealthSample {
            catastrophic: self.catastrophic,
            counter: self.counter(),
        })
    }
}

impl Verbs for SimHca {
    fn alloc_pd(&mut self) -> Result<Pdn, VerbsError> {
        self.commands()?;
        self.verbs.alloc_pd()
    }
    fn dealloc_pd(&mut self, pd: Pdn) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.dealloc_pd(pd)
    }
    fn create_cq(&mut self, entries: u32) -> Result<Cqn, VerbsError> {
        self.commands()?;
        self.verbs.create_cq(entries)
    }
    fn destroy_cq(&mut self, cq: Cqn) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.destroy_cq(cq)
    }
    fn poll_cq(&mut self, cq: Cqn) -> Result<Option<Cqe>, VerbsError> {
        // A memory read of the CQ buffer: works on a dead device, not on a missing one.
        if self.phase == Phase::Removed {
            return Err(VerbsError::Absent);
        }
        self.verbs.poll_cq(cq)
    }
    fn create_qp(&mut self, attr: QpAttr) -> Result<Qpn, VerbsError> {
        self.commands()?;
        if attr.port == 0 || attr.port > self.config.ports {
            return Err(VerbsError::InvalidArgument);
        }
        self.verbs.create_qp(attr)
    }
    fn modify_qp(
        &mut self,
        qp: Qpn,
        to: QpState,
        remote: Option<RemoteQp>,
    ) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.modify_qp(qp, to, remote)
    }
    fn destroy_qp(&mut self, qp: Qpn) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.destroy_qp(qp)
    }
    fn reg_mr(
        &mut self,
        pd: Pdn,
        addr: u64,
        len: u64,
        access: Access,
        keys: Option<MrKeys>,
    ) -> Result<MrKeys, VerbsError> {
        self.commands()?;
        self.verbs.reg_mr(pd, addr, len, access, keys)
    }
    fn dereg_mr(&mut self, lkey: u32) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.dereg_mr(lkey)
    }
    fn create_ah(&mut self, pd: Pdn, port: u8, dlid: Lid) -> Result<Ahn, VerbsError> {
        self.commands()?;
        if port == 0 || port > self.config.ports {
            return Err(VerbsError::InvalidArgument);
        }
        self.verbs.create_ah(pd, port, dlid)
    }
    fn destroy_ah(&mut self, ah: Ahn) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.destroy_ah(ah)
    }
    fn attach_mcast(&mut self, qp: Qpn, mgid: Mgid, mlid: Lid) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.attach_mcast(qp, mgid, mlid)
    }
    fn detach_mcast(&mut self, qp: Qpn, mgid: Mgid) -> Result<(), VerbsError> {
        self.commands()?;
        self.verbs.detach_mcast(qp, mgid)
    }
    fn post_send(&mut self, qp: Qpn, wr: &SendWr) -> Result<(), VerbsError> {
        if self.doorbell()? {
            self.verbs.post_send(qp, wr)
        } else {
            Ok(())
        }
    }
    fn post_recv(&mut self, qp: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        if self.doorbell()? {
            self.verbs.post_recv(qp, wr)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comes_back_after_its_reset_time() {
        let mut h = SimHca::new(SimHcaConfig::default());
        h.set_now(Instant::from_ms(10));
        h.assert_reset().expect("reset");
        assert_eq!(h.probe_ready(), Ok(Readiness::NotReady));
        assert!(h.identity().is_err(), "no identity while in reset");
        h.set_now(Instant::from_ms(210));
        assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
        assert!(h.identity().is_ok());
    }

    #[test]
    fn faults_behave_as_named() {
        let mut h = SimHca::new(SimHcaConfig::default());
        let before = h.current_identity();
        h.fail_next_resets(1);
        assert_eq!(h.assert_reset(), Err(HwError::DeviceError));
        h.replace_on_next_reset();
        h.stage_firmware(7);
        h.assert_reset().expect("second reset works");
        h.set_now(Instant::from_ms(1000));
        assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
        let after = h.identity().expect("running");
        assert!(!before.same_adapter(&after));
        assert_eq!(after.fw_version, 7);

        h.stall_health();
        let a = h.read_health().expect("running").counter;
        h.set_now(Instant::from_ms(5000));
        assert_eq!(h.read_health().expect("running").counter, a);

        h.never_return();
        h.assert_reset().expect("reset");
        h.set_now(Instant::from_ms(60_000));
        assert_eq!(h.probe_ready(), Ok(Readiness::NotReady));
        h.remove();
        assert_eq!(h.probe_ready(), Err(HwError::Absent));
    }

    #[test]
    fn catastrophic_error_shows_in_health_and_clears_on_reset() {
        let mut h = SimHca::new(SimHcaConfig::default());
        h.inject_catastrophic(0xbad);
        assert_eq!(h.read_health().expect("running").catastrophic, 0xbad);
        h.assert_reset().expect("reset");
        h.set_now(Instant::from_ms(500));
        h.probe_ready().expect("probe");
        assert_eq!(h.read_health().expect("running").catastrophic, 0);
    }

    // ----- the verbs model -----

    const PEER: RemoteQp = RemoteQp {
        lid: 0x20,
        qpn: Qpn(0x77),
    };

    /// A running device with an RC queue pair connected to `PEER`, a region with every
    /// right over 4 KiB of host memory, and one receive posted.
    fn connected() -> (SimHca, Qpn, Cqn, MrKeys, u64) {
        let mut h = SimHca::new(SimHcaConfig::default());
        let pd = h.alloc_pd().expect("pd");
        let cq = h.create_cq(16).expect("cq");
        let qp = h
            .create_qp(QpAttr {
                pd,
                qp_type: QpType::Rc,
                send_cq: cq,
                recv_cq: cq,
                port: 1,
                max_send_wr: 8,
                max_recv_wr: 8,
            })
            .expect("qp");
        h.modify_qp(qp, QpState::Init, None).expect("init");
        h.modify_qp(qp, QpState::Rtr, Some(PEER)).expect("rtr");
        h.modify_qp(qp, QpState::Rts, None).expect("rts");
        let addr = h.verbs_mut().dma_alloc(4096).expect("dma");
        let all = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
        let keys = h.reg_mr(pd, addr, 4096, all, None).expect("mr");
        let sge = Sge {
            addr,
            len: 256,
            lkey: keys.lkey,
        };
        h.post_recv(qp, &RecvWr { wr_id: 1, sge }).expect("recv");
        (h, qp, cq, keys, addr)
    }

    #[test]
    fn a_send_reaches_the_wire_and_a_remote_send_lands_in_a_posted_receive() {
        let (mut h, qp, cq, keys, addr) = connected();
        h.verbs_mut()
            .mem_mut(addr + 1024, 5)
            .expect("mem")
            .copy_from_slice(b"hello");
        let sge = Sge {
            addr: addr + 1024,
            len: 5,
            lkey: keys.lkey,
        };
        h.post_send(
            qp,
            &SendWr {
                wr_id: 9,
                sge,
                dest: SendDest::Connected,
            },
        )
        .expect("send");
        let msg = h
            .verbs_mut()
            .wire_take(|m| m.dlid == PEER.lid)
            .expect("on wire");
        assert_eq!(
            (msg.payload(), msg.dqpn, msg.src_qpn),
            (&b"hello"[..], PEER.qpn, qp)
        );
        let sent = h.poll_cq(cq).expect("poll").expect("cqe");
        assert_eq!((sent.wr_id, sent.status), (9, WcStatus::Success));

        h.remote_send(PEER, qp, b"reply").expect("delivered");
        let got = h.poll_cq(cq).expect("poll").expect("cqe");
        assert_eq!(
            (got.wr_id, got.opcode, got.byte_len),
            (1, WcOpcode::Recv, 5)
        );
        assert_eq!(h.verbs().mem(addr, 5), Some(&b"reply"[..]));
        assert_eq!(
            h.remote_send(PEER, qp, b"again"),
            Err(RemoteError::ReceiverNotReady),
            "one receive was posted"
        );
        let stranger = RemoteQp {
            lid: 0x21,
            qpn: Qpn(5),
        };
        assert_eq!(
            h.remote_send(stranger, qp, b"x"),
            Err(RemoteError::NotConnected)
        );
    }

    #[test]
    fn remote_rdma_checks_key_range_and_rights() {
        let (mut h, qp, _, keys, addr) = connected();
        h.remote_rdma_write(PEER, qp, keys.rkey, addr + 100, b"data")
            .expect("write");
        let mut out = [0u8; 4];
        h.remote_rdma_read(PEER, qp, keys.rkey, addr + 100, &mut out)
            .expect("read");
        assert_eq!(&out, b"data");
        let bad = keys.rkey ^ 0x1;
        assert_eq!(
            h.remote_rdma_read(PEER, qp, bad, addr, &mut out),
            Err(RemoteError::AccessError)
        );
        assert_eq!(
            h.remote_rdma_read(PEER, qp, keys.rkey, addr + 4094, &mut out),
            Err(RemoteError::AccessError),
            "past the end of the region"
        );
        assert_eq!(h.verbs().stats().remote_access_errors, 2);
    }

    #[test]
    fn a_reset_forgets_every_resource_and_preserved_keys_come_back_on_request() {
        let (mut h, qp, _, keys, addr) = connected();
        assert!(h.verbs().live_objects() >= 4);
        h.assert_reset().expect("reset");
        assert_eq!(h.verbs().live_objects(), 0);
        h.set_now(Instant::from_ms(500));
        assert_eq!(h.probe_ready(), Ok(Readiness::Ready));
        assert_eq!(h.alloc_pd(), Err(VerbsError::DeviceError), "before init");
        h.init_command_interface().expect("init");
        let mut out = [0u8; 4];
        assert_eq!(
            h.remote_rdma_read(PEER, qp, keys.rkey, addr, &mut out),
            Err(RemoteError::NoSuchQp)
        );
        let pd = h.alloc_pd().expect("pd");
        let fresh = h
            .reg_mr(pd, addr, 4096, Access::REMOTE_READ, None)
            .expect("fresh");
        assert_ne!(fresh, keys, "an ordinary registration gets new keys");
        h.dereg_mr(fresh.lkey).expect("dereg");
        let again = h
            .reg_mr(pd, addr, 4096, Access::REMOTE_READ, Some(keys))
            .expect("same keys");
        assert_eq!(again, keys);
        assert_eq!(
            h.reg_mr(pd, addr, 4096, Access::REMOTE_READ, Some(keys)),
            Err(VerbsError::KeyUnavailable),
            "the entry is taken"
        );
    }

    #[test]
    fn a_device_in_catastrophic_error_takes_doorbells_and_does_nothing() {
        let (mut h, qp, cq, keys, addr) = connected();
        h.inject_catastrophic(1);
        assert_eq!(h.alloc_pd(), Err(VerbsError::DeviceError));
        let sge = Sge {
            addr,
            len: 8,
            lkey: keys.lkey,
        };
        let wr = SendWr {
            wr_id: 3,
            sge,
            dest: SendDest::Connected,
        };
        assert_eq!(h.post_send(qp, &wr), Ok(()), "the doorbell is just a write");
        assert_eq!(h.poll_cq(cq), Ok(None), "and nothing completes");
        assert_eq!(h.verbs().wire_len(), 0);
        assert_eq!(h.verbs().stats().lost_doorbells, 1);
        assert_eq!(h.remote_send(PEER, qp, b"x"), Err(RemoteError::HostDown));
        h.remove();
        assert_eq!(h.post_send(qp, &wr), Err(VerbsError::Absent));
    }

    #[test]
    fn multicast_reaches_attached_datagram_queue_pairs_only() {
        let mut h = SimHca::new(SimHcaConfig::default());
        let pd = h.alloc_pd().expect("pd");
        let cq = h.create_cq(16).expect("cq");
        let addr = h.verbs_mut().dma_alloc(1024).expect("dma");
        let keys = h
            .reg_mr(pd, addr, 1024, Access::LOCAL_WRITE, None)
            .expect("mr");
        let mut qps = [Qpn(0); 2];
        for (n, q) in qps.iter_mut().enumerate() {
            *q = h
                .create_qp(QpAttr {
                    pd,
                    qp_type: QpType::Ud,
                    send_cq: cq,
                    recv_cq: cq,
                    port: 1,
                    max_send_wr: 4,
                    max_recv_wr: 4,
                })
                .expect("qp");
            h.modify_qp(*q, QpState::Init, None).expect("init");
            h.modify_qp(*q, QpState::Rtr, None).expect("rtr");
            let sge = Sge {
                addr: addr + 512 * n as u64,
                len: 512,
                lkey: keys.lkey,
            };
            h.post_recv(
                *q,
                &RecvWr {
                    wr_id: n as u64,
                    sge,
                },
            )
            .expect("recv");
        }
        const GROUP: Mgid = 0xff12_401b_ffff_0000_0000_0000_ffff_ffff;
        h.attach_mcast(qps[0], GROUP, 0xc000).expect("attach");
        assert_eq!(h.remote_send_mcast(GROUP, b"arp"), Ok(1));
        h.detach_mcast(qps[0], GROUP).expect("detach");
        assert_eq!(h.remote_send_mcast(GROUP, b"arp"), Ok(0));
        assert!(!h.verbs().is_attached(qps[0], GROUP));
    }
}
