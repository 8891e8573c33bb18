//! KMDF's queue states, as far as the child driver's queues need them (driver/kmdf-child): a
//! queue accepts and dispatches from its creation; WdfIoQueueStop keeps accepting and stops
//! dispatching, WdfIoQueueStart does both again, WdfIoQueuePurge accepts nothing. A stop or
//! purge callback is called once the driver owns no request of the queue's, from inside the
//! call when it already owns none, at the caller's IRQL (fxioqueue.cpp, DispatchEvents and
//! ProcessIdleComplete); a queue takes one at a time (`Rule::QueueFatalError`).
//!
//! The model's requests are synchronous today (`io.rs`): the driver owns none past its
//! callback, so every stop callback comes from inside its WdfIoQueueStop. Pending requests,
//! a forward into another queue and power-managed holding come with the child's I/O.

use wdk_sys::*;

use super::driver::DriverFn;
use super::kernel::Kind;
use super::machine::at;
use super::{irql, violation, with, Rule, DISPATCH, PASSIVE};

/// A queue's state (FxIoQueue's m_QueueState, m_IdleComplete, m_PurgeComplete,
/// m_DriverIoCount).
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueState {
    pub(crate) accepting: bool,
    pub(crate) dispatching: bool,
    /// The stop callback asked for and not yet called: (function, context).
    pub(crate) idle: Option<(PFN_WDF_IO_QUEUE_STATE, WDFCONTEXT)>,
    pub(crate) purge: Option<(PFN_WDF_IO_QUEUE_STATE, WDFCONTEXT)>,
    /// Requests the driver owns (dispatched, not completed).
    pub(crate) owned: u32,
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
            idle: None,
            purge: None,
            owned: 0,
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
    with(
        |k| match &k.objects[super::kernel::Kernel::index_of(queue as _)].kind {
            Kind::Queue { state, .. } => *state,
            other => violation(Rule::WrongObjectType, "queue state", other.name()),
        },
    )
}

/// DispatchEvents' callbacks: the stop callback once the driver owns nothing; the purge
/// callback then too. Each called at the caller's IRQL with no kernel lock held.
fn dispatch_events(queue: WDFQUEUE) {
    loop {
        let due = change("DispatchEvents", queue, |s| {
            if s.owned != 0 {
                return None;
            }
            s.idle.take().or_else(|| s.purge.take())
        });
        let Some((f, context)) = due else {
            return;
        };
        if let Some(f) = f {
            // SAFETY: the driver's EvtIoQueueState with its queue and the context it gave.
            at("EvtIoQueueState", irql(), || unsafe {
                f.run((queue, context))
            });
        }
    }
}

pub(crate) unsafe extern "C" fn WdfIoQueueStop(
    _: PWDF_DRIVER_GLOBALS,
    queue: WDFQUEUE,
    stop_complete: PFN_WDF_IO_QUEUE_STATE,
    context: WDFCONTEXT,
) {
    const DDI: &str = "WdfIoQueueStop";
    let kernel = super::enter(DDI, DISPATCH);
    change(DDI, queue, |s| {
        if stop_complete.is_some() {
            if s.idle.is_some() {
                violation(
                    Rule::QueueFatalError,
                    DDI,
                    "a stop callback while another is outstanding (QueueIdle: \
                     STATUS_INVALID_DEVICE_REQUEST, then FatalError)",
                );
            }
            s.idle = Some((stop_complete, context));
        }
        s.accepting = true;
        s.dispatching = false;
        s.stops += 1;
    });
    drop(kernel);
    dispatch_events(queue);
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
    let kernel = super::enter(DDI, DISPATCH);
    change(DDI, queue, |s| {
        if purge_complete.is_some() {
            if s.purge.is_some() {
                violation(
                    Rule::QueueFatalError,
                    DDI,
                    "a purge callback while another is outstanding (QueuePurge: \
                     STATUS_INVALID_DEVICE_REQUEST, then FatalError)",
                );
            }
            s.purge = Some((purge_complete, context));
        }
        s.accepting = false;
        s.dispatching = false;
        s.purges += 1;
    });
    drop(kernel);
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
