//! HCABUS_BUS_INTERFACE_V1 on each child PDO (WdfDeviceAddQueryInterface), its functions
//! bound to the FDO's bus. **Never compiled** (docs/windows.md). The Linux twin of these
//! functions, over the threaded host, is driver/capi/src/interface.rs, tested from C.

use core::ffi::{c_char, c_void, CStr};

use hcabus::bus_abi::*;
use hcabus::types::{ClientId, Epoch, VetoReason};
use wdk_sys::*;

use super::platform::{fdo_context, CCallback};
use super::FdoContext;

/// The interface the PDO of a child publishes; `Context` is the FDO.
pub(crate) fn interface_for(fdo: WDFDEVICE) -> HcabusBusInterfaceV1 {
    HcabusBusInterfaceV1 {
        size: core::mem::size_of::<HcabusBusInterfaceV1>() as u16,
        version: HCABUS_BUS_INTERFACE_VERSION,
        context: fdo.cast(),
        // KMDF counts references on the PDO itself.
        interface_reference: Some(reference_no_op),
        interface_dereference: Some(reference_no_op),
        register: Some(register),
        unregister: Some(unregister),
        reset_request: Some(reset_request),
        reset_execute: Some(reset_execute),
        reset_consent: Some(reset_consent),
        reset_veto: Some(reset_veto),
        query_state: Some(query_state),
    }
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
        SendQueryToParent: 0,
        ImportInterface: 0,
        EvtDeviceProcessQueryInterfaceRequest: None,
    };
    // SAFETY: KMDF copies the interface (of the size in its header) when a child asks.
    unsafe { call_unsafe_wdf_function_binding!(WdfDeviceAddQueryInterface, pdo, &mut config) }
}

unsafe extern "C" fn reference_no_op(_context: *mut c_void) {}

/// Runs a call on the bus of the FDO behind `context`; never unwinds (panic=abort in the
/// driver profile), refuses a null context or a device with no bus.
fn with_bus(
    context: *mut c_void,
    call: impl FnOnce(&crate::bus::Bus<super::platform::WdfPlatform>) -> HcabusStatus,
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

unsafe extern "C" fn register(
    context: *mut c_void,
    desc: *const HcabusClientDesc,
    out: *mut HcabusRegistration,
) -> HcabusStatus {
    with_bus(context, |bus| {
        if desc.is_null() || out.is_null() {
            return status::INVALID_PARAMETER;
        }
        // SAFETY: non-null, an HCABUS_CLIENT_DESC by the caller's contract.
        let d = unsafe { desc.read_unaligned() };
        let (Some(function), false) = (d.event_callback, d.name.is_null()) else {
            return status::INVALID_PARAMETER;
        };
        // SAFETY: non-null and NUL-terminated by the caller's contract; read now only.
        let name = unsafe { CStr::from_ptr(d.name) }.to_bytes();
        let client = match client_desc(d.size, d.kind, d.flags, name) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let callback = CCallback {
            function,
            context: d.client_context,
        };
        match bus.register(client, callback) {
            Ok(r) => {
                let reg = HcabusRegistration {
                    client_id: r.id.to_raw(),
                    epoch: r.epoch.0,
                    state: r.state as u32,
                    late: r.late.into(),
                };
                // SAFETY: non-null and writable by the caller's contract.
                unsafe { out.write_unaligned(reg) };
                status::SUCCESS
            }
            Err(e) => status::of_refusal(e.code()),
        }
    })
}

unsafe extern "C" fn unregister(context: *mut c_void, client: u64) -> HcabusStatus {
    with_bus(context, |bus| {
        status_of(bus.unregister(ClientId::from_raw(client)))
    })
}

unsafe extern "C" fn reset_request(
    context: *mut c_void,
    client: u64,
    epoch: *mut u64,
) -> HcabusStatus {
    with_bus(context, |bus| {
        match bus.reset_request(ClientId::from_raw(client)) {
            Ok(e) => {
                if !epoch.is_null() {
                    // SAFETY: non-null and writable by the caller's contract.
                    unsafe { epoch.write_unaligned(e.0) };
                }
                status::SUCCESS
            }
            Err(e) => status::of_refusal(e.code()),
        }
    })
}

unsafe extern "C" fn reset_execute(context: *mut c_void, client: u64, epoch: u64) -> HcabusStatus {
    use hcabus::ExecuteOutcome;
    with_bus(context, |bus| {
        match bus.reset_execute(ClientId::from_raw(client), Epoch(epoch)) {
            Ok(ExecuteOutcome::Accepted) => status::SUCCESS,
            Ok(ExecuteOutcome::AlreadyReady) => status::ALREADY_READY,
            Ok(ExecuteOutcome::TooLate) => status::PAST_DEADLINE,
            Err(e) => status::of_refusal(e.code()),
        }
    })
}

unsafe extern "C" fn reset_consent(context: *mut c_void, client: u64, epoch: u64) -> HcabusStatus {
    with_bus(context, |bus| {
        status_of(bus.reset_consent(ClientId::from_raw(client), Epoch(epoch)))
    })
}

unsafe extern "C" fn reset_veto(
    context: *mut c_void,
    client: u64,
    epoch: u64,
    reason: *const c_char,
) -> HcabusStatus {
    with_bus(context, |bus| {
        let reason = if reason.is_null() {
            VetoReason::cut("")
        } else {
            // SAFETY: NUL-terminated by the caller's contract; read now only.
            let bytes = unsafe { CStr::from_ptr(reason) }.to_bytes();
            VetoReason::cut(core::str::from_utf8(bytes).unwrap_or("(not UTF-8)"))
        };
        status_of(bus.reset_veto(ClientId::from_raw(client), Epoch(epoch), reason))
    })
}

unsafe extern "C" fn query_state(context: *mut c_void, out: *mut HcabusBusState) -> HcabusStatus {
    with_bus(context, |bus| {
        if out.is_null() {
            return status::INVALID_PARAMETER;
        }
        // SAFETY: non-null; only the first field, the size, is read before it is checked.
        let size = unsafe { out.cast::<u32>().read_unaligned() };
        if size as usize != core::mem::size_of::<HcabusBusState>() {
            return status::INFO_LENGTH_MISMATCH;
        }
        let (state, epoch, now) = bus.state();
        let answer = HcabusBusState {
            size,
            state: state as u32,
            epoch: epoch.0,
            now_us: now.as_us(),
        };
        // SAFETY: writable, its size checked.
        unsafe { out.write_unaligned(answer) };
        status::SUCCESS
    })
}
