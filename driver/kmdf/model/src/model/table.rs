//! The driver, device, init, queue, child-list, resource, registry and request DDIs, and the
//! function table they are installed in.

use std::string::String;

use wdk_sys::*;

use super::kernel::{Device, Identity, Init, InitOrigin, InitState, Kernel, Kind, Role};
use super::objects::{validate, Options};
use super::{violation, with, Rule, DISPATCH, PASSIVE};

/// A UNICODE_STRING's text.
pub(crate) fn text(ddi: &str, s: PCUNICODE_STRING) -> String {
    // SAFETY: the driver's string or NULL.
    let Some(s) = (unsafe { s.as_ref() }) else {
        violation(Rule::NullParameter, ddi, "a NULL UNICODE_STRING")
    };
    if s.Length % 2 != 0 || s.Length > s.MaximumLength {
        violation(Rule::NullParameter, ddi, "a malformed UNICODE_STRING");
    }
    // SAFETY: Length bytes of u16 at Buffer (the string's contract).
    let w = unsafe { core::slice::from_raw_parts(s.Buffer, usize::from(s.Length / 2)) };
    // The kernel's copy: not the driver's bytes, whoever calls this first.
    super::uncounted(|| String::from_utf16_lossy(w))
}

pub(crate) unsafe extern "C" fn WdfDriverCreate(
    globals: PWDF_DRIVER_GLOBALS,
    _o: PDRIVER_OBJECT,
    _p: PCUNICODE_STRING,
    a: PWDF_OBJECT_ATTRIBUTES,
    config: PWDF_DRIVER_CONFIG,
    out: *mut WDFDRIVER,
) -> NTSTATUS {
    const DDI: &str = "WdfDriverCreate";
    let _kernel = super::enter(DDI, PASSIVE);
    // SAFETY: the driver's config.
    let Some(c) = (unsafe { config.as_ref() }) else {
        violation(Rule::NullParameter, DDI, "DriverConfig is NULL")
    };
    with(|k| {
        if c.Size as usize != core::mem::size_of::<WDF_DRIVER_CONFIG>() {
            return k.refuse(DDI, STATUS_INFO_LENGTH_MISMATCH, "WDF_DRIVER_CONFIG.Size");
        }
        // KMDF takes an execution level and a synchronization scope for the driver object
        // (its devices inherit them: fxdriverapi.cpp validates only the parent); SDV's
        // warning rule DriverAttributeChanged flags a driver that sets them.
        if let Err((s, why)) = validate(
            a,
            Options {
                parent_not_allowed: true,
                execution_level_allowed: true,
                synchronization_scope_allowed: true,
                ..Options::default()
            },
        ) {
            return k.refuse(DDI, s, why);
        }
        // SAFETY: the driver's attributes, validated above, or NULL.
        if let Some(a) = unsafe { a.as_ref() } {
            let level =
                a.ExecutionLevel != _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent;
            let scope = a.SynchronizationScope
                != _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent;
            if level || scope {
                k.sdv_warnings.push((
                    Rule::DriverAttributeChanged,
                    DDI,
                    format!(
                        "the driver object's ExecutionLevel {} / SynchronizationScope {} set \
                         (KMDF takes them; its devices inherit them)",
                        a.ExecutionLevel, a.SynchronizationScope
                    ),
                ));
            }
        }
        let slot = super::caller_slot(globals, DDI);
        if k.drivers[slot].is_some() {
            // KMDF keeps one FxDriver per driver object (FxDriver::_CreateDriver).
            violation(
                Rule::Expectation,
                DDI,
                "a second WdfDriverCreate from one driver",
            );
        }
        let h = k.create(DDI, Kind::Driver { config: *c }, a, None);
        k.drivers[slot] = Some(h);
        if !out.is_null() {
            // SAFETY: a non-null out-pointer of the driver's.
            unsafe { *out = h as WDFDRIVER };
        }
        STATUS_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn WdfFdoInitQueryProperty(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    property: DEVICE_REGISTRY_PROPERTY::Type,
    length: ULONG,
    buffer: PVOID,
    result: PULONG,
) -> NTSTATUS {
    const DDI: &str = "WdfFdoInitQueryProperty";
    let _kernel = super::enter(DDI, PASSIVE);
    with(|k| {
        let i = k.init(DDI, init);
        let strings = match property {
            DEVICE_REGISTRY_PROPERTY::DevicePropertyHardwareID => &i.hardware_ids,
            DEVICE_REGISTRY_PROPERTY::DevicePropertyCompatibleIDs => &i.compatible_ids,
            _ => return STATUS_INVALID_PARAMETER,
        };
        if length != 0 && buffer.is_null() {
            violation(Rule::NullParameter, DDI, "a NULL buffer of nonzero length");
        }
        // A REG_MULTI_SZ: each string NUL-terminated, one more NUL at the end. A buffer
        // too small gets nothing but the length it needs (IoGetDeviceProperty's rule).
        let mut wide: Vec<u16> = Vec::new();
        for id in strings {
            wide.extend(id.encode_utf16());
            wide.push(0);
        }
        wide.push(0);
        let bytes = wide.len() * 2;
        if !result.is_null() {
            // SAFETY: the driver's out-pointer.
            unsafe { *result = bytes as ULONG };
        }
        if (length as usize) < bytes {
            return STATUS_BUFFER_TOO_SMALL;
        }
        // SAFETY: `length` >= `bytes` writable bytes at `buffer`.
        unsafe { core::ptr::copy_nonoverlapping(wide.as_ptr(), buffer.cast(), wide.len()) };
        STATUS_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn WdfDeviceInitSetPnpPowerEventCallbacks(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    pnp: PWDF_PNPPOWER_EVENT_CALLBACKS,
) {
    const DDI: &str = "WdfDeviceInitSetPnpPowerEventCallbacks";
    let _kernel = super::enter(DDI, DISPATCH);
    // SAFETY: the driver's callbacks.
    let Some(p) = (unsafe { pnp.as_ref() }) else {
        violation(Rule::NullParameter, DDI, "NULL callbacks")
    };
    if p.Size as usize != core::mem::size_of::<WDF_PNPPOWER_EVENT_CALLBACKS>() {
        violation(
            Rule::NullParameter,
            DDI,
            "WDF_PNPPOWER_EVENT_CALLBACKS.Size is not its size",
        );
    }
    with(|k| k.init(DDI, init).pnp = *p);
}

pub(crate) unsafe extern "C" fn WdfDeviceInitSetDeviceType(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    _t: ULONG,
) {
    let _kernel = super::enter("WdfDeviceInitSetDeviceType", DISPATCH);
    with(|k| {
        k.init("WdfDeviceInitSetDeviceType", init);
    });
}

pub(crate) unsafe extern "C" fn WdfFdoInitSetDefaultChildListConfig(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    config: PWDF_CHILD_LIST_CONFIG,
    a: PWDF_OBJECT_ATTRIBUTES,
) {
    const DDI: &str = "WdfFdoInitSetDefaultChildListConfig";
    let _kernel = super::enter(DDI, PASSIVE);
    // SAFETY: the driver's config.
    let Some(c) = (unsafe { config.as_ref() }) else {
        violation(Rule::NullParameter, DDI, "Config is NULL")
    };
    if c.Size as usize != core::mem::size_of::<WDF_CHILD_LIST_CONFIG>()
        || c.EvtChildListCreateDevice.is_none()
    {
        violation(
            Rule::ChildList,
            DDI,
            "a child list config with a wrong Size or no EvtChildListCreateDevice",
        );
    }
    if validate(
        a,
        Options {
            parent_not_allowed: true,
            ..Options::default()
        },
    )
    .is_err()
    {
        violation(Rule::ChildList, DDI, "invalid child list attributes");
    }
    with(|k| k.init(DDI, init).child_list = Some(*c));
}

pub(crate) unsafe extern "C" fn WdfDeviceCreate(
    globals: PWDF_DRIVER_GLOBALS,
    init: *mut PWDFDEVICE_INIT,
    a: PWDF_OBJECT_ATTRIBUTES,
    out: *mut WDFDEVICE,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceCreate";
    let _kernel = super::enter(DDI, PASSIVE);
    if init.is_null() || out.is_null() {
        violation(Rule::NullParameter, DDI, "DeviceInit or Device is NULL");
    }
    // SAFETY: checked non-null.
    let handle = unsafe { *init };
    with(|k| {
        let i = k.init(DDI, handle);
        let origin = i.origin;
        if let Some(failed) = i.failed {
            violation(
                Rule::InitMisused,
                DDI,
                &format!("an init whose {failed} failed (SDV InitFreeDeviceCreate: free it)"),
            );
        }
        // SAFETY: the driver's attributes, or NULL.
        let callbacks = unsafe { a.as_ref() }
            .is_some_and(|a| a.EvtCleanupCallback.is_some() || a.EvtDestroyCallback.is_some());
        if origin == InitOrigin::Control && !callbacks {
            violation(
                Rule::ControlNoCleanup,
                DDI,
                "a control device with no EvtCleanupCallback or EvtDestroyCallback",
            );
        }
        let options = Options {
            parent_not_allowed: true,
            execution_level_allowed: true,
            synchronization_scope_allowed: true,
            ..Options::default()
        };
        if let Err((s, why)) = validate(a, options) {
            return k.refuse(DDI, s, why);
        }
        if k.fails(DDI) {
            return k.refuse(
                DDI,
                STATUS_INSUFFICIENT_RESOURCES,
                "failed on purpose by the scenario",
            );
        }
        // IoCreateDevice: a name another device object holds (one not deleted: deletion
        // takes the name out of the object directory) is a collision.
        let name = k.init(DDI, handle).name.clone();
        let taken = name.as_ref().is_some_and(|n| {
            k.objects.iter().any(|o| {
                !o.deleted && matches!(&o.kind, Kind::Device(d) if d.name.as_ref() == Some(n))
            })
        });
        if taken {
            return k.refuse(
                DDI,
                STATUS_OBJECT_NAME_COLLISION,
                "a device name another device object holds",
            );
        }
        let i: &mut Init = k.init(DDI, handle);
        i.state = InitState::Consumed;
        let role = match origin {
            InitOrigin::Pnp => Role::Fdo,
            InitOrigin::Child => Role::Pdo,
            InitOrigin::Control => Role::Control,
        };
        let device = Box::new(Device {
            role,
            pnp: i.pnp,
            name: i.name.take(),
            links: Vec::new(),
            sddl: i.sddl.take(),
            queue: None,
            child_list: None,
            interfaces: Vec::new(),
            finished: role != Role::Control,
            identity: core::mem::take(&mut i.identity),
            adapter: i.adapter,
            lower_pdo: i.lower_pdo,
            device_interfaces: Vec::new(),
            // SAFETY: an all-zero DEVICE_OBJECT is what the model hands out.
            wdm: Box::new(unsafe { core::mem::zeroed() }),
            special_files: 0,
            special_use: [0; 8],
            pnp_notify: core::mem::take(&mut i.pnp_notify),
        });
        let list = i.child_list;
        let driver = k.drivers[super::caller_slot(globals, DDI)];
        let h = k.create(DDI, Kind::Device(device), a, driver);
        if let Some(config) = list {
            let l = k.create(
                DDI,
                Kind::ChildList {
                    device: h,
                    config,
                    children: Vec::new(),
                    scanning: false,
                },
                core::ptr::null_mut(),
                Some(h),
            );
            if let Kind::Device(d) = &mut k.objects[Kernel::index_of(h as _)].kind {
                d.child_list = Some(l);
            }
        }
        // SAFETY: checked non-null.
        unsafe { *out = h as WDFDEVICE };
        // SAFETY: checked non-null; KMDF NULLs the caller's init once consumed.
        unsafe { *init = core::ptr::null_mut() };
        STATUS_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn WdfDeviceGetDriver(
    globals: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
) -> WDFDRIVER {
    let _kernel = super::enter("WdfDeviceGetDriver", DISPATCH);
    with(|k| {
        k.live("WdfDeviceGetDriver", device);
        let slot = super::caller_slot(globals, "WdfDeviceGetDriver");
        k.drivers[slot].map_or(core::ptr::null_mut(), |h| h as WDFDRIVER)
    })
}

pub(crate) unsafe extern "C" fn WdfControlDeviceInitAllocate(
    _: PWDF_DRIVER_GLOBALS,
    driver: WDFDRIVER,
    sddl: *const UNICODE_STRING,
) -> PWDFDEVICE_INIT {
    const DDI: &str = "WdfControlDeviceInitAllocate";
    let _kernel = super::enter(DDI, PASSIVE);
    let sddl = text(DDI, sddl);
    with(|k| {
        k.live(DDI, driver);
        // An init is pool: NULL when the pool is short, as documented.
        if k.fails(DDI) {
            return core::ptr::null_mut();
        }
        k.inits
            .push(Init::new(InitOrigin::Control, String::new(), 0));
        let n = k.inits.len() - 1;
        k.inits[n].sddl = Some(sddl);
        Kernel::init_handle(n)
    })
}

pub(crate) unsafe extern "C" fn WdfDeviceInitAssignName(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    name: PCUNICODE_STRING,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceInitAssignName";
    let _kernel = super::enter(DDI, PASSIVE);
    let name = text(DDI, name);
    with(|k| {
        k.init(DDI, init);
        if k.fails(DDI) {
            k.init(DDI, init).failed = Some(DDI);
            return k.refuse(
                DDI,
                STATUS_INSUFFICIENT_RESOURCES,
                "failed on purpose by the scenario",
            );
        }
        k.init(DDI, init).name = Some(name);
        STATUS_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn WdfDeviceInitFree(_: PWDF_DRIVER_GLOBALS, init: PWDFDEVICE_INIT) {
    const DDI: &str = "WdfDeviceInitFree";
    let _kernel = super::enter(DDI, DISPATCH);
    with(|k| {
        let i = k.init(DDI, init);
        if i.origin != InitOrigin::Control {
            violation(
                Rule::InitMisused,
                DDI,
                "an init KMDF gave the driver (only a control device's is the driver's to free)",
            );
        }
        i.state = InitState::Freed;
    });
}

pub(crate) unsafe extern "C" fn WdfDeviceCreateSymbolicLink(
    _: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
    link: PCUNICODE_STRING,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceCreateSymbolicLink";
    let _kernel = super::enter(DDI, PASSIVE);
    let link = text(DDI, link);
    with(|k| match &mut k.live(DDI, device).kind {
        Kind::Device(d) if d.name.is_some() => {
            d.links.push(link);
            STATUS_SUCCESS
        }
        Kind::Device(_) => k.refuse(
            DDI,
            STATUS_INVALID_DEVICE_REQUEST,
            "a symbolic link to an unnamed device",
        ),
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    })
}

pub(crate) unsafe extern "C" fn WdfIoQueueCreate(
    _: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
    config: PWDF_IO_QUEUE_CONFIG,
    a: PWDF_OBJECT_ATTRIBUTES,
    out: *mut WDFQUEUE,
) -> NTSTATUS {
    const DDI: &str = "WdfIoQueueCreate";
    let _kernel = super::enter(DDI, DISPATCH);
    // SAFETY: the driver's config.
    let Some(c) = (unsafe { config.as_ref() }) else {
        violation(Rule::NullParameter, DDI, "Config is NULL")
    };
    with(|k| {
        if c.Size as usize != core::mem::size_of::<WDF_IO_QUEUE_CONFIG>() {
            return k.refuse(DDI, STATUS_INFO_LENGTH_MISMATCH, "WDF_IO_QUEUE_CONFIG.Size");
        }
        let options = Options {
            execution_level_allowed: true,
            synchronization_scope_allowed: true,
            ..Options::default()
        };
        if let Err((s, why)) = validate(a, options) {
            return k.refuse(DDI, s, why);
        }
        if c.DefaultQueue == 0 && out.is_null() {
            return k.refuse(
                DDI,
                STATUS_INVALID_PARAMETER,
                "a non-default queue with no out handle",
            );
        }
        k.live(DDI, device);
        let q = k.create(
            DDI,
            Kind::Queue {
                device: device as usize,
                config: *c,
                state: super::queues::QueueState::default(),
            },
            a,
            Some(device as usize),
        );
        // The device's requests go to its default queue; another is the driver's to forward to.
        if let Kind::Device(d) = &mut k.live(DDI, device).kind {
            if c.DefaultQueue != 0 {
                d.queue = Some(q);
            }
        }
        if !out.is_null() {
            // SAFETY: the driver's out-pointer.
            unsafe { *out = q as WDFQUEUE };
        }
        STATUS_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn WdfControlFinishInitializing(
    _: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
) {
    const DDI: &str = "WdfControlFinishInitializing";
    let _kernel = super::enter(DDI, DISPATCH);
    with(|k| match &mut k.live(DDI, device).kind {
        Kind::Device(d) if d.role == Role::Control => d.finished = true,
        _ => violation(Rule::WrongObjectType, DDI, "not a control device"),
    });
}

pub(crate) unsafe extern "C" fn WdfIoQueueGetDevice(
    _: PWDF_DRIVER_GLOBALS,
    queue: WDFQUEUE,
) -> WDFDEVICE {
    let _kernel = super::enter("WdfIoQueueGetDevice", DISPATCH);
    // A deleted control device's queue still dispatches while a handle is open
    // (fxpkggeneral.cpp): the handle's reference keeps both.
    with(|k| match &k.object("WdfIoQueueGetDevice", queue).kind {
        Kind::Queue { device, .. } => *device as WDFDEVICE,
        other => violation(Rule::WrongObjectType, "WdfIoQueueGetDevice", other.name()),
    })
}

pub(crate) unsafe extern "C" fn WdfDeviceWdmGetDeviceObject(
    _: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
) -> PDEVICE_OBJECT {
    let _kernel = super::enter("WdfDeviceWdmGetDeviceObject", DISPATCH);
    with(
        |k| match &mut k.live("WdfDeviceWdmGetDeviceObject", device).kind {
            Kind::Device(d) => &mut *d.wdm as PDEVICE_OBJECT,
            other => violation(
                Rule::WrongObjectType,
                "WdfDeviceWdmGetDeviceObject",
                other.name(),
            ),
        },
    )
}

impl Init {
    /// An init for a device whose most specific hardware id is `hardware_id`: a PCI
    /// function's gets every id the PCI bus reports for it ([`pci_function_ids`]).
    pub(crate) fn new(origin: InitOrigin, hardware_id: String, adapter: usize) -> Init {
        let (hardware_ids, compatible_ids) = pci_function_ids(&hardware_id);
        Init {
            origin,
            state: InitState::Open,
            pnp: WDF_PNPPOWER_EVENT_CALLBACKS::default(),
            child_list: None,
            name: None,
            sddl: None,
            identity: Identity::default(),
            hardware_ids,
            compatible_ids,
            adapter,
            lower_pdo: None,
            failed: None,
            pnp_notify: Vec::new(),
        }
    }

    /// An init for a function driver's device on `pdo`, whose hardware ids are the ones the
    /// bus gave the PDO (WdfPdoInitAddHardwareID), as PnP reports them to the driver above.
    pub(crate) fn for_pdo(pdo: super::kernel::Handle, hardware_ids: Vec<String>) -> Init {
        Init {
            hardware_ids,
            compatible_ids: Vec::new(),
            lower_pdo: Some(pdo),
            ..Init::new(InitOrigin::Pnp, String::new(), usize::MAX)
        }
    }
}

/// The ids the PCI bus driver reports for a function whose most specific id is `full`
/// (`PCI\VEN_v&DEV_d&SUBSYS_s&REV_r`): hardware ids VEN&DEV&SUBSYS&REV, VEN&DEV&SUBSYS,
/// VEN&DEV&REV and VEN&DEV (about 270 bytes as UTF-16 for a ConnectX), and compatible ids
/// VEN&DEV&REV, VEN&DEV, VEN&CC, VEN and CC, for an InfiniBand controller (class 0C06).
/// Another id is reported alone.
pub(crate) fn pci_function_ids(full: &str) -> (Vec<String>, Vec<String>) {
    let parts: Vec<&str> = full.split('&').collect();
    let [ven, dev, subsys, rev] = parts.as_slice() else {
        return (vec![full.to_string()], Vec::new());
    };
    let vendor = ven.to_string();
    let base = format!("{vendor}&{dev}");
    let hardware = vec![
        full.to_string(),
        format!("{base}&{subsys}"),
        format!("{base}&{rev}"),
        base.clone(),
    ];
    let compatible = vec![
        format!("{base}&{rev}"),
        base,
        format!("{vendor}&CC_0C0600"),
        format!("{vendor}&CC_0C06"),
        vendor,
        "PCI\\CC_0C0600".to_string(),
        "PCI\\CC_0C06".to_string(),
    ];
    (hardware, compatible)
}

/// The table, every other entry NULL (a call to one panics in the macro: a DDI the model
/// does not have). Built once per process and kept: a process may boot the driver many times
/// (`schedule.rs`, a machine per schedule), as WdfLdr binds each load to the same table.
pub(crate) fn install() {
    static TABLE: std::sync::OnceLock<Vec<WDFFUNC>> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut table = vec![None; _WDFFUNCENUM::WdfFunctionTableNumEntries as usize];
        for (index, f) in super::entries::entries() {
            table[index as usize] = f;
        }
        table
    });
    // SAFETY: one scenario per process, set before the driver runs.
    unsafe { super::WdfFunctions_01033 = table.as_ptr() };
    // SAFETY: as above.
    unsafe { super::WdfFunctionCount = table.len() as ULONG };
}
