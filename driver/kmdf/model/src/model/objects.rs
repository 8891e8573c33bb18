//! Objects: attribute validation as FxValidateObjectAttributes does it, creation with a typed
//! context, deletion (children first, cleanup callbacks after), references and context
//! lookups.

use wdk_sys::*;

use super::driver::DriverFn;
use super::kernel::{Context, Handle, Kernel, Kind, Object};
use super::{violation, with, Rule, DISPATCH};

pub(crate) const STATUS_WDF_OBJECT_ATTRIBUTES_INVALID: NTSTATUS = 0xC020_0209_u32 as i32;
pub(crate) const STATUS_WDF_PARENT_ASSIGNMENT_NOT_ALLOWED: NTSTATUS = 0xC020_020F_u32 as i32;
pub(crate) const STATUS_WDF_SYNCHRONIZATION_SCOPE_INVALID: NTSTATUS = 0xC020_0210_u32 as i32;
pub(crate) const STATUS_WDF_EXECUTION_LEVEL_INVALID: NTSTATUS = 0xC020_0211_u32 as i32;
pub(crate) const STATUS_WDF_PARENT_NOT_SPECIFIED: NTSTATUS = 0xC020_0212_u32 as i32;

/// FX_VALIDATE_OPTION_* of FxValidateFunctions.h.
#[derive(Clone, Copy, Default)]
pub(crate) struct Options {
    pub(crate) parent_not_allowed: bool,
    pub(crate) parent_required: bool,
    pub(crate) execution_level_allowed: bool,
    pub(crate) synchronization_scope_allowed: bool,
}

/// FxValidateObjectAttributes: `Ok` or the status the DDI returns, with why.
pub(crate) fn validate(
    a: PWDF_OBJECT_ATTRIBUTES,
    o: Options,
) -> Result<(), (NTSTATUS, &'static str)> {
    // SAFETY: the driver passes a valid pointer or NULL (the DDI's contract).
    let Some(a) = (unsafe { a.as_ref() }) else {
        if o.parent_required {
            return Err((
                STATUS_WDF_PARENT_NOT_SPECIFIED,
                "no attributes, and this object needs a parent",
            ));
        }
        return Ok(());
    };
    if a.Size as usize != core::mem::size_of::<WDF_OBJECT_ATTRIBUTES>() {
        return Err((
            STATUS_INFO_LENGTH_MISMATCH,
            "WDF_OBJECT_ATTRIBUTES.Size is not its size",
        ));
    }
    // SAFETY: a type info is a static the driver declared.
    let info = unsafe { a.ContextTypeInfo.as_ref() };
    if let Some(info) = info {
        if info.ContextSize != 0 && info.ContextName.is_null() {
            return Err((
                STATUS_WDF_OBJECT_ATTRIBUTES_INVALID,
                "a context type with a size and no name",
            ));
        }
    }
    if a.ContextSizeOverride != 0 {
        match info {
            None => {
                return Err((
                    STATUS_WDF_OBJECT_ATTRIBUTES_INVALID,
                    "ContextSizeOverride without ContextTypeInfo",
                ))
            }
            Some(i) if a.ContextSizeOverride < i.ContextSize => {
                return Err((
                    STATUS_WDF_OBJECT_ATTRIBUTES_INVALID,
                    "ContextSizeOverride below the type's ContextSize",
                ))
            }
            Some(_) => {}
        }
    }
    if o.parent_not_allowed && !a.ParentObject.is_null() {
        return Err((
            STATUS_WDF_PARENT_ASSIGNMENT_NOT_ALLOWED,
            "this object takes no parent",
        ));
    }
    if o.parent_required && a.ParentObject.is_null() {
        return Err((
            STATUS_WDF_PARENT_NOT_SPECIFIED,
            "this object needs a parent",
        ));
    }
    let level = a.ExecutionLevel;
    if level == _WDF_EXECUTION_LEVEL::WdfExecutionLevelInvalid
        || level > _WDF_EXECUTION_LEVEL::WdfExecutionLevelDispatch
    {
        return Err((
            STATUS_WDF_OBJECT_ATTRIBUTES_INVALID,
            "ExecutionLevel is WdfExecutionLevelInvalid (0) or out of range",
        ));
    }
    let scope = a.SynchronizationScope;
    if scope == _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInvalid
        || scope > _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeNone
    {
        return Err((
            STATUS_WDF_OBJECT_ATTRIBUTES_INVALID,
            "SynchronizationScope is WdfSynchronizationScopeInvalid (0) or out of range",
        ));
    }
    if !o.synchronization_scope_allowed
        && scope != _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeInheritFromParent
        && scope != _WDF_SYNCHRONIZATION_SCOPE::WdfSynchronizationScopeNone
    {
        return Err((
            STATUS_WDF_SYNCHRONIZATION_SCOPE_INVALID,
            "this object takes no synchronization scope",
        ));
    }
    if !o.execution_level_allowed
        && level != _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent
    {
        return Err((
            STATUS_WDF_EXECUTION_LEVEL_INVALID,
            "this object takes no execution level",
        ));
    }
    Ok(())
}

impl Kernel {
    /// A new object of `kind` with what `a` asks (validated before), under `a`'s parent or
    /// `default_parent`.
    pub(crate) fn create(
        &mut self,
        ddi: &str,
        kind: Kind,
        a: PWDF_OBJECT_ATTRIBUTES,
        default_parent: Option<Handle>,
    ) -> Handle {
        // SAFETY: validated by the caller.
        let a = unsafe { a.as_ref() };
        let parent = match a.map(|a| a.ParentObject).filter(|p| !p.is_null()) {
            Some(p) => {
                self.live(ddi, p);
                Some(p as Handle)
            }
            None => default_parent,
        };
        let context = a.and_then(|a| {
            // SAFETY: a static type info of the driver's.
            let info = unsafe { a.ContextTypeInfo.as_ref() }?;
            let size = info.ContextSize.max(a.ContextSizeOverride);
            let memory = vec![0u128; size.div_ceil(16).max(1)].into_boxed_slice();
            self.context_bytes += size;
            Some(Context {
                unique: info.UniqueType,
                memory,
                size,
            })
        });
        self.objects.push(Object {
            kind,
            parent,
            context,
            cleanup: a.and_then(|a| a.EvtCleanupCallback),
            destroy: a.and_then(|a| a.EvtDestroyCallback),
            deleted: false,
            disposing: false,
            references: 0,
            cycle_of: self.preparing,
            execution_level: a.map_or(
                _WDF_EXECUTION_LEVEL::WdfExecutionLevelInheritFromParent,
                |a| a.ExecutionLevel,
            ),
        });
        Kernel::handle_of(self.objects.len() - 1)
    }

    /// Marks `handle` and its descendants deleted (children first); their cleanup callbacks,
    /// to be called outside the kernel's lock.
    pub(crate) fn delete(
        &mut self,
        ddi: &str,
        handle: Handle,
    ) -> Vec<(PFN_WDF_OBJECT_CONTEXT_CLEANUP, Handle)> {
        let mut gone = self.descendants(handle);
        gone.push(handle);
        let mut cleanups = Vec::new();
        for h in gone {
            let o = &mut self.objects[Kernel::index_of(h as *mut _)];
            match &mut o.kind {
                Kind::SpinLock { holder: 1.., .. } | Kind::WaitLock { holder: 1.. } => {
                    violation(Rule::SpinLockMisused, ddi, "a lock deleted while held")
                }
                // KMDF's dispose of a timer, DPC or work item stops, cancels or flushes it.
                Kind::Timer { due_us, .. } => *due_us = None,
                Kind::Dpc { queued, .. } | Kind::WorkItem { queued, .. } => *queued = false,
                _ => {}
            }
            o.deleted = true;
            o.disposing = true;
            if let Some(c) = &o.context {
                self.context_bytes -= c.size;
            }
            cleanups.push((o.cleanup, h));
        }
        cleanups
    }
}

impl Kernel {
    /// Deletes an object that has no cleanup callback of the driver's to run (a request, a
    /// resource list, a PDO the driver gave none).
    pub(crate) fn delete_now(&mut self, ddi: &str, handle: Handle) {
        for (cleanup, h) in self.delete(ddi, handle) {
            if cleanup.is_some() {
                violation(
                    Rule::Expectation,
                    ddi,
                    "the model dropped a cleanup callback",
                );
            }
            self.objects[Kernel::index_of(h as _)].disposing = false;
        }
    }
}

/// Calls cleanup callbacks (outside the kernel's lock: they are the driver's code). While
/// its callback runs an object's context is still there; afterwards only a reference keeps it.
pub(crate) fn run_cleanups(cleanups: Vec<(PFN_WDF_OBJECT_CONTEXT_CLEANUP, Handle)>) {
    for &(cleanup, h) in &cleanups {
        if let Some(f) = cleanup {
            let counting = crate::model::heap::count_bytes(super::driver::heap_is_counted());
            // SAFETY: the driver's callback, for its object, as KMDF calls it.
            unsafe { f.run((h as WDFOBJECT,)) };
            crate::model::heap::count_bytes(counting);
        }
        with(|k| k.objects[Kernel::index_of(h as _)].disposing = false);
    }
    for &(_, h) in &cleanups {
        destroy_if_unreferenced(h);
    }
    super::uncounted(|| drop(cleanups));
}

/// An object deleted and no longer referenced: its memory goes, after its EvtDestroyCallback
/// (fxobject.cpp: destroy runs when the last reference of a deleted object is released).
pub(crate) fn destroy_if_unreferenced(h: Handle) {
    let destroy = with(|k| {
        let o = &mut k.objects[Kernel::index_of(h as _)];
        if o.deleted && o.references == 0 && !o.disposing {
            // Its context is there until the callback returns.
            o.disposing = o.destroy.is_some();
            o.destroy.take()
        } else {
            None
        }
    });
    if let Some(f) = destroy {
        let counting = crate::model::heap::count_bytes(super::driver::heap_is_counted());
        // SAFETY: the driver's callback, for its object, its context still there.
        unsafe { f.run((h as WDFOBJECT,)) };
        crate::model::heap::count_bytes(counting);
        with(|k| k.objects[Kernel::index_of(h as _)].disposing = false);
    }
}

pub(crate) unsafe extern "C" fn WdfObjectGetTypedContextWorker(
    _: PWDF_DRIVER_GLOBALS,
    handle: WDFOBJECT,
    info: PCWDF_OBJECT_CONTEXT_TYPE_INFO,
) -> PVOID {
    const DDI: &str = "WdfObjectGetTypedContextWorker";
    let _kernel = super::enter(DDI, super::DISPATCH_PLUS_ONE);
    if info.is_null() {
        violation(Rule::NullParameter, DDI, "TypeInfo is NULL");
    }
    // SAFETY: a non-null type info is the driver's static.
    let unique = unsafe { (*info).UniqueType };
    with(|k| {
        let o = k.object(DDI, handle);
        match &mut o.context {
            Some(c) if c.unique == info || c.unique == unique => c.memory.as_mut_ptr().cast(),
            _ => core::ptr::null_mut(),
        }
    })
}

pub(crate) unsafe extern "C" fn WdfObjectDelete(_: PWDF_DRIVER_GLOBALS, handle: WDFOBJECT) {
    const DDI: &str = "WdfObjectDelete";
    let _kernel = super::enter(DDI, DISPATCH);
    // KMDF's dispose of a DPC, timer or work item waits for a run on another processor
    // (FxDpc::FlushAndRundown, FxTimer::Stop(TRUE), FxWorkItem::FlushAndWait).
    let me = super::schedule::me();
    super::schedule::wait_until(Rule::SelfDeadlock, DDI, "never settles", |k| {
        k.live(DDI, handle);
        let mut gone = k.descendants(handle as Handle);
        gone.push(handle as Handle);
        gone.iter()
            .all(|h| match k.objects[Kernel::index_of(*h as _)].kind {
                Kind::Dpc { running, .. }
                | Kind::Timer { running, .. }
                | Kind::WorkItem { running, .. } => running == 0 || running == me,
                _ => true,
            })
    });
    let cleanups = with(|k| {
        let o = k.live(DDI, handle);
        if let Kind::Device(d) = &o.kind {
            if d.role != super::kernel::Role::Control {
                violation(Rule::DeletePnpDevice, DDI, "a PnP device object");
            }
        }
        k.delete(DDI, handle as Handle)
    });
    run_cleanups(cleanups);
}

pub(crate) unsafe extern "C" fn WdfObjectReferenceActual(
    _: PWDF_DRIVER_GLOBALS,
    handle: WDFOBJECT,
    _tag: PVOID,
    _line: LONG,
    _file: PCCH,
) {
    let _kernel = super::enter("WdfObjectReferenceActual", DISPATCH);
    with(|k| k.live("WdfObjectReferenceActual", handle).references += 1);
}

pub(crate) unsafe extern "C" fn WdfObjectDereferenceActual(
    _: PWDF_DRIVER_GLOBALS,
    handle: WDFOBJECT,
    _tag: PVOID,
    _line: LONG,
    _file: PCCH,
) {
    const DDI: &str = "WdfObjectDereferenceActual";
    let _kernel = super::enter(DDI, DISPATCH);
    with(|k| {
        let o = k.object(DDI, handle);
        if o.references == 0 {
            violation(Rule::ReferenceLeak, DDI, "a dereference with no reference");
        }
        o.references -= 1;
    });
    destroy_if_unreferenced(handle as Handle);
}

/// The parent of a DPC, work item or timer.
fn parent_of(ddi: &str, handle: WDFOBJECT, kind: &str, max_irql: u8) -> WDFOBJECT {
    let _kernel = super::enter(ddi, max_irql);
    with(|k| {
        let o = k.live(ddi, handle);
        if o.kind.name() != kind {
            violation(
                Rule::WrongObjectType,
                ddi,
                &format!("a {} where a {kind} is taken", o.kind.name()),
            );
        }
        o.parent.map_or(core::ptr::null_mut(), |p| p as WDFOBJECT)
    })
}

pub(crate) unsafe extern "C" fn WdfDpcGetParentObject(
    _: PWDF_DRIVER_GLOBALS,
    dpc: WDFDPC,
) -> WDFOBJECT {
    parent_of("WdfDpcGetParentObject", dpc.cast(), "WDFDPC", super::HIGH)
}

pub(crate) unsafe extern "C" fn WdfWorkItemGetParentObject(
    _: PWDF_DRIVER_GLOBALS,
    item: WDFWORKITEM,
) -> WDFOBJECT {
    parent_of(
        "WdfWorkItemGetParentObject",
        item.cast(),
        "WDFWORKITEM",
        DISPATCH,
    )
}

pub(crate) unsafe extern "C" fn WdfTimerGetParentObject(
    _: PWDF_DRIVER_GLOBALS,
    timer: WDFTIMER,
) -> WDFOBJECT {
    parent_of(
        "WdfTimerGetParentObject",
        timer.cast(),
        "WDFTIMER",
        DISPATCH,
    )
}
