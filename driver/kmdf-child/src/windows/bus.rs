//! The bus interface as a child driver holds it: queried from the PDO in prepare hardware,
//! checked, registered with; the bus's events answered from the callback at DISPATCH_LEVEL;
//! unregistered (a rundown) and dereferenced in release hardware.

use core::ffi::c_void;

use hcabus::bus_abi::*;
use hcabus::types::ClientFlags;
use wdk_sys::*;

use super::context::ChildContext;
use crate::abi::{check_interface, BusEvent, InterfaceError};
use crate::child::Action;
use crate::queue::{Change, QueueOp};

/// WdfFdoQueryForInterface on the PDO below, for version 1 at its size. KMDF references the
/// interface for the caller when it answers: every path after a successful query ends in
/// InterfaceDereference, the refused interface's too.
///
/// # Safety
/// `device` is the child's live FDO, at PASSIVE_LEVEL (prepare hardware).
pub(super) unsafe fn query(device: WDFDEVICE) -> Result<HcabusBusInterfaceV1, NTSTATUS> {
    let mut iface = HcabusBusInterfaceV1::EMPTY;
    let guid = super::kernel_guid(&GUID_HCABUS_BUS_INTERFACE);
    // SAFETY: the device is live; the GUID and the interface outlive the call, which writes
    // at most `Size` bytes of it.
    let status = unsafe {
        call_unsafe_wdf_function_binding!(
            WdfFdoQueryForInterface,
            device,
            &guid,
            (&mut iface as *mut HcabusBusInterfaceV1).cast(),
            core::mem::size_of::<HcabusBusInterfaceV1>() as USHORT,
            HCABUS_BUS_INTERFACE_VERSION,
            core::ptr::null_mut()
        )
    };
    if status < 0 {
        log::error!("the PDO answered the query for HCABUS_BUS_INTERFACE_V1 {status:#x}");
        return Err(status);
    }
    if let Err(e) = check_interface(&iface) {
        log::error!("refusing the bus interface: {e}");
        // SAFETY: the query referenced it; given back once.
        unsafe { dereference(&iface) };
        return Err(match e {
            InterfaceError::TooSmall { .. } => STATUS_INVALID_BUFFER_SIZE,
            InterfaceError::Version { .. } => STATUS_REVISION_MISMATCH,
            InterfaceError::Missing(_) => STATUS_NOT_SUPPORTED,
        });
    }
    Ok(iface)
}

/// Gives back the reference a successful query took.
///
/// # Safety
/// `iface` came from a successful [`query`] and this reference was not given back yet.
pub(super) unsafe fn dereference(iface: &HcabusBusInterfaceV1) {
    if let Some(f) = iface.interface_dereference {
        // SAFETY: the interface's own function with its own context.
        unsafe { f(iface.context) };
    }
}

/// Register with the bus, the callback's context the FDO's, holding the child's spin lock
/// across the call and telling the state machine before it is released. An event the
/// registration sets in motion (a RESET, a late registrant's RESET_END) is then delivered to a
/// child that knows it is registered: the call, at DISPATCH_LEVEL under the lock, runs no
/// callback on this processor, and one delivered on another waits for the lock
/// (docs/bus-interface.md, "Threading and IRQL"). Returns the step's action.
///
/// # Safety
/// `ctx` holds the interface `query` returned; PASSIVE_LEVEL.
pub(super) unsafe fn register(ctx: &ChildContext) -> Result<Action, NTSTATUS> {
    let bus = ctx.bus();
    let function = ctx.function;
    let desc = HcabusClientDesc {
        size: core::mem::size_of::<HcabusClientDesc>() as u16,
        kind: function.kind() as u16,
        flags: ClientFlags::bits(&function.flags()),
        name: function.name().as_ptr(),
        event_callback: Some(evt_bus_event),
        client_context: (ctx as *const ChildContext).cast_mut().cast(),
    };
    let mut reg = HcabusRegistration::default();
    let Some(f) = bus.register else {
        return Err(STATUS_NOT_SUPPORTED);
    };
    let failed = hcabus::types::State::Failed as u32;
    // Register runs at DISPATCH_LEVEL under the lock, where a bus between a PnP stop and its
    // start answers DEVICE_BUSY at once; QUERY_STATE at PASSIVE_LEVEL waits that start out
    // first (up to 30 s), so a child starting during the bus's rebalance still registers.
    if let Some(query) = bus.query_state {
        let mut state = HcabusBusState {
            size: core::mem::size_of::<HcabusBusState>() as u32,
            ..HcabusBusState::default()
        };
        // SAFETY: the bus's function with its own context and a sized state to fill.
        let s = unsafe { query(bus.context, &mut state) };
        if s < 0 {
            log::info!("QueryState before Register: {} ({s:#x})", status::name(s));
        }
    }
    ctx.with_child(|c| {
        // SAFETY: the bus's function with its own context, a whole descriptor (its name read
        // during the call only) and a registration to fill; callable at DISPATCH_LEVEL. The
        // context handed over lives with the device, past release hardware's Unregister.
        let status = unsafe { f(bus.context, &desc, &mut reg) };
        if status < 0 {
            return Err(status);
        }
        Ok(c.registered(reg.client_id, reg.epoch, reg.late != 0, reg.state == failed))
    })
    .inspect_err(|s| log::error!("Register: {} ({s:#x})", status::name(*s)))
}

/// Unregister: returns when no callback of this child runs or will start (PASSIVE_LEVEL,
/// outside the callback). DEVICE_REMOVED counts as done: the bus is gone.
///
/// # Safety
/// `ctx` holds the interface it registered with.
pub(super) unsafe fn unregister(ctx: &ChildContext) -> NTSTATUS {
    let bus = ctx.bus();
    let id = ctx.with_child(|c| c.client_id());
    let Some(f) = bus.unregister else {
        return STATUS_NOT_SUPPORTED;
    };
    // SAFETY: the bus's function with its own context and this child's id.
    let status = unsafe { f(bus.context, id) };
    let removed = status::of_refusal(hcabus::errors::RefusalCode::DeviceRemoved);
    if status < 0 && status != removed {
        log::error!("Unregister: {} ({status:#x})", status::name(status));
    }
    ctx.with_child(|c| c.unregistered());
    status
}

/// The bus's event callback: at DISPATCH_LEVEL on Windows (the bus delivers from its DPC),
/// with no bus lock held. It copies what it needs out of the event (which lives for the call)
/// and steps the state machine under the child's lock, then acts with the lock dropped.
unsafe extern "C" fn evt_bus_event(context: *mut c_void, event: *const HcabusEvent) {
    // SAFETY: the context is the FDO's ChildContext this callback was registered with; the
    // bus calls no callback of a client after its Unregister returned, and the device (and
    // so the context) outlives that.
    let Some(ctx) = (unsafe { context.cast::<ChildContext>().as_ref() }) else {
        return;
    };
    // SAFETY: the bus hands a live event for the duration of the call.
    let Some(event) = (unsafe { event.as_ref() }) else {
        return;
    };
    // SAFETY: every member of the union is plain integers: the raw words are always valid.
    let raw = unsafe { event.data.raw };
    let decoded = BusEvent::decode(event.kind, raw);
    let action = ctx.with_child(|c| c.on_event(decoded));
    ctx.act(action);
}

/// EvtIoQueueState of the I/O queue's stop: KMDF calls it once the queue dispatches nothing
/// and every request it gave the driver is completed, possibly from inside WdfIoQueueStop
/// (the queue already idle), at the caller's IRQL.
unsafe extern "C" fn evt_io_stopped(queue: WDFQUEUE, _context: WDFCONTEXT) {
    // SAFETY: the queue is live for its callback.
    let device = unsafe { call_unsafe_wdf_function_binding!(WdfIoQueueGetDevice, queue) };
    // SAFETY: the queue's device is the child FDO that created it.
    let Some(ctx) = (unsafe { ChildContext::of(device) }) else {
        return;
    };
    let action = ctx.with_child(|c| c.queue_idle());
    ctx.act(action);
}

/// Carries out what the state machine decided, with the child's lock dropped. Every call's
/// refusal is kept in the counters (IOCTL_HCABUS_CHILD_STATS) and logged.
pub(super) fn act(ctx: &ChildContext, action: Action) {
    let bus = ctx.bus();
    let id = ctx.with_child(|c| c.client_id());
    let refused = |what: &str, status: i32| {
        if status < 0 {
            log::error!("{what}: {} ({status:#x})", status::name(status));
            ctx.with_child(|c| c.refused(status));
        }
    };
    match action {
        Action::Nothing => {}
        Action::Consent(epoch) => {
            if let Some(f) = bus.reset_consent {
                // SAFETY: the bus's function with its context, this child's id and the
                // query's epoch; callable at DISPATCH_LEVEL.
                refused("ResetConsent", unsafe { f(bus.context, id, epoch) });
            }
        }
        Action::Veto(epoch) => {
            if let Some(f) = bus.reset_veto {
                // SAFETY: as above; the reason is a NUL-terminated literal.
                let s = unsafe {
                    f(
                        bus.context,
                        id,
                        epoch,
                        c"its I/O has no other path".as_ptr(),
                    )
                };
                refused("ResetVeto", s);
            }
        }
        Action::Execute(epoch) => {
            if let Some(f) = bus.reset_execute {
                // SAFETY: the bus's function with its context, this child's id and the
                // reset's epoch; callable at DISPATCH_LEVEL, from inside a callback too.
                let s = unsafe { f(bus.context, id, epoch) };
                ctx.with_child(|c| c.executed(s, s == status::PAST_DEADLINE));
                if s < 0 {
                    log::error!("ResetExecute: {} ({s:#x})", status::name(s));
                }
            }
        }
        Action::Queue(op) => carry_out(ctx, op),
    }
}

/// Queue changes a thread carries out in a row before it gives up (each is a change another
/// thread decided while this one made the last call: a handful at most).
const QUEUE_CHANGES_IN_A_ROW: u32 = 64;

/// Carries out `op` and then every queue change decided while it ran, this thread alone
/// (`QueueBook`), so that the queue ends as last decided. An action a change brings (the
/// stop callback from inside WdfIoQueueStop: ResetExecute) is carried out on the way.
fn carry_out(ctx: &ChildContext, op: QueueOp) {
    let mut op = op;
    for _ in 0..QUEUE_CHANGES_IN_A_ROW {
        let change = ctx.with_child(|c| c.performing(op));
        queue_call(ctx.io_queue, change);
        match ctx.with_child(|c| c.applied(op)) {
            Action::Queue(next) => op = next,
            _ => return,
        }
    }
    ctx.with_child(|c| c.abandon());
    log::error!(
        "the I/O queue's state changed {QUEUE_CHANGES_IN_A_ROW} times while one thread \
         carried the changes out: left to the next change"
    );
}

/// The KMDF call of a queue change (each callable at DISPATCH_LEVEL).
fn queue_call(queue: WDFQUEUE, change: Change) {
    match change {
        // SAFETY: the queue lives with the device. Asked for only with no stop callback
        // outstanding (QueueBook::performing: a second is a WDF_VIOLATION bugcheck).
        Change::Stop => unsafe {
            call_unsafe_wdf_function_binding!(
                WdfIoQueueStop,
                queue,
                Some(evt_io_stopped),
                core::ptr::null_mut()
            )
        },
        // SAFETY: as above, without a callback (which KMDF takes at any time).
        Change::Close => unsafe {
            call_unsafe_wdf_function_binding!(WdfIoQueueStop, queue, None, core::ptr::null_mut())
        },
        // SAFETY: as above; what the queue held may be dispatched from inside the call, on
        // this processor.
        Change::Start => unsafe { call_unsafe_wdf_function_binding!(WdfIoQueueStart, queue) },
        // SAFETY: as above: what waits is cancelled, and new requests are refused until a
        // start.
        Change::Purge => unsafe {
            call_unsafe_wdf_function_binding!(WdfIoQueuePurge, queue, None, core::ptr::null_mut())
        },
    }
}
