//! `HCABUS_BUS_INTERFACE_V1`: the query interface and every function it points to.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use hcabus::bus_abi::*;
use hcabus::host::ThreadedBus;

use crate::callback::callback_of;
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
        let interface = interface(
            sim.cast(),
            Some(interface_reference),
            Some(interface_dereference),
        );
        live.references.fetch_add(1, Ordering::AcqRel);
        // SAFETY: non-null and writable for `size` bytes, at least the interface's.
        unsafe { out.write_unaligned(interface) };
        status::SUCCESS
    })
}

/// Runs `call` on the simulated bus behind `context`.
fn with_sim(context: *mut c_void, call: impl FnOnce(&HcabusSim) -> HcabusStatus) -> HcabusStatus {
    guard(|| {
        // SAFETY: every function below is reached only through an interface whose context
        // is a live bus (the header's contract); a null or foreign context is refused.
        match unsafe { sim_from(context) } {
            Ok(sim) => call(sim),
            Err(e) => e,
        }
    })
}

/// Runs a call on the bus behind `context`.
pub(crate) fn with_bus(
    context: *mut c_void,
    call: impl FnOnce(&ThreadedBus) -> HcabusStatus,
) -> HcabusStatus {
    with_sim(context, |sim| call(sim.host.bus()))
}

unsafe extern "C" fn interface_reference(context: *mut c_void) {
    with_sim(context, |sim| {
        sim.references.fetch_add(1, Ordering::AcqRel);
        status::SUCCESS
    });
}

unsafe extern "C" fn interface_dereference(context: *mut c_void) {
    with_sim(context, |sim| {
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

// The interface's functions: the bus behind `Context`, then hcabus-cabi's marshalling.
hcabus_cabi::interface_functions!(with_bus, callback_of);
