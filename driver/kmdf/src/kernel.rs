//! What the bus driver needs from the kernel: the host's [`Platform`] (locks, timers, the DPC,
//! the work item, callbacks, PnP, the event log, the clock; hcabus::host) and, for preparing
//! the device, [`KmdfPlatform`] (the IRQL, the registers, the child list).
//!
//! The Windows implementation (src/windows/, compiled on Windows only) maps each method onto
//! one or two WDF/WDM calls; the fake (src/fake.rs) records every call with the IRQL it was
//! made at, so the tests can hold the driver to the rules of docs/design.md.

pub use hcabus::host::{EventLogEntry, Lock, Platform, PlatformError, Scheduled};

/// Interrupt request levels the driver runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Irql {
    /// Threads: PnP callbacks, work items, most IOCTLs.
    Passive = 0,
    /// DPCs, timers, spin-lock holders, client callbacks.
    Dispatch = 2,
}

/// A child function the bus enumerates: one PDO each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChildFunction {
    /// IPoIB on one port (1-based).
    Ipoib { port: u8 },
    /// The SRP initiator (the boot disk rides on it).
    Srp,
}

impl ChildFunction {
    /// The PDO's hardware id (the INF of each child driver matches it).
    pub fn hardware_id(self) -> &'static str {
        match self {
            ChildFunction::Ipoib { port: 1 } => "HCABUS\\IPOIB&PORT1",
            ChildFunction::Ipoib { port: 2 } => "HCABUS\\IPOIB&PORT2",
            ChildFunction::Ipoib { .. } => "HCABUS\\IPOIB",
            ChildFunction::Srp => "HCABUS\\SRP",
        }
    }

    /// The children of a bus with `ports` IB ports: an IPoIB per port, then the SRP initiator.
    pub fn of_bus(ports: u8) -> impl Iterator<Item = ChildFunction> {
        (1..=ports)
            .map(|port| ChildFunction::Ipoib { port })
            .chain([ChildFunction::Srp])
    }

    /// The child list's identification description: unique per child.
    pub fn serial(self) -> u32 {
        match self {
            ChildFunction::Ipoib { port } => u32::from(port),
            ChildFunction::Srp => SRP_SERIAL,
        }
    }

    /// The child whose identification is `serial`; `None` for one the bus never reports.
    pub fn from_serial(serial: u32) -> Option<ChildFunction> {
        match serial {
            SRP_SERIAL => Some(ChildFunction::Srp),
            1..=MAX_PORTS => Some(ChildFunction::Ipoib { port: serial as u8 }),
            _ => None,
        }
    }

    /// The PDO's instance id: its serial in decimal, unique among the bus's children (PnP
    /// makes the device instance path from the parent's and this).
    pub fn instance_id(self, digits: &mut [u8; 10]) -> &str {
        let mut n = self.serial();
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        core::str::from_utf8(&digits[at..]).unwrap_or("0")
    }

    /// The device text PnP shows for the PDO (IRP_MN_QUERY_DEVICE_TEXT's description).
    pub fn description(self) -> &'static str {
        match self {
            ChildFunction::Ipoib { port: 1 } => "hcabus IPoIB, port 1",
            ChildFunction::Ipoib { port: 2 } => "hcabus IPoIB, port 2",
            ChildFunction::Ipoib { .. } => "hcabus IPoIB",
            ChildFunction::Srp => "hcabus SRP initiator",
        }
    }

    /// The device text's location.
    pub fn location(self) -> &'static str {
        match self {
            ChildFunction::Ipoib { port: 1 } => "InfiniBand port 1",
            ChildFunction::Ipoib { port: 2 } => "InfiniBand port 2",
            ChildFunction::Ipoib { .. } => "InfiniBand port",
            ChildFunction::Srp => "InfiniBand HCA",
        }
    }
}

/// The SRP initiator's serial; an IPoIB child's is its port.
const SRP_SERIAL: u32 = 0x100;
/// The most IB ports a bus enumerates children for.
const MAX_PORTS: u32 = 2;

/// What the KMDF driver needs of the kernel beyond the host's [`Platform`]: the IRQL, the PCI
/// function's registers and the child list, used while the device is prepared.
pub trait KmdfPlatform: Platform {
    /// The IRQL of the calling thread.
    fn irql(&self) -> Irql;
    /// EvtDevicePrepareHardware: map BAR0 from the translated resources and get the PCI bus
    /// interface for config space: the adapter over its registers ([`hcabus::mmio::MmioHca`]).
    fn map_registers(&mut self) -> Result<Self::Hca, PlatformError>;
    /// WdfChildListAddOrUpdateChildDescriptionAsPresent.
    fn child_present(&self, child: ChildFunction) -> Result<(), PlatformError>;
}
