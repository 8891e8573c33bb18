//! HCABUS_BUS_INTERFACE_V1 on each child PDO (WdfDeviceAddQueryInterface), its functions
//! bound to the FDO's bus. Type-checked against the KMDF 1.33 headers, never linked or run
//! (docs/windows.md). The Linux twin of these functions, over the threaded host, is
//! driver/capi/src/interface.rs, tested from C.

use core::ffi::c_void;

use hcabus::bus_abi::*;
use wdk_sys::*;

use super::platform::{fdo_context, WdfPlatform};
use super::FdoContext;
use hcabus::host::Bus;

/// The interface the PDO of a child publishes; `Context` is the FDO.
pub(crate) fn interface_for(fdo: WDFDEVICE) -> HcabusBusInterfaceV1 {
    // KMDF counts references on the PDO itself.
    interface(fdo.cast(), Some(reference_no_op), Some(reference_no_op))
}

/// Publishes the interface on a child's PDO.
///
/// # Safety
/// `pdo` is a PDO being created for `fdo`, at PASSIVE_LEVEL.
pub(crate) unsafe fn publish(pdo: WDFDEVICE, fdo: WDFDEVICE) -> NTSTATUS {
    let mut iface = interface_for(fdo);
    let mut config = WDF_QUERY_INTERFACE_CONFIG {
        Size: core::mem::size_of::<WDF_QUERY_INTERFACE_CONFIG>() as ULONG,
        Interface: (&mut iface as *mut HcabusBusInterfaceV1).cast(),
        InterfaceType: (&GUID_HCABUS_BUS_INTERFACE as *const Guid).cast(),
        SendQueryToParentStack: 0,
        ImportInterface: 0,
        EvtDeviceProcessQueryInterfaceRequest: None,
    };
    // SAFETY: KMDF copies the interface (of the size in its header) when a child asks.
    unsafe { call_unsafe_wdf_function_binding!(WdfDeviceAddQueryInterface, pdo, &mut config) }
}

unsafe extern "C" fn reference_no_op(_context: *mut c_void) {}

/// Runs a call on the bus of the FDO behind `context`; refuses a null context or a device
/// with no bus (never unwinds: the driver profile aborts on panic).
fn with_bus(
    context: *mut c_void,
    call: impl FnOnce(&Bus<WdfPlatform>) -> HcabusStatus,
) -> HcabusStatus {
    if context.is_null() {
        return status::INVALID_PARAMETER;
    }
    // SAFETY: the context is the FDO this interface was published for, which outlives its
    // children's PDOs and so every holder of the interface.
    let ctx: &FdoContext = unsafe { fdo_context(context.cast()) };
    match ctx.bus.as_ref() {
        Some(bus) => call(bus),
        None => status::of_refusal(hcabus::errors::RefusalCode::DeviceRemoved),
    }
}

// The interface's functions: the bus behind `Context`, then hcabus-cabi's marshalling.
hcabus_cabi::interface_functions!(with_bus, core::convert::identity);
