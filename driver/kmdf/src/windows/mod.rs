//! The FFI layer: DriverEntry and the KMDF event callbacks on windows-drivers-rs.
//!
//! Type-checked and clippy-clean against windows-drivers-rs over the KMDF 1.33 headers
//! (../shared/wdk-kit, in CI); never linked or run: that needs Windows and the WDK
//! (docs/windows.md).
//! It is kept mechanical: each callback recovers the bus from the device context and calls
//! the tested logic in the core host (`hcabus::host::Bus`) and [`crate::device`]; the platform's Windows side is in
//! `platform.rs`, the C ABI's functions in `interface.rs`. Every unsafe block says why it is
//! sound.
#![allow(unsafe_code)]

mod interface;
mod io;
mod objects;
mod platform;

use wdk_sys::{
    call_unsafe_wdf_function_binding, NTSTATUS, PCUNICODE_STRING, PDRIVER_OBJECT, PWDFDEVICE_INIT,
    STATUS_INSUFFICIENT_RESOURCES, STATUS_SUCCESS, ULONG, WDFCMRESLIST, WDFDEVICE, WDFDRIVER,
    WDFQUEUE, WDFREQUEST, WDF_DRIVER_CONFIG, WDF_NO_HANDLE, WDF_NO_OBJECT_ATTRIBUTES,
    WDF_POWER_DEVICE_STATE,
};

use crate::device;
use crate::device::{prepare, BusConfig};
use hcabus::host::Bus;
use platform::WdfPlatform;

// Only in the abort build: with an unwinding profile lib.rs refuses to compile, and std's
// panic handler would clash with wdk-panic's before that message could be read.
#[cfg(all(not(test), panic = "abort"))]
extern crate wdk_panic;

#[cfg(all(not(test), panic = "abort"))]
#[global_allocator]
static GLOBAL_ALLOCATOR: wdk_alloc::WdkAllocator = wdk_alloc::WdkAllocator;

/// The FDO's context: the bus, once the hardware is prepared.
pub(crate) struct FdoContext {
    pub(crate) bus: Option<Bus<WdfPlatform>>,
    pub(crate) device: WDFDEVICE,
}

// SAFETY: "DriverEntry" is the symbol the kernel calls; nothing else in the driver exports it.
#[unsafe(export_name = "DriverEntry")]
pub extern "system" fn driver_entry(
    driver: PDRIVER_OBJECT,
    registry_path: PCUNICODE_STRING,
) -> NTSTATUS {
    platform::install_logger();
    let mut config = WDF_DRIVER_CONFIG {
        Size: core::mem::size_of::<WDF_DRIVER_CONFIG>() as ULONG,
        EvtDriverDeviceAdd: Some(evt_device_add),
        ..WDF_DRIVER_CONFIG::default()
    };
    // SAFETY: the driver object and registry path are the kernel's, valid for this call; the
    // config is initialised above and outlives the call.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDriverCreate,
            driver,
            registry_path,
            WDF_NO_OBJECT_ATTRIBUTES,
            &mut config,
            WDF_NO_HANDLE as *mut WDFDRIVER,
        )
    }
}

/// EvtDriverDeviceAdd: the FDO on the HCA's PCI function (PASSIVE_LEVEL).
extern "C" fn evt_device_add(_driver: WDFDRIVER, init: PWDFDEVICE_INIT) -> NTSTATUS {
    // SAFETY: `init` is KMDF's, valid until WdfDeviceCreate consumes it.
    let ids = unsafe { platform::pci_ids(init) };
    let setup = match device::device_add(ids.0, ids.1, platform::next_instance()) {
        Ok(s) => s,
        Err(e) => {
            log::error!("{e}");
            return wdk_sys::STATUS_NOT_SUPPORTED;
        }
    };
    // SAFETY: `init` is KMDF's; the setup strings live until the call returns (KMDF copies).
    unsafe { platform::create_fdo(init, &setup) }
}

/// IB ports of the adapters the driver takes (ConnectX-3 to -6 have two).
const PORTS: u8 = 2;

/// EvtDevicePrepareHardware (PASSIVE_LEVEL): the bus comes to life here, and every byte it
/// will use is allocated here.
extern "C" fn evt_prepare_hardware(
    device: WDFDEVICE,
    _raw: WDFCMRESLIST,
    translated: WDFCMRESLIST,
) -> NTSTATUS {
    // SAFETY: the context was allocated with the FDO and lives as long as it.
    let ctx = unsafe { platform::fdo_context(device) };
    // SAFETY: the translated resource list is KMDF's, valid for this callback.
    let platform = match unsafe { WdfPlatform::new(device, translated, PORTS) } {
        Ok(p) => p,
        Err(status) => return status,
    };
    let config = BusConfig {
        coordinator: platform.registry_config(),
        ports: PORTS,
    };
    match prepare(platform, config) {
        Ok(bus) => {
            ctx.bus = Some(bus);
            STATUS_SUCCESS
        }
        Err(e) => {
            log::error!("prepare hardware: {e}");
            STATUS_INSUFFICIENT_RESOURCES
        }
    }
}

/// EvtDeviceReleaseHardware: the bus goes, its registers are unmapped.
extern "C" fn evt_release_hardware(device: WDFDEVICE, _translated: WDFCMRESLIST) -> NTSTATUS {
    // SAFETY: as in evt_prepare_hardware.
    let ctx = unsafe { platform::fdo_context(device) };
    ctx.bus = None;
    STATUS_SUCCESS
}

extern "C" fn evt_surprise_removal(device: WDFDEVICE) {
    // SAFETY: as in evt_prepare_hardware.
    if let Some(bus) = unsafe { platform::fdo_context(device) }.bus.as_ref() {
        bus.surprise_removal();
    }
}

extern "C" fn evt_d0_exit(device: WDFDEVICE, target: WDF_POWER_DEVICE_STATE) -> NTSTATUS {
    // SAFETY: as in evt_prepare_hardware.
    if let Some(bus) = unsafe { platform::fdo_context(device) }.bus.as_ref() {
        bus.d0_exit(target == wdk_sys::_WDF_POWER_DEVICE_STATE::WdfPowerDeviceD3Final);
    }
    STATUS_SUCCESS
}

/// EvtIoDeviceControl of the control device's queue: METHOD_BUFFERED.
extern "C" fn evt_io_device_control(
    queue: WDFQUEUE,
    request: WDFREQUEST,
    output_length: usize,
    input_length: usize,
    code: ULONG,
) {
    // SAFETY: the queue and request are KMDF's for this callback; the buffers it returns are
    // the request's system buffer, valid until the request completes below.
    let status = unsafe {
        platform::with_request_buffers(
            queue,
            request,
            input_length,
            output_length,
            |bus, i, o, r| bus.device_control(code, i, o, r),
        )
    };
    // SAFETY: the request is ours to complete, once.
    unsafe { platform::complete(request, status) };
}

/// The delivery DPC, a WDFTIMER, the hardware work item: each finds the bus and calls it.
extern "C" fn evt_dpc(dpc: wdk_sys::WDFDPC) {
    // SAFETY: the DPC's parent is the FDO, whose context outlives it.
    if let Some(bus) = unsafe { platform::parent_context(objects::Child::Dpc(dpc)) }
        .bus
        .as_ref()
    {
        bus.dpc();
    }
}

extern "C" fn evt_work_item(item: wdk_sys::WDFWORKITEM) {
    // SAFETY: as in evt_dpc.
    if let Some(bus) = unsafe { platform::parent_context(objects::Child::WorkItem(item)) }
        .bus
        .as_ref()
    {
        bus.work_item();
    }
}

extern "C" fn evt_timer(timer: wdk_sys::WDFTIMER) {
    // SAFETY: the timer's context holds its TimerId, written at its creation.
    let id = unsafe { platform::timer_id(timer) };
    // SAFETY: the timer's parent is the FDO.
    let ctx = unsafe { platform::parent_context(objects::Child::Timer(timer)) };
    if let Some(bus) = ctx.bus.as_ref() {
        bus.timer_fired(id);
    }
}

/// EvtChildListCreateDevice: a raw PDO for one child function, with its hardware id, and the
/// bus interface published on it.
extern "C" fn evt_child_create_device(
    list: wdk_sys::WDFCHILDLIST,
    id: wdk_sys::PWDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER,
    init: PWDFDEVICE_INIT,
) -> NTSTATUS {
    // SAFETY: the child list is the FDO's default list, live while it creates children.
    let fdo = unsafe { call_unsafe_wdf_function_binding!(WdfChildListGetDevice, list) };
    let header = core::mem::size_of::<wdk_sys::WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER>();
    // SAFETY: the identification is the size the list was configured with: the header, then
    // the child's u32 serial.
    let serial_at = unsafe { id.cast::<u8>().add(header) }.cast::<u32>();
    // SAFETY: as above; the serial follows the header unaligned-safe.
    let serial = unsafe { serial_at.read_unaligned() };
    // SAFETY: `init` is KMDF's for this child; `fdo` is live while its children are created.
    unsafe { objects::create_pdo(init, fdo, serial) }
}
