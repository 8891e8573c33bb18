//! The remote IPoIB endpoint an interface talks to, simulated: behind the product's
//! `ibal::ipoib::Peer`, run on the interface's turn.

use hcabus::verbs::{Lid, Qpn, RemoteQp};
use hcabus::{Duration, Instant};
use ibal::ipoib::{
    group_mgid, port_lid, Peer, Traffic, BROADCAST_MLID, FRAME, KIND_ARP, KIND_DATA, KIND_MCAST,
    PEER_QPN,
};
use ibal::target::Wire;

/// The remote IPoIB endpoint: learns our QPN from ARP, sends unicast and multicast.
#[derive(Debug, Clone)]
pub struct IpoibPeer {
    lid: Lid,
    /// Our QPN as last announced.
    host_qpn: Option<Qpn>,
    next_unicast: Option<Instant>,
    next_mcast: Option<Instant>,
    interval: Duration,
    pub received: u64,
    pub sent_ok: u64,
    pub send_failures: u64,
}

impl IpoibPeer {
    /// The peer at `lid`, sending `pps` unicast packets a second (multicast: one tenth).
    pub fn new(lid: Lid, pps: u32) -> Self {
        let interval = Duration::from_us(1_000_000 / u64::from(pps.max(1)));
        IpoibPeer {
            lid,
            host_qpn: None,
            next_unicast: (pps > 0).then_some(Instant::ZERO + interval),
            next_mcast: (pps > 0).then_some(Instant::ZERO + interval),
            interval,
            received: 0,
            sent_ok: 0,
            send_failures: 0,
        }
    }

    /// Its first packets one interval after `at` (its host powers on then), as from 0.
    pub fn starting_at(mut self, at: Instant) -> Self {
        let later = |t: Option<Instant>| t.map(|t| t.max(at + self.interval));
        self.next_unicast = later(self.next_unicast);
        self.next_mcast = later(self.next_mcast);
        self
    }

    pub fn next_due(&self) -> Option<Instant> {
        [self.next_unicast, self.next_mcast]
            .into_iter()
            .flatten()
            .min()
    }

    pub fn run(&mut self, hca: &mut dyn Wire, now: Instant, port: u8, groups: u8) {
        let lid = self.lid;
        // Broadcasts only from our own subnet: the other port's go to its own peer.
        let host = port_lid(port);
        while let Some(m) = hca.wire_take(&|m| {
            m.dlid == lid || (m.dlid == BROADCAST_MLID && m.dqpn == PEER_QPN && m.src_lid == host)
        }) {
            match m.payload().first() {
                Some(&KIND_ARP) => self.host_qpn = Some(m.src_qpn),
                Some(&KIND_DATA) => self.received += 1,
                _ => {}
            }
        }
        let me = RemoteQp { lid, qpn: PEER_QPN };
        let mut frame = [0u8; FRAME];
        while let Some(t) = self.next_unicast.filter(|t| *t <= now) {
            self.next_unicast = Some(t + self.interval);
            let Some(to) = self.host_qpn else {
                continue;
            };
            frame[0] = KIND_DATA;
            match hca.remote_send(me, to, &frame) {
                Ok(()) => self.sent_ok += 1,
                Err(_) => self.send_failures += 1,
            }
        }
        while let Some(t) = self.next_mcast.filter(|t| *t <= now) {
            self.next_mcast = Some(t + Duration::from_us(self.interval.as_us() * 10));
            frame[0] = KIND_MCAST;
            for i in 0..usize::from(groups) {
                if hca.remote_send_mcast(group_mgid(port, i), &frame).is_ok() {
                    self.sent_ok += 1;
                }
            }
        }
    }
}

impl Peer for IpoibPeer {
    fn next_due(&self) -> Option<Instant> {
        IpoibPeer::next_due(self)
    }
    fn run(&mut self, wire: &mut dyn Wire, now: Instant, port: u8, groups: u8) {
        IpoibPeer::run(self, wire, now, port, groups);
    }
    fn received(&self) -> u64 {
        self.received
    }
    fn as_any(&self) -> &dyn core::any::Any {
        self
    }
}

/// The stack above an interface as the lab runs it: a packet every `1 / pps` seconds, the
/// first one interval in (none at 0 pps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SteadyTraffic {
    interval: Duration,
    next: Option<Instant>,
}

impl SteadyTraffic {
    pub fn new(pps: u32) -> Self {
        let interval = Duration::from_us(1_000_000 / u64::from(pps.max(1)));
        SteadyTraffic {
            interval,
            next: (pps > 0).then_some(Instant::ZERO + interval),
        }
    }

    /// Its first packet one interval after `at` (its host powers on then), as from 0.
    pub fn starting_at(mut self, at: Instant) -> Self {
        self.next = self.next.map(|t| t.max(at + self.interval));
        self
    }
}

impl Traffic for SteadyTraffic {
    fn next_due(&self) -> Option<Instant> {
        self.next
    }

    fn take_due(&mut self, now: Instant) -> u32 {
        let mut n = 0;
        while let Some(t) = self.next.filter(|t| *t <= now) {
            self.next = Some(t + self.interval);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_traffic_hands_each_packet_down_once_at_its_rate() {
        let mut t = SteadyTraffic::new(1_000);
        assert_eq!(t.next_due(), Some(Instant::from_ms(1)), "one interval in");
        assert_eq!(t.take_due(Instant::from_us(999)), 0);
        assert_eq!(t.take_due(Instant::from_ms(10)), 10);
        assert_eq!(t.take_due(Instant::from_ms(10)), 0, "counted once");
        assert_eq!(t.next_due(), Some(Instant::from_ms(11)));
        let mut none = SteadyTraffic::new(0);
        assert_eq!(
            (none.next_due(), none.take_due(Instant::from_ms(1_000))),
            (None, 0)
        );
    }
}
