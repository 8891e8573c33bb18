//! HCABUS_BUS_INTERFACE_V1 on each child PDO (WdfDeviceAddQueryInterface), its functions bound to
//! the FDO's bus. Type-checked against the KMDF 1.33 headers and run on the KMDF model
//! (hcabus-kmdf-model); linked and its image run there too (docs/windows.md). The Linux twin of
//! these functions, over the threaded host, is driver/capi/src/interface.rs, tested from C.

use core::ffi::c_void;

use hcabus::bus_abi::*;
use wdk_sys::*;

use super::context::{context, FdoContext, FDO_CONTEXT};
use super::defects::{planted, Defect};
use super::wdf_platform::WdfPlatform;
use hcabus::host::Bus;

/// The interface the PDO of a child publishes; `Context` is the FDO. KMDF calls
/// `InterfaceReference` for each child that queries it, and the child calls
/// `InterfaceDereference` when it lets go: each holds a reference on the FDO object, so the
/// context `with_bus` reads stays allocated for as long as any child can call (after the
/// FDO is gone the calls are refused, DEVICE_REMOVED).
pub(crate) fn interface_for(fdo: WDFDEVICE) -> HcabusBusInterfaceV1 {
    interface(fdo.cast(), Some(reference), Some(dereference))
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

/// The tag of the FDO references the interface's holders take (shown by !wdfhandle).
static INTERFACE_TAG: u8 = 0;

unsafe extern "C" fn reference(context: *mut c_void) {
    if context.is_null() {
        return;
    }
    // SAFETY: the context is the FDO, live while a child can query its PDO's interface.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfObjectReferenceActual,
            context.cast(),
            (&INTERFACE_TAG as *const u8).cast_mut().cast(),
            line!() as LONG,
            c"interface.rs".as_ptr()
        )
    };
}

unsafe extern "C" fn dereference(context: *mut c_void) {
    if context.is_null() {
        return;
    }
    // SAFETY: gives back a reference `reference` took (the holder's contract).
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfObjectDereferenceActual,
            context.cast(),
            (&INTERFACE_TAG as *const u8).cast_mut().cast(),
            line!() as LONG,
            c"interface.rs".as_ptr()
        )
    };
}

/// How long a child's call at PASSIVE_LEVEL waits for a stopped bus to start again (a
/// rebalance's stop and start take milliseconds; a start that fails ends in removal).
const STOPPED_WAIT_MS: u32 = 30_000;

/// Runs a call on the bus of the FDO behind `context`; refuses a null context, and a device
/// removed (DEVICE_REMOVED). Between a PnP stop and the next start (a rebalance) the bus is
/// parked: a call at PASSIVE_LEVEL waits for the start, so that a child sees a rebalance as
/// nothing (its unregister then runs down on the resumed bus); at DISPATCH_LEVEL, or past
/// STOPPED_WAIT_MS, it is answered DEVICE_BUSY, to be asked again. Never unwinds: the
/// driver profile aborts on panic.
fn with_bus(
    context_: *mut c_void,
    call: impl FnOnce(&Bus<WdfPlatform>) -> HcabusStatus,
) -> HcabusStatus {
    if context_.is_null() {
        return status::INVALID_PARAMETER;
    }
    // SAFETY: the context is the FDO this interface was published for; the holder's
    // reference keeps its object (and so its context) allocated.
    let Some(ctx) = (unsafe { context::<FdoContext>(context_.cast(), &FDO_CONTEXT) }) else {
        return status::INVALID_PARAMETER;
    };
    let mut call = call;
    let started = WdfPlatform::interrupt_time();
    loop {
        let order = core::sync::atomic::Ordering::Acquire;
        let starts = ctx.starts.load(order);
        match ctx.with_bus_or(call) {
            Ok(status) => return status,
            Err(back) => call = back,
        }
        if ctx.removed.load(order) {
            return status::of_refusal(hcabus::errors::RefusalCode::DeviceRemoved);
        }
        if !ctx.stopped.load(order) {
            // Not stopped: either never started or released for good (removed), or a start
            // let callers in after this one was refused. Then it tries again: as often as
            // starts come, which PnP serialises.
            if ctx.starts.load(order) != starts && !planted(Defect::StartMissedAfterRefusal) {
                continue;
            }
            return status::of_refusal(hcabus::errors::RefusalCode::DeviceRemoved);
        }
        // SAFETY: callable at any IRQL.
        let passive = unsafe { wdk_sys::ntddk::KeGetCurrentIrql() } == 0;
        // Time elapsed, not the sleeps counted: each 10 ms sleep lasts to the next tick.
        let waited = WdfPlatform::interrupt_time().saturating_since(started);
        if !passive || waited.as_ms() >= u64::from(STOPPED_WAIT_MS) {
            return status::DEVICE_BUSY;
        }
        WdfPlatform::sleep_ms(10);
    }
}

// The interface's functions: the bus behind `Context`, then hcabus-cabi's marshalling.
hcabus_cabi::interface_functions!(with_bus, core::convert::identity);
