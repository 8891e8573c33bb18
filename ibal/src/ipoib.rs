//! IPoIB: a network interface over a UD queue pair, with a remote IPoIB peer.
//!
//! On RESET it pauses like an NDIS miniport in RESET_START: the send queue stops, sends
//! the hardware has not completed go back to the stack as resubmittable, multicast groups
//! are left, the queue pair destroyed and the link reported down. On RESET_END (as
//! deferred work) it re-creates the queue pair, re-joins the broadcast and multicast
//! groups, restores its receive filter, announces its new QPN with a gratuitous ARP and
//! reports link up; the stack resubmits what came back.

use std::collections::VecDeque;

use bitflags::bitflags;
use hcabus::bus::Client;
use hcabus::fabric::HOST_LID_BASE;
use hcabus::types::*;
use hcabus::verbs::*;
use hcabus::{Duration, Instant};

use crate::access::{Dest, FabricBus, MrFlags, MrSpec, QpSpec, Send};
use crate::handle::*;
use crate::ibal_client::{EventLog, SharedIbal};
use crate::target::Wire;

mod rejoin;
mod stats;
use crate::retry::{ClientProblem, Connector};
pub use rejoin::{Joins, OnSaTimeout, Rejoin, RejoinStats, SaAnswer, SaTimeoutRule, SubnetAdmin};
pub use stats::NetStats;

/// The IPv4 broadcast group of partition 0xffff.
pub const BROADCAST_MGID: Mgid = 0xff12_401b_ffff_0000_0000_0000_ffff_ffff;
pub const BROADCAST_MLID: Lid = 0xc000;
/// Most extra multicast groups an interface joins.
pub const MAX_GROUPS: usize = 4;
/// The peer's fixed UD queue pair number.
pub const PEER_QPN: Qpn = Qpn(0x00ab_cd00);

/// Bytes of one frame.
pub const FRAME: usize = 32;
/// Packets the stack queues above the interface unless configured (Linux's default
/// txqueuelen).
const STACK_QUEUE: u16 = 1000;
const RING: usize = 64;
/// A frame's first byte: its kind.
pub const KIND_DATA: u8 = 1;
pub const KIND_MCAST: u8 = 2;
pub const KIND_ARP: u8 = 3;

/// The `i`th extra multicast group of a port.
pub fn group_mgid(port: u8, i: usize) -> Mgid {
    0xff12_601b_ffff_0000_0000_0001_ff00_0000 | (u128::from(port) << 8) | i as u128
}

fn group_mlid(i: usize) -> Lid {
    BROADCAST_MLID + 1 + i as Lid
}

bitflags! {
    /// The receive filter the stack set (NDIS packet filter).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct PacketFilter: u32 {
        const DIRECTED = 1 << 0;
        const MULTICAST = 1 << 1;
        const BROADCAST = 1 << 2;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpoibConfig {
    pub port: u8,
    /// Extra multicast groups joined besides broadcast.
    pub groups: u8,
    pub peer_lid: Lid,
    /// IPoIB finishes its quiesce as deferred work, this long after RESET.
    pub ack_delay: Duration,
    /// In a fleet with a subnet administrator: how long an SA query may go unanswered, and
    /// what a timeout means (the shipped retry, or the naive reset; `rejoin.rs`).
    pub sa_timeout: Duration,
    pub on_sa_timeout: OnSaTimeout,
    /// Packets the stack queues above the interface while it cannot send (Linux's
    /// `txqueuelen`, 1,000 by default); past it the stack drops. Reserved at start.
    pub stack_queue: u16,
}

impl IpoibConfig {
    /// DMA memory for the send and receive rings.
    pub const fn dma_bytes() -> u64 {
        (2 * RING * FRAME) as u64
    }

    pub const fn cq_entries() -> u32 {
        2 * RING as u32
    }

    pub const fn work_requests() -> u32 {
        RING as u32
    }
}

impl Default for IpoibConfig {
    fn default() -> Self {
        IpoibConfig {
            port: 1,
            groups: 2,
            peer_lid: 0x200,
            ack_delay: Duration::from_ms(1),
            sa_timeout: Duration::from_ms(1_000),
            on_sa_timeout: OnSaTimeout::Retry,
            stack_queue: STACK_QUEUE,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Res {
    pd: Option<PdHandle>,
    cq: Option<CqHandle>,
    qp: Option<QpHandle>,
    mr: Option<(MrHandle, MrKeys)>,
    peer_ah: Option<AhHandle>,
    bcast_ah: Option<AhHandle>,
}

const NO_RES: Res = Res {
    pd: None,
    cq: None,
    qp: None,
    mr: None,
    peer_ah: None,
    bcast_ah: None,
};

/// The remote IPoIB endpoint the interface talks to, run on the interface's turn (as a
/// disk's target is, `crate::target`): on a real fabric it is another host; the lab's
/// simulated one (`hcabus-lab`) learns the interface's QPN from its ARP and sends unicast
/// and multicast.
pub trait Peer: core::fmt::Debug + core::marker::Send + core::any::Any {
    /// When it next sends on its own.
    fn next_due(&self) -> Option<Instant>;
    /// Hears what the interface on `port` sent and sends what is due at `now` (to the
    /// interface, and to its `groups` multicast groups).
    fn run(&mut self, wire: &mut dyn Wire, now: Instant, port: u8, groups: u8);
    /// Packets it received from the interface.
    fn received(&self) -> u64;
    /// The concrete peer, for the host that made it.
    fn as_any(&self) -> &dyn core::any::Any;
}

/// The network stack above the interface, as the interface meets it: it hands packets
/// down to be sent. On a host that is NDIS's protocol drivers; the lab's sends at a
/// steady rate. The interface keeps what it is handed in the stack's queue
/// (`txqueuelen`) while the link is down.
pub trait Traffic: core::fmt::Debug + core::marker::Send {
    /// When it next hands a packet down.
    fn next_due(&self) -> Option<Instant>;
    /// The packets it hands down by `now`, each counted once.
    fn take_due(&mut self, now: Instant) -> u32;
}

/// The bus client of one IPoIB interface, with the stack above it and its peer.
#[derive(Debug)]
pub struct IpoibClient {
    desc: ClientDesc,
    config: IpoibConfig,
    ibal: SharedIbal,
    consumer: Option<ConsumerId>,
    id: Option<ClientId>,
    events: EventLog,
    res: Res,
    link_up: bool,
    filter: PacketFilter,
    /// The stack's packets waiting to go (new, or handed back during a reset).
    stack_queue: VecDeque<u64>,
    /// Posted, not yet completed, oldest first.
    posted: VecDeque<u64>,
    traffic: Box<dyn Traffic>,
    next_seq: u64,
    connect_at: Option<Instant>,
    execute_at: Option<(Instant, Epoch)>,
    buf_base: u64,
    peer: Box<dyn Peer>,
    stats: NetStats,
    /// Refused connects back off up to `io_hold_timeout`.
    reconnect: Connector,
    /// Its port is usable: Active, or never reported (a bus that does not model ports).
    port_up: bool,
    pub refusals: u32,
    /// Its joins through a fleet's SA (`None`: no SA modelled, a join is the attach alone).
    rejoin: Option<Rejoin>,
}

impl IpoibClient {
    /// The interface `name` configured by `config`, on the access layer `ibal`, talking to
    /// `peer`, sending what `traffic` hands it.
    pub fn new(
        name: &str,
        config: IpoibConfig,
        ibal: SharedIbal,
        peer: Box<dyn Peer>,
        traffic: Box<dyn Traffic>,
    ) -> Option<Self> {
        Some(IpoibClient {
            desc: ClientDesc::new(name, ClientKind::Ipoib, ClientFlags::empty())?,
            config: IpoibConfig {
                groups: config.groups.min(MAX_GROUPS as u8),
                ..config
            },
            ibal,
            consumer: None,
            id: None,
            events: EventLog::new(),
            res: NO_RES,
            link_up: false,
            filter: PacketFilter::all(),
            stack_queue: VecDeque::with_capacity(usize::from(config.stack_queue.max(1))),
            posted: VecDeque::with_capacity(RING),
            traffic,
            next_seq: 1,
            connect_at: None,
            execute_at: None,
            buf_base: 0,
            peer,
            stats: NetStats::default(),
            reconnect: Connector::new("IPoIB connect"),
            port_up: true,
            refusals: 0,
            rejoin: None,
        })
    }

    /// Why the interface is not passing traffic, if it is not.
    pub fn problem(&self) -> Option<ClientProblem> {
        self.reconnect.problem()
    }

    /// A refused connect backs off; past the deadline the interface stays down, recorded,
    /// until the next RESET_END.
    fn connect_refused<B: FabricBus + ?Sized>(
        &mut self,
        bus: &mut B,
        e: crate::errors::CreateError,
    ) {
        if bus.state() == hcabus::State::Failed || e == crate::errors::CreateError::DeviceFailed {
            return;
        }
        let now = bus.now();
        let limit = Duration::from_ms(bus.policy().io_hold_timeout_ms);
        let name = self.desc.name;
        self.connect_at = self
            .reconnect
            .refused(name.as_str(), now, limit, e, bus.rng());
    }

    pub fn stats(&self) -> &NetStats {
        &self.stats
    }

    pub fn peer(&self) -> &dyn Peer {
        &*self.peer
    }

    pub fn link_up(&self) -> bool {
        self.link_up
    }

    /// The device QPN of the interface's queue pair, while it has one.
    pub fn qpn(&self) -> Option<Qpn> {
        let (c, qp) = (self.consumer?, self.res.qp?);
        self.ibal.lock().qpn(c, qp)
    }

    /// The multicast groups the interface belongs to.
    pub fn groups(&self) -> impl Iterator<Item = Mgid> + '_ {
        core::iter::once(BROADCAST_MGID)
            .chain((0..usize::from(self.config.groups)).map(|i| group_mgid(self.config.port, i)))
    }

    fn slot_addr(&self, send: bool, i: usize) -> u64 {
        self.buf_base + ((if send { 0 } else { RING }) + i) as u64 * FRAME as u64
    }

    fn connect<B: FabricBus + ?Sized>(
        &mut self,
        bus: &mut B,
    ) -> Result<(), crate::errors::CreateError> {
        let Some(c) = self.consumer else {
            return Ok(());
        };
        self.teardown(bus);
        let port = self.config.port;
        let result = (|| {
            let mut al = self.ibal.lock();
            let pd = al.alloc_pd(bus, c)?;
            self.res.pd = Some(pd);
            let cq = al.create_cq(bus, c, IpoibConfig::cq_entries())?;
            self.res.cq = Some(cq);
            let qp = al.create_qp(
                bus,
                c,
                QpSpec::on_one_cq(pd, QpType::Ud, cq, port, RING as u32),
            )?;
            self.res.qp = Some(qp);
            self.res.mr = Some(al.reg_mr(
                bus,
                c,
                MrSpec {
                    pd,
                    addr: self.buf_base,
                    len: (2 * RING * FRAME) as u64,
                    access: Access::LOCAL_WRITE,
                    flags: MrFlags::empty(),
                },
            )?);
            self.res.peer_ah = Some(al.create_ah(bus, c, pd, port, self.config.peer_lid)?);
            self.res.bcast_ah = Some(al.create_ah(bus, c, pd, port, BROADCAST_MLID)?);
            al.ready_to_receive(bus, c, qp, None)?;
            al.modify_qp(bus, c, qp, QpState::Rts, None)?;
            al.attach_mcast(bus, c, qp, BROADCAST_MGID, BROADCAST_MLID)?;
            for i in 0..usize::from(self.config.groups) {
                al.attach_mcast(bus, c, qp, group_mgid(port, i), group_mlid(i))?;
            }
            Ok(())
        })();
        if let Err(e) = result {
            self.teardown(bus);
            return Err(e);
        }
        self.stats.group_joins += 1 + u32::from(self.config.groups);
        // The filter the stack set survives in software; the new QP gets it again.
        self.stats.filters_restored += 1;
        for i in 0..RING {
            self.post_recv(bus, i as u64);
        }
        self.link_up = true;
        self.stats.link_ups += 1;
        if !self.send_frame(bus, KIND_ARP, 0, true) {
            // The announcement is not the stack's to resend: lost, and counted so.
            self.stats.dropped += 1;
        }
        let queries = self.sa_queries();
        if let Some(r) = &mut self.rejoin {
            r.start(bus.now(), queries);
        }
        Ok(())
    }

    fn teardown<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let Some(c) = self.consumer else {
            return;
        };
        let r = core::mem::replace(&mut self.res, NO_RES);
        let mut al = self.ibal.lock();
        if let Some(qp) = r.qp {
            let _ = al.detach_mcast(bus, c, qp, BROADCAST_MGID);
            for i in 0..usize::from(self.config.groups) {
                let _ = al.detach_mcast(bus, c, qp, group_mgid(self.config.port, i));
            }
        }
        let results = [
            r.qp.map(|h| al.destroy_qp(bus, c, h)),
            r.peer_ah.map(|h| al.destroy_ah(bus, c, h)),
            r.bcast_ah.map(|h| al.destroy_ah(bus, c, h)),
            r.mr.map(|(h, _)| al.dereg_mr(bus, c, h)),
            r.cq.map(|h| al.destroy_cq(bus, c, h)),
            r.pd.map(|h| al.dealloc_pd(bus, c, h)),
        ];
        for e in results.into_iter().flatten().filter_map(Result::err) {
            log::error!("ipoib teardown: {e}");
        }
    }

    fn post_recv<B: FabricBus + ?Sized>(&mut self, bus: &mut B, i: u64) {
        let (Some(c), Some(qp), Some((_, keys))) = (self.consumer, self.res.qp, self.res.mr) else {
            return;
        };
        let wr = RecvWr {
            wr_id: i,
            sge: Sge {
                addr: self.slot_addr(false, i as usize),
                len: FRAME as u32,
                lkey: keys.lkey,
            },
        };
        let _ = self.ibal.lock().post_recv(bus, c, qp, &wr);
    }

    /// Posts one frame; `false` if it could not go now.
    fn send_frame<B: FabricBus + ?Sized>(
        &mut self,
        bus: &mut B,
        kind: u8,
        seq: u64,
        broadcast: bool,
    ) -> bool {
        let (Some(c), Some(qp), Some((_, keys))) = (self.consumer, self.res.qp, self.res.mr) else {
            return false;
        };
        let ah = if broadcast {
            self.res.bcast_ah
        } else {
            self.res.peer_ah
        };
        let Some(ah) = ah else {
            return false;
        };
        let slot = (seq as usize) % RING;
        let addr = self.slot_addr(true, slot);
        bus.device().with_dma(addr, FRAME as u64, |buf| {
            buf.fill(0);
            buf[0] = kind;
            buf[8..16].copy_from_slice(&seq.to_le_bytes());
        });
        let wr = Send {
            wr_id: seq,
            sge: Sge {
                addr,
                len: FRAME as u32,
                lkey: keys.lkey,
            },
            dest: Dest::Datagram { ah, qpn: PEER_QPN },
        };
        self.ibal.lock().post_send(bus, c, qp, &wr).is_ok()
    }

    fn poll<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let (Some(c), Some(cq)) = (self.consumer, self.res.cq) else {
            return;
        };
        loop {
            let Ok(Some(cqe)) = self.ibal.lock().poll_cq(bus, c, cq) else {
                break;
            };
            match (cqe.opcode, cqe.status) {
                (WcOpcode::Send, status) => {
                    // Completions come in order; ARP frames (seq 0) are not the stack's.
                    if cqe.wr_id == 0 {
                        continue;
                    }
                    if self.posted.front() == Some(&cqe.wr_id) {
                        self.posted.pop_front();
                    }
                    match status {
                        WcStatus::Success => self.stats.sent += 1,
                        WcStatus::Flushed => self.hand_back(cqe.wr_id),
                        _ => self.stats.dropped += 1,
                    }
                }
                (WcOpcode::Recv, WcStatus::Success) => {
                    let addr = self.slot_addr(false, cqe.wr_id as usize);
                    let kind = bus.device().with_dma(addr, 1, |b| b[0]).unwrap_or(0);
                    match kind {
                        KIND_MCAST if self.filter.contains(PacketFilter::MULTICAST) => {
                            self.stats.received_multicast += 1
                        }
                        KIND_DATA if self.filter.contains(PacketFilter::DIRECTED) => {
                            self.stats.received_unicast += 1
                        }
                        _ => {}
                    }
                    self.post_recv(bus, cqe.wr_id);
                }
                (WcOpcode::Recv, _) => {}
            }
        }
    }

    /// A send goes back to the stack, resubmittable (NDIS_STATUS_PAUSED).
    fn hand_back(&mut self, seq: u64) {
        self.stats.completed_back += 1;
        if self.stack_queue.len() < self.stack_queue.capacity() {
            self.stack_queue.push_front(seq);
        } else {
            self.stats.dropped += 1;
        }
    }

    fn on_reset<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        // Real completions first, then every send still out goes back to the stack.
        self.poll(bus);
        while let Some(seq) = self.posted.pop_back() {
            self.hand_back(seq);
        }
        self.teardown(bus);
        if let Some(r) = &mut self.rejoin {
            r.stop();
        }
        if self.link_up {
            self.link_up = false;
            self.stats.link_downs += 1;
        }
    }

    fn transmit<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        while self.link_up && self.posted.len() < RING {
            let Some(&seq) = self.stack_queue.front() else {
                break;
            };
            if !self.send_frame(bus, KIND_DATA, seq, false) {
                break;
            }
            self.stack_queue.pop_front();
            self.posted.push_back(seq);
        }
    }
}

impl<B: FabricBus + ?Sized> Client<B> for IpoibClient {
    fn start(&mut self, bus: &mut B) {
        let Some(base) = bus.device().dma_alloc(IpoibConfig::dma_bytes()) else {
            self.refusals += 1;
            self.reconnect.start_failed(ClientProblem::NoDmaMemory {
                bytes: IpoibConfig::dma_bytes(),
            });
            return;
        };
        self.buf_base = base;
        match self.ibal.lock().open(self.desc.name.as_str()) {
            Ok(c) => self.consumer = Some(c),
            Err(e) => {
                self.refusals += 1;
                self.reconnect.start_failed(ClientProblem::NoConsumer(e));
                return;
            }
        }
        match bus.register(self.desc) {
            Ok(r) => {
                self.id = Some(r.id);
                self.port_up = bus
                    .port(self.config.port)
                    .is_none_or(|p| p.state == PortState::Active);
                if r.state.in_service() {
                    self.connect_at = self.port_up.then(|| bus.now());
                }
            }
            Err(e) => {
                self.refusals += 1;
                self.reconnect.start_failed(ClientProblem::NotRegistered(e));
            }
        }
    }

    fn on_event(&mut self, bus: &mut B, id: ClientId, event: Event) {
        self.events.push(event.kind());
        let now = bus.now();
        match event {
            Event::Reset { epoch, .. } => {
                self.on_reset(bus);
                self.connect_at = None;
                // Down until PORT_ACTIVE, if the bus knows the port at all.
                self.port_up = bus.port(self.config.port).is_none();
                if self.config.ack_delay == Duration::ZERO {
                    if bus.reset_execute(id, epoch).is_err() {
                        self.refusals += 1;
                    }
                } else {
                    self.execute_at = Some((now + self.config.ack_delay, epoch));
                }
            }
            Event::ResetEnd { .. } | Event::ResetAborted { .. } => {
                // The reset is over: an execute still deferred for it (forced past the
                // quiesce deadline) acknowledges nothing now, and must not keep PORT_ACTIVE
                // from bringing the link up.
                self.execute_at = None;
                // Link up (and the multicast joins) only on an Active port.
                self.connect_at = self.port_up.then_some(now);
                self.reconnect.fresh_device();
            }
            // Not CAN_VETO, so never asked; were it, silence would be consent.
            Event::ResetQuery { .. } => {}
            Event::ResetFailed { .. } | Event::DeviceFatal { .. } => {
                self.on_reset(bus);
                self.connect_at = None;
                // As at RESET_END: an execute still deferred acknowledges nothing now.
                self.execute_at = None;
            }
            Event::PortActive { port, .. } if port == self.config.port => {
                // A second PORT_ACTIVE (a new LID on a port already Active) brings nothing
                // up: a connect backing off keeps its time; the new master's
                // ClientReregister, in the same sweep, rejoins the groups.
                let back = !std::mem::replace(&mut self.port_up, true);
                if back && self.res.qp.is_none() && self.execute_at.is_none() {
                    self.connect_at = Some(now);
                }
            }
            Event::PortDown { port, .. } if port == self.config.port => {
                // Link down: sends go back to the stack, the groups are gone; all of it is
                // made again on PORT_ACTIVE, as after a reset.
                self.port_up = false;
                self.connect_at = None;
                self.on_reset(bus);
            }
            Event::PortActive { .. } | Event::PortDown { .. } => {}
        }
    }

    /// Its traffic, its peer and its joins are its own: nothing another client does moves
    /// its next wake.
    fn wake_is_own(&self) -> bool {
        true
    }

    fn next_wake(&self) -> Option<Instant> {
        [
            self.traffic.next_due(),
            self.connect_at,
            self.execute_at.map(|(t, _)| t),
            self.peer.next_due(),
            self.rejoin.as_ref().and_then(Rejoin::due),
            // A ClientReregister is an event of the adapter's: seen when it comes, by an
            // interface with a queue pair to join with (one without joins when it has).
            self.rejoin
                .as_ref()
                .filter(|_| self.res.qp.is_some())
                .and_then(Rejoin::reregister_due),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn wake(&mut self, bus: &mut B) {
        let now = bus.now();
        self.peer
            .run(bus.device(), now, self.config.port, self.config.groups);
        self.poll(bus);
        if let Some((_, epoch)) = self.execute_at.filter(|(t, _)| *t <= now) {
            self.execute_at = None;
            if let Some(id) = self.id {
                if bus.reset_execute(id, epoch).is_err() {
                    self.refusals += 1;
                }
            }
        }
        if self.connect_at.is_some_and(|t| t <= now) {
            self.connect_at = None;
            match self.connect(bus) {
                Ok(()) => self.reconnect.connected(),
                Err(e) => self.connect_refused(bus, e),
            }
        }
        self.run_joins(bus);
        for _ in 0..self.traffic.take_due(now) {
            // The stack queues while the link is down; past its queue it drops.
            if self.stack_queue.len() < self.stack_queue.capacity() {
                self.stack_queue.push_back(self.next_seq);
            } else {
                self.stats.dropped += 1;
            }
            self.next_seq += 1;
        }
        self.transmit(bus);
        // The peer hears what was just sent.
        self.peer
            .run(bus.device(), now, self.config.port, self.config.groups);
        self.stats.peer_received = self.peer.received();
    }
}

crate::ibal_client::report_fields!(
    IpoibClient,
    |c| c.reconnect.problem().map(|p| p.to_string()),
    |c| c.stats.counters(c.stack_queue.len() as u64),
    |c| c.link_up()
);

/// Host LID of a port, as the peer addresses it.
pub fn port_lid(port: u8) -> Lid {
    HOST_LID_BASE + Lid::from(port.saturating_sub(1))
}
