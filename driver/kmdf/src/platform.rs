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
            ChildFunction::Srp => 0x100,
        }
    }
}

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
