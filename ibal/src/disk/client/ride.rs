//! A port that goes dark under a logged-in disk (docs/design.md §7 "A link flap ridden"):
//! the queue pair stays in RTS, and its transport sends again at each timeout what is not
//! acknowledged, on both sides. A port back while the last retransmission can still get
//! through loses nothing, so the disk keeps its connection that long and sends nothing
//! new (a multipath disk moves what waits to another path); past it, the port's loss is a
//! transport loss: the disk takes its commands back and logs in again when the port is back.
//! A port back with another LID (renumbered by a new master) has lost every connection
//! made under the old one, however short the flap.

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

    /// PORT_ACTIVE: a connection kept through the flap serves again, nothing lost; one
    /// whose ride ended by this instant (its wake not run yet) is lost as at that end.
    pub(super) fn port_came_back<B: FabricBus + ?Sized>(&mut self, bus: &mut B) {
        let Some(until) = self.disk.port_dark_until() else {
            return;
        };
        // The same end as `port_dark_too_long`'s: a port back at `until` is too late.
        if until <= bus.now() {
            self.port_lost(bus);
            return;
        }
        self.disk.link = Link::Up;
        self.disk.last_sent = Some(self.disk.seen);
        self.disk.stats.port_flaps_ridden += 1;
        log::info!(
            "{}: its port is back within the transport's retries: no login",
            self.desc.name
        );
    }

    /// PORT_ACTIVE with `lid`: a connection made under another LID of its port addresses
    /// nothing now (the target answers the old LID; a new master renumbered the port), so
    /// it is dropped at once, its commands taken back, and the disk logs in again through
    /// a path asked for anew, rather than wait for its transport to give up. `true` if so.
    pub(super) fn port_renumbered<B: FabricBus + ?Sized>(&mut self, bus: &mut B, lid: u16) -> bool {
        if !self.disk.is_connected() || self.port_lid.is_none_or(|l| l == lid) {
            return false;
        }
        log::warn!(
            "{}: its port is back as LID {lid:#x}, not {:#x}: logging in again",
            self.desc.name,
            self.port_lid.unwrap_or(0)
        );
        self.disk.stats.lid_changes += 1;
        self.disk.on_reset(&self.ibal, bus);
        // The path is asked for again: its source LID moved.
        self.cancel_connect();
        self.connect_at = Some(bus.now());
        true
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
