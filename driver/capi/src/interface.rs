//! `HCABUS_BUS_INTERFACE_V1`: the query interface and every function it points to.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hcabus::bus_abi::*;
use hcabus::types::{ClientId, Epoch, VetoReason};

use crate::callback::CCallback;
use crate::{guard, sim_from, HcabusSim};

/// IRP_MN_QUERY_INTERFACE for this bus: fills `*out` with `HCABUS_BUS_INTERFACE_V1` and
/// references it once (the caller dereferences it when done).
///
/// Refusals, as a bus driver's: another interface type `NOT_SUPPORTED`, version 0
/// `REVISION_MISMATCH` (a later version gets version 1, which `Version` then says), a `size`
/// smaller than the interface `BUFFER_TOO_SMALL`; nothing is written then.
///
/// # Safety
/// `sim` is null or a live handle; `guid` null or a GUID; `out` null or writable for `size`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn hcabus_sim_query_interface(
    sim: *mut HcabusSim,
    guid: *const Guid,
    size: u16,
    version: u16,
    out: *mut HcabusBusInterfaceV1,
) -> HcabusStatus {
    guard(|| {
        // SAFETY: null or a live handle, by the caller's contract.
        let live = match unsafe { sim_from(sim.cast()) } {
            Ok(live) => live,
            Err(e) => return e,
        };
        if guid.is_null() || out.is_null() {
            return status::INVALID_PARAMETER;
        }
        // SAFETY: non-null, a GUID by the caller's contract.
        if unsafe { guid.read_unaligned() } != GUID_HCABUS_BUS_INTERFACE {
            return status::NOT_SUPPORTED;
        }
        if version == 0 {
            return status::REVISION_MISMATCH;
        }
        if usize::from(size) < size_of::<HcabusBusInterfaceV1>() {
            return status::BUFFER_TOO_SMALL;
        }
        let interface = HcabusBusInterfaceV1 {
            size: size_of::<HcabusBusInterfaceV1>() as u16,
            version: HCABUS_BUS_INTERFACE_VERSION,
            context: sim.cast(),
            interface_reference: Some(interface_reference),
            interface_dereference: Some(interface_dereference),
            register: Some(register),
            unregister: Some(unregister),
            reset_request: Some(reset_request),
            reset_execute: Some(reset_execute),
            reset_consent: Some(reset_consent),
            reset_veto: Some(reset_veto),
            query_state: Some(query_state),
        };
        live.references.fetch_add(1, Ordering::AcqRel);
        // SAFETY: non-null and writable for `size` bytes, at least the interface's.
        unsafe { out.write_unaligned(interface) };
        status::SUCCESS
    })
}

/// Runs a call on the bus behind `context`.
pub(crate) fn with_bus(
    context: *mut c_void,
    call: impl FnOnce(&HcabusSim) -> HcabusStatus,
) -> HcabusStatus {
    guard(|| {
        // SAFETY: every function below is reached only through an interface whose context
        // is a live bus (the header's contract); a null or foreign context is refused.
        match unsafe { sim_from(context) } {
            Ok(sim) => call(sim),
            Err(e) => e,
        }
    })
}

unsafe extern "C" fn interface_reference(context: *mut c_void) {
    with_bus(context, |sim| {
        sim.references.fetch_add(1, Ordering::AcqRel);
        status::SUCCESS
    });
}

unsafe extern "C" fn interface_dereference(context: *mut c_void) {
    with_bus(context, |sim| {
        // One more dereference than references is a caller's bug: refused, never wrapped.
        let dropped = sim
            .references
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        if dropped.is_err() {
            log::error!("InterfaceDereference without a reference: ignored");
        }
        status::SUCCESS
    });
}

unsafe extern "C" fn register(
    context: *mut c_void,
    desc: *const HcabusClientDesc,
    out: *mut HcabusRegistration,
) -> HcabusStatus {
    with_bus(context, |sim| {
        if desc.is_null() || out.is_null() {
            return status::INVALID_PARAMETER;
        }
        // SAFETY: non-null, an HCABUS_CLIENT_DESC by the caller's contract.
        let d = unsafe { desc.read_unaligned() };
        if d.name.is_null() {
            return status::INVALID_PARAMETER;
        }
        let Some(function) = d.event_callback else {
            return status::INVALID_PARAMETER;
        };
        // SAFETY: non-null and NUL-terminated by the caller's contract; read now only.
        let name = unsafe { CStr::from_ptr(d.name) }.to_bytes();
        let client = match client_desc(d.size, d.kind, d.flags, name) {
            Ok(client) => client,
            Err(e) => return e,
        };
        let callback = Arc::new(CCallback {
            function,
            context: d.client_context,
        });
        match sim.host.bus().register(client, callback) {
            Ok(r) => {
                let registration = HcabusRegistration {
                    client_id: r.id.to_raw(),
                    epoch: r.epoch.0,
                    state: r.state as u32,
                    late: r.late.into(),
                };
                // SAFETY: non-null and writable by the caller's contract.
                unsafe { out.write_unaligned(registration) };
                status::SUCCESS
            }
            Err(e) => status::of_refusal(e.code()),
        }
    })
}

unsafe extern "C" fn unregister(context: *mut c_void, client: u64) -> HcabusStatus {
    with_bus(context, |sim| {
        status_of(sim.host.bus().unregister(ClientId::from_raw(client)))
    })
}

unsafe extern "C" fn reset_request(
    context: *mut c_void,
    client: u64,
    epoch: *mut u64,
) -> HcabusStatus {
    with_bus(context, |sim| {
        match sim.host.bus().reset_request(ClientId::from_raw(client)) {
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
    with_bus(context, |sim| {
        let id = ClientId::from_raw(client);
        match sim.host.bus().reset_execute(id, Epoch(epoch)) {
            Ok(ExecuteOutcome::Accepted) => status::SUCCESS,
            Ok(ExecuteOutcome::AlreadyReady) => status::ALREADY_READY,
            Ok(ExecuteOutcome::TooLate) => status::PAST_DEADLINE,
            Err(e) => status::of_refusal(e.code()),
        }
    })
}

unsafe extern "C" fn reset_consent(context: *mut c_void, client: u64, epoch: u64) -> HcabusStatus {
    with_bus(context, |sim| {
        status_of(
            sim.host
                .bus()
                .reset_consent(ClientId::from_raw(client), Epoch(epoch)),
        )
    })
}

unsafe extern "C" fn reset_veto(
    context: *mut c_void,
    client: u64,
    epoch: u64,
    reason: *const c_char,
) -> HcabusStatus {
    with_bus(context, |sim| {
        let reason = if reason.is_null() {
            VetoReason::cut("")
        } else {
            // SAFETY: non-null and NUL-terminated by the caller's contract; read now only.
            let text = unsafe { CStr::from_ptr(reason) }.to_string_lossy();
            VetoReason::cut(&text)
        };
        let id = ClientId::from_raw(client);
        status_of(sim.host.bus().reset_veto(id, Epoch(epoch), reason))
    })
}

unsafe extern "C" fn query_state(context: *mut c_void, out: *mut HcabusBusState) -> HcabusStatus {
    with_bus(context, |sim| {
        if out.is_null() {
            return status::INVALID_PARAMETER;
        }
        // SAFETY: non-null; `size` is the first field of the HCABUS_BUS_STATE the caller
        // owns, so only those four bytes are read before the size is known.
        let size = unsafe { out.cast::<u32>().read_unaligned() };
        if size as usize != size_of::<HcabusBusState>() {
            return status::INFO_LENGTH_MISMATCH;
        }
        let bus = sim.host.bus();
        let (state, epoch) = bus.inspect(|c| (c.state(), c.epoch()));
        let answer = HcabusBusState {
            size,
            state: state as u32,
            epoch: epoch.0,
            now_us: bus.now().as_us(),
        };
        // SAFETY: non-null and writable, checked to be an HCABUS_BUS_STATE by its size.
        unsafe { out.write_unaligned(answer) };
        status::SUCCESS
    })
}
