//! Special files: WdfDeviceSetSpecialFileSupport and the PnP manager's
//! IRP_MN_DEVICE_USAGE_NOTIFICATION, as KMDF handles it (fxpkgpnp.cpp,
//! FxPkgPnp::PnpDeviceUsageNotification): a device in the notification's path that does
//! not support the file type fails it STATUS_NOT_IMPLEMENTED; a PDO first sends it to its
//! parent's stack (the FDO here) and fails with it; then the driver's
//! EvtDeviceUsageNotificationEx decides, and a PDO's failure reverts its parent.

use wdk_sys::*;

use super::driver::DriverFn;
use super::kernel::{Handle, Kernel, Kind, Role};
use super::machine::at;
use super::{violation, with, Rule, DISPATCH, PASSIVE};

/// One notification a device answered: (device, file type, in path, status).
pub(crate) type Notified = (Handle, WDF_SPECIAL_FILE_TYPE, bool, NTSTATUS);

pub(crate) unsafe extern "C" fn WdfDeviceSetSpecialFileSupport(
    _: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
    file: WDF_SPECIAL_FILE_TYPE,
    supported: BOOLEAN,
) {
    const DDI: &str = "WdfDeviceSetSpecialFileSupport";
    let _kernel = super::enter(DDI, DISPATCH);
    use _WDF_SPECIAL_FILE_TYPE::*;
    if file < WdfSpecialFilePaging || file == WdfSpecialFilePostDisplay || file >= WdfSpecialFileMax
    {
        // fxdeviceapikm.cpp: FxVerifierDbgBreakPoint, and nothing set.
        violation(
            Rule::SpecialFileType,
            DDI,
            &format!("file type {file} is not one a device can support"),
        );
    }
    with(|k| match &mut k.live(DDI, device.cast()).kind {
        Kind::Device(d) if supported != 0 => d.special_files |= 1 << file,
        Kind::Device(d) => d.special_files &= !(1 << file),
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    });
}

/// IRP_MN_DEVICE_USAGE_NOTIFICATION on `device` (a PDO or the FDO), as KMDF answers it.
pub(crate) fn notify(device: Handle, file: WDF_SPECIAL_FILE_TYPE, in_path: bool) -> NTSTATUS {
    let (supported, role, parent, callback) = with(|k| {
        let parent = bus_of(k, device);
        let d = k.device(device);
        (
            d.special_files & (1 << file) != 0,
            d.role,
            parent,
            d.pnp.EvtDeviceUsageNotificationEx,
        )
    });
    if in_path && !supported {
        return record(device, file, in_path, STATUS_NOT_IMPLEMENTED);
    }
    let parent = if role == Role::Pdo { parent } else { None };
    if let Some(p) = parent {
        let status = notify(p, file, in_path);
        if status < 0 {
            return record(device, file, in_path, status);
        }
    }
    let status = callback.map_or(STATUS_SUCCESS, |f| {
        // SAFETY: the driver's callback for its device, at PASSIVE_LEVEL as KMDF calls it.
        at("EvtDeviceUsageNotificationEx", PASSIVE, || unsafe {
            f.run((device as WDFDEVICE, file, BOOLEAN::from(in_path)))
        })
    });
    if status < 0 && in_path {
        if let Some(p) = parent {
            notify(p, file, false);
        }
    }
    record(device, file, in_path, status)
}

/// The FDO whose child list holds the PDO `device` (its parent device in KMDF's terms).
fn bus_of(k: &Kernel, device: Handle) -> Option<Handle> {
    k.objects.iter().find_map(|o| match &o.kind {
        Kind::ChildList {
            device: fdo,
            children,
            ..
        } if !o.deleted && children.iter().any(|c| c.pdo == Some(device)) => Some(*fdo),
        _ => None,
    })
}

fn record(device: Handle, file: WDF_SPECIAL_FILE_TYPE, in_path: bool, s: NTSTATUS) -> NTSTATUS {
    with(|k| {
        k.usage.push((device, file, in_path, s));
        if s >= 0 {
            let count = &mut k.device(device).special_use[file as usize % 8];
            *count = if in_path {
                *count + 1
            } else {
                count.saturating_sub(1)
            };
        }
    });
    s
}

/// IRP_MN_QUERY_STOP_DEVICE or IRP_MN_QUERY_REMOVE_DEVICE, as KMDF answers it for a device
/// with no EvtDeviceQueryStop/Remove (pnpstatemachine.cpp): refused
/// STATUS_DEVICE_NOT_READY while a special file is on its path, else accepted.
pub(crate) fn query_stop_or_remove(device: Handle) -> NTSTATUS {
    with(|k| {
        if k.device(device).special_use.iter().any(|&n| n > 0) {
            STATUS_DEVICE_NOT_READY
        } else {
            STATUS_SUCCESS
        }
    })
}
