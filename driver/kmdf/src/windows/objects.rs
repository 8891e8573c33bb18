//! The kernel calls behind the Windows platform, one small function each, written against
//! wdk-sys 0.5 and the KMDF 1.33 headers, against which it is type-checked; never linked or
//! run (docs/windows.md).

use core::sync::atomic::{AtomicU32, Ordering};

use hcabus::types::TimerId;
use wdk_sys::*;

use super::{evt_d0_exit, evt_dpc, evt_io_device_control, evt_prepare_hardware};
use super::{evt_release_hardware, evt_surprise_removal, evt_timer, evt_work_item, FdoContext};
use crate::device::FdoSetup;
use crate::platform::ChildFunction;

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
            DEVICE_REGISTRY_PROPERTY::DevicePropertyHardwareID,
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
    // SAFETY: the device was just created with an FdoContext.
    let slot = unsafe { context(device.cast()) };
    // SAFETY: the context was just allocated by KMDF with the device, zeroed: written once.
    unsafe { slot.write(FdoContext { bus: None, device }) };
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

/// `text` as a UNICODE_STRING over `buffer` (ASCII text: names, SDDL).
fn unicode(text: &str, buffer: &mut [u16; 128]) -> UNICODE_STRING {
    let n = text.len().min(buffer.len());
    for (w, b) in buffer.iter_mut().zip(text.bytes()) {
        *w = u16::from(b);
    }
    UNICODE_STRING {
        Length: (n * 2) as u16,
        MaximumLength: (buffer.len() * 2) as u16,
        Buffer: buffer.as_mut_ptr(),
    }
}

/// The control device: admin-only SDDL, `\Device\HcaBus<n>` and its symbolic link, a
/// sequential IOCTL queue. Its context names the FDO, whose bus serves the requests.
///
/// # Safety
/// `fdo` is live, at PASSIVE_LEVEL.
unsafe fn control_device(fdo: WDFDEVICE, setup: &FdoSetup) -> NTSTATUS {
    let (mut sddl_buf, mut name_buf, mut link_buf) = ([0u16; 128], [0u16; 128], [0u16; 128]);
    let sddl = unicode(setup.sddl, &mut sddl_buf);
    let mut name = unicode(&setup.control_device, &mut name_buf);
    let mut link = unicode(&setup.symbolic_link, &mut link_buf);
    // SAFETY: the FDO is live.
    let driver = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceGetDriver, fdo) };
    // SAFETY: the SDDL string lives for the call; KMDF copies it.
    let mut init =
        unsafe { call_unsafe_wdf_function_binding!(WdfControlDeviceInitAllocate, driver, &sddl) };
    if init.is_null() {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    // SAFETY: `init` is ours until WdfDeviceCreate; the name lives for the call.
    let s = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitAssignName, init, &mut name) };
    if s < 0 {
        // SAFETY: not consumed by a create: freed here, once.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
        return s;
    }
    let mut attributes = context_attributes();
    let mut control: WDFDEVICE = core::ptr::null_mut();
    // SAFETY: `init` is consumed (and freed by KMDF on failure).
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreate, &mut init, &mut attributes, &mut control)
    };
    if s < 0 {
        return s;
    }
    // SAFETY: the control device was just created with an FdoContext.
    let slot = unsafe { context(control.cast()) };
    // SAFETY: allocated with the control device, written once; it names the FDO.
    unsafe {
        slot.write(FdoContext {
            bus: None,
            device: fdo,
        })
    };
    // SAFETY: the control device is live; the link lives for the call.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreateSymbolicLink, control, &mut link)
    };
    if s < 0 {
        return s;
    }
    let mut queue_config = WDF_IO_QUEUE_CONFIG {
        Size: core::mem::size_of::<WDF_IO_QUEUE_CONFIG>() as ULONG,
        DispatchType: _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchSequential,
        DefaultQueue: 1,
        EvtIoDeviceControl: Some(evt_io_device_control),
        ..WDF_IO_QUEUE_CONFIG::default()
    };
    // SAFETY: the control device is live; the config outlives the call.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfIoQueueCreate,
            control,
            &mut queue_config,
            WDF_NO_OBJECT_ATTRIBUTES,
            core::ptr::null_mut(),
        )
    };
    if s < 0 {
        return s;
    }
    // SAFETY: the control device is fully set up.
    unsafe { call_unsafe_wdf_function_binding!(WdfControlFinishInitializing, control) };
    STATUS_SUCCESS
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

/// The object a DPC, work item or timer was created under (KMDF has no generic
/// `WdfObjectGetParent`: each object type has its own `Get...ParentObject`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Child {
    Dpc(WDFDPC),
    WorkItem(WDFWORKITEM),
    Timer(WDFTIMER),
}

/// The parent of a DPC, work item or timer.
///
/// # Safety
/// The object is live.
pub(crate) unsafe fn parent(object: Child) -> WDFOBJECT {
    match object {
        // SAFETY: the caller's contract.
        Child::Dpc(dpc) => unsafe { call_unsafe_wdf_function_binding!(WdfDpcGetParentObject, dpc) },
        Child::WorkItem(item) => {
            // SAFETY: the caller's contract.
            unsafe { call_unsafe_wdf_function_binding!(WdfWorkItemGetParentObject, item) }
        }
        Child::Timer(timer) => {
            // SAFETY: the caller's contract.
            unsafe { call_unsafe_wdf_function_binding!(WdfTimerGetParentObject, timer) }
        }
    }
}

/// GUID_BUS_INTERFACE_STANDARD of wdmguid.h, which wdk-sys does not bind:
/// {496B8280-6F25-11D0-BEAF-08002BE2092F}.
const GUID_BUS_INTERFACE_STANDARD: GUID = GUID {
    Data1: 0x496B_8280,
    Data2: 0x6F25,
    Data3: 0x11D0,
    Data4: [0xBE, 0xAF, 0x08, 0x00, 0x2B, 0xE2, 0x09, 0x2F],
};

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
        // SAFETY: the timer was just created with a u32 context.
        let slot = unsafe { context((*timer).cast()) }.cast::<u32>();
        // SAFETY: the u32 just allocated with the timer: its TimerId, written once.
        unsafe { slot.write(TimerId::ALL[i] as u32) };
    }
    Ok((dpc, work_item, timers))
}

/// The TimerId a WDFTIMER stands for.
///
/// # Safety
/// `timer` was created by `create`.
pub(crate) unsafe fn timer_id(timer: WDFTIMER) -> TimerId {
    // SAFETY: the caller's contract: the timer carries a u32 context.
    let slot = unsafe { context(timer.cast()) }.cast::<u32>();
    // SAFETY: the u32 written at create.
    let raw = unsafe { slot.read() };
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
