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

#[cfg(all(test, feature = "sim"))]
mod tests;

/// What the bus knows of one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortView {
    pub state: PortState,
    /// The LID while Active; 0 otherwise.
    pub lid: u16,
}

/// Every port's bit: the belief of a newcomer on a running bus.
pub(super) const ALL_PORTS: u8 = (1 << MAX_PORTS) - 1;

const fn bit(port: u8) -> u8 {
    1 << (port - 1)
}

impl Coordinator {
    /// The hardware reports that `port` (1..=MAX_PORTS) is now in `state`, with `lid` when
    /// Active. Hosts call this from the adapter's port-change event; a report that changes
    /// nothing is ignored.
    pub fn port_changed(
        &mut self,
        now: Instant,
        port: u8,
        state: PortState,
        lid: u16,
    ) -> Result<(), PortError> {
        self.advance(now);
        if port == 0 || port > MAX_PORTS {
            return Err(PortError::NoSuchPort);
        }
        let lid = if state == PortState::Active { lid } else { 0 };
        let view = PortView { state, lid };
        let slot = &mut self.ports[usize::from(port - 1)];
        if *slot == Some(view) {
            return Ok(());
        }
        *slot = Some(view);
        if state == PortState::Active {
            self.awaiting_ports &= !bit(port);
        }
        self.record(RecordKind::Port { port, state, lid });
        self.sync_ports();
        Ok(())
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

    /// What the bus knows of `port`; `None` for a port the hardware never reported.
    pub fn port(&self, port: u8) -> Option<PortView> {
        let i = usize::from(port.checked_sub(1)?);
        self.ports.get(i).copied().flatten()
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
            if slot.is_some_and(|v| v.state != PortState::Down) {
                *slot = Some(PortView {
                    state: PortState::Down,
                    lid: 0,
                });
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
