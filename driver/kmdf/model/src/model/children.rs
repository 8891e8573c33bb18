//! The PnP manager's side of the child list: a PDO per present child (through the driver's
//! EvtChildListCreateDevice), the questions PnP asks each PDO, their removal, and a child
//! driver's IRP_MN_QUERY_INTERFACE.

use std::vec::Vec;

use wdk_sys::*;

use super::driver::DriverFn;
use super::kernel::{Handle, Init, InitOrigin, InitState, Kernel, Kind, Role};
use super::machine::at;
use super::{violation, with, Rule, PASSIVE};

/// The child list of an FDO, and each present child without a PDO (its identification).
fn pending(
    fdo: Handle,
) -> (
    Handle,
    PFN_WDF_CHILD_LIST_CREATE_DEVICE,
    Vec<(usize, Vec<u8>)>,
) {
    with(|k| {
        let list = k
            .device(fdo)
            .child_list
            .unwrap_or_else(|| violation(Rule::Expectation, "enumerate", "no child list"));
        match &k.objects[Kernel::index_of(list as _)].kind {
            Kind::ChildList {
                config, children, ..
            } => (
                list,
                config.EvtChildListCreateDevice,
                children
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.present && c.pdo.is_none())
                    .map(|(i, c)| (i, c.identification.clone()))
                    .collect(),
            ),
            _ => violation(Rule::WrongObjectType, "enumerate", "not a child list"),
        }
    })
}

/// IRP_MN_QUERY_DEVICE_RELATIONS (BusRelations) and what follows for each new child.
pub(crate) fn enumerate(fdo: Handle) {
    remove_missing(fdo);
    let (list, create, new) = pending(fdo);
    let Some(create) = create else { return };
    for (index, mut identification) in new {
        let init = with(|k| {
            k.inits.push(Init::new(InitOrigin::Child, String::new(), 0));
            Kernel::init_handle(k.inits.len() - 1)
        });
        let before = with(|k| k.objects.len());
        // SAFETY: the driver's callback with its list, a copy of the identification and an
        // init KMDF owns.
        let status = at("EvtChildListCreateDevice", PASSIVE, || unsafe {
            create.run((
                list as WDFCHILDLIST,
                identification
                    .as_mut_ptr()
                    .cast::<WDF_CHILD_IDENTIFICATION_DESCRIPTION_HEADER>(),
                init,
            ))
        });
        with(|k| {
            let n = Kernel::init_index(init);
            if k.inits[n].state == InitState::Open {
                k.inits[n].state = InitState::Freed;
            }
            if status < 0 {
                violation(
                    Rule::Expectation,
                    "EvtChildListCreateDevice",
                    &format!("a present child's PDO was not created: {status:#x}"),
                );
            }
            let pdo = (before..k.objects.len())
                .find(|i| matches!(&k.objects[*i].kind, Kind::Device(d) if d.role == Role::Pdo))
                .map(Kernel::handle_of);
            let Some(pdo) = pdo else {
                violation(
                    Rule::Expectation,
                    "EvtChildListCreateDevice",
                    "success with no PDO",
                )
            };
            k.objects[Kernel::index_of(pdo as _)].parent = Some(fdo);
            check_identity(k, fdo, pdo);
            if let Kind::ChildList { children, .. } =
                &mut k.objects[Kernel::index_of(list as _)].kind
            {
                children[index].pdo = Some(pdo);
            }
        });
    }
}

/// What PnP asks a new PDO (IRP_MN_QUERY_ID, IRP_MN_QUERY_DEVICE_TEXT), and the siblings'
/// instance ids unique.
fn check_identity(k: &mut Kernel, fdo: Handle, pdo: Handle) {
    const DDI: &str = "IRP_MN_QUERY_ID";
    let id = k.device(pdo).identity.clone();
    if id.device_id.is_none() || id.hardware_ids.is_empty() {
        violation(
            Rule::PdoIdentity,
            DDI,
            "BusQueryDeviceID or BusQueryHardwareIDs unanswered",
        );
    }
    let Some(instance) = id.instance_id.clone() else {
        violation(
            Rule::PdoIdentity,
            DDI,
            "BusQueryInstanceID unanswered (no WdfPdoInitAssignInstanceID)",
        );
    };
    let Some(locale) = id.default_locale else {
        violation(
            Rule::PdoIdentity,
            "IRP_MN_QUERY_DEVICE_TEXT",
            "no default locale (WdfPdoInitSetDefaultLocale)",
        );
    };
    if !id
        .text
        .iter()
        .any(|(l, d, _)| *l == locale && !d.is_empty())
    {
        violation(
            Rule::PdoIdentity,
            "IRP_MN_QUERY_DEVICE_TEXT",
            "no description in the default locale",
        );
    }
    let siblings: Vec<Handle> = (0..k.objects.len())
        .map(Kernel::handle_of)
        .filter(|h| *h != pdo)
        .collect();
    for s in siblings {
        let o = &k.objects[Kernel::index_of(s as _)];
        if o.deleted || o.parent != Some(fdo) {
            continue;
        }
        if let Kind::Device(d) = &o.kind {
            if d.role == Role::Pdo
                && d.identity.device_id == id.device_id
                && d.identity.instance_id.as_ref() == Some(&instance)
            {
                violation(
                    Rule::PdoIdentity,
                    DDI,
                    "two children with one device id and one instance id",
                );
            }
        }
    }
}

/// PDOs whose child is no longer present are removed (KMDF deletes them).
fn remove_missing(fdo: Handle) {
    with(|k| {
        let Some(list) = k.device(fdo).child_list else {
            return;
        };
        let gone: Vec<Handle> = match &mut k.objects[Kernel::index_of(list as _)].kind {
            Kind::ChildList { children, .. } => children
                .iter_mut()
                .filter(|c| !c.present)
                .filter_map(|c| c.pdo.take())
                .collect(),
            _ => Vec::new(),
        };
        for pdo in gone {
            stacked_on(k, pdo);
            k.delete_now("remove PDO", pdo);
        }
    });
}

/// A PDO is deleted only with no other driver's device on it: PnP removes the stack above a
/// PDO first (the machine does, `Machine::remove_child_stacks`). A PDO re-enumerated away
/// under a device (a reset that changed the firmware) is a removal the model does not make
/// yet: it says so rather than leave a device on a deleted PDO.
fn stacked_on(k: &mut Kernel, pdo: Handle) {
    let above = k
        .objects
        .iter()
        .any(|o| !o.deleted && matches!(&o.kind, Kind::Device(d) if d.lower_pdo == Some(pdo)));
    if above {
        violation(
            Rule::Unmodelled,
            "remove PDO",
            "a PDO removed with a driver's device still on it (the model removes such a stack \
             only before the bus's own removal)",
        );
    }
}

/// Removes every child's PDO (before the FDO goes, as PnP removes children first).
pub(crate) fn remove_all(fdo: Handle) {
    with(|k| {
        let Some(list) = k.device(fdo).child_list else {
            return;
        };
        let gone: Vec<Handle> = match &mut k.objects[Kernel::index_of(list as _)].kind {
            Kind::ChildList { children, .. } => {
                children.iter_mut().filter_map(|c| c.pdo.take()).collect()
            }
            _ => Vec::new(),
        };
        for pdo in gone {
            if !k.objects[Kernel::index_of(pdo as _)].deleted {
                stacked_on(k, pdo);
                k.delete_now("remove PDO", pdo);
            }
        }
    });
}

/// The PDO of the child whose serial is `serial`, if it has one.
pub(crate) fn pdo_of(fdo: Handle, serial: u32) -> Option<Handle> {
    with(|k| pdo_of_in(k, fdo, serial))
}

/// A child driver's IRP_MN_QUERY_INTERFACE on the PDO of the child whose serial is `serial`,
/// for `size` bytes of version `version` ([`answer_query`]). The bytes are the caller's
/// buffer after the IRP: `size` of them, what KMDF did not write left as `filler`.
pub(crate) fn query_interface(
    fdo: Handle,
    serial: u32,
    guid: &GUID,
    size: usize,
    version: u16,
    filler: u8,
) -> Result<Vec<u8>, NTSTATUS> {
    let pdo = with(|k| pdo_of_in(k, fdo, serial)).ok_or(STATUS_NO_SUCH_DEVICE)?;
    let published = answer_query(pdo, guid, size, version)?;
    let mut buffer = vec![filler; size];
    buffer[..published.len()].copy_from_slice(&published);
    Ok(buffer)
}

/// IRP_MN_QUERY_INTERFACE on `pdo`, answered as KMDF's PDO answers it
/// (FxPkgPnp::HandleQueryInterface): the first interface published with that GUID, its own
/// `Size` bytes, when that size and its version are each at most the ones asked for, else
/// STATUS_INVALID_BUFFER_SIZE; no interface of that GUID, STATUS_NOT_SUPPORTED. The copy is
/// referenced before it is returned (KMDF calls its InterfaceReference); a refusal takes
/// nothing. The bytes returned are what KMDF writes into the caller's buffer.
pub(crate) fn answer_query(
    pdo: Handle,
    guid: &GUID,
    size: usize,
    version: u16,
) -> Result<Vec<u8>, NTSTATUS> {
    let published = with(|k| {
        let d = k.device(pdo);
        let (_, bytes) = d
            .interfaces
            .iter()
            .find(|(g, _)| {
                g.Data1 == guid.Data1
                    && g.Data2 == guid.Data2
                    && g.Data3 == guid.Data3
                    && g.Data4 == guid.Data4
            })
            .ok_or(STATUS_NOT_SUPPORTED)?;
        Ok::<Vec<u8>, NTSTATUS>(bytes.clone())
    })?;
    // SAFETY: WdfDeviceAddQueryInterface kept only interfaces at least an INTERFACE long.
    let header = unsafe { published.as_ptr().cast::<INTERFACE>().read_unaligned() };
    if usize::from(header.Size) > size || header.Version > version {
        return Err(STATUS_INVALID_BUFFER_SIZE);
    }
    if let Some(reference) = header.InterfaceReference {
        // SAFETY: the interface's own function and context, as KMDF calls it.
        at("InterfaceReference", PASSIVE, || unsafe {
            reference.run((header.Context,))
        });
    }
    Ok(published)
}

/// The PDO of `fdo`'s child whose serial is `serial`.
fn pdo_of_in(k: &mut Kernel, fdo: Handle, serial: u32) -> Option<Handle> {
    let list = k.device(fdo).child_list?;
    match &k.objects[Kernel::index_of(list as _)].kind {
        Kind::ChildList { children, .. } => {
            children
                .iter()
                .find(|c| c.identification.get(4..8) == Some(&serial.to_le_bytes()[..]))?
                .pdo
        }
        _ => None,
    }
}
