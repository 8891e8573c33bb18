//! The C ABI of the bus interface, marshalled once: what each function of
//! `HCABUS_BUS_INTERFACE_V1` does with the raw pointers a C child hands it, over the one host
//! ([`Bus`], on any platform).
//!
//! Both exports of the interface use it: the Linux library over the threaded host
//! (driver/capi, tested from C) and the KMDF driver's PDOs (driver/kmdf/src/windows). So the
//! marshalling the Windows driver runs is the marshalling the C tests exercise here; only the
//! `extern "C"` shims that find the bus behind `Context` differ. `no_std`, no allocation.
#![no_std]

use core::ffi::{c_char, c_void, CStr};

use hcabus::bus_abi::*;
use hcabus::coordinator::ExecuteOutcome;
use hcabus::host::{Bus, Platform};
use hcabus::types::*;

// For the macro's expansions elsewhere.
#[doc(hidden)]
pub use hcabus::bus_abi::{
    HcabusBusInterfaceV1, HcabusBusState, HcabusClientDesc, HcabusRegistration, HcabusStatus,
    InterfaceRefFn, HCABUS_BUS_INTERFACE_VERSION,
};

/// A client's callback as C gave it: `void (*)(void *client_context, const HCABUS_EVENT *)`.
#[derive(Debug, Clone, Copy)]
pub struct CCallback {
    pub function: unsafe extern "C" fn(*mut c_void, *const HcabusEvent),
    pub context: *mut c_void,
}

// SAFETY: the C contract (hcabus.h, docs/bus-interface.md) is that a callback may run on any
// processor; the bus never dereferences the context, it only hands it back.
unsafe impl Send for CCallback {}
// SAFETY: as above; the bus only copies the two pointers.
unsafe impl Sync for CCallback {}

impl CCallback {
    /// Calls the client with `event`.
    pub fn deliver(&self, client: ClientId, event: Event) {
        let event = HcabusEvent::new(client, event);
        // SAFETY: the function and context are what the client registered; the event lives on
        // this stack frame for the whole call, which is all hcabus.h promises.
        unsafe { (self.function)(self.context, &event) };
    }
}

/// `Register(ctx, desc, registration)`; `callback_of` makes the platform's callback of the
/// C one.
///
/// # Safety
/// `desc` is null or an `HCABUS_CLIENT_DESC` whose `Name` is null or NUL-terminated; `out` is
/// null or writable for an `HCABUS_REGISTRATION`.
pub unsafe fn register<P: Platform>(
    bus: &Bus<P>,
    desc: *const HcabusClientDesc,
    out: *mut HcabusRegistration,
    callback_of: impl FnOnce(CCallback) -> P::Callback,
) -> HcabusStatus {
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
    match bus.register(client, callback_of(callback)) {
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
}

/// `Unregister(ctx, id)`.
pub fn unregister<P: Platform>(bus: &Bus<P>, client: u64) -> HcabusStatus {
    status_of(bus.unregister(ClientId::from_raw(client)))
}

/// `ResetRequest(ctx, id, &epoch)`.
///
/// # Safety
/// `epoch` is null or writable for a `uint64_t`.
pub unsafe fn reset_request<P: Platform>(
    bus: &Bus<P>,
    client: u64,
    epoch: *mut u64,
) -> HcabusStatus {
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
}

/// `ResetExecute(ctx, id, epoch)`: idempotent and late answers succeed informationally.
pub fn reset_execute<P: Platform>(bus: &Bus<P>, client: u64, epoch: u64) -> HcabusStatus {
    match bus.reset_execute(ClientId::from_raw(client), Epoch(epoch)) {
        Ok(ExecuteOutcome::Accepted) => status::SUCCESS,
        Ok(ExecuteOutcome::AlreadyReady) => status::ALREADY_READY,
        Ok(ExecuteOutcome::TooLate) => status::PAST_DEADLINE,
        Err(e) => status::of_refusal(e.code()),
    }
}

/// `ResetConsent(ctx, id, epoch)`.
pub fn reset_consent<P: Platform>(bus: &Bus<P>, client: u64, epoch: u64) -> HcabusStatus {
    status_of(bus.reset_consent(ClientId::from_raw(client), Epoch(epoch)))
}

/// `ResetVeto(ctx, id, epoch, reason)`: a reason is cut to 32 bytes, never refused.
///
/// # Safety
/// `reason` is null or NUL-terminated.
pub unsafe fn reset_veto<P: Platform>(
    bus: &Bus<P>,
    client: u64,
    epoch: u64,
    reason: *const c_char,
) -> HcabusStatus {
    let reason = if reason.is_null() {
        VetoReason::cut("")
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's contract; read now only.
        let bytes = unsafe { CStr::from_ptr(reason) }.to_bytes();
        // Only the valid prefix of text that is not UTF-8: no allocation to repair it.
        let text = match core::str::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => core::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or(""),
        };
        VetoReason::cut(text)
    };
    status_of(bus.reset_veto(ClientId::from_raw(client), Epoch(epoch), reason))
}

/// `QueryState(ctx, &state)`.
///
/// # Safety
/// `out` is null or an `HCABUS_BUS_STATE` whose first field the caller set; it is written
/// only once that field says it is the right size.
pub unsafe fn query_state<P: Platform>(bus: &Bus<P>, out: *mut HcabusBusState) -> HcabusStatus {
    if out.is_null() {
        return status::INVALID_PARAMETER;
    }
    // SAFETY: non-null; only the first field, the size, is read before it is checked.
    let size = unsafe { out.cast::<u32>().read_unaligned() };
    if size as usize != core::mem::size_of::<HcabusBusState>() {
        return status::INFO_LENGTH_MISMATCH;
    }
    let (state, epoch) = bus.inspect(|c| (c.state(), c.epoch()));
    let now = bus.now();
    let answer = HcabusBusState {
        size,
        state: state as u32,
        epoch: epoch.0,
        now_us: now.as_us(),
    };
    // SAFETY: writable, and checked to be an HCABUS_BUS_STATE by its size.
    unsafe { out.write_unaligned(answer) };
    status::SUCCESS
}

/// Defines the seven `extern "C"` functions of the interface (`register` .. `query_state`),
/// each finding its bus with `$with_bus(context, |bus| ..)` and calling the marshalling above
/// (`register` makes the platform's callback with `$callback_of`), and
/// `interface(context, reference, dereference)`, the structure that points to them. Both
/// exports expand it, so their functions cannot drift apart.
#[macro_export]
macro_rules! interface_functions {
    ($with_bus:path, $callback_of:path) => {
        /// `HCABUS_BUS_INTERFACE_V1` for `context`, with the export's reference counting.
        fn interface(
            context: *mut ::core::ffi::c_void,
            reference: $crate::InterfaceRefFn,
            dereference: $crate::InterfaceRefFn,
        ) -> $crate::HcabusBusInterfaceV1 {
            $crate::HcabusBusInterfaceV1 {
                size: ::core::mem::size_of::<$crate::HcabusBusInterfaceV1>() as u16,
                version: $crate::HCABUS_BUS_INTERFACE_VERSION,
                context,
                interface_reference: reference,
                interface_dereference: dereference,
                register: Some(register),
                unregister: Some(unregister),
                reset_request: Some(reset_request),
                reset_execute: Some(reset_execute),
                reset_consent: Some(reset_consent),
                reset_veto: Some(reset_veto),
                query_state: Some(query_state),
            }
        }

        // SAFETY (for each unsafe block below): the pointers are the C caller's, under
        // hcabus.h's contract, which is what each hcabus_cabi function asks.

        unsafe extern "C" fn register(
            context: *mut ::core::ffi::c_void,
            desc: *const $crate::HcabusClientDesc,
            out: *mut $crate::HcabusRegistration,
        ) -> $crate::HcabusStatus {
            // SAFETY: see above.
            $with_bus(context, |bus| unsafe {
                $crate::register(bus, desc, out, $callback_of)
            })
        }

        unsafe extern "C" fn unregister(
            context: *mut ::core::ffi::c_void,
            client: u64,
        ) -> $crate::HcabusStatus {
            $with_bus(context, |bus| $crate::unregister(bus, client))
        }

        unsafe extern "C" fn reset_request(
            context: *mut ::core::ffi::c_void,
            client: u64,
            epoch: *mut u64,
        ) -> $crate::HcabusStatus {
            // SAFETY: see above.
            $with_bus(context, |bus| unsafe {
                $crate::reset_request(bus, client, epoch)
            })
        }

        unsafe extern "C" fn reset_execute(
            context: *mut ::core::ffi::c_void,
            client: u64,
            epoch: u64,
        ) -> $crate::HcabusStatus {
            $with_bus(context, |bus| $crate::reset_execute(bus, client, epoch))
        }

        unsafe extern "C" fn reset_consent(
            context: *mut ::core::ffi::c_void,
            client: u64,
            epoch: u64,
        ) -> $crate::HcabusStatus {
            $with_bus(context, |bus| $crate::reset_consent(bus, client, epoch))
        }

        unsafe extern "C" fn reset_veto(
            context: *mut ::core::ffi::c_void,
            client: u64,
            epoch: u64,
            reason: *const ::core::ffi::c_char,
        ) -> $crate::HcabusStatus {
            // SAFETY: see above.
            $with_bus(context, |bus| unsafe {
                $crate::reset_veto(bus, client, epoch, reason)
            })
        }

        unsafe extern "C" fn query_state(
            context: *mut ::core::ffi::c_void,
            out: *mut $crate::HcabusBusState,
        ) -> $crate::HcabusStatus {
            // SAFETY: see above.
            $with_bus(context, |bus| unsafe { $crate::query_state(bus, out) })
        }
    };
}
