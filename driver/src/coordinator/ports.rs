//! Ports (docs/design.md §2, §4, §5 "Ports"): what the hardware says of each port, and PORT_ACTIVE /
//! PORT_DOWN to the clients that are running.
//!
//! Each client carries the set of ports it believes Active. A newcomer on a running bus
//! believes every port Active (what a driver assumes of a started adapter); RESET empties the
//! set, since after a hardware reset every port starts Down. Whenever the bus is running
//! (Operational, or Preparing, where nothing is torn down yet), every running client is told
//! how the ports differ from its belief: after a port change, after a reset concludes (so
//! PORT_ACTIVE follows RESET_END or RESET_ABORTED) and after a registration. A port the
//! hardware never reported does not exist for the bus.

use super::stage::Walk;
use super::Coordinator;
use crate::errors::PortError;
use crate::recorder::RecordKind;
use crate::time::Instant;
use crate::types::*;

/// What the bus knows of one port: what the hardware last reported of it.
pub type PortView = PortAttrs;

/// Every port's bit: the belief of a newcomer on a running bus.
pub(super) const ALL_PORTS: u8 = (1 << MAX_PORTS) - 1;

const fn bit(port: u8) -> u8 {
    1 << (port - 1)
}

impl Coordinator {
    /// The hardware reports `port` (1..=MAX_PORTS) as `attrs` now says. Hosts call this
    /// from the adapter's port-change event; a report that changes nothing is ignored, and
    /// one that changes only what the clients are not told (the physical state while
    /// training, say) is kept without a record.
    pub fn port_changed(
        &mut self,
        now: Instant,
        port: u8,
        attrs: PortAttrs,
    ) -> Result<(), PortError> {
        self.advance(now);
        if port == 0 || port > MAX_PORTS {
            return Err(PortError::NoSuchPort);
        }
        let view = attrs.normalized();
        let slot = &mut self.ports[usize::from(port - 1)];
        let before = *slot;
        if before == Some(view) {
            return Ok(());
        }
        *slot = Some(view);
        if view.state == PortState::Active {
            self.awaiting_ports &= !bit(port);
        }
        if before.map(|b| (b.state, b.lid)) != Some((view.state, view.lid)) {
            self.record(RecordKind::Port {
                port,
                state: view.state,
                lid: view.lid,
            });
        }
        self.sync_ports();
        let relabelled = before.is_some_and(|b| b.state == PortState::Active && b.lid != view.lid)
            && view.state == PortState::Active;
        if relabelled {
            self.lid_changed(port, view.lid);
        }
        Ok(())
    }

    /// An Active port's LID changed under it (a new master that reassigns LIDs): every
    /// running client that has the port as Active hears PORT_ACTIVE again, with the new LID.
    /// What it addressed by the old one (its connections, its peers' paths to it) is gone.
    fn lid_changed(&mut self, port: u8, lid: u16) {
        if !matches!(self.state(), State::Operational | State::Preparing) {
            return;
        }
        let event = Event::PortActive {
            epoch: self.epoch,
            port,
            lid,
        };
        self.deliver_each(Walk::OldestFirst, event, |e| {
            e.state == ClientState::Active && e.ports & bit(port) != 0
        });
    }

    /// The ports (bit 0: port 1) that were Active when a hardware reset took them down and
    /// are not Active again: while the device is in service and this is not empty, it is
    /// recovering (docs/design.md §5 "Service restored"). Empty once the device is Failed or
    /// Removed: nothing is coming back to wait for.
    pub fn awaiting_ports(&self) -> u8 {
        match self.state() {
            State::Failed | State::Removed => 0,
            _ => self.awaiting_ports,
        }
    }

    /// What the bus knows of `port`; `None` for a port the hardware never reported. A
    /// Failed or Removed device serves no port, whatever its links last said: Down in every
    /// view (QUERY_STATE, the reports), its LID gone; a removed device gives no light either.
    pub fn port(&self, port: u8) -> Option<PortView> {
        let i = usize::from(port.checked_sub(1)?);
        let view = self.ports.get(i).copied().flatten()?;
        Some(match self.state() {
            State::Failed => PortAttrs {
                state: PortState::Down,
                ..view
            }
            .normalized(),
            State::Removed => PortAttrs {
                state: PortState::Down,
                phys: PhysState::Disabled,
                ..view
            }
            .normalized(),
            _ => view,
        })
    }

    /// A hardware reset takes every port down; the hardware reports them again as the links
    /// train and the subnet manager sweeps.
    pub(super) fn ports_reset(&mut self) {
        for port in 1..=MAX_PORTS {
            if self
                .port(port)
                .is_some_and(|v| v.state == PortState::Active)
            {
                self.awaiting_ports |= bit(port);
            }
            let slot = &mut self.ports[usize::from(port - 1)];
            if let Some(v) = slot.filter(|v| v.state != PortState::Down) {
                // The device gives no light while it is reset; the GID is the port's own.
                *slot = Some(
                    PortAttrs {
                        state: PortState::Down,
                        phys: PhysState::Disabled,
                        ..v
                    }
                    .normalized(),
                );
                self.record(RecordKind::Port {
                    port,
                    state: PortState::Down,
                    lid: 0,
                });
            }
        }
    }

    /// Tells every running client how the ports differ from what it believes.
    pub(super) fn sync_ports(&mut self) {
        if !matches!(self.state(), State::Operational | State::Preparing) {
            return;
        }
        let epoch = self.epoch;
        for port in 1..=MAX_PORTS {
            let Some(view) = self.port(port) else {
                continue;
            };
            let active = view.state == PortState::Active;
            let event = if active {
                Event::PortActive {
                    epoch,
                    port,
                    lid: view.lid,
                }
            } else {
                Event::PortDown { epoch, port }
            };
            self.deliver_each(Walk::OldestFirst, event, |e| {
                let believes = e.ports & bit(port) != 0;
                if e.state != ClientState::Active || believes == active {
                    return false;
                }
                e.ports ^= bit(port);
                true
            });
        }
    }
}
