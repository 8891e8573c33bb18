//! The rules the model enforces, each with what it says and where KMDF or Windows says it.

/// A rule the model enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    NoKernel,
    NullParameter,
    InvalidHandle,
    UsedAfterDelete,
    WrongObjectType,
    IrqlTooHigh,
    InitMisused,
    InitLeaked,
    DeletePnpDevice,
    SpinLockMisused,
    WaitLockMisused,
    LockHeldOnReturn,
    SelfDeadlock,
    RequestCompletedTwice,
    RequestNotCompleted,
    RequestUsedAfterCompletion,
    InformationTooLarge,
    CycleLeak,
    ControlDeviceAtUnload,
    ObjectLeak,
    ReferenceLeak,
    MappingLeak,
    BadUnmap,
    InterfaceLeak,
    EtwRegistration,
    PdoIdentity,
    ChildList,
    DeviceInDx,
    WaitWithLockHeld,
    SpecialFileType,
    NoDriverObject,
    ControlNotFinished,
    CallbackAfterUnregister,
    RemovedDuringRebalance,
    Deadlock,
    ControlNoCleanup,
    BufferAfterCompletion,
    LockWithoutParent,
    NullDereference,
    StackOverflow,
    DriverBugCheck,
    DriverAttributeChanged,
    Unmodelled,
    QueueFatalError,
    Expectation,
}

impl Rule {
    /// The bug check code Windows would stop with (0x10D: WDF_VIOLATION; others as named).
    pub(crate) fn code(self) -> u32 {
        match self {
            Rule::IrqlTooHigh => 0xA,                   // IRQL_NOT_LESS_OR_EQUAL
            Rule::NullDereference => 0x50,              // PAGE_FAULT_IN_NONPAGED_AREA
            Rule::MappingLeak | Rule::BadUnmap => 0xC4, // DRIVER_VERIFIER_DETECTED_VIOLATION
            Rule::ControlDeviceAtUnload | Rule::CycleLeak | Rule::ObjectLeak => 0xCE, // DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS
            Rule::StackOverflow => 0x7F, // UNEXPECTED_KERNEL_MODE_TRAP (a double fault)
            Rule::Expectation
            | Rule::NoKernel
            | Rule::DriverBugCheck
            | Rule::DriverAttributeChanged
            | Rule::Unmodelled
            | Rule::DeviceInDx
            | Rule::CallbackAfterUnregister
            | Rule::RemovedDuringRebalance
            | Rule::EtwRegistration => 0,
            _ => 0x10D, // WDF_VIOLATION
        }
    }

    /// The rule, in a sentence.
    pub(crate) fn says(self) -> &'static str {
        match self {
            Rule::NoKernel => "the model must be installed before the driver runs",
            Rule::NullParameter => "a required pointer parameter is never NULL",
            Rule::InvalidHandle => "a handle passed to a DDI is one KMDF gave out",
            Rule::UsedAfterDelete => "an object is not used once deleted and unreferenced",
            Rule::WrongObjectType => "a handle is of the type the DDI takes",
            Rule::IrqlTooHigh => "each DDI is called at or below its maximum IRQL",
            Rule::InitMisused => "a WDFDEVICE_INIT is used only until WdfDeviceCreate consumes it; only a control device's is freed by the driver",
            Rule::InitLeaked => "a control device's WDFDEVICE_INIT is consumed by a successful create or freed",
            Rule::DeletePnpDevice => "a driver never deletes a PnP device object",
            Rule::SpinLockMisused => "a spin lock is released by its holder and never acquired twice",
            Rule::WaitLockMisused => "a wait lock with no timeout is acquired at PASSIVE_LEVEL, once",
            Rule::LockHeldOnReturn => "a callback returns with no lock held, at the IRQL it was called at",
            Rule::SelfDeadlock => "a wait (timer stop, DPC cancel, work-item flush, rundown) never waits for the caller itself",
            Rule::RequestCompletedTwice => "a request is completed exactly once",
            Rule::RequestNotCompleted => "a request the driver takes is completed",
            Rule::RequestUsedAfterCompletion => "a completed request is not touched",
            Rule::InformationTooLarge => "METHOD_BUFFERED: Information never exceeds the output buffer's length",
            Rule::CycleLeak => "what prepare hardware creates, maps or references, release hardware gives back",
            Rule::ControlDeviceAtUnload => "a driver deletes its control devices before it unloads",
            Rule::ObjectLeak => "every object the driver created is gone at unload",
            Rule::ReferenceLeak => "every WdfObjectReference has its WdfObjectDereference",
            Rule::MappingLeak => "every MmMapIoSpaceEx has its MmUnmapIoSpace",
            Rule::BadUnmap => "MmUnmapIoSpace takes a mapping's base and length exactly",
            Rule::InterfaceLeak => "every interface reference a query took is dereferenced",
            Rule::EtwRegistration => "an ETW provider is written to only while registered, and unregistered before the driver unloads",
            Rule::PdoIdentity => "a PDO answers PnP's queries: device id, hardware ids, a unique instance id, device text with a default locale",
            Rule::ChildList => "a child identification is the size the list was configured with",
            Rule::DeviceInDx => "nothing reads or writes a device's registers between its D0Exit and its next D0Entry",
            Rule::SpecialFileType => "WdfDeviceSetSpecialFileSupport takes a file type a device can support (paging, hibernation, dump, boot, guest assigned)",
            Rule::WaitWithLockHeld => "a thread that waits (KeDelayExecutionThread) holds no spin lock or wait lock",
            Rule::NoDriverObject => "DriverEntry that returns success has created the framework driver object (WdfDriverCreate)",
            Rule::ControlNotFinished => "a control device EvtDriverDeviceAdd creates is finished (WdfControlFinishInitializing) before it returns success",
            Rule::CallbackAfterUnregister => "once a child's unregister returns, the bus never calls its callback again",
            Rule::Deadlock => "every wait ends: a lock, a rundown, a flush is given up by whoever holds it",
            Rule::ControlNoCleanup => "a control device registers a cleanup or destroy callback, where what it holds is given back",
            Rule::BufferAfterCompletion => "a request's buffers are not touched once it is completed",
            Rule::LockWithoutParent => "a spin lock or wait lock is created with a parent object",
            Rule::NullDereference => "the driver dereferences no NULL a DDI may return, nor any address it does not own",
            Rule::RemovedDuringRebalance => "a child's call during a PnP stop and restart is never answered DEVICE_REMOVED",
            Rule::StackOverflow => "a call into the driver stays within the kernel stack (24 KiB on x64, a guard page below)",
            Rule::DriverBugCheck => "the driver never stops the machine itself (KeBugCheckEx: its panic handler)",
            Rule::DriverAttributeChanged => "the driver leaves the driver object's execution level and synchronization scope to KMDF (a warning rule: KMDF takes them, the model reports them at unload)",
            Rule::Unmodelled => "the image calls only what the model gives (a limit of the model's, not the driver's)",
            Rule::QueueFatalError => "a queue takes one stop (or purge) callback at a time: a second while one is outstanding is the queue's fatal error",
            Rule::Expectation => "what the scenario expects of the driver",
        }
    }

    /// Where the rule comes from.
    pub(crate) fn source(self) -> &'static str {
        match self {
            Rule::NoKernel | Rule::Expectation | Rule::Unmodelled => "the model's scenario",
            Rule::QueueFatalError => "fxioqueueapi.cpp, WdfIoQueueStop and WdfIoQueuePurge (FatalError: WDF_VIOLATION 0xA when QueueIdle or QueuePurge answer STATUS_INVALID_DEVICE_REQUEST); fxioqueue.cpp, QueueIdle",
            Rule::StackOverflow => "KERNEL_STACK_SIZE (ntddk.h, 0x6000 on x64); an overflow into the guard page is a double fault",
            Rule::DriverBugCheck => "KeBugCheckEx documentation; wdk-panic's handler",
            Rule::DriverAttributeChanged => "SDV rule DriverAttributeChanged (warnings set); fxdriverapi.cpp, WdfDriverCreate (validates the attributes' parent only)",
            Rule::ControlNoCleanup => "SDV rule Cleanup4CtlDeviceRegistered; Using Control Device Objects",
            Rule::NullDereference => "SDV rule NullCheck; a page fault in kernel code is PAGE_FAULT_IN_NONPAGED_AREA (the scenario's process catches SIGSEGV and SIGBUS)",
            Rule::LockWithoutParent => "SDV rule ParentObjectCheckLock (KMDF itself parents such a lock to the driver)",
            Rule::BufferAfterCompletion => "SDV rules BufAfterReqCompletedIoctl(A); WdfRequestComplete documentation (the I/O manager frees the buffer)",
            Rule::Deadlock => "Driver Verifier's deadlock detection (a wait that never ends hangs the machine); the model's step bound",
            Rule::CallbackAfterUnregister => "HCABUS_BUS_INTERFACE_V1's contract (include/hcabus.h): unregister is a rundown (docs/design.md)",
            Rule::RemovedDuringRebalance => "HCABUS_BUS_INTERFACE_V1's contract: a rebalance is invisible to the children (docs/windows.md)",
            Rule::NullParameter => "handleapi.cpp, FxPointerNotNull (WDF_REQUIRED_PARAMETER_IS_NULL)",
            Rule::InvalidHandle | Rule::WrongObjectType => "fxhandle.h, FxObjectHandleGetPtr (WDF_INVALID_HANDLE)",
            Rule::UsedAfterDelete => "fxobject.cpp, object state machine (deleted objects are freed when the last reference goes)",
            Rule::IrqlTooHigh => "FxVerifierCheckIrqlLevel; the DDI's documented IRQL",
            Rule::InitMisused | Rule::InitLeaked => "WdfControlDeviceInitAllocate and WdfDeviceInitFree documentation; fxdeviceapi.cpp, WdfDeviceCreate",
            Rule::DeletePnpDevice => "fxdevice.cpp, FxDevice::DeleteObject (only control devices may be deleted by the driver)",
            Rule::SpinLockMisused => "fxspinlock.cpp, verifier checks on acquire/release",
            Rule::WaitLockMisused => "WdfWaitLockAcquire documentation (no timeout: PASSIVE_LEVEL)",
            Rule::LockHeldOnReturn => "KMDF verifier, FxCallbackLock checks; Driver Verifier IRQL checks",
            Rule::SelfDeadlock => "WdfTimerStop, WdfDpcCancel, WdfWorkItemFlush documentation; ExWaitForRundownProtectionRelease",
            Rule::RequestCompletedTwice | Rule::RequestUsedAfterCompletion => "fxrequest.cpp, FxRequest::Complete (verifier: request already completed)",
            Rule::RequestNotCompleted => "a sequential queue dispatches nothing more until it is (fxioqueue.cpp)",
            Rule::InformationTooLarge => "the I/O manager's METHOD_BUFFERED copy (IopCompleteRequest)",
            Rule::CycleLeak => "EvtDeviceReleaseHardware documentation; the model's own rule for rebalance",
            Rule::ControlDeviceAtUnload => "Using Control Device Objects (KMDF does not delete them)",
            Rule::ObjectLeak | Rule::ReferenceLeak => "KMDF verifier leak report at unload (fxverifier, TrackHandles)",
            Rule::MappingLeak | Rule::BadUnmap => "MmMapIoSpaceEx / MmUnmapIoSpace documentation; Driver Verifier",
            Rule::InterfaceLeak => "IRP_MN_QUERY_INTERFACE documentation (the caller dereferences what it got)",
            Rule::EtwRegistration => "EtwRegister and EtwUnregister documentation (a driver unregisters before it unloads; no tracing call outside the code they bound)",
            Rule::PdoIdentity => "WdfPdoInitAssignDeviceID/InstanceID, WdfPdoInitAddDeviceText/SetDefaultLocale documentation; the toaster bus sample",
            Rule::ChildList => "fxchildlist.cpp, identification size check",
            Rule::DeviceInDx => "EvtDeviceD0Exit documentation (the device is in Dx once it returns); PCI PM: memory space is off in D3hot, a read answers all ones (no bugcheck: the model stops where hardware would mislead)",
            Rule::SpecialFileType => "fxdeviceapikm.cpp, WdfDeviceSetSpecialFileSupport (FxVerifierDbgBreakPoint on a type out of range)",
            Rule::WaitWithLockHeld => "KeDelayExecutionThread documentation (IRQL <= APC_LEVEL); a wait lock held across a wait stalls every other acquirer",
            Rule::NoDriverObject => "WdfDriverCreate documentation (called from DriverEntry); SDV rule DriverCreate",
            Rule::ControlNotFinished => "WdfControlFinishInitializing documentation (until then the control device takes no request); SDV rule CtlDeviceFinishInitDeviceAdd",
        }
    }
}
