//! DPCs, work items, timers, spin locks and wait locks, as KMDF creates and runs them.

use wdk_sys::*;

use super::kernel::{Handle, Kind};
use super::objects::{validate, Options, STATUS_WDF_PARENT_ASSIGNMENT_NOT_ALLOWED};
use super::{irql, set_irql, violation, with, Rule, DISPATCH, PASSIVE};

const DEFERRED: Options = Options {
    parent_not_allowed: false,
    parent_required: true,
    execution_level_allowed: false,
    synchronization_scope_allowed: false,
};

/// Creates a DPC, work item, timer (`DEFERRED`: a config of the right size, a device or
/// queue parent) or lock (`LOCK`: the driver its parent unless the attributes name one).
fn create_sync(
    (ddi, globals): (&'static str, PWDF_DRIVER_GLOBALS),
    max_irql: u8,
    size_ok: bool,
    attributes: PWDF_OBJECT_ATTRIBUTES,
    out: *mut WDFOBJECT,
    kind: Kind,
    options: Options,
) -> NTSTATUS {
    let _kernel = super::enter(ddi, max_irql);
    if out.is_null() {
        violation(Rule::NullParameter, ddi, "the out handle is NULL");
    }
    with(|k| {
        if !size_ok {
            return k.refuse(
                ddi,
                STATUS_INFO_LENGTH_MISMATCH,
                "the config's Size is not its size",
            );
        }
        if let Err((status, why)) = validate(attributes, options) {
            return k.refuse(ddi, status, why);
        }
        if options.parent_required {
            // SAFETY: validated: a parent is set.
            let parent = unsafe { (*attributes).ParentObject };
            let p = k.live(ddi, parent);
            if !matches!(p.kind, Kind::Device(_) | Kind::Queue { .. }) {
                let what = p.kind.name();
                return k.refuse(
                    ddi,
                    STATUS_WDF_PARENT_ASSIGNMENT_NOT_ALLOWED,
                    &format!("parent is a {what}, not a device or queue"),
                );
            }
        }
        if k.fails(ddi) {
            return k.refuse(
                ddi,
                STATUS_INSUFFICIENT_RESOURCES,
                "failed on purpose by the scenario",
            );
        }
        let default_parent = if options.parent_required {
            None
        } else {
            k.drivers[super::caller_slot(globals, ddi)]
        };
        let h = k.create(ddi, kind, attributes, default_parent);
        // SAFETY: checked non-null above.
        unsafe { *out = h as WDFOBJECT };
        STATUS_SUCCESS
    })
}

/// `WdfDpcCreate`, `WdfWorkItemCreate` and `WdfTimerCreate`: each takes a config, the
/// attributes and an out handle, and is checked alike by [`create_sync`].
macro_rules! deferred_creates {
    ($($ddi:ident($config:ty, $handle:ty, $max:ident) => $kind:ident { $($f:ident: $v:expr),* };)*) => {$(
        pub(crate) unsafe extern "C" fn $ddi(
            globals: PWDF_DRIVER_GLOBALS,
            config: $config,
            attributes: PWDF_OBJECT_ATTRIBUTES,
            out: *mut $handle,
        ) -> NTSTATUS {
            // SAFETY: the driver's config, or NULL (refused).
            let Some(c) = (unsafe { config.as_ref() }) else {
                violation(Rule::NullParameter, stringify!($ddi), "Config is NULL")
            };
            let ok = c.Size as usize == core::mem::size_of_val(c);
            let kind = Kind::$kind { config: *c, $($f: $v),* };
            create_sync((stringify!($ddi), globals), $max, ok, attributes, out.cast(), kind, DEFERRED)
        }
    )*};
}

deferred_creates! {
    WdfDpcCreate(PWDF_DPC_CONFIG, WDFDPC, DISPATCH) => Dpc { queued: false, running: 0 };
    WdfWorkItemCreate(PWDF_WORKITEM_CONFIG, WDFWORKITEM, DISPATCH) =>
        WorkItem { queued: false, running: 0 };
    WdfTimerCreate(PWDF_TIMER_CONFIG, WDFTIMER, DISPATCH) => Timer { due_us: None, running: 0 };
}

/// A DPC queued from PASSIVE_LEVEL runs at once, as another processor would run it before
/// the caller's next line: a driver that queues a DPC before the state it reads is
/// published finds that out here. Queued at DISPATCH_LEVEL (from a DPC or a timer, or under
/// a spin lock), or when other processors run (`schedule`), it waits for the dispatcher.
pub(crate) unsafe extern "C" fn WdfDpcEnqueue(_: PWDF_DRIVER_GLOBALS, dpc: WDFDPC) -> BOOLEAN {
    let _kernel = super::enter("WdfDpcEnqueue", super::HIGH);
    let (added, idle) = with(|k| match &mut k.live("WdfDpcEnqueue", dpc.cast()).kind {
        Kind::Dpc {
            queued, running, ..
        } => (!core::mem::replace(queued, true), *running == 0),
        other => violation(Rule::WrongObjectType, "WdfDpcEnqueue", other.name()),
    });
    if added && idle && irql() == PASSIVE && !super::schedule::on() {
        super::machine::run_dpc(dpc as Handle);
    }
    BOOLEAN::from(added)
}

pub(crate) unsafe extern "C" fn WdfDpcCancel(
    _: PWDF_DRIVER_GLOBALS,
    dpc: WDFDPC,
    wait: BOOLEAN,
) -> BOOLEAN {
    const DDI: &str = "WdfDpcCancel";
    let _kernel = super::enter(DDI, if wait != 0 { PASSIVE } else { super::HIGH });
    let me = super::schedule::me();
    let removed = with(|k| match &mut k.live(DDI, dpc.cast()).kind {
        Kind::Dpc {
            queued, running, ..
        } => {
            if wait != 0 && *running == me {
                violation(
                    Rule::SelfDeadlock,
                    DDI,
                    "Wait TRUE from the DPC's own callback",
                );
            }
            BOOLEAN::from(core::mem::replace(queued, false))
        }
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    });
    if wait != 0 {
        // KeFlushQueuedDpcs: a run on another processor ends first.
        settle(DDI, dpc.cast());
    }
    removed
}

/// Waits until the DPC, timer or work item `h` runs on no other thread.
fn settle(ddi: &'static str, h: WDFOBJECT) {
    super::schedule::wait_until(Rule::SelfDeadlock, ddi, "never settles", |k| {
        match k.object(ddi, h).kind {
            Kind::Dpc { running, .. }
            | Kind::Timer { running, .. }
            | Kind::WorkItem { running, .. } => running == 0,
            _ => true,
        }
    });
}

pub(crate) unsafe extern "C" fn WdfWorkItemEnqueue(_: PWDF_DRIVER_GLOBALS, item: WDFWORKITEM) {
    let _kernel = super::enter("WdfWorkItemEnqueue", DISPATCH);
    with(
        |k| match &mut k.live("WdfWorkItemEnqueue", item.cast()).kind {
            Kind::WorkItem { queued, .. } => *queued = true,
            other => violation(Rule::WrongObjectType, "WdfWorkItemEnqueue", other.name()),
        },
    );
}

pub(crate) unsafe extern "C" fn WdfWorkItemFlush(_: PWDF_DRIVER_GLOBALS, item: WDFWORKITEM) {
    const DDI: &str = "WdfWorkItemFlush";
    let _kernel = super::enter(DDI, PASSIVE);
    let me = super::schedule::me();
    let run = with(|k| match &mut k.live(DDI, item.cast()).kind {
        Kind::WorkItem { running, .. } if *running == me => {
            violation(Rule::SelfDeadlock, DDI, "from the work item's own callback")
        }
        Kind::WorkItem { queued, .. } => core::mem::replace(queued, false),
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    });
    // A flush waits until a queued work item has run, and a run under way has ended: the
    // flusher runs the queued one itself (on one CPU it could not be otherwise).
    if run {
        super::machine::run_work_item(item as Handle);
    }
    settle(DDI, item.cast());
}

pub(crate) unsafe extern "C" fn WdfTimerStart(
    _: PWDF_DRIVER_GLOBALS,
    timer: WDFTIMER,
    due: LONGLONG,
) -> BOOLEAN {
    const DDI: &str = "WdfTimerStart";
    let _kernel = super::enter(DDI, DISPATCH);
    with(|k| {
        let (now, tick) = (k.now_us, k.tick);
        match &mut k.live(DDI, timer.cast()).kind {
            Kind::Timer { due_us, .. } => {
                // Negative: relative, in 100 ns; positive: absolute system time (unused
                // here). It fires at the first clock tick at or after.
                let at = if due < 0 {
                    tick.ceil(now + (due.unsigned_abs() / 10))
                } else {
                    now
                };
                BOOLEAN::from(due_us.replace(at).is_some())
            }
            other => violation(Rule::WrongObjectType, DDI, other.name()),
        }
    })
}

pub(crate) unsafe extern "C" fn WdfTimerStop(
    _: PWDF_DRIVER_GLOBALS,
    timer: WDFTIMER,
    wait: BOOLEAN,
) -> BOOLEAN {
    const DDI: &str = "WdfTimerStop";
    let _kernel = super::enter(DDI, if wait != 0 { PASSIVE } else { DISPATCH });
    let me = super::schedule::me();
    let stopped = with(|k| match &mut k.live(DDI, timer.cast()).kind {
        Kind::Timer {
            due_us, running, ..
        } => {
            if wait != 0 && *running == me {
                violation(
                    Rule::SelfDeadlock,
                    DDI,
                    "Wait TRUE from the timer's own callback",
                );
            }
            BOOLEAN::from(due_us.take().is_some())
        }
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    });
    if wait != 0 {
        settle(DDI, timer.cast());
    }
    stopped
}

const LOCK: Options = Options {
    parent_not_allowed: false,
    parent_required: false,
    execution_level_allowed: false,
    synchronization_scope_allowed: false,
};

/// SDV ParentObjectCheckLock: a lock names its parent. KMDF would parent it to the driver,
/// where it outlives every device whose data it guards.
fn lock_parented(ddi: &str, a: PWDF_OBJECT_ATTRIBUTES) {
    // SAFETY: the driver's attributes, or NULL.
    if unsafe { a.as_ref() }.is_none_or(|a| a.ParentObject.is_null()) {
        violation(
            Rule::LockWithoutParent,
            ddi,
            "no ParentObject in its attributes",
        );
    }
}

pub(crate) unsafe extern "C" fn WdfSpinLockCreate(
    globals: PWDF_DRIVER_GLOBALS,
    a: PWDF_OBJECT_ATTRIBUTES,
    lock: *mut WDFSPINLOCK,
) -> NTSTATUS {
    lock_parented("WdfSpinLockCreate", a);
    let kind = Kind::SpinLock {
        holder: 0,
        saved_irql: 0,
    };
    create_sync(
        ("WdfSpinLockCreate", globals),
        DISPATCH,
        true,
        a,
        lock.cast(),
        kind,
        LOCK,
    )
}

pub(crate) unsafe extern "C" fn WdfWaitLockCreate(
    globals: PWDF_DRIVER_GLOBALS,
    a: PWDF_OBJECT_ATTRIBUTES,
    lock: *mut WDFWAITLOCK,
) -> NTSTATUS {
    lock_parented("WdfWaitLockCreate", a);
    let kind = Kind::WaitLock { holder: 0 };
    create_sync(
        ("WdfWaitLockCreate", globals),
        DISPATCH,
        true,
        a,
        lock.cast(),
        kind,
        LOCK,
    )
}

pub(crate) unsafe extern "C" fn WdfSpinLockAcquire(_: PWDF_DRIVER_GLOBALS, lock: WDFSPINLOCK) {
    const DDI: &str = "WdfSpinLockAcquire";
    let _kernel = super::enter(DDI, DISPATCH);
    let before = irql();
    // KeAcquireSpinLock raises the IRQL, then spins while another processor holds it.
    set_irql(DISPATCH);
    let me = super::schedule::me();
    super::schedule::wait_until(
        Rule::SpinLockMisused,
        DDI,
        "held by another",
        |k| match &mut k.live(DDI, lock.cast()).kind {
            Kind::SpinLock { holder, .. } if *holder == me => violation(
                Rule::SpinLockMisused,
                DDI,
                "acquired again by its holder (a deadlock)",
            ),
            Kind::SpinLock { holder, saved_irql } => {
                let free = *holder == 0;
                if free {
                    *holder = me;
                    *saved_irql = before;
                }
                free
            }
            other => violation(Rule::WrongObjectType, DDI, other.name()),
        },
    );
}

pub(crate) unsafe extern "C" fn WdfSpinLockRelease(_: PWDF_DRIVER_GLOBALS, lock: WDFSPINLOCK) {
    const DDI: &str = "WdfSpinLockRelease";
    let _kernel = super::enter(DDI, DISPATCH);
    let me = super::schedule::me();
    let restore = with(|k| match &mut k.live(DDI, lock.cast()).kind {
        Kind::SpinLock { holder, saved_irql } => {
            if *holder != me {
                violation(Rule::SpinLockMisused, DDI, "released while not held");
            }
            *holder = 0;
            *saved_irql
        }
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    });
    set_irql(restore);
}

pub(crate) unsafe extern "C" fn WdfWaitLockAcquire(
    _: PWDF_DRIVER_GLOBALS,
    lock: WDFWAITLOCK,
    timeout: PLONGLONG,
) -> NTSTATUS {
    const DDI: &str = "WdfWaitLockAcquire";
    let _kernel = super::enter(DDI, if timeout.is_null() { PASSIVE } else { DISPATCH });
    let me = super::schedule::me();
    // No timeout: the caller waits while another thread holds it (the layer never asks
    // for one, so a timeout is not modelled).
    super::schedule::wait_until(
        Rule::WaitLockMisused,
        DDI,
        "held by another",
        |k| match &mut k.live(DDI, lock.cast()).kind {
            Kind::WaitLock { holder } if *holder == me => violation(
                Rule::WaitLockMisused,
                DDI,
                "acquired again by its holder (a deadlock)",
            ),
            Kind::WaitLock { holder } => {
                let free = *holder == 0;
                if free {
                    *holder = me;
                }
                free
            }
            other => violation(Rule::WrongObjectType, DDI, other.name()),
        },
    );
    STATUS_SUCCESS
}

pub(crate) unsafe extern "C" fn WdfWaitLockRelease(_: PWDF_DRIVER_GLOBALS, lock: WDFWAITLOCK) {
    const DDI: &str = "WdfWaitLockRelease";
    let _kernel = super::enter(DDI, DISPATCH);
    let me = super::schedule::me();
    with(|k| match &mut k.live(DDI, lock.cast()).kind {
        Kind::WaitLock { holder } => {
            if *holder != me {
                violation(Rule::WaitLockMisused, DDI, "released while not held");
            }
            *holder = 0;
        }
        other => violation(Rule::WrongObjectType, DDI, other.name()),
    });
}
