//! `SimHca`: a ConnectX-like device in virtual time with injectable faults.

use crate::verbs::SimVerbs;
use hcabus::fabric::{Fabric, RemoteError, RemoteRdma, WireMsg};
use hcabus::hca::{Hca, HealthSample, HwError, Identity, Readiness};
use hcabus::time::{Duration, Instant};
use hcabus::types::{PortAttrs, PortState};
use hcabus::verbs::*;

/// What the simulated adapter is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimHcaConfig {
    pub identity: Identity,
    pub ports: u8,
    /// Time the device takes to come back after a reset is asserted.
    pub hw_reset: Duration,
    /// Link training, from the device back (or a cable plugged in) to the port in Init.
    pub link_up: Duration,
    /// The subnet manager's sweep, from Init to Active with a LID.
    pub sm_sweep: Duration,
    pub verbs: VerbsLimits,
    /// The timer of its reliable connections (local ACK timeout, retry count).
    pub transport: RcTransport,
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
            link_up: Duration::ZERO,
            sm_sweep: Duration::ZERO,
            verbs: VerbsLimits::default(),
            transport: RcTransport::DEFAULT,
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
    /// Logins the remote targets refused as busy (`target_busy`).
    pub logins_refused: u32,
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
    /// The PCI header as `save_config` read it.
    saved_header: [u8; 64],
    cmd_ready: bool,
    stats: SimHcaStats,
    verbs: SimVerbs,
    ports: SimPorts,
    /// Logins the remote targets still refuse as busy.
    busy_logins: u32,
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
            saved_header: [0; 64],
            cmd_ready: true,
            stats: SimHcaStats::default(),
            verbs: SimVerbs::new(config.verbs, config.transport),
            ports: SimPorts::new(
                config.ports,
                config.identity.node_guid,
                config.link_up,
                config.sm_sweep,
            ),
            busy_logins: 0,
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
        self.sync_links();
        if self.alive() {
            self.verbs.run_transport(now);
        } else {
            // A device that moves nothing runs no timer: what it sent waits for its reset.
            self.verbs.set_now(now);
        }
    }

    /// Tells the data path which ports have a link now: only an Active port carries
    /// anything, either way.
    fn sync_links(&mut self) {
        let mut links = [false; hcabus::types::MAX_PORTS as usize];
        for (port, up) in (1u8..).zip(links.iter_mut()) {
            *up = self.ports.state(port, self.now) == PortState::Active;
        }
        self.verbs.set_links(links);
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
        // Already in reset: the ports that were to train stay dark.
        if matches!(self.phase, Phase::InReset { .. }) {
            self.ports.reset(None);
        }
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
        self.ports.remove();
        self.sync_links();
    }

    /// A cable pulled from `port` now, plugged back after `duration`; `false` for a port
    /// the adapter does not have.
    pub fn pull_cable(&mut self, port: u8, duration: Duration) -> bool {
        let pulled = self.ports.pull_cable(port, self.now, duration);
        self.sync_links();
        pulled
    }

    /// No subnet manager sweeps from `from` until `until`: a port that trains meanwhile
    /// waits in Init for the new master (docs/design.md §11).
    pub fn sm_away(&mut self, from: Instant, until: Instant) {
        self.ports.sm_away(from, until);
        self.sync_links();
    }

    /// The subnet manager's sweeps from now on (`SimPorts::set_sweeps`).
    pub fn set_sweeps(&mut self, sweeps: Option<std::sync::Arc<dyn ports::SweepSchedule>>) {
        self.ports.set_sweeps(sweeps);
        self.sync_links();
    }

    /// A new master that reassigns LIDs reaches the device at `at`: every port gets a new
    /// LID then (`SimPorts::renumber`); no port's state changes.
    pub fn renumber(&mut self, at: Instant) {
        self.ports.renumber(at);
    }

    /// The remote targets refuse the next `count` logins as busy.
    pub fn refuse_logins(&mut self, count: u32) {
        self.busy_logins = self.busy_logins.saturating_add(count);
    }

    /// How many ports the adapter has.
    pub fn port_count(&self) -> u8 {
        self.config.ports.min(hcabus::types::MAX_PORTS)
    }

    /// The ports, for the host to poll for changes.
    pub fn ports(&self) -> &SimPorts {
        &self.ports
    }

    /// Hands every port change since the last call to `report(port, attrs)`.
    pub fn poll_ports(&mut self, report: impl FnMut(u8, PortAttrs)) {
        self.ports.poll(self.now, report);
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
        let ready_at = self.now + self.config.hw_reset;
        self.phase = Phase::InReset { ready_at };
        self.ports.reset((!self.never_returns).then_some(ready_at));
        self.sync_links();
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
    fn remote_login_refused(&mut self) -> bool {
        if self.busy_logins == 0 {
            return false;
        }
        self.busy_logins -= 1;
        self.stats.logins_refused += 1;
        true
    }

    fn wire_take(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        let m = self.verbs.wire_take(wanted)?;
        if m.seq != 0 {
            // The peer's acknowledgement: a dead device completes nothing for it.
            if self.alive() {
                self.verbs.acknowledge(m.seq);
            } else {
                self.verbs.lose_acknowledgement(m.seq);
            }
        }
        Some(m)
    }

    fn wire_front(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        self.verbs.wire_front(wanted)
    }

    fn wire_drop(&mut self, wanted: impl Fn(&WireMsg) -> bool) -> Option<WireMsg> {
        // Not acknowledged: its sender's transport gives it up at the end of its budget.
        self.verbs.wire_take(wanted)
    }

    fn carries(&self, lid: Lid, since: Instant, at: Instant) -> bool {
        // The wire names a port by the LID its queue pairs send from (`HOST_LID_BASE` on).
        let port = lid
            .checked_sub(hcabus::fabric::HOST_LID_BASE)
            .and_then(|i| u8::try_from(i).ok())
            .and_then(|i| i.checked_add(1));
        port.is_some_and(|port| self.ports.carried_since(port, since, at))
    }

    peer_ops! {
        fn remote_send(from: RemoteQp, to: Qpn, data: &[u8]) -> ();
        fn remote_send_mcast(mgid: Mgid, data: &[u8]) -> u32;
        fn remote_rdma_write(rdma: RemoteRdma, data: &[u8]) -> ();
        fn remote_rdma_read(rdma: RemoteRdma, out: &mut [u8]) -> ();
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

/// The type-0 PCI header a ConnectX function of `id` presents (PCI Local Bus 3.0 §6.1): its
/// ids, memory space and bus mastering on, class 0x0C06 (InfiniBand), a 64-bit BAR 0, the
/// capability list at 0x40, interrupt pin A.
fn type0_header(id: &Identity) -> [u8; 64] {
    let mut h = [0u8; 64];
    let mut put = |at: usize, bytes: &[u8]| h[at..at + bytes.len()].copy_from_slice(bytes);
    put(0x00, &id.vendor_id.to_le_bytes());
    put(0x02, &id.device_id.to_le_bytes());
    put(0x04, &0x0006u16.to_le_bytes());
    put(0x06, &0x0010u16.to_le_bytes());
    put(0x0A, &[0x06, 0x0C]);
    put(0x0C, &[0x10]);
    put(0x10, &0xF000_000Cu32.to_le_bytes());
    put(0x2C, &id.subsys_vendor_id.to_le_bytes());
    put(0x2E, &id.subsys_id.to_le_bytes());
    put(0x34, &[0x40]);
    put(0x3D, &[0x01]);
    h
}

impl Hca for SimHca {
    fn save_config(&mut self) -> Result<(), HwError> {
        if self.phase == Phase::Removed {
            return Err(HwError::Absent);
        }
        self.config_saved = true;
        self.saved_header = type0_header(&self.identity);
        self.stats.config_saves += 1;
        Ok(())
    }

    fn saved_config(&self, out: &mut [u8]) -> usize {
        if !self.config_saved {
            return 0;
        }
        let n = out.len().min(self.saved_header.len());
        out[..n].copy_from_slice(&self.saved_header[..n]);
        n
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
    fn rc_transport(&self) -> RcTransport {
        self.config.transport
    }
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
    fn reg_mr(&mut self, attr: MrAttr, keys: Option<MrKeys>) -> Result<MrKeys, VerbsError> {
        self.commands()?;
        self.verbs.reg_mr(attr, keys)
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

mod ports;

pub use ports::{SimPorts, SweepSchedule};

#[cfg(test)]
mod tests;
