//! KMDF's queue states, as far as the child driver's queues need them (driver/kmdf-child): a
//! queue accepts and dispatches from its creation; WdfIoQueueStop keeps accepting and stops
//! dispatching, WdfIoQueueStart does both again, WdfIoQueuePurge accepts nothing. A stop or
//! purge callback is called once the driver owns no request of the queue's, from inside the
//! call when it already owns none, at the caller's IRQL (fxioqueue.cpp, DispatchEvents and
//! ProcessIdleComplete); a queue takes one at a time (`Rule::QueueFatalError`).
//!
//! A PnP device's requests (the child driver's, `two.rs`) go through its default queue here:
//! queued, dispatched while the queue dispatches (inline, on the thread that delivered,
//! started or completed: KMDF's DispatchEvents), owned by the driver until it completes them
//! or forwards them to another of its queues, cancelled by a purge; one the driver does not
//! complete in its callback stays pending with the I/O manager; a power-managed queue is held
//! out of D0. The bus's control device keeps the synchronous path of `io.rs`. Not modelled
//! yet: a request cancelled while queued by its caller, and a queue's execution level (every
//! callback runs at the IRQL of the thread that dispatches).

use wdk_sys::*;

use std::vec::Vec;

use super::driver::DriverFn;
use super::kernel::{Handle, Kernel, Kind};
use super::machine::at;
use super::{irql, violation, with, Rule, DISPATCH, PASSIVE};

/// A queue's state (FxIoQueue's m_QueueState, m_IdleComplete, m_PurgeComplete, m_Queue,
/// m_DriverOwned).
#[derive(Debug, Clone)]
pub(crate) struct QueueState {
    pub(crate) accepting: bool,
    pub(crate) dispatching: bool,
    /// A power-managed queue's power state: held (false) while its device is out of D0, as
    /// KMDF holds it (StopProcessingForPower), whatever the driver's own stop or start.
    pub(crate) powered: bool,
    /// The stop callback asked for and not yet called: (function, context).
    pub(crate) idle: Option<(PFN_WDF_IO_QUEUE_STATE, WDFCONTEXT)>,
    pub(crate) purge: Option<(PFN_WDF_IO_QUEUE_STATE, WDFCONTEXT)>,
    /// Requests waiting in the queue, oldest first.
    pub(crate) queued: Vec<Handle>,
    /// Requests the driver owns (dispatched from this queue, not completed or forwarded).
    pub(crate) owned: Vec<Handle>,
    /// Requests dispatched from this queue, for the scenarios.
    pub(crate) dispatched: u32,
    /// Threads inside DispatchEvents for this queue (m_Dispatching): a completion runs the
    /// queue's events only when none is (DispatchInternalEvents), and the stop or purge
    /// callback comes only on the one thread in it.
    pub(crate) dispatchers: u32,
    /// WdfIoQueueStop, WdfIoQueueStart and WdfIoQueuePurge calls, for the scenarios.
    pub(crate) stops: u32,
    pub(crate) starts: u32,
    pub(crate) purges: u32,
}

impl Default for QueueState {
    fn default() -> Self {
        QueueState {
            accepting: true,
            dispatching: true,
            powered: true,
            idle: None,
            purge: None,
            queued: Vec::new(),
            owned: Vec::new(),
            dispatched: 0,
            dispatchers: 0,
            stops: 0,
            starts: 0,
            purges: 0,
        }
    }
}

/// The state of `queue`, changed by `f` (the handle checked live and a queue's).
fn change<R>(ddi: &str, queue: WDFQUEUE, f: impl FnOnce(&mut QueueState) -> R) -> R {
    with(|k| match &mut k.live(ddi, queue.cast()).kind {
        Kind::Queue { state, .. } => f(state),
        other => violation(Rule::WrongObjectType, ddi, other.name()),
    })
}

/// The queue's state, for the scenarios.
pub(crate) fn state(queue: usize) -> QueueState {
    with(|k| match &k.objects[Kernel::index_of(queue as _)].kind {
        Kind::Queue { state, .. } => state.clone(),
        other => violation(Rule::WrongObjectType, "queue state", other.name()),
    })
}

/// What DispatchEvents does next.
enum Next {
    Callback(PFN_WDF_IO_QUEUE_STATE, WDFCONTEXT),
    Dispatch(
        Handle,
        PFN_WDF_IO_QUEUE_IO_DEVICE_CONTROL,
        u32,
        usize,
        usize,
    ),
    Done,
}

/// KMDF's DispatchEvents, on the calling thread at its IRQL with no kernel lock held: the
/// stop callback once the driver owns nothing (requests may still wait: a stopped queue keeps
/// them); the purge callback once nothing waits either; else, while the queue dispatches, the
/// oldest waiting request to the driver's callback, owned by the driver from then on.
fn dispatch_events(queue: WDFQUEUE) {
    change("DispatchEvents", queue, |s| s.dispatchers += 1);
    loop {
        match next_event(queue) {
            Next::Done => return,
            Next::Callback(f, context) => {
                if let Some(f) = f {
                    // SAFETY: the driver's EvtIoQueueState with its queue and its context.
                    at("EvtIoQueueState", irql(), || unsafe {
                        f.run((queue, context))
                    });
                }
            }
            Next::Dispatch(request, Some(f), code, out, input) => {
                // SAFETY: the driver's EvtIoDeviceControl with its queue and a request it owns
                // now, its lengths and code.
                at("EvtIoDeviceControl", irql(), || unsafe {
                    f.run((queue, request as WDFREQUEST, out, input, code))
                });
            }
            Next::Dispatch(request, None, ..) => {
                // KMDF fails a request the queue has no callback for.
                finish(request, STATUS_INVALID_DEVICE_REQUEST);
                completed(request);
            }
        }
    }
}

/// The next thing DispatchEvents does for `queue`, its state updated for it; `Done` leaves
/// the loop in the same step (so a completion that found this thread in it is never lost).
fn next_event(queue: WDFQUEUE) -> Next {
    with(|k| {
        let (config, s) = match &mut k.live("DispatchEvents", queue.cast()).kind {
            Kind::Queue { config, state, .. } => (*config, state),
            other => violation(Rule::WrongObjectType, "DispatchEvents", other.name()),
        };
        if s.owned.is_empty() && s.dispatchers == 1 {
            if let Some((f, c)) = s.idle.take() {
                return Next::Callback(f, c);
            }
            if s.queued.is_empty() {
                if let Some((f, c)) = s.purge.take() {
                    return Next::Callback(f, c);
                }
            }
        }
        if !s.dispatching
            || !s.powered
            || s.queued.is_empty()
            || s.owned.len() >= presented(&config)
        {
            s.dispatchers -= 1;
            return Next::Done;
        }
        let request = s.queued.remove(0);
        s.owned.push(request);
        s.dispatched += 1;
        match &k.objects[Kernel::index_of(request as _)].kind {
            Kind::Request(r) => Next::Dispatch(
                request,
                config.EvtIoDeviceControl,
                r.code,
                r.output_length,
                r.input_length,
            ),
            other => violation(Rule::WrongObjectType, "DispatchEvents", other.name()),
        }
    })
}

/// How many requests the queue presents to the driver at once: one for a sequential queue;
/// for a parallel one what its config says (KMDF copies NumberOfPresentedRequests as given:
/// WDF_IO_QUEUE_CONFIG_INIT's is no limit, and 0 presents nothing); none for a manual one.
fn presented(config: &WDF_IO_QUEUE_CONFIG) -> usize {
    match config.DispatchType {
        _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchSequential => 1,
        _WDF_IO_QUEUE_DISPATCH_TYPE::WdfIoQueueDispatchParallel => {
            // SAFETY: the union's one member, plain integers.
            let n = unsafe { config.Settings.Parallel.NumberOfPresentedRequests };
            n as usize
        }
        _ => 0,
    }
}

/// The I/O manager hands `request` to a PnP device's default queue: it waits there, or is
/// dispatched at once; a queue that accepts nothing (purged) fails it.
pub(crate) fn deliver(queue: Handle, request: Handle) {
    let accepted = change("IRP_MJ_DEVICE_CONTROL", queue as WDFQUEUE, |s| {
        if s.accepting {
            s.queued.push(request);
        }
        s.accepting
    });
    if !accepted {
        finish(request, STATUS_INVALID_DEVICE_STATE);
        return;
    }
    dispatch_events(queue as WDFQUEUE);
}

/// The model completes `request` itself (a purge, a queue with no callback).
fn finish(request: Handle, status: NTSTATUS) {
    with(|k| {
        if let Kind::Request(r) = &mut k.objects[Kernel::index_of(request as _)].kind {
            r.completed = true;
            r.status = status;
            r.information = 0;
            r.delivered.clear();
            r.system_buffer.fill(super::io::POISON);
        }
    });
}

/// The queue `request` is owned from, if the driver owns it through one.
fn owner(k: &mut Kernel, request: Handle) -> Option<Handle> {
    k.objects
        .iter()
        .enumerate()
        .find_map(|(n, o)| match &o.kind {
            Kind::Queue { state, .. } if !o.deleted && state.owned.contains(&request) => {
                Some(Kernel::handle_of(n))
            }
            _ => None,
        })
}

/// WdfRequestComplete* of a request a queue dispatched: the driver owns it no more, and the
/// queue's events run (its stop callback, what waits) on the completing thread, unless a
/// thread is in the queue's DispatchEvents already: that one runs them (KMDF's
/// RequestCompletedCallback, DispatchInternalEvents). A completion inside the driver's own
/// EvtIoDeviceControl so never runs the stop callback nested in it.
pub(crate) fn completed(request: Handle) {
    let queue = with(|k| {
        let q = owner(k, request)?;
        match &mut k.objects[Kernel::index_of(q as _)].kind {
            Kind::Queue { state, .. } => {
                state.owned.retain(|r| *r != request);
                (state.dispatchers == 0).then_some(q)
            }
            _ => None,
        }
    });
    if let Some(q) = queue {
        dispatch_events(q as WDFQUEUE);
    }
}

/// The power-managed queues of `device` held (`false`: leaving D0, before D0Exit) or resumed
/// (`true`: after D0Entry, what waited dispatched on this thread), as KMDF's power state
/// machine does (StopProcessingForPower, ResumeProcessingForPower).
pub(crate) fn power_device(device: Handle, on: bool) {
    let queues = queues_of(device, |c| c.PowerManaged != _WDF_TRI_STATE::WdfFalse);
    for queue in queues {
        change("power", queue as WDFQUEUE, |s| s.powered = on);
        if on {
            dispatch_events(queue as WDFQUEUE);
        }
    }
}

/// The queues of `device` purged as KMDF purges them at removal, the power-managed ones
/// (`managed`) or the others: what waits is cancelled.
pub(crate) fn purge_device(device: Handle, managed: bool) {
    let power_managed = |c: &WDF_IO_QUEUE_CONFIG| c.PowerManaged != _WDF_TRI_STATE::WdfFalse;
    for queue in queues_of(device, |c| power_managed(c) == managed) {
        stop_or_purge(
            "remove",
            queue as WDFQUEUE,
            true,
            None,
            core::ptr::null_mut(),
        );
    }
}

/// The live queues of `device` whose config `which` takes.
fn queues_of(device: Handle, which: impl Fn(&WDF_IO_QUEUE_CONFIG) -> bool) -> Vec<Handle> {
    with(|k| {
        k.objects
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                !o.deleted
                    && matches!(&o.kind, Kind::Queue { device: d, config, .. }
                        if *d == device && which(config))
            })
            .map(|(n, _)| Kernel::handle_of(n))
            .collect()
    })
}

/// wdfstatus.h's STATUS_WDF_BUSY (not in the kit's bindings): a queue that accepts nothing.
const STATUS_WDF_BUSY: NTSTATUS = 0xC020_0204_u32 as NTSTATUS;

pub(crate) unsafe extern "C" fn WdfRequestForwardToIoQueue(
    _: PWDF_DRIVER_GLOBALS,
    request: WDFREQUEST,
    destination: WDFQUEUE,
) -> NTSTATUS {
    const DDI: &str = "WdfRequestForwardToIoQueue";
    let kernel = super::enter(DDI, DISPATCH);
    let from = with(|k| {
        k.object(DDI, request);
        k.live(DDI, destination.cast());
        owner(k, request as Handle)
    });
    let Some(from) = from else {
        violation(
            Rule::RequestUsedAfterCompletion,
            DDI,
            "a request the driver does not own through a queue",
        )
    };
    let moved = with(|k| {
        let accepting = match &k.objects[Kernel::index_of(destination as _)].kind {
            Kind::Queue { state, .. } => state.accepting,
            other => violation(Rule::WrongObjectType, DDI, other.name()),
        };
        if !accepting {
            return false;
        }
        if let Kind::Queue { state, .. } = &mut k.objects[Kernel::index_of(from as _)].kind {
            state.owned.retain(|r| *r != request as Handle);
        }
        if let Kind::Queue { state, .. } = &mut k.objects[Kernel::index_of(destination as _)].kind {
            state.queued.push(request as Handle);
        }
        true
    });
    drop(kernel);
    if !moved {
        // FxIoQueue::QueueRequestFromForward: a queue that accepts nothing is busy; the
        // driver still owns the request.
        return STATUS_WDF_BUSY;
    }
    dispatch_events(destination);
    dispatch_events(from as WDFQUEUE);
    STATUS_SUCCESS
}

pub(crate) unsafe extern "C" fn WdfIoQueueStop(
    _: PWDF_DRIVER_GLOBALS,
    queue: WDFQUEUE,
    stop_complete: PFN_WDF_IO_QUEUE_STATE,
    context: WDFCONTEXT,
) {
    const DDI: &str = "WdfIoQueueStop";
    drop(super::enter(DDI, DISPATCH));
    stop_or_purge(DDI, queue, false, stop_complete, context);
}

pub(crate) unsafe extern "C" fn WdfIoQueueStart(_: PWDF_DRIVER_GLOBALS, queue: WDFQUEUE) {
    const DDI: &str = "WdfIoQueueStart";
    let kernel = super::enter(DDI, DISPATCH);
    change(DDI, queue, |s| {
        s.accepting = true;
        s.dispatching = true;
        s.starts += 1;
    });
    drop(kernel);
    dispatch_events(queue);
}

pub(crate) unsafe extern "C" fn WdfIoQueuePurge(
    _: PWDF_DRIVER_GLOBALS,
    queue: WDFQUEUE,
    purge_complete: PFN_WDF_IO_QUEUE_STATE,
    context: WDFCONTEXT,
) {
    const DDI: &str = "WdfIoQueuePurge";
    drop(super::enter(DDI, DISPATCH));
    stop_or_purge(DDI, queue, true, purge_complete, context);
}

/// QueueIdle (`purge` false) and QueuePurge (`purge` true): the queue dispatches nothing more;
/// a purge also accepts nothing more and cancels what waits (STATUS_CANCELLED). A callback
/// asked for is the queue's one of its kind: a second while one is outstanding is the queue's
/// fatal error. The queue's events follow, on this thread.
fn stop_or_purge(
    ddi: &'static str,
    queue: WDFQUEUE,
    purge: bool,
    callback: PFN_WDF_IO_QUEUE_STATE,
    context: WDFCONTEXT,
) {
    let cancelled = change(ddi, queue, |s| {
        let slot = if purge { &mut s.purge } else { &mut s.idle };
        if callback.is_some() {
            if slot.is_some() {
                violation(
                    Rule::QueueFatalError,
                    ddi,
                    "a callback of the kind already outstanding (QueueIdle or QueuePurge: \
                     STATUS_INVALID_DEVICE_REQUEST, then FatalError)",
                );
            }
            *slot = Some((callback, context));
        }
        // QueueIdle clears DispatchRequests; QueuePurge AcceptRequests only.
        if purge {
            s.accepting = false;
        } else {
            s.accepting = true;
            s.dispatching = false;
        }
        if purge {
            s.purges += 1;
            core::mem::take(&mut s.queued)
        } else {
            s.stops += 1;
            Vec::new()
        }
    });
    for r in cancelled {
        finish(r, STATUS_CANCELLED);
    }
    dispatch_events(queue);
}

/// A device interface on a PnP device (fxdeviceinterfaceapi.cpp: a control device's is
/// STATUS_INVALID_DEVICE_REQUEST); enabled when the device starts.
pub(crate) unsafe extern "C" fn WdfDeviceCreateDeviceInterface(
    _: PWDF_DRIVER_GLOBALS,
    device: WDFDEVICE,
    class: *const GUID,
    reference: PCUNICODE_STRING,
) -> NTSTATUS {
    const DDI: &str = "WdfDeviceCreateDeviceInterface";
    let _kernel = super::enter(DDI, PASSIVE);
    if class.is_null() {
        violation(Rule::NullParameter, DDI, "InterfaceClassGUID is NULL");
    }
    if !reference.is_null() {
        violation(
            Rule::Unmodelled,
            DDI,
            "a reference string (the model keeps one interface per class)",
        );
    }
    // SAFETY: the driver's GUID.
    let guid = unsafe { *class };
    with(|k| match &mut k.live(DDI, device).kind {
        Kind::Device(d) if d.role != super::kernel::Role::Control => {
            d.device_interfaces.push(guid);
            STATUS_SUCCESS
        }
        Kind::Device(_) => k.refuse(
            DDI,
            STATUS_INVALID_DEVICE_REQUEST,
            "a device interface on a control device",
        ),
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    })
}
