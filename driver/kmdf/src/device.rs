//! DriverEntry, EvtDriverDeviceAdd and EvtDevicePrepareHardware, as decisions: which PCI
//! functions the driver takes, how its FDO and its control device are set up, how the bus
//! comes to life, and what a caller's handle may do.

use hcabus::coordinator::Config;
use hcabus::host::{Bus, NewError, Parked};
use hcabus::ioctl::Rights;
use hcabus::{Policy, PolicyError};

use crate::kernel::{ChildFunction, KmdfPlatform, PlatformError};

/// Mellanox / NVIDIA.
pub const PCI_VENDOR_MELLANOX: u16 = 0x15B3;

/// ConnectX functions this bus driver takes (the INF lists the same hardware ids).
pub const SUPPORTED_DEVICES: [(u16, &str); 6] = [
    (0x1003, "ConnectX-3"),
    (0x1007, "ConnectX-3 Pro"),
    (0x1013, "ConnectX-4"),
    (0x1015, "ConnectX-4 Lx"),
    (0x1017, "ConnectX-5"),
    (0x101B, "ConnectX-6"),
];

/// FILE_DEVICE_BUS_EXTENDER: the FDO's device type, as a bus driver's.
pub const FILE_DEVICE_BUS_EXTENDER: u32 = 0x0000_002A;

/// The control device's SDDL: SYSTEM and Administrators only (docs/design.md §8).
pub const CONTROL_DEVICE_SDDL: &str = "D:P(A;;GA;;;SY)(A;;GA;;;BA)";

/// A device name built without the heap: EvtDriverDeviceAdd allocates nothing it could
/// fail to get (`alloc::format!` would abort the machine on a short pool).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeviceName {
    bytes: [u8; 40],
    len: usize,
}

impl DeviceName {
    /// `prefix` then the decimal `instance`.
    fn new(prefix: &str, instance: u32) -> Self {
        use core::fmt::Write;
        let mut name = DeviceName {
            bytes: [0; 40],
            len: 0,
        };
        // The longest, `\DosDevices\HcaBus4294967295`, is 29 bytes: it always fits.
        let _fits = write!(name, "{prefix}{instance}");
        name
    }

    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl core::fmt::Write for DeviceName {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        let room = self.bytes.get_mut(self.len..end).ok_or(core::fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl core::fmt::Debug for DeviceName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// How the FDO and the control device are set up for one HCA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdoSetup {
    pub device_type: u32,
    /// n, the control device's number.
    pub instance: u32,
    /// `\Device\HcaBus<n>`, the control device (`\\.\HcaBus<n>` for hcactl).
    pub control_device: DeviceName,
    pub symbolic_link: DeviceName,
    pub sddl: &'static str,
    pub model: &'static str,
}

/// Why EvtDriverDeviceAdd refused a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AddError {
    /// Not a ConnectX function this driver knows.
    #[error("PCI {vendor_id:04x}:{device_id:04x} is not a supported ConnectX")]
    Unsupported { vendor_id: u16, device_id: u16 },
}

/// EvtDriverDeviceAdd: the FDO of the `instance`th HCA with these PCI ids.
pub fn device_add(vendor_id: u16, device_id: u16, instance: u32) -> Result<FdoSetup, AddError> {
    let model = SUPPORTED_DEVICES
        .iter()
        .find(|(id, _)| vendor_id == PCI_VENDOR_MELLANOX && *id == device_id)
        .map(|(_, m)| *m)
        .ok_or(AddError::Unsupported {
            vendor_id,
            device_id,
        })?;
    Ok(FdoSetup {
        device_type: FILE_DEVICE_BUS_EXTENDER,
        instance,
        control_device: DeviceName::new("\\Device\\HcaBus", instance),
        symbolic_link: DeviceName::new("\\DosDevices\\HcaBus", instance),
        sddl: CONTROL_DEVICE_SDDL,
        model,
    })
}

/// The vendor and device ids in a PCI hardware id (`PCI\VEN_15B3&DEV_1003&SUBSYS_...`).
pub fn parse_pci_hardware_id(id: &str) -> Option<(u16, u16)> {
    let upper = id.get(..4)?;
    if !upper.eq_ignore_ascii_case("PCI\\") {
        return None;
    }
    let field = |tag: &str| {
        let at = id.find(tag)? + tag.len();
        u16::from_str_radix(id.get(at..at + 4)?, 16).ok()
    };
    Some((field("VEN_")?, field("DEV_")?))
}

/// FILE_READ_DATA and FILE_WRITE_DATA in a handle's granted access.
const FILE_READ_DATA: u32 = 0x0001;
const FILE_WRITE_DATA: u32 = 0x0002;

/// What a handle with this granted access may do (FILE_READ_DATA, FILE_WRITE_DATA).
pub fn rights_of(granted_access: u32) -> Rights {
    let mut rights = Rights::empty();
    if granted_access & FILE_READ_DATA != 0 {
        rights |= Rights::READ;
    }
    if granted_access & FILE_WRITE_DATA != 0 {
        rights |= Rights::WRITE;
    }
    rights
}

/// What the handle behind an IOCTL of `code` may do, as far as the driver can know: the
/// code's RequiredAccess bits (FILE_READ_ACCESS, FILE_WRITE_ACCESS), which the I/O manager
/// checked against the handle's granted access before the request reached the driver. A
/// FILE_OBJECT's ReadAccess/WriteAccess are share-access bookkeeping, not that grant.
pub fn rights_of_ioctl(code: u32) -> Rights {
    Rights::from_bits_truncate((code >> 14) & (Rights::READ | Rights::WRITE).bits())
}

/// The policy from the service's Parameters key: each value named as [`Policy::KEYS`] names
/// it (REG_DWORD; flags 0 or 1), the default for each value absent. A value that cannot be
/// taken is refused by name, and the whole policy falls back to the defaults: a boot driver
/// that refused to start would take the boot disk with it.
pub fn policy_from_registry(
    mut read: impl FnMut(&str) -> Option<u32>,
) -> (Policy, Option<PolicyError>) {
    let mut policy = Policy::default();
    for key in Policy::KEYS {
        let Some(value) = read(key) else {
            continue;
        };
        if policy.set(key, value.into()).is_err() {
            let refused = PolicyError {
                field: key,
                problem: "out of range for this key",
            };
            return (Policy::default(), Some(refused));
        }
    }
    match policy.validate() {
        Ok(()) => (policy, None),
        Err(e) => (Policy::default(), Some(e)),
    }
}

/// The Parameters value that sets the flight recorder's depth, in records.
pub const RECORDER_RECORDS_KEY: &str = "flight_recorder_records";

/// The flight recorder's depth when the registry does not set it. A record is 112 bytes in
/// non-paged memory, so 1024 records are 112 KiB: an adapter stays near 165 KiB in all
/// (docs/windows.md, "Non-paged memory per adapter"), and the ring still holds the last
/// dozens of resets (one with no client writes about 15 records, each client a few more).
pub const DEFAULT_RECORDER_RECORDS: u32 = 1024;

/// The depths the registry may ask for: at least one reset's records; at most 16384
/// (1.75 MiB per adapter), for an engineer chasing a fault who asks for it knowingly.
pub const RECORDER_RECORDS: core::ops::RangeInclusive<u32> = 64..=16_384;

/// The coordinator's configuration from the service's Parameters key: the policy
/// ([`policy_from_registry`]) and the flight recorder's depth ([`RECORDER_RECORDS_KEY`]).
/// Each part a value spoils falls back to its default, and its refusal names the key.
pub fn config_from_registry(
    mut read: impl FnMut(&str) -> Option<u32>,
) -> (Config, [Option<PolicyError>; 2]) {
    let (policy, policy_refused) = policy_from_registry(&mut read);
    let (records, depth_refused) = match read(RECORDER_RECORDS_KEY) {
        None => (DEFAULT_RECORDER_RECORDS, None),
        Some(n) if RECORDER_RECORDS.contains(&n) => (n, None),
        Some(_) => (
            DEFAULT_RECORDER_RECORDS,
            Some(PolicyError {
                field: RECORDER_RECORDS_KEY,
                problem: "out of range for this key (64 to 16384 records)",
            }),
        ),
    };
    let config = Config {
        policy,
        recorder_capacity: records as usize,
        ..Config::default()
    };
    (config, [policy_refused, depth_refused])
}

/// What the driver is configured with (from the registry's Parameters key on Windows).
#[derive(Debug, Clone, Copy)]
pub struct BusConfig {
    pub coordinator: Config,
    /// IB ports: one IPoIB child each.
    pub ports: u8,
}

/// Why EvtDevicePrepareHardware failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PrepareError {
    /// A kernel call failed: the registers, the child list, or a lock KMDF could not create.
    #[error("{0}")]
    Platform(PlatformError),
    /// The bus could not be built on the device (its identity, the policy).
    #[error("{0}")]
    Bus(NewError),
    /// More ports than the child list names (1..=2).
    #[error("{0} ports: the bus enumerates 1 or 2")]
    Ports(u8),
}

impl From<NewError> for PrepareError {
    fn from(e: NewError) -> Self {
        match e {
            NewError::Platform(e) => PrepareError::Platform(e),
            e => PrepareError::Bus(e),
        }
    }
}

/// EvtDevicePrepareHardware (PASSIVE_LEVEL): map the registers, report the children, build
/// the bus (which reads the identity and reserves everything the coordinator will ever need),
/// or, after a PnP stop, resume the bus that stop `parked` on the new resources (the
/// children's registrations kept).
pub fn prepare<K: KmdfPlatform>(
    kernel: K,
    config: BusConfig,
    parked: Option<Parked<K::Callback>>,
) -> Result<Bus<K>, PrepareError> {
    let (kernel, hca) = ready(kernel, config.ports)?;
    Ok(match parked {
        Some(parked) => Bus::resume(kernel, parked, hca)?,
        None => Bus::new(kernel, config.coordinator, hca)?,
    })
}

/// [`prepare`], the bus written into `room` (the kernel's pool memory) rather than returned:
/// no frame between prepare hardware and the bus carries it by value. On an error nothing
/// was written to `room`.
pub fn prepare_in<K: KmdfPlatform>(
    room: &mut core::mem::MaybeUninit<Bus<K>>,
    kernel: K,
    config: BusConfig,
    parked: Option<Parked<K::Callback>>,
) -> Result<&mut Bus<K>, PrepareError> {
    let (kernel, hca) = ready(kernel, config.ports)?;
    Ok(match parked {
        Some(parked) => Bus::resume_in(room, kernel, parked, hca)?,
        None => Bus::init_in(room, kernel, config.coordinator, hca)?,
    })
}

/// The registers mapped and the children reported present, before the bus is built: an
/// error here leaves nothing built to undo.
fn ready<K: KmdfPlatform>(mut kernel: K, ports: u8) -> Result<(K, K::Hca), PrepareError> {
    if !(1..=2).contains(&ports) {
        return Err(PrepareError::Ports(ports));
    }
    let hca = kernel.map_registers().map_err(PrepareError::Platform)?;
    for child in ChildFunction::of_bus(ports) {
        kernel
            .child_present(child)
            .map_err(PrepareError::Platform)?;
    }
    Ok((kernel, hca))
}
