//! The driver's devices: the FDO of each HCA, its control device and its children's PDOs, as
//! KMDF creates them. Type-checked against the KMDF 1.33 headers and run on the KMDF model
//! (hcabus-kmdf-model); linked and its image run there too (docs/windows.md).

use core::sync::atomic::Ordering;

use wdk_sys::*;

use super::children;
use super::context::{attributes, context, init_context, ControlContext, FdoContext};
use super::context::{CONTROL_CONTEXT, FDO_CONTEXT};
use super::defects::{planted, Defect};
use super::shared::AtomicU64;
use super::{evt_d0_entry, evt_d0_exit, evt_io_device_control, evt_prepare_hardware};
use super::{evt_release_hardware, evt_surprise_removal, evt_usage_notification};
use crate::device::FdoSetup;
use crate::kernel::ChildFunction;

/// The control-device numbers in use (bit n: `\Device\HcaBus<n>`). The lowest free one is
/// taken at device add, and given back when the FDO's memory goes (after its control
/// device's: that holds a reference on the FDO while a handle is open, and a new adapter
/// must not take a name still in the object directory). So the first adapter is `HcaBus0`
/// across disable and enable with the driver loaded, which is where hcactl looks by default,
/// and every name is one of the 64 hcactl searches.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// A fresh image's statics, as Windows loads the driver: the KMDF model boots the driver
/// more than once in a process (hcabus-kmdf-model's `schedule.rs`, a machine per schedule), and
/// calls this through `lab::image_loaded`.
#[cfg(wdk_fake)]
pub(crate) fn image_loaded() {
    INSTANCES.store(0, Ordering::Relaxed);
}

/// The lowest control-device number free, now taken; `None` with 64 adapters already named.
pub(crate) fn claim_instance() -> Option<u32> {
    let mut used = INSTANCES.load(Ordering::Acquire);
    loop {
        let n = (!used).trailing_zeros();
        if n >= u64::BITS {
            return None;
        }
        match INSTANCES.compare_exchange_weak(
            used,
            used | 1 << n,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => return Some(n),
            Err(seen) => used = seen,
        }
    }
}

/// Gives back a number [`claim_instance`] took.
pub(crate) fn release_instance(n: u32) {
    if planted(Defect::NamesDrift) {
        return;
    }
    INSTANCES.fetch_and(!(1u64 << (n % u64::BITS)), Ordering::AcqRel);
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
/// A PCI function reports several ids (four for a ConnectX: about 270 bytes), and KMDF
/// writes nothing into a buffer too small for all of them, so the size is asked first and
/// the buffer taken from pool for it; pool that cannot be had is
/// STATUS_INSUFFICIENT_RESOURCES, not a bugcheck.
///
/// # Safety
/// `init` is KMDF's WDFDEVICE_INIT for this add.
pub(crate) unsafe fn pci_ids(init: PWDFDEVICE_INIT) -> Result<(u16, u16), NTSTATUS> {
    let query = |length: ULONG, buffer: PVOID, needed: &mut ULONG| {
        // SAFETY: `buffer` is NULL with a zero length, or `length` writable bytes.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfFdoInitQueryProperty,
                init,
                DEVICE_REGISTRY_PROPERTY::DevicePropertyHardwareID,
                length,
                buffer,
                needed,
            )
        }
    };
    let mut needed: ULONG = 0;
    let mut fixed = [0u16; 128];
    let status = if planted(Defect::FixedIdBuffer) {
        needed = core::mem::size_of_val(&fixed) as ULONG;
        STATUS_SUCCESS
    } else {
        query(0, core::ptr::null_mut(), &mut needed)
    };
    if status != STATUS_BUFFER_TOO_SMALL && !planted(Defect::FixedIdBuffer) {
        // No id at all: nothing to match against the ids this driver takes.
        return Err(if status < 0 {
            status
        } else {
            STATUS_NOT_SUPPORTED
        });
    }
    let mut pooled = alloc::vec::Vec::new();
    let wide: &mut [u16] = if planted(Defect::FixedIdBuffer) {
        &mut fixed
    } else {
        let units = (needed as usize).div_ceil(2);
        pooled
            .try_reserve_exact(units)
            .map_err(|_| STATUS_INSUFFICIENT_RESOURCES)?;
        pooled.resize(units, 0u16);
        &mut pooled
    };
    let length = core::mem::size_of_val(wide) as ULONG;
    let status = query(length, wide.as_mut_ptr().cast(), &mut needed);
    if status < 0 {
        return Err(status);
    }
    // The first string of the multi-string, as ASCII (hardware ids are).
    let mut ascii = [0u8; 128];
    let n = wide.iter().position(|c| *c == 0).unwrap_or(wide.len());
    let n = n.min(ascii.len());
    for (a, w) in ascii.iter_mut().zip(&wide[..n]) {
        *a = u8::try_from(*w).unwrap_or(b'?');
    }
    Ok(core::str::from_utf8(&ascii[..n])
        .ok()
        .and_then(crate::device::parse_pci_hardware_id)
        .unwrap_or((0, 0)))
}

/// WdfDeviceCreate of the FDO as a bus extender, its PnP and power callbacks, the default
/// child list and the control device with its IOCTL queue.
///
/// # Safety
/// `init` is KMDF's for this EvtDriverDeviceAdd: KMDF frees it whatever happens.
/// `setup.instance` is the FDO's from here: given back here if no FDO is made, else when
/// its memory goes.
pub(crate) unsafe fn create_fdo(init: PWDFDEVICE_INIT, setup: &FdoSetup) -> NTSTATUS {
    let mut pnp = WDF_PNPPOWER_EVENT_CALLBACKS {
        Size: core::mem::size_of::<WDF_PNPPOWER_EVENT_CALLBACKS>() as ULONG,
        EvtDevicePrepareHardware: Some(evt_prepare_hardware),
        EvtDeviceReleaseHardware: Some(evt_release_hardware),
        EvtDeviceSurpriseRemoval: Some(evt_surprise_removal),
        EvtDeviceD0Entry: Some(evt_d0_entry),
        EvtDeviceD0Exit: Some(evt_d0_exit),
        EvtDeviceUsageNotificationEx: Some(evt_usage_notification),
        EvtDeviceQueryStop: Some(super::evt_query_stop),
        EvtDeviceSelfManagedIoFlush: Some(super::evt_self_managed_io_flush),
        ..WDF_PNPPOWER_EVENT_CALLBACKS::default()
    };
    // SAFETY: `init` is live; the callbacks struct outlives the call (KMDF copies it).
    unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceInitSetPnpPowerEventCallbacks, init, &mut pnp);
    }
    // A cancelled stop has no EvtDevice callback: entering WdfDevStatePnpQueryCanceled is
    // how the bus hears it (its resets were held from the query on).
    // SAFETY: `init` is live; a valid state, callback and notification type.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfDeviceInitRegisterPnpStateChangeCallback,
            init,
            _WDF_DEVICE_PNP_STATE::WdfDevStatePnpQueryCanceled,
            Some(super::evt_query_canceled),
            _WDF_STATE_NOTIFICATION_TYPE::StateNotificationEnterState as ULONG
        )
    };
    if status < 0 {
        return status;
    }
    // SAFETY: as above.
    unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceInitSetDeviceType, init, setup.device_type)
    };
    let mut children = WDF_CHILD_LIST_CONFIG {
        Size: core::mem::size_of::<WDF_CHILD_LIST_CONFIG>() as ULONG,
        IdentificationDescriptionSize: core::mem::size_of::<children::Identification>() as ULONG,
        EvtChildListCreateDevice: Some(super::evt_child_create_device),
        ..WDF_CHILD_LIST_CONFIG::default()
    };
    if !planted(Defect::NoChildListConfig) {
        // SAFETY: `init` is live; the config outlives the call.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfFdoInitSetDefaultChildListConfig,
                init,
                &mut children,
                WDF_NO_OBJECT_ATTRIBUTES
            )
        };
    }
    let mut attributes = attributes(core::ptr::null_mut(), Some(&FDO_CONTEXT));
    attributes.EvtCleanupCallback = Some(evt_fdo_cleanup);
    attributes.EvtDestroyCallback = Some(evt_fdo_destroy);
    let mut device: WDFDEVICE = core::ptr::null_mut();
    let (original, mut init) = (init, init);
    // SAFETY: `init` is consumed on success; on failure KMDF frees the PnP init it gave us.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreate, &mut init, &mut attributes, &mut device)
    };
    if status < 0 {
        release_instance(setup.instance);
        return status;
    }
    if planted(Defect::FdoInitAfterCreate) {
        // SAFETY: none: the planted violation (a consumed init), which the model stops at.
        unsafe {
            call_unsafe_wdf_function_binding!(
                WdfDeviceInitSetDeviceType,
                original,
                setup.device_type
            )
        };
    }
    // SAFETY: the device was just created.
    unsafe { support_special_files(device) };
    // SAFETY: the device was just created with FDO_CONTEXT and is not yet published.
    let Some(ctx) = (unsafe { FdoContext::init(device, setup.instance) }) else {
        // No context to find at destroy: the number is given back now.
        release_instance(setup.instance);
        return STATUS_INVALID_DEVICE_STATE;
    };
    // SAFETY: the device is live at PASSIVE_LEVEL; a failure deletes the FDO, whose cleanup
    // deletes whatever control device was made.
    unsafe { control_device(ctx, setup, original) }
}

/// EvtCleanupCallback of the FDO (PASSIVE_LEVEL, as it is deleted): its control device goes
/// with it, so that no request can reach a context that is gone and the driver can unload.
extern "C" fn evt_fdo_cleanup(object: WDFOBJECT) {
    if planted(Defect::ControlDeviceKept) {
        return;
    }
    // SAFETY: the FDO is being deleted but its context stays until its memory goes.
    let Some(ctx) = (unsafe { context::<FdoContext>(object, &FDO_CONTEXT) }) else {
        return;
    };
    ctx.removed.store(true, Ordering::Release);
    // The bus a last PnP stop kept goes with the FDO.
    drop(ctx.take_parked());
    let control = ctx.control.swap(core::ptr::null_mut(), Ordering::AcqRel);
    if !control.is_null() {
        // SAFETY: the control device this FDO created, deleted once (swapped out above).
        unsafe { call_unsafe_wdf_function_binding!(WdfObjectDelete, control.cast()) };
    }
}

/// EvtDestroyCallback of the FDO: its memory goes, after its control device's (which held a
/// reference on it), so the control device's name is free again.
extern "C" fn evt_fdo_destroy(object: WDFOBJECT) {
    // SAFETY: the FDO's context stays until this callback returns.
    if let Some(ctx) = unsafe { context::<FdoContext>(object, &FDO_CONTEXT) } {
        release_instance(ctx.instance);
    }
}

/// EvtDestroyCallback of the control device: its memory goes, so no request of it can run
/// any more: the reference on its FDO is given back.
extern "C" fn evt_control_destroy(object: WDFOBJECT) {
    // SAFETY: the control device's context stays until this callback returns.
    let Some(ctx) = (unsafe { context::<ControlContext>(object, &CONTROL_CONTEXT) }) else {
        return;
    };
    if !ctx.fdo.is_null() && !planted(Defect::ControlHoldsNoReference) {
        // SAFETY: the reference control_device took on this FDO, given back once.
        unsafe { reference(ctx.fdo.cast(), false) };
    }
}

/// WdfObjectReferenceActual / WdfObjectDereferenceActual of `object`, tagged as the control
/// device's.
///
/// # Safety
/// `object` is live (a reference) or referenced by this tag (a dereference).
unsafe fn reference(object: WDFOBJECT, take: bool) {
    let tag = c"hcabus control".as_ptr().cast_mut().cast();
    let file = c"objects.rs".as_ptr();
    if take {
        // SAFETY: the caller's contract; the tag and file are static.
        unsafe {
            call_unsafe_wdf_function_binding!(WdfObjectReferenceActual, object, tag, 0, file)
        };
    } else {
        // SAFETY: as above.
        unsafe {
            call_unsafe_wdf_function_binding!(WdfObjectDereferenceActual, object, tag, 0, file)
        };
    }
}

/// A child's PDO: its device, hardware and instance ids, its description (from its serial:
/// which child function), then the bus interface published on it. Not a raw PDO: each child
/// has a function driver of its own (IPoIB's, SRP's), matched by its hardware id.
///
/// # Safety
/// `init` is KMDF's for this child, `fdo` its live parent.
pub(crate) unsafe fn create_pdo(init: PWDFDEVICE_INIT, fdo: WDFDEVICE, serial: u32) -> NTSTATUS {
    let Some(child) = ChildFunction::from_serial(serial) else {
        return STATUS_INVALID_PARAMETER;
    };
    // SAFETY: `init` is live for this callback.
    let s = unsafe { pdo_identity(init, child) };
    if s < 0 {
        return s;
    }
    let mut pdo: WDFDEVICE = core::ptr::null_mut();
    let (original, mut init) = (init, init);
    // SAFETY: `init` is consumed on success; on failure KMDF frees the child list's init.
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
    if planted(Defect::PdoInitAfterCreate) {
        // SAFETY: none: the planted violation (a consumed init), which the model stops at.
        unsafe { call_unsafe_wdf_function_binding!(WdfPdoInitSetDefaultLocale, original, 0x409) };
    }
    if child == ChildFunction::Srp {
        // SAFETY: the PDO was just created.
        unsafe { support_special_files(pdo) };
    }
    // SAFETY: a PDO being created for `fdo`.
    unsafe { super::interface::publish(pdo, fdo) }
}

/// The boot LUN behind the SRP child holds the paging file, the crash dump, the
/// hibernation file and the boot files: KMDF fails a usage notification in the path of a
/// device that does not support the type (fxpkgpnp.cpp), and a PDO passes it to its parent
/// first, so both the SRP PDO and the FDO say they support them.
///
/// # Safety
/// `device` is live.
unsafe fn support_special_files(device: WDFDEVICE) {
    if planted(Defect::NoSpecialFiles) {
        return;
    }
    use _WDF_SPECIAL_FILE_TYPE::*;
    for file in [
        WdfSpecialFilePaging,
        WdfSpecialFileHibernation,
        WdfSpecialFileDump,
        WdfSpecialFileBoot,
    ] {
        // SAFETY: the caller's contract; a type KMDF 1.33 takes.
        unsafe {
            call_unsafe_wdf_function_binding!(WdfDeviceSetSpecialFileSupport, device, file, 1)
        };
    }
}

/// The ids and the text PnP asks a child's PDO for (IRP_MN_QUERY_ID, _QUERY_DEVICE_TEXT).
///
/// # Safety
/// `init` is a live PDO init.
unsafe fn pdo_identity(init: PWDFDEVICE_INIT, child: ChildFunction) -> NTSTATUS {
    let mut buffer = [0u16; 128];
    let mut id = unicode(child.hardware_id(), &mut buffer);
    // SAFETY: the string lives until the call returns (KMDF copies it).
    let s = unsafe { call_unsafe_wdf_function_binding!(WdfPdoInitAssignDeviceID, init, &mut id) };
    if s < 0 {
        return s;
    }
    // SAFETY: as above.
    let s = unsafe { call_unsafe_wdf_function_binding!(WdfPdoInitAddHardwareID, init, &mut id) };
    if s < 0 || planted(Defect::BarePdo) {
        return s;
    }
    let mut instance_buffer = [0u16; 128];
    let mut digits = [0u8; 10];
    let mut instance = unicode(child.instance_id(&mut digits), &mut instance_buffer);
    // SAFETY: as above.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfPdoInitAssignInstanceID, init, &mut instance)
    };
    if s < 0 {
        return s;
    }
    let mut text_buffer = [0u16; 128];
    let mut location_buffer = [0u16; 128];
    let mut text = unicode(child.description(), &mut text_buffer);
    let mut location = unicode(child.location(), &mut location_buffer);
    // SAFETY: as above.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfPdoInitAddDeviceText,
            init,
            &mut text,
            &mut location,
            LOCALE_EN_US
        )
    };
    if s < 0 {
        return s;
    }
    // SAFETY: as above.
    unsafe { call_unsafe_wdf_function_binding!(WdfPdoInitSetDefaultLocale, init, LOCALE_EN_US) };
    STATUS_SUCCESS
}

/// en-US: the locale of the children's device text, and their default.
const LOCALE_EN_US: LCID = 0x0409;

/// `text` as a UNICODE_STRING over `buffer` (ASCII text: names, ids, SDDL).
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
/// sequential IOCTL queue. Its context names the FDO, whose bus serves the requests; the
/// FDO's context names it, so that the FDO's cleanup deletes it.
///
/// # Safety
/// `fdo` is live, at PASSIVE_LEVEL.
unsafe fn control_device(
    fdo: &FdoContext,
    setup: &FdoSetup,
    pnp_init: PWDFDEVICE_INIT,
) -> NTSTATUS {
    let (mut sddl_buf, mut name_buf) = ([0u16; 128], [0u16; 128]);
    let sddl = unicode(setup.sddl, &mut sddl_buf);
    let mut name = unicode(setup.control_device.as_str(), &mut name_buf);
    // SAFETY: the FDO is live.
    let driver = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceGetDriver, fdo.device) };
    // SAFETY: the SDDL string lives for the call; KMDF copies it.
    let mut init =
        unsafe { call_unsafe_wdf_function_binding!(WdfControlDeviceInitAllocate, driver, &sddl) };
    if planted(Defect::ControlFromPnpInit) {
        // The planted violation: a control device from the FDO's init (consumed), not from
        // WdfControlDeviceInitAllocate's.
        // SAFETY: the init just allocated, not consumed: freed once.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
        init = pnp_init;
    }
    if init.is_null() {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    // SAFETY: `init` is ours until WdfDeviceCreate; the name lives for the call.
    let s = unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitAssignName, init, &mut name) };
    if s < 0 && !planted(Defect::CreateAfterFailedName) {
        if !planted(Defect::NameFailureNotFreed) {
            // SAFETY: not consumed by a create: freed here, once.
            unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
        }
        return s;
    }
    let mut attributes = attributes(core::ptr::null_mut(), Some(&CONTROL_CONTEXT));
    if !planted(Defect::ControlNoCleanupCallback) {
        attributes.EvtDestroyCallback = Some(evt_control_destroy);
    }
    let mut control: WDFDEVICE = core::ptr::null_mut();
    let original = init;
    if planted(Defect::ControlCreateOnFreedInit) {
        // SAFETY: none: the planted violation (the create below takes a freed init).
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
    }
    // SAFETY: `init` is consumed only if the create succeeds.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreate, &mut init, &mut attributes, &mut control)
    };
    if s < 0 {
        // SAFETY: the init a failed create left ours.
        return unsafe { control_create_failed(init, s) };
    }
    if planted(Defect::ControlInitAfterCreate) {
        // SAFETY: none: the planted violation (a consumed init), which the model stops at.
        let _ = unsafe {
            call_unsafe_wdf_function_binding!(WdfDeviceInitAssignName, original, &mut name)
        };
    }
    fdo.control.store(control, Ordering::Release);
    // SAFETY: the control device was just created with CONTROL_CONTEXT and no request can
    // reach it before WdfControlFinishInitializing.
    if !unsafe {
        init_context(
            control.cast(),
            &CONTROL_CONTEXT,
            ControlContext { fdo: fdo.device },
        )
    } {
        return STATUS_INVALID_DEVICE_STATE;
    }
    if !planted(Defect::ControlHoldsNoReference) {
        // SAFETY: the FDO is live; the reference is given back by evt_control_destroy.
        unsafe { reference(fdo.device.cast(), true) };
    }
    // SAFETY: the control device is live.
    unsafe { control_queue(control, setup) }
}

/// A control device's init that a failed create left ours: freed once, and the failure
/// returned (each planted branch breaks one of SDV's rules on purpose).
///
/// # Safety
/// `init` is the control device's, not consumed.
unsafe fn control_create_failed(init: PWDFDEVICE_INIT, status: NTSTATUS) -> NTSTATUS {
    if !planted(Defect::ControlInitNotFreed) {
        // SAFETY: the caller's contract: freed once.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
    }
    if planted(Defect::ControlInitFreedTwice) {
        // SAFETY: none: the planted violation, a second free.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, init) };
    }
    if planted(Defect::FreeNullInit) {
        // SAFETY: none: the planted violation, a NULL init.
        unsafe { call_unsafe_wdf_function_binding!(WdfDeviceInitFree, core::ptr::null_mut()) };
    }
    if planted(Defect::CreateFailureIgnored) {
        return STATUS_SUCCESS;
    }
    status
}

/// The control device's symbolic link and its IOCTL queue, then it is open for requests.
///
/// # Safety
/// `control` is a control device just created, at PASSIVE_LEVEL.
unsafe fn control_queue(control: WDFDEVICE, setup: &FdoSetup) -> NTSTATUS {
    let mut link_buf = [0u16; 128];
    let mut link = unicode(setup.symbolic_link.as_str(), &mut link_buf);
    // SAFETY: the control device is live; the link lives for the call.
    let s = unsafe {
        call_unsafe_wdf_function_binding!(WdfDeviceCreateSymbolicLink, control, &mut link)
    };
    if s < 0 {
        return s;
    }
    // PASSIVE_LEVEL, said, not inherited: the driver object's default lets KMDF call the
    // queue's callbacks at DISPATCH_LEVEL, where the bus's wait lock and the registry are
    // not to be had (SDV KmdfIrql2).
    let mut queue_attributes = attributes(core::ptr::null_mut(), None);
    if !planted(Defect::QueueLevelInherited) {
        queue_attributes.ExecutionLevel = _WDF_EXECUTION_LEVEL::WdfExecutionLevelPassive;
    }
    let mut queue_config = WDF_IO_QUEUE_CONFIG {
        Size: core::mem::size_of::<WDF_IO_QUEUE_CONFIG>() as ULONG,
        DispatchType: _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchSequential,
        PowerManaged: _WDF_TRI_STATE::WdfUseDefault,
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
            &mut queue_attributes,
            core::ptr::null_mut(),
        )
    };
    if s < 0 {
        return s;
    }
    if !planted(Defect::ControlNotFinished) {
        // SAFETY: the control device is fully set up.
        unsafe { call_unsafe_wdf_function_binding!(WdfControlFinishInitializing, control) };
    }
    STATUS_SUCCESS
}
