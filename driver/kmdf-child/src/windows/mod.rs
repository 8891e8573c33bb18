//! The FFI layer: DriverEntry and the KMDF callbacks of the child's FDO, on windows-drivers-rs.
//! Each callback finds the FDO's context, steps [`crate::child::Child`] under the context's
//! spin lock, and carries out the step's action with the lock dropped. Every unsafe block
//! says why it is sound.
#![allow(unsafe_code)]

mod bus;
mod context;
mod io;

use wdk_sys::*;

use crate::abi::{Function, GUID_HCABUS_CHILD_INTERFACE};
use context::{attributes, ChildContext};

#[cfg(all(not(test), panic = "abort"))]
extern crate wdk_panic;

#[cfg(all(not(test), panic = "abort"))]
#[global_allocator]
static GLOBAL_ALLOCATOR: wdk_alloc::WdkAllocator = wdk_alloc::WdkAllocator;

/// `log` to DbgPrint.
fn install_logger() {
    struct DbgPrint;
    impl log::Log for DbgPrint {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &log::Record<'_>) {
            wdk::println!("hcabus-child: {} {}", record.level(), record.args());
        }
        fn flush(&self) {}
    }
    static LOGGER: DbgPrint = DbgPrint;
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
}

// SAFETY: "DriverEntry" is the symbol the kernel calls; nothing else in the driver exports it.
#[unsafe(export_name = "DriverEntry")]
pub extern "system" fn driver_entry(
    driver: PDRIVER_OBJECT,
    registry_path: PCUNICODE_STRING,
) -> NTSTATUS {
    install_logger();
    let mut config = WDF_DRIVER_CONFIG {
        Size: core::mem::size_of::<WDF_DRIVER_CONFIG>() as ULONG,
        EvtDriverDeviceAdd: Some(evt_device_add),
        ..WDF_DRIVER_CONFIG::default()
    };
    // SAFETY: the kernel's driver object and registry path, valid for this call; the config
    // outlives it.
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

/// The function the PDO is, from its first hardware id (`HCABUS\SRP`, `HCABUS\IPOIB&PORTn`):
/// the size is asked first, and at most 64 UTF-16 units are read (a longer id is no id of
/// this bus's). No pool: the buffer is on the stack.
///
/// # Safety
/// `init` is KMDF's WDFDEVICE_INIT for this add.
unsafe fn function_of(init: PWDFDEVICE_INIT) -> Result<Function, NTSTATUS> {
    let mut wide = [0u16; 64];
    let mut needed: ULONG = 0;
    // SAFETY: `init` is live; the buffer is writable for its length in bytes.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoInitQueryProperty,
            init,
            DEVICE_REGISTRY_PROPERTY::DevicePropertyHardwareID,
            core::mem::size_of_val(&wide) as ULONG,
            wide.as_mut_ptr().cast(),
            &mut needed,
        )
    };
    if status < 0 {
        // A PDO of the bus has one short id: too long a list is another device's.
        return Err(if status == STATUS_BUFFER_TOO_SMALL {
            STATUS_NOT_SUPPORTED
        } else {
            status
        });
    }
    let n = wide.iter().position(|c| *c == 0).unwrap_or(wide.len());
    let mut ascii = [0u8; 64];
    for (a, w) in ascii.iter_mut().zip(&wide[..n]) {
        *a = u8::try_from(*w).unwrap_or(b'?');
    }
    core::str::from_utf8(&ascii[..n])
        .ok()
        .and_then(Function::of_hardware_id)
        .ok_or(STATUS_NOT_SUPPORTED)
}

/// EvtDriverDeviceAdd (PASSIVE_LEVEL): the FDO on one of the bus's PDOs, its two queues, its
/// lock and its device interface.
extern "C" fn evt_device_add(_driver: WDFDRIVER, init: PWDFDEVICE_INIT) -> NTSTATUS {
    // SAFETY: `init` is KMDF's for this add.
    let function = match unsafe { function_of(init) } {
        Ok(f) => f,
        Err(s) => {
            log::error!("not a PDO of the hcabus bus this driver takes: {s:#x}");
            return s;
        }
    };
    let mut pnp = WDF_PNPPOWER_EVENT_CALLBACKS {
        Size: core::mem::size_of::<WDF_PNPPOWER_EVENT_CALLBACKS>() as ULONG,
        EvtDevicePrepareHardware: Some(evt_prepare_hardware),
        EvtDeviceReleaseHardware: Some(evt_release_hardware),
        ..WDF_PNPPOWER_EVENT_CALLBACKS::default()
    };
    // SAFETY: `init` is live; KMDF copies the callbacks.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceInitSetPnpPowerEventCallbacks, init, &mut pnp)
    };
    let mut device_attributes = attributes(core::ptr::null_mut(), true);
    let mut device: WDFDEVICE = core::ptr::null_mut();
    let mut init = init;
    // SAFETY: `init` is consumed on success; on failure KMDF frees it.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceCreate,
            &mut init,
            &mut device_attributes,
            &mut device
        )
    };
    if status < 0 {
        return status;
    }
    // SAFETY: the device was just created and is not yet started.
    match unsafe { create_children(device, function) } {
        Ok(()) => STATUS_SUCCESS,
        // KMDF deletes the device when device add fails.
        Err(s) => s,
    }
}

/// The FDO's lock, queues and context, and its device interface.
///
/// # Safety
/// `device` was just created with the child context, inside device add.
unsafe fn create_children(device: WDFDEVICE, function: Function) -> Result<(), NTSTATUS> {
    let mut lock: WDFSPINLOCK = core::ptr::null_mut();
    let mut lock_attributes = attributes(device.cast(), false);
    // SAFETY: the attributes (parent: the device) and the out-handle live for the call.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfSpinLockCreate, &mut lock_attributes, &mut lock)
    };
    check(s)?;
    // SAFETY: the device is live.
    let io_queue = unsafe { create_queue(device, false, io::evt_io_child_io) }?;
    // SAFETY: the device was just created with the context; nothing reaches it yet.
    if unsafe { ChildContext::init(device, function, io_queue, lock) }.is_none() {
        return Err(STATUS_INVALID_DEVICE_STATE);
    }
    // SAFETY: the device is live; its context is written before any request can come.
    unsafe { create_queue(device, true, io::evt_io_device_control) }?;
    let guid = kernel_guid(&GUID_HCABUS_CHILD_INTERFACE);
    // SAFETY: the device is live; the GUID outlives the call; no reference string.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceCreateDeviceInterface,
            device,
            &guid,
            core::ptr::null()
        )
    };
    check(s)
}

/// The ABI's GUID as the kernel's (the same four fields).
fn kernel_guid(g: &hcabus::bus_abi::Guid) -> GUID {
    GUID {
        Data1: g.data1,
        Data2: g.data2,
        Data3: g.data3,
        Data4: g.data4,
    }
}

fn check(status: NTSTATUS) -> Result<(), NTSTATUS> {
    if status < 0 {
        Err(status)
    } else {
        Ok(())
    }
}

/// A parallel queue: the default one (not power-managed, so the counters answer in D3) or
/// the I/O queue (power-managed: KMDF holds it outside D0 as the reset does).
///
/// # Safety
/// `device` is live, in device add.
unsafe fn create_queue(
    device: WDFDEVICE,
    default: bool,
    callback: extern "C" fn(WDFQUEUE, WDFREQUEST, usize, usize, ULONG),
) -> Result<WDFQUEUE, NTSTATUS> {
    let mut config = WDF_IO_QUEUE_CONFIG {
        Size: core::mem::size_of::<WDF_IO_QUEUE_CONFIG>() as ULONG,
        DispatchType: _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel,
        PowerManaged: if default {
            _WDF_TRI_STATE::WdfFalse
        } else {
            _WDF_TRI_STATE::WdfTrue
        },
        DefaultQueue: u8::from(default),
        EvtIoDeviceControl: Some(callback),
        ..WDF_IO_QUEUE_CONFIG::default()
    };
    // WDF_IO_QUEUE_CONFIG_INIT's value for a parallel queue: no limit. KMDF copies the field
    // as given, and at 0 a parallel queue presents no request at all (FxIoQueue's
    // m_MaxParallelQueuePresentedRequests).
    config.Settings.Parallel.NumberOfPresentedRequests = ULONG::MAX;
    let mut queue: WDFQUEUE = core::ptr::null_mut();
    // SAFETY: the device is live; the config outlives the call; the queue is the device's.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfIoQueueCreate,
            device,
            &mut config,
            WDF_NO_OBJECT_ATTRIBUTES,
            &mut queue
        )
    };
    check(s).map(|()| queue)
}

/// EvtDevicePrepareHardware (PASSIVE_LEVEL): the interface from the PDO, checked, then
/// Register. A start that fails here leaves nothing held: a refused interface is given back.
extern "C" fn evt_prepare_hardware(
    device: WDFDEVICE,
    _raw: WDFCMRESLIST,
    _translated: WDFCMRESLIST,
) -> NTSTATUS {
    // SAFETY: KMDF's live device, one of ours.
    let Some(ctx) = (unsafe { ChildContext::of(device) }) else {
        return STATUS_INVALID_DEVICE_STATE;
    };
    // SAFETY: the device is live, at PASSIVE_LEVEL.
    let iface = match unsafe { bus::query(device) } {
        Ok(iface) => iface,
        Err(s) => return s,
    };
    // SAFETY: before Register: no callback and no I/O reads it yet.
    unsafe { ctx.set_bus(iface) };
    // SAFETY: the context holds the interface just queried.
    match unsafe { bus::register(ctx) } {
        Ok(action) => {
            ctx.act(action);
            STATUS_SUCCESS
        }
        Err(s) => {
            // SAFETY: the query's reference, given back once; nothing registered reads it.
            unsafe { bus::dereference(&iface) };
            // SAFETY: no callback or I/O can read it (not registered).
            unsafe { ctx.set_bus(hcabus::bus_abi::HcabusBusInterfaceV1::EMPTY) };
            s
        }
    }
}

/// EvtDeviceReleaseHardware (PASSIVE_LEVEL, out of D0: the I/O queue dispatches nothing):
/// Unregister, which returns once no callback of this child runs or will start, then the
/// interface's reference given back. After a surprise removal of the bus both still happen:
/// the calls answer DEVICE_REMOVED, and the reference keeps the bus's context readable until
/// this dereference.
extern "C" fn evt_release_hardware(device: WDFDEVICE, _translated: WDFCMRESLIST) -> NTSTATUS {
    // SAFETY: KMDF's live device, one of ours.
    let Some(ctx) = (unsafe { ChildContext::of(device) }) else {
        return STATUS_SUCCESS;
    };
    let iface = ctx.bus();
    if iface.context.is_null() && iface.interface_dereference.is_none() {
        return STATUS_SUCCESS;
    }
    // SAFETY: the context holds the interface it registered with.
    unsafe { bus::unregister(ctx) };
    // SAFETY: the query's reference, given back once, after the last call.
    unsafe { bus::dereference(&iface) };
    // SAFETY: Unregister returned: no callback reads it; the I/O queue is held (out of D0).
    unsafe { ctx.set_bus(hcabus::bus_abi::HcabusBusInterfaceV1::EMPTY) };
    STATUS_SUCCESS
}
