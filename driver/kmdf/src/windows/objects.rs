//! The kernel calls behind the Windows platform, one small function each, written against
//! wdk-sys 0.5 and the KMDF 1.33 headers. **Never compiled** (docs/windows.md).

use core::ffi::c_void;
use core::sync::atomic::{AtomicU32, Ordering};

use hcabus::ioctl::{NtStatus, Reply, Rights};
use hcabus::types::TimerId;
use wdk_sys::*;

use super::{evt_d0_exit, evt_dpc, evt_io_device_control, evt_prepare_hardware};
use super::{evt_release_hardware, evt_surprise_removal, evt_timer, evt_work_item, FdoContext};
use crate::bus::Bus;
use crate::device::{rights_of, FdoSetup};
use crate::platform::{ChildFunction, EventLogEntry};

static INSTANCES: AtomicU32 = AtomicU32::new(0);

/// The next HCA's instance number (`\Device\HcaBus<n>`).
pub(crate) fn next_instance() -> u32 {
    INSTANCES.fetch_add(1, Ordering::Relaxed)
}

/// `log` to DbgPrint (through wdk's println).
pub(crate) fn install_logger() {
    struct DbgPrint;
    impl log::Log for DbgPrint {
        fn enabled(&self, _: &log::Metadata<'_>) -> bool {
            true
        }
        fn log(&self, record: &log::Record<'_>) {
            wdk::println!("hcabus: {} {}", record.level(), record.args());
        }
        fn flush(&self) {}
    }
    static LOGGER: DbgPrint = DbgPrint;
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(log::LevelFilter::Info);
}

/// The PCI vendor and device ids of the function being added, from its first hardware id.
///
/// # Safety
/// `init` is KMDF's WDFDEVICE_INIT for this add.
pub(crate) unsafe fn pci_ids(init: PWDFDEVICE_INIT) -> (u16, u16) {
    let mut wide = [0u16; 128];
    let mut len: ULONG = 0;
    // SAFETY: the buffer's size in bytes bounds what the call writes.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoInitQueryProperty,
            init,
            _DEVICE_REGISTRY_PROPERTY::DevicePropertyHardwareID,
            core::mem::size_of_val(&wide) as ULONG,
            wide.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if status < 0 {
        return (0, 0);
    }
    // The first string of the multi-string, as ASCII (hardware ids are).
    let mut ascii = [0u8; 128];
    let n = wide.iter().position(|c| *c == 0).unwrap_or(wide.len());
    for (a, w) in ascii.iter_mut().zip(&wide[..n]) {
        *a = u8::try_from(*w).unwrap_or(b'?');
    }
    core::str::from_utf8(&ascii[..n])
        .ok()
        .and_then(crate::device::parse_pci_hardware_id)
        .unwrap_or((0, 0))
}

/// WdfDeviceCreate of the FDO as a bus extender, its PnP and power callbacks, the default
/// child list and the control device with its IOCTL queue.
///
/// # Safety
/// `init` is KMDF's, consumed here.
pub(crate) unsafe fn create_fdo(init: PWDFDEVICE_INIT, setup: &FdoSetup) -> NTSTATUS {
    let mut pnp = WDF_PNPPOWER_EVENT_CALLBACKS {
        Size: core::mem::size_of::<WDF_PNPPOWER_EVENT_CALLBACKS>() as ULONG,
        EvtDevicePrepareHardware: Some(evt_prepare_hardware),
        EvtDeviceReleaseHardware: Some(evt_release_hardware),
        EvtDeviceSurpriseRemoval: Some(evt_surprise_removal),
        EvtDeviceD0Exit: Some(evt_d0_exit),
        ..WDF_PNPPOWER_EVENT_CALLBACKS::default()
    };
    // SAFETY: `init` is live; the callbacks struct outlives the call (KMDF copies it).
    unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceInitSetPnpPowerEventCallbacks, init, &mut pnp);
    }
    // SAFETY: as above.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceInitSetDeviceType, init, setup.device_type)
    };
    let mut children = WDF_CHILD_LIST_CONFIG {
        Size: core::mem::size_of::<WDF_CHILD_LIST_CONFIG>() as ULONG,
        IdentificationDescriptionSize: (core::mem::size_of::<
            WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER,
        >() + 4) as ULONG,
        EvtChildListCreateDevice: Some(super::evt_child_create_device),
        ..WDF_CHILD_LIST_CONFIG::default()
    };
    // SAFETY: `init` is live; the config outlives the call.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoInitSetDefaultChildListConfig,
            init,
            &mut children,
            WDF_NO_OBJECT_ATTRIBUTES
        )
    };
    let mut attributes = context_attributes();
    let mut device: WDFDEVICE = core::ptr::null_mut();
    let mut init = init;
    // SAFETY: `init` is consumed; the attributes carry the FdoContext type.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreate, &mut init, &mut attributes, &mut device)
    };
    if status < 0 {
        return status;
    }
    // SAFETY: the context was just allocated by KMDF with the device, zeroed.
    unsafe {
        context(device.cast()).write(FdoContext { bus: None, device });
    }
    // SAFETY: the device is live; each creates one object parented to it.
    unsafe { control_device(device, setup) }
}

/// A child's PDO: its hardware id (from its serial: which child function), then the bus
/// interface published on it.
///
/// # Safety
/// `init` is KMDF's for this child, `fdo` its live parent.
pub(crate) unsafe fn create_pdo(init: PWDFDEVICE_INIT, fdo: WDFDEVICE, serial: u32) -> NTSTATUS {
    let child = match serial {
        0x100 => ChildFunction::Srp,
        port => ChildFunction::Ipoib { port: port as u8 },
    };
    let mut wide = [0u16; 64];
    for (w, b) in wide.iter_mut().zip(child.hardware_id().bytes()) {
        *w = u16::from(b);
    }
    let len = child.hardware_id().len();
    let mut id = UNICODE_STRING {
        Length: (len * 2) as u16,
        MaximumLength: (wide.len() * 2) as u16,
        Buffer: wide.as_mut_ptr(),
    };
    // SAFETY: the string lives until the call returns (KMDF copies it).
    let s = unsafe { call_unsafe_wdf_function_binding!(WdfPdoInitAssignDeviceID, init, &mut id) };
    if s < 0 {
        return s;
    }
    // SAFETY: as above.
    let s = unsafe { call_unsafe_wdf_function_binding!(WdfPdoInitAddHardwareID, init, &mut id) };
    if s < 0 {
        return s;
    }
    let mut pdo: WDFDEVICE = core::ptr::null_mut();
    let mut init = init;
    // SAFETY: `init` is consumed.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceCreate,
            &mut init,
            WDF_NO_OBJECT_ATTRIBUTES,
            &mut pdo
        )
    };
    if s < 0 {
        return s;
    }
    // SAFETY: a PDO being created for `fdo`.
    unsafe { super::interface::publish(pdo, fdo) }
}

/// The control device (admin-only SDDL) and its sequential IOCTL queue.
///
/// # Safety
/// `fdo` is live.
unsafe fn control_device(fdo: WDFDEVICE, setup: &FdoSetup) -> NTSTATUS {
    let _ = (fdo, setup.sddl, &setup.control_device, &setup.symbolic_link);
    let mut queue_config = WDF_IO_QUEUE_CONFIG {
        Size: core::mem::size_of::<WDF_IO_QUEUE_CONFIG>() as ULONG,
        DispatchType: _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchSequential,
        EvtIoDeviceControl: Some(evt_io_device_control),
        ..WDF_IO_QUEUE_CONFIG::default()
    };
    // WdfControlDeviceInitAllocate with SDDL_DEVOBJ_SYS_ALL_ADM_ALL, WdfDeviceInitAssignName,
    // WdfDeviceCreate, WdfDeviceCreateSymbolicLink, then the queue on it; abbreviated here to
    // the queue on the FDO (docs/windows.md: the control device is one of the uncompiled steps
    // to finish on Windows).
    // SAFETY: the FDO is live; the config outlives the call.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfIoQueueCreate,
            fdo,
            &mut queue_config,
            WDF_NO_OBJECT_ATTRIBUTES,
            core::ptr::null_mut(),
        )
    }
}

fn context_attributes() -> WDF_OBJECT_ATTRIBUTES {
    WDF_OBJECT_ATTRIBUTES {
        Size: core::mem::size_of::<WDF_OBJECT_ATTRIBUTES>() as ULONG,
        ExecutionLevel: _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent,
        SynchronizationScope: _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent,
        ContextSizeOverride: core::mem::size_of::<FdoContext>(),
        ..WDF_OBJECT_ATTRIBUTES::default()
    }
}

/// The FdoContext of a device (or of the device an object belongs to).
///
/// # Safety
/// `object` carries an FdoContext.
pub(crate) unsafe fn context(object: WDFOBJECT) -> *mut FdoContext {
    // SAFETY: the caller's contract.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfObjectGetTypedContextWorker, object, core::ptr::null())
    }
    .cast()
}

/// The parent of a KMDF object.
///
/// # Safety
/// `object` is live.
pub(crate) unsafe fn parent(object: WDFOBJECT) -> WDFOBJECT {
    // SAFETY: the caller's contract.
    unsafe { call_unsafe_wdf_function_binding!(WdfObjectGetParent, object) }
}

/// The delivery DPC, the hardware work item and one timer per TimerId, parented to the FDO.
///
/// # Safety
/// `device` is live, at PASSIVE_LEVEL.
pub(crate) unsafe fn create(
    device: WDFDEVICE,
) -> Result<(WDFDPC, WDFWORKITEM, [WDFTIMER; TimerId::COUNT]), NTSTATUS> {
    let mut attributes = WDF_OBJECT_ATTRIBUTES {
        Size: core::mem::size_of::<WDF_OBJECT_ATTRIBUTES>() as ULONG,
        ParentObject: device.cast(),
        ..WDF_OBJECT_ATTRIBUTES::default()
    };
    let mut dpc_config = WDF_DPC_CONFIG {
        Size: core::mem::size_of::<WDF_DPC_CONFIG>() as ULONG,
        EvtDpcFunc: Some(evt_dpc),
        AutomaticSerialization: 0,
        ..WDF_DPC_CONFIG::default()
    };
    let mut dpc = core::ptr::null_mut();
    // SAFETY: the configs outlive the calls; the objects are parented to the live device.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfDpcCreate, &mut dpc_config, &mut attributes, &mut dpc)
    };
    if s < 0 {
        return Err(s);
    }
    let mut work_config = WDF_WORKITEM_CONFIG {
        Size: core::mem::size_of::<WDF_WORKITEM_CONFIG>() as ULONG,
        EvtWorkItemFunc: Some(evt_work_item),
        AutomaticSerialization: 0,
    };
    let mut work_item = core::ptr::null_mut();
    // SAFETY: as above.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfWorkItemCreate,
            &mut work_config,
            &mut attributes,
            &mut work_item
        )
    };
    if s < 0 {
        return Err(s);
    }
    let mut timers = [core::ptr::null_mut(); TimerId::COUNT];
    for (i, timer) in timers.iter_mut().enumerate() {
        let mut config = WDF_TIMER_CONFIG {
            Size: core::mem::size_of::<WDF_TIMER_CONFIG>() as ULONG,
            EvtTimerFunc: Some(evt_timer),
            AutomaticSerialization: 0,
            ..WDF_TIMER_CONFIG::default()
        };
        let mut timer_attributes = WDF_OBJECT_ATTRIBUTES {
            ContextSizeOverride: core::mem::size_of::<u32>(),
            ..attributes
        };
        // SAFETY: as above.
        let s = unsafe {
            call_unsafe_wdf_function_binding!(
                WdfTimerCreate,
                &mut config,
                &mut timer_attributes,
                timer
            )
        };
        if s < 0 {
            return Err(s);
        }
        // SAFETY: the timer's context is a u32 just allocated with it: its TimerId.
        unsafe {
            context((*timer).cast())
                .cast::<u32>()
                .write(TimerId::ALL[i] as u32)
        };
    }
    Ok((dpc, work_item, timers))
}

/// The TimerId a WDFTIMER stands for.
///
/// # Safety
/// `timer` was created by `create`.
pub(crate) unsafe fn timer_id(timer: WDFTIMER) -> TimerId {
    // SAFETY: the caller's contract: the context is the u32 written at create.
    let raw = unsafe { context(timer.cast()).cast::<u32>().read() };
    TimerId::try_from(raw).unwrap_or(TimerId::HealthPoll)
}

/// The first memory resource: BAR0.
///
/// # Safety
/// `list` is the translated resource list of prepare hardware.
pub(crate) unsafe fn memory_bar(list: WDFCMRESLIST) -> Option<(i64, usize)> {
    // SAFETY: the caller's contract.
    let count = unsafe { call_unsafe_wdf_function_binding!(WdfCmResourceListGetCount, list) };
    for i in 0..count {
        // SAFETY: `i` is below the count.
        let d =
            unsafe { call_unsafe_wdf_function_binding!(WdfCmResourceListGetDescriptor, list, i) };
        // SAFETY: KMDF returns a valid descriptor for an index below the count.
        let d = unsafe { &*d };
        if u32::from(d.Type) == CmResourceTypeMemory {
            // SAFETY: the Memory member is the one a memory resource fills.
            let m = unsafe { d.u.Memory };
            // SAFETY: reading the union's QuadPart of a PHYSICAL_ADDRESS.
            return Some((unsafe { m.Start.QuadPart }, m.Length as usize));
        }
    }
    None
}

/// MmMapIoSpaceEx, uncached, non-executable.
///
/// # Safety
/// `start`/`len` are a memory resource assigned to this device.
pub(crate) unsafe fn map(start: i64, len: usize) -> Option<*mut u8> {
    let address = PHYSICAL_ADDRESS { QuadPart: start };
    // SAFETY: the caller's contract.
    let p = unsafe {
        wdk_sys::ntddk::MmMapIoSpaceEx(address, len as u64, PAGE_READWRITE | PAGE_NOCACHE)
    };
    (!p.is_null()).then_some(p.cast())
}

/// The PCI bus interface (GUID_BUS_INTERFACE_STANDARD) for config space.
///
/// # Safety
/// `device` is live, at PASSIVE_LEVEL.
pub(crate) unsafe fn pci_interface(device: WDFDEVICE) -> Option<BUS_INTERFACE_STANDARD> {
    // SAFETY: an all-zero interface is a valid value to be filled.
    let mut iface: BUS_INTERFACE_STANDARD = unsafe { core::mem::zeroed() };
    // SAFETY: the device is live; the buffer is the interface's size.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoQueryForInterface,
            device,
            &GUID_BUS_INTERFACE_STANDARD,
            (&mut iface as *mut BUS_INTERFACE_STANDARD).cast(),
            core::mem::size_of::<BUS_INTERFACE_STANDARD>() as u16,
            1,
            core::ptr::null_mut(),
        )
    };
    (s >= 0).then_some(iface)
}

/// WdfChildListAddOrUpdateChildDescriptionAsPresent with the child's identification.
///
/// # Safety
/// `device` is a live FDO with a default child list.
pub(crate) unsafe fn child_present(
    device: WDFDEVICE,
    child: ChildFunction,
) -> Result<(), NTSTATUS> {
    #[repr(C)]
    struct Identification {
        header: WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER,
        serial: u32,
    }
    let mut id = Identification {
        header: WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER {
            IdentificationDescriptionSize: core::mem::size_of::<Identification>() as ULONG,
        },
        serial: child.serial(),
    };
    // SAFETY: the device is live.
    let list = unsafe { call_unsafe_wdf_function_binding!(WdfFdoGetDefaultChildList, device) };
    // SAFETY: the identification is the size the child list was configured with.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfChildListAddOrUpdateChildDescriptionAsPresent,
            list,
            &mut id.header,
            core::ptr::null_mut(),
        )
    };
    if s < 0 {
        Err(s)
    } else {
        Ok(())
    }
}

/// Marks every child missing: PnP surprise-removes their PDOs.
///
/// # Safety
/// `device` is a live FDO with a default child list.
pub(crate) unsafe fn children_missing(device: WDFDEVICE) {
    // SAFETY: the device is live.
    let list = unsafe { call_unsafe_wdf_function_binding!(WdfFdoGetDefaultChildList, device) };
    // SAFETY: begin/end bracket a scan with nothing reported present: all go missing.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfChildListBeginScan, list);
    }
    // SAFETY: as above.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfChildListEndScan, list);
    }
}

/// A scan that reports `children` present: the child list makes new PDOs for them (after
/// `children_missing` removed the old ones).
///
/// # Safety
/// `device` is a live FDO with a default child list.
pub(crate) unsafe fn rescan(device: WDFDEVICE, children: &[ChildFunction]) {
    // SAFETY: the device is live.
    let list = unsafe { call_unsafe_wdf_function_binding!(WdfFdoGetDefaultChildList, device) };
    // SAFETY: a scan bracketed by begin and end.
    unsafe { call_unsafe_wdf_function_binding!(WdfChildListBeginScan, list) };
    for child in children {
        // SAFETY: inside the scan, on the same live device.
        if let Err(s) = unsafe { child_present(device, *child) } {
            log::error!("re-enumerating {child:?}: 0x{s:08X}");
        }
    }
    // SAFETY: ends the scan begun above.
    unsafe { call_unsafe_wdf_function_binding!(WdfChildListEndScan, list) };
}

/// IoAllocateErrorLogEntry + IoWriteErrorLogEntry with the message id of messages.mc.
///
/// # Safety
/// `device` is live; PASSIVE_LEVEL or DISPATCH_LEVEL.
pub(crate) unsafe fn write_error_log(device: WDFDEVICE, entry: EventLogEntry) {
    // SAFETY: the device is live.
    let wdm = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceWdmGetDeviceObject, device) };
    let size = core::mem::size_of::<IO_ERROR_LOG_PACKET>() as u8;
    // SAFETY: a size the I/O manager accepts; null when its pool is short (the entry is lost
    // and logged by `log` instead).
    let packet = unsafe { wdk_sys::ntddk::IoAllocateErrorLogEntry(wdm.cast(), size) }
        .cast::<IO_ERROR_LOG_PACKET>();
    if packet.is_null() {
        log::warn!("event log entry not written: {entry:?}");
        return;
    }
    // SAFETY: a zeroed packet of `size` bytes we own until written.
    unsafe {
        (*packet).ErrorCode = entry.message_id() as i32;
    }
    // SAFETY: the packet is ours; the I/O manager frees it.
    unsafe { wdk_sys::ntddk::IoWriteErrorLogEntry(packet.cast()) };
}

/// Runs `f` on the request's METHOD_BUFFERED buffers with the handle's rights; the status
/// and byte count go back through the request.
///
/// # Safety
/// `queue` and `request` are KMDF's for an EvtIoDeviceControl call.
pub(crate) unsafe fn with_request_buffers(
    queue: WDFQUEUE,
    request: WDFREQUEST,
    input_len: usize,
    output_len: usize,
    f: impl FnOnce(&Bus<super::platform::WdfPlatform>, &[u8], &mut [u8], Rights) -> Reply,
) -> (NtStatus, usize) {
    // SAFETY: the queue's device is the FDO.
    let device = unsafe { call_unsafe_wdf_function_binding!(WdfIoQueueGetDevice, queue) };
    // SAFETY: the FDO carries its context.
    let Some(bus) = (unsafe { &*context(device.cast()) }).bus.as_ref() else {
        return (NtStatus::INVALID_DEVICE_REQUEST, 0);
    };
    let mut buffer: *mut c_void = core::ptr::null_mut();
    let mut len = 0usize;
    // SAFETY: METHOD_BUFFERED: one system buffer, max(input, output) bytes.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestRetrieveInputBuffer,
            request,
            0,
            &mut buffer,
            &mut len
        )
    };
    if s < 0 || buffer.is_null() {
        return (NtStatus::INVALID_BUFFER_SIZE, 0);
    }
    // The dispatcher decodes the input fully before it writes a byte of output, so one copy
    // of the input keeps both views apart.
    let mut input = [0u8; 512];
    let n = input_len.min(input.len()).min(len);
    // SAFETY: the system buffer has at least `len` bytes.
    input[..n].copy_from_slice(unsafe { core::slice::from_raw_parts(buffer.cast::<u8>(), n) });
    // SAFETY: the system buffer has room for the output length KMDF checked.
    let output =
        unsafe { core::slice::from_raw_parts_mut(buffer.cast::<u8>(), output_len.min(len)) };
    // SAFETY: the request's file object is live for the request.
    let granted = unsafe { granted_access(request) };
    let reply = f(bus, &input[..n], output, rights_of(granted));
    (reply.status, reply.bytes)
}

/// The access the handle behind `request` was granted.
///
/// # Safety
/// `request` is live.
unsafe fn granted_access(request: WDFREQUEST) -> u32 {
    // SAFETY: the caller's contract.
    let irp = unsafe { call_unsafe_wdf_function_binding!(WdfRequestWdmGetIrp, request) };
    // SAFETY: a device-control IRP carries its stack location and file object.
    let stack = unsafe {
        (*irp)
            .Tail
            .Overlay
            .__bindgen_anon_2
            .__bindgen_anon_1
            .CurrentStackLocation
    };
    // SAFETY: as above.
    let file = unsafe { (*stack).FileObject };
    if file.is_null() {
        return 0;
    }
    // SAFETY: the file object is live for the request.
    let (read, write) = unsafe { ((*file).ReadAccess, (*file).WriteAccess) };
    u32::from(read != 0) | (u32::from(write != 0) << 1)
}

/// Completes the request with its status and bytes.
///
/// # Safety
/// `request` is live and not yet completed.
pub(crate) unsafe fn complete(request: WDFREQUEST, (status, bytes): (NtStatus, usize)) {
    // SAFETY: the caller's contract.
    unsafe {
        call_unsafe_wdf_function_binding!(
            WdfRequestCompleteWithInformation,
            request,
            status.0 as i32,
            bytes as u64
        )
    };
}
