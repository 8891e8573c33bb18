//! PDO inits, query interfaces, the child list, the resource list, the registry and
//! requests' buffers.

use wdk_sys::*;

use super::driver::callable;
use super::kernel::{Child, Kernel, Kind, Role};
use super::table::text;
use super::wdm::{bus_data, pci_dereference, pci_reference};
use super::{violation, with, Rule, DISPATCH, PASSIVE};

/// GUID_BUS_INTERFACE_STANDARD of wdmguid.h, which wdk-sys does not bind, as the PCI bus
/// driver knows it: {496B8280-6F25-11D0-BEAF-08002BE2092F}. The kernel's own copy, so that a
/// driver asking with another GUID is refused.
const GUID_BUS_INTERFACE_STANDARD: GUID = GUID {
    Data1: 0x496B_8280,
    Data2: 0x6F25,
    Data3: 0x11D0,
    Data4: [0xBE, 0xAF, 0x08, 0x00, 0x2B, 0xE2, 0x09, 0x2F],
};

fn pdo_init(
    ddi: &str,
    init: PWDFDEVICE_INIT,
    max_irql: u8,
    f: impl FnOnce(&mut super::kernel::Identity),
) {
    let _kernel = super::enter(ddi, max_irql);
    with(|k| {
        let i = k.init(ddi, init);
        if i.origin != super::kernel::InitOrigin::Child {
            violation(Rule::InitMisused, ddi, "not a PDO's init");
        }
        f(&mut i.identity);
    });
}

pub(crate) unsafe extern "C" fn WdfPdoInitAssignDeviceID(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    id: PCUNICODE_STRING,
) -> NTSTATUS {
    let id = text("WdfPdoInitAssignDeviceID", id);
    pdo_init("WdfPdoInitAssignDeviceID", init, PASSIVE, |i| {
        i.device_id = Some(id)
    });
    STATUS_SUCCESS
}

pub(crate) unsafe extern "C" fn WdfPdoInitAddHardwareID(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    id: PCUNICODE_STRING,
) -> NTSTATUS {
    let id = text("WdfPdoInitAddHardwareID", id);
    pdo_init("WdfPdoInitAddHardwareID", init, PASSIVE, |i| {
        i.hardware_ids.push(id)
    });
    STATUS_SUCCESS
}

pub(crate) unsafe extern "C" fn WdfPdoInitAssignInstanceID(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    id: PCUNICODE_STRING,
) -> NTSTATUS {
    let id = text("WdfPdoInitAssignInstanceID", id);
    pdo_init("WdfPdoInitAssignInstanceID", init, PASSIVE, |i| {
        i.instance_id = Some(id)
    });
    STATUS_SUCCESS
}

pub(crate) unsafe extern "C" fn WdfPdoInitAddDeviceText(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    description: PCUNICODE_STRING,
    location: PCUNICODE_STRING,
    locale: LCID,
) -> NTSTATUS {
    let d = text("WdfPdoInitAddDeviceText", description);
    let l = text("WdfPdoInitAddDeviceText", location);
    pdo_init("WdfPdoInitAddDeviceText", init, PASSIVE, |i| {
        i.text.push((locale, d, l))
    });
    STATUS_SUCCESS
}

pub(crate) unsafe extern "C" fn WdfPdoInitSetDefaultLocale(
    _: PWDF_DRIVER_GLOBALS,
    init: PWDFDEVICE_INIT,
    locale: LCID,
) {
    pdo_init("WdfPdoInitSetDefaultLocale", init, PASSIVE, |i| {
        i.default_locale = Some(locale)
    });
}

pub(crate) unsafe extern "C" fn WdfDeviceAddQueryInterface(
    _: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
    config: PWDF_QUERY_INTERFACE_CONFIG,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceAddQueryInterface";
    let _kernel = super::enter(DDI, PASSIVE);
    // SAFETY: the driver's config.
    let Some(c) = (unsafe { config.as_ref() }) else {
        violation(Rule::NullParameter, DDI, "NULL config")
    };
    if c.Interface.is_null() || c.InterfaceType.is_null() {
        violation(
            Rule::NullParameter,
            DDI,
            "Interface or InterfaceType is NULL",
        );
    }
    // SAFETY: an INTERFACE starts with its Size (u16); KMDF copies that many bytes.
    let size = usize::from(unsafe { (*c.Interface).Size });
    if size < core::mem::size_of::<INTERFACE>() {
        // fxqueryinterfaceapi.cpp: an interface smaller than its own header is refused.
        return with(|k| {
            k.refuse(
                DDI,
                STATUS_INVALID_PARAMETER,
                "Interface->Size below sizeof(INTERFACE)",
            )
        });
    }
    // SAFETY: as above.
    let bytes = unsafe { core::slice::from_raw_parts(c.Interface.cast::<u8>(), size) }.to_vec();
    // SAFETY: a GUID the driver passes.
    let guid = unsafe { *c.InterfaceType };
    with(|k| {
        if c.Size as usize != core::mem::size_of::<WDF_QUERY_INTERFACE_CONFIG>() {
            return k.refuse(
                DDI,
                STATUS_INFO_LENGTH_MISMATCH,
                "WDF_QUERY_INTERFACE_CONFIG.Size",
            );
        }
        match &mut k.live(DDI, device).kind {
            Kind::Device(d) if d.role != Role::Control => {
                d.interfaces.push((guid, bytes));
                STATUS_SUCCESS
            }
            _ => k.refuse(
                DDI,
                STATUS_INVALID_DEVICE_REQUEST,
                "not on a control device",
            ),
        }
    })
}

pub(crate) unsafe extern "C" fn WdfChildListGetDevice(
    _: PWDF_DRIVER_GLOBALS,
    list: WDFCHILDLIST,
) -> WDFDEVICE {
    let _kernel = super::enter("WdfChildListGetDevice", DISPATCH);
    with(|k| match &k.live("WdfChildListGetDevice", list).kind {
        Kind::ChildList { device, .. } => *device as WDFDEVICE,
        other => violation(Rule::WrongObjectType, "WdfChildListGetDevice", other.name()),
    })
}

pub(crate) unsafe extern "C" fn WdfFdoGetDefaultChildList(
    _: PWDF_DRIVER_GLOBALS,
    fdo: WDFDEVICE,
) -> WDFCHILDLIST {
    let _kernel = super::enter("WdfFdoGetDefaultChildList", DISPATCH);
    with(|k| match &k.live("WdfFdoGetDefaultChildList", fdo).kind {
        Kind::Device(d) => d
            .child_list
            .map_or(core::ptr::null_mut(), |h| h as WDFCHILDLIST),
        other => violation(
            Rule::WrongObjectType,
            "WdfFdoGetDefaultChildList",
            other.name(),
        ),
    })
}

fn scan(ddi: &str, list: WDFCHILDLIST, begin: bool, max_irql: u8) {
    let _kernel = super::enter(ddi, max_irql);
    with(|k| match &mut k.live(ddi, list).kind {
        Kind::ChildList {
            children, scanning, ..
        } => {
            if begin {
                children.iter_mut().for_each(|c| c.reported = false);
            } else {
                children
                    .iter_mut()
                    .filter(|c| !c.reported)
                    .for_each(|c| c.present = false);
            }
            *scanning = begin;
        }
        other => violation(Rule::WrongObjectType, ddi, other.name()),
    });
}

pub(crate) unsafe extern "C" fn WdfChildListBeginScan(_: PWDF_DRIVER_GLOBALS, list: WDFCHILDLIST) {
    scan("WdfChildListBeginScan", list, true, DISPATCH);
}

pub(crate) unsafe extern "C" fn WdfChildListEndScan(_: PWDF_DRIVER_GLOBALS, list: WDFCHILDLIST) {
    scan("WdfChildListEndScan", list, false, DISPATCH);
}

pub(crate) unsafe extern "C" fn WdfChildListAddOrUpdateChildDescriptionAsPresent(
    _: PWDF_DRIVER_GLOBALS,
    list: WDFCHILDLIST,
    id: PWDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER,
    _address: PWDF_CHILD_ADDRESS_DESCRIPTION_HEADER,
) -> NTSTATUS {
    const DDI: &str = "WdfChildListAddOrUpdateChildDescriptionAsPresent";
    let _kernel = super::enter(DDI, DISPATCH);
    if id.is_null() {
        violation(
            Rule::NullParameter,
            DDI,
            "IdentificationDescription is NULL",
        );
    }
    with(|k| match &mut k.live(DDI, list).kind {
        Kind::ChildList {
            config, children, ..
        } => {
            // SAFETY: a header the driver passes.
            let size = unsafe { (*id).IdentificationDescriptionSize };
            if size != config.IdentificationDescriptionSize {
                violation(
                    Rule::ChildList,
                    DDI,
                    &format!(
                        "{size} bytes where the list was configured with {}",
                        config.IdentificationDescriptionSize
                    ),
                );
            }
            // SAFETY: `size` bytes at `id`, as checked.
            let bytes =
                unsafe { core::slice::from_raw_parts(id.cast::<u8>(), size as usize) }.to_vec();
            match children.iter_mut().find(|c| c.identification == bytes) {
                Some(c) => {
                    c.present = true;
                    c.reported = true;
                }
                None => children.push(Child {
                    identification: bytes,
                    present: true,
                    reported: true,
                    pdo: None,
                }),
            }
            STATUS_SUCCESS
        }
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    })
}

pub(crate) unsafe extern "C" fn WdfCmResourceListGetCount(
    _: PWDF_DRIVER_GLOBALS,
    list: WDFCMRESLIST,
) -> ULONG {
    let _kernel = super::enter("WdfCmResourceListGetCount", DISPATCH);
    with(|k| match &k.live("WdfCmResourceListGetCount", list).kind {
        Kind::ResourceList { descriptors } => descriptors.len() as ULONG,
        other => violation(
            Rule::WrongObjectType,
            "WdfCmResourceListGetCount",
            other.name(),
        ),
    })
}

pub(crate) unsafe extern "C" fn WdfCmResourceListGetDescriptor(
    _: PWDF_DRIVER_GLOBALS,
    list: WDFCMRESLIST,
    index: ULONG,
) -> PCM_PARTIAL_RESOURCE_DESCRIPTOR {
    let _kernel = super::enter("WdfCmResourceListGetDescriptor", DISPATCH);
    with(
        |k| match &mut k.live("WdfCmResourceListGetDescriptor", list).kind {
            Kind::ResourceList { descriptors } => descriptors
                .get_mut(index as usize)
                .map_or(core::ptr::null_mut(), |d| d as *mut _),
            other => violation(
                Rule::WrongObjectType,
                "WdfCmResourceListGetDescriptor",
                other.name(),
            ),
        },
    )
}

/// GUID_BUS_INTERFACE_STANDARD, as the PCI bus driver answers it.
/// On an FDO stacked on a PDO of the bus's (the child driver's), the query goes down its
/// stack to that PDO, which answers from what the bus published (`children::answer_query`).
pub(crate) unsafe extern "C" fn WdfFdoQueryForInterface(
    _: PWDF_DRIVER_GLOBALS,
    fdo: WDFDEVICE,
    guid: LPCGUID,
    interface: PINTERFACE,
    size: USHORT,
    version: USHORT,
    _data: PVOID,
) -> NTSTATUS {
    const DDI: &str = "WdfFdoQueryForInterface";
    let _kernel = super::enter(DDI, PASSIVE);
    if guid.is_null() || interface.is_null() {
        violation(
            Rule::NullParameter,
            DDI,
            "InterfaceType or Interface is NULL",
        );
    }
    // SAFETY: a GUID the driver passes.
    let g = unsafe { *guid };
    let want = GUID_BUS_INTERFACE_STANDARD;
    let same = g.Data1 == want.Data1
        && g.Data2 == want.Data2
        && g.Data3 == want.Data3
        && g.Data4 == want.Data4;
    let (adapter, lower_pdo) = with(|k| match &k.live(DDI, fdo).kind {
        Kind::Device(d) if d.role == Role::Fdo => (d.adapter, d.lower_pdo),
        _ => violation(Rule::WrongObjectType, DDI, "not an FDO"),
    });
    if let Some(pdo) = lower_pdo {
        drop(_kernel);
        return match super::children::answer_query(pdo, &g, usize::from(size), version) {
            Ok(bytes) => {
                // SAFETY: `size` bytes of the caller's; KMDF writes the published size, no
                // more than asked for (answer_query's check).
                unsafe {
                    core::ptr::copy_nonoverlapping(bytes.as_ptr(), interface.cast(), bytes.len())
                };
                STATUS_SUCCESS
            }
            Err(status) => status,
        };
    }
    if !same || usize::from(size) < core::mem::size_of::<BUS_INTERFACE_STANDARD>() {
        return STATUS_NOT_SUPPORTED;
    }
    let context = (adapter + 1) as PVOID;
    let iface = interface.cast::<BUS_INTERFACE_STANDARD>();
    // SAFETY: `size` bytes of the caller's, checked to hold a BUS_INTERFACE_STANDARD.
    unsafe {
        iface.write(BUS_INTERFACE_STANDARD {
            Size: core::mem::size_of::<BUS_INTERFACE_STANDARD>() as USHORT,
            Version: 1,
            Context: context,
            InterfaceReference: callable::<PINTERFACE_REFERENCE>(Some(pci_reference)),
            InterfaceDereference: callable::<PINTERFACE_DEREFERENCE>(Some(pci_dereference)),
            TranslateBusAddress: None,
            GetDmaAdapter: None,
            SetBusData: callable::<PGET_SET_DEVICE_DATA>(Some(bus_data::<true>)),
            GetBusData: callable::<PGET_SET_DEVICE_DATA>(Some(bus_data::<false>)),
        })
    };
    // The exporting driver references the interface before it returns it.
    // SAFETY: the context just made.
    unsafe { pci_reference(context) };
    STATUS_SUCCESS
}

pub(crate) unsafe extern "C" fn WdfDriverOpenParametersRegistryKey(
    _: PWDF_DRIVER_GLOBALS,
    driver: WDFDRIVER,
    _access: ACCESS_MASK,
    a: PWDF_OBJECT_ATTRIBUTES,
    key: *mut WDFKEY,
) -> NTSTATUS {
    const DDI: &str = "WdfDriverOpenParametersRegistryKey";
    let _kernel = super::enter(DDI, PASSIVE);
    if key.is_null() {
        violation(Rule::NullParameter, DDI, "Key is NULL");
    }
    with(|k| {
        k.live(DDI, driver);
        if let Err((s, why)) = super::objects::validate(a, super::objects::Options::default()) {
            return k.refuse(DDI, s, why);
        }
        let h = k.create(DDI, Kind::Key, a, Some(driver as usize));
        // SAFETY: checked non-null.
        unsafe { *key = h as WDFKEY };
        STATUS_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn WdfRegistryQueryULong(
    _: PWDF_DRIVER_GLOBALS,
    key: WDFKEY,
    name: PCUNICODE_STRING,
    value: PULONG,
) -> NTSTATUS {
    const DDI: &str = "WdfRegistryQueryULong";
    let _kernel = super::enter(DDI, PASSIVE);
    let name = text(DDI, name);
    with(|k| {
        k.live(DDI, key);
        match k.parameters.get(&name) {
            Some(v) => {
                // SAFETY: the driver's out-pointer.
                unsafe { *value = *v };
                STATUS_SUCCESS
            }
            None => STATUS_OBJECT_NAME_NOT_FOUND,
        }
    })
}

pub(crate) unsafe extern "C" fn WdfRegistryClose(_: PWDF_DRIVER_GLOBALS, key: WDFKEY) {
    const DDI: &str = "WdfRegistryClose";
    let _kernel = super::enter(DDI, PASSIVE);
    let cleanups = with(|k| {
        k.live(DDI, key);
        k.delete(DDI, key as usize)
    });
    super::objects::run_cleanups(cleanups);
}

fn request<R>(
    ddi: &str,
    request: WDFREQUEST,
    f: impl FnOnce(&mut super::machine::Request) -> R,
) -> R {
    let _kernel = super::enter(ddi, DISPATCH);
    with(|k| match &mut k.live(ddi, request).kind {
        Kind::Request(r) => {
            if r.completed {
                violation(
                    Rule::RequestUsedAfterCompletion,
                    ddi,
                    "the request was completed",
                );
            }
            f(r)
        }
        other => violation(Rule::WrongObjectType, ddi, other.name()),
    })
}

/// WdfRequestRetrieveInput/OutputBuffer of a METHOD_BUFFERED request: the one system buffer,
/// with the length of that direction; a length of 0 is STATUS_BUFFER_TOO_SMALL.
fn retrieve(
    ddi: &str,
    req: WDFREQUEST,
    minimum: usize,
    buffer: *mut PVOID,
    length: *mut usize,
    output: bool,
) -> NTSTATUS {
    if buffer.is_null() {
        violation(Rule::NullParameter, ddi, "Buffer is NULL");
    }
    request(ddi, req, |r| {
        let len = if output {
            r.output_length
        } else {
            r.input_length
        };
        if len == 0 || len < minimum {
            return STATUS_BUFFER_TOO_SMALL;
        }
        // SAFETY: the driver's out-pointer, checked non-null.
        unsafe { *buffer = r.system_buffer.as_mut_ptr().cast() };
        if !length.is_null() {
            // SAFETY: optional, and given.
            unsafe { *length = len };
        }
        STATUS_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn WdfRequestRetrieveInputBuffer(
    _: PWDF_DRIVER_GLOBALS,
    r: WDFREQUEST,
    minimum: usize,
    buffer: *mut PVOID,
    length: *mut usize,
) -> NTSTATUS {
    let _kernel = super::enter("WdfRequestRetrieveInputBuffer", DISPATCH);
    retrieve(
        "WdfRequestRetrieveInputBuffer",
        r,
        minimum,
        buffer,
        length,
        false,
    )
}

pub(crate) unsafe extern "C" fn WdfRequestRetrieveOutputBuffer(
    _: PWDF_DRIVER_GLOBALS,
    r: WDFREQUEST,
    minimum: usize,
    buffer: *mut PVOID,
    length: *mut usize,
) -> NTSTATUS {
    let _kernel = super::enter("WdfRequestRetrieveOutputBuffer", DISPATCH);
    retrieve(
        "WdfRequestRetrieveOutputBuffer",
        r,
        minimum,
        buffer,
        length,
        true,
    )
}

pub(crate) unsafe extern "C" fn WdfRequestWdmGetIrp(_: PWDF_DRIVER_GLOBALS, r: WDFREQUEST) -> PIRP {
    let _kernel = super::enter("WdfRequestWdmGetIrp", DISPATCH);
    request("WdfRequestWdmGetIrp", r, |r| &mut *r.irp as PIRP)
}

pub(crate) unsafe extern "C" fn WdfRequestCompleteWithInformation(
    _: PWDF_DRIVER_GLOBALS,
    r: WDFREQUEST,
    status: NTSTATUS,
    information: ULONG_PTR,
) {
    const DDI: &str = "WdfRequestCompleteWithInformation";
    let _kernel = super::enter(DDI, DISPATCH);
    with(|k| match &mut k.object(DDI, r).kind {
        Kind::Request(req) => {
            if req.completed {
                violation(Rule::RequestCompletedTwice, DDI, "completed again");
            }
            if status >= 0 && information as usize > req.output_length {
                violation(
                    Rule::InformationTooLarge,
                    DDI,
                    &format!(
                        "{information} bytes into a {}-byte output buffer",
                        req.output_length
                    ),
                );
            }
            req.completed = true;
            req.status = status;
            req.information = information as usize;
            let n = req.information.min(req.output_length);
            req.delivered = req.system_buffer[..n].to_vec();
            req.system_buffer.fill(super::io::POISON);
        }
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    });
    drop(_kernel);
    // A request a queue dispatched: its queue's events follow its completion.
    super::queues::completed(r as usize);
}

impl Kernel {
    /// The device behind a handle, for the machine.
    pub(crate) fn device(&mut self, h: usize) -> &mut super::kernel::Device {
        match &mut self.objects[Kernel::index_of(h as _)].kind {
            Kind::Device(d) => d,
            other => violation(Rule::WrongObjectType, "(machine)", other.name()),
        }
    }
}
