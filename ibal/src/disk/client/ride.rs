//! A port that goes dark under a logged-in disk (docs/design.md §7 "A link flap ridden"):
//! the queue pair stays in RTS, and its transport sends again at each timeout what is not
//! acknowledged, on both sides. A port back while the last retransmission can still get
//! through loses nothing, so the disk keeps its connection that long and sends nothing
//! new (a multipath disk moves what waits to another path); past it, the port's loss is a
//! transport loss: the disk takes its commands back and logs in again when the port is back.

use hcabus::{Duration, Instant};

use super::{Link, SrpClient, SrpDisk};
use crate::access::FabricBus;

impl SrpDisk {
    /// How long after its port goes dark a connection's transport can still carry what is
    /// out: until its last retransmission. `None`: it cannot (no timer, or no retry).
    fn port_ride(&self) -> Option<Duration> {
        let rc = self.transport;
        rc.retransmission(rc.retry_count)
            .filter(|d| *d > Duration::ZERO)
    }

    /// When a connection whose port is dark is given up, if it is.
    pub(super) fn port_dark_until(&self) -> Option<Instant> {
        match self.link {
            Link::PortDark { until } => Some(until),
            _ => None,
        }
    }
}

impl SrpClient {
    /// PORT_DOWN under a connected disk: ride the flap if the transport can, else take the
    /// commands out back now, as at a reset, and log in again when the port is back.
    pub(super) fn port_went_dark<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let now = bus.now();
        let ride = self.disk.port_ride();
        if let (Link::Up, Some(ride)) = (self.disk.link, ride) {
            let until = now + ride;
            log::info!(
                "{}: its port went down: the connection is kept until {until} while the \
                 transport retransmits",
                self.desc.name
            );
            self.disk.link = Link::PortDark { until };
            return;
        }
        self.port_lost(bus);
    }

    /// PORT_ACTIVE: a connection kept through the flap serves again, nothing lost.
    pub(super) fn port_came_back(&mut self) {
        if self.disk.port_dark_until().is_some() {
            self.disk.link = Link::Up;
            self.disk.last_sent = Some(self.disk.seen);
            self.disk.stats.port_flaps_ridden += 1;
            log::info!(
                "{}: its port is back within the transport's retries: no login",
                self.desc.name
            );
        }
    }

    /// A port dark past what the transport rides: the connection is given up.
    pub(super) fn port_dark_too_long<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        if self.disk.port_dark_until().is_some_and(|t| t <= bus.now()) {
            log::warn!(
                "{}: its port stayed down past the transport's retries: logging in again",
                self.desc.name
            );
            self.port_lost(bus);
        }
    }

    /// A transport loss: take the commands in flight back, as at RESET, and log in again
    /// when the port is back.
    fn port_lost<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        self.disk.stats.port_losses += 1;
        self.disk.on_reset(&self.ibal, bus);
    }
}
