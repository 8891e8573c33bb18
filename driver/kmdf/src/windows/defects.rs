//! Misuses of KMDF this layer once had, planted back on purpose so that the KMDF model
//! (hcabus-kmdf-model, tests only) shows it catches each. On Windows [`planted`] is `false` and
//! every planted branch folds away; only the model's tests plant one, one test at a time.

/// A misuse the layer had before it ran against the model (docs/windows.md lists each with
/// the KMDF rule it breaks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(wdk_fake), allow(dead_code))]
pub enum Defect {
    /// A: context lookups pass a null type info.
    NullContextType,
    /// B: object attributes give a context size with no context type.
    SizeWithoutType,
    /// B: the control device's init is not freed when its WdfDeviceCreate fails.
    ControlInitNotFreed,
    /// C: the DPC's, work item's and timers' attributes leave the execution level and the
    /// synchronization scope at 0 (invalid).
    InvalidExecutionLevel,
    /// D: release hardware drops the bus with no rundown, and stops, flushes and deletes
    /// nothing.
    ReleaseWithoutRundown,
    /// E: the registers stay mapped and the PCI bus interface referenced.
    MappingKept,
    /// F: the output view is capped at the input buffer's length.
    OutputFromInput,
    /// G: the control device outlives its FDO.
    ControlDeviceKept,
    /// H: a lock KMDF could not create is used anyway.
    LockStatusIgnored,
    /// I: the PDOs get no instance id and no device text.
    BarePdo,
    /// J: the rights come from the file object's share-access flags.
    ShareAccessAsGranted,
    /// K: the hardware ids are asked for in a fixed 256-byte buffer, too small for the
    /// four a PCI function reports.
    FixedIdBuffer,
    /// L: EvtDeviceD0Exit takes WdfPowerDeviceD3Final for removal (it comes on every PnP
    /// stop): a rebalance ends the bus with DEVICE_FATAL to every child.
    FinalExitAsRemoval,
    /// M: EvtDeviceD0Exit does nothing: the health watch and a reset in flight go on
    /// touching a device in Dx.
    NothingInDx,
    /// N: EvtDeviceD0Exit does not wait for a reset in flight: it runs on past D0Exit.
    ResetRunsPastD0Exit,
    /// O: the control device holds no reference on its FDO: a request through a handle
    /// kept open past the FDO's removal reads its freed context.
    ControlHoldsNoReference,
    /// P: WdfDeviceSetSpecialFileSupport never called: the boot LUN's paging, dump and
    /// hibernation files are refused (STATUS_NOT_IMPLEMENTED).
    NoSpecialFiles,
    /// Q: the bus and its coordinator are boxed with `Box::new`: a short pool is
    /// handle_alloc_error, a bugcheck, where STATUS_INSUFFICIENT_RESOURCES is the answer.
    InfallibleAllocation,
    /// R: no EvtDeviceQueryStop: PnP stops the bus in the middle of a reset, whose saved
    /// config space names the BARs the rebalance moves.
    StopDuringReset,
    // Violations of Static Driver Verifier's KMDF rules the layer never had, planted so that
    // the model shows it catches each (docs/sdv-rules.md names the rule each stands for).
    /// SDV WdfSpinlock: the spin lock acquired again by its holder.
    SpinLockTwice,
    /// SDV WdfSpinlockRelease: a spin lock never released (a timer callback returns holding
    /// one; kept everywhere, it broke the IRQL of the next PASSIVE_LEVEL DDI first).
    SpinLockKept,
    /// SDV WdfWaitlock: the wait lock acquired again by its holder.
    WaitLockTwice,
    /// SDV WdfWaitlockRelease: the wait lock never released.
    WaitLockKept,
    /// SDV DoubleCompletion: the IOCTL's request completed twice.
    CompletedTwice,
    /// SDV InvalidReqAccess: the request's buffer asked for after it was completed.
    TouchedAfterCompletion,
    /// SDV RequestCompleted: EvtIoDeviceControl returns with the request not completed.
    LeftPending,
    /// SDV KmdfIrql: the DPC opens the Parameters key (PASSIVE_LEVEL only) at DISPATCH_LEVEL.
    PassiveCallAtDispatch,
    /// SDV DeviceInitAPI: the FDO's init used after its WdfDeviceCreate.
    FdoInitAfterCreate,
    /// SDV PdoDeviceInitAPI, ChildDeviceInitApi: a PDO's init used after its WdfDeviceCreate.
    PdoInitAfterCreate,
    /// SDV ControlDeviceInitAPI: the control device's init used after its WdfDeviceCreate.
    ControlInitAfterCreate,
    /// SDV DoubleDeviceInitFree: the control device's init freed twice after a failed create.
    ControlInitFreedTwice,
    /// SDV InitFreeDeviceCreateType2: the control device created from an init already freed.
    ControlCreateOnFreedInit,
    /// SDV InitFreeNull: WdfDeviceInitFree given the NULL a create or a free leaves.
    FreeNullInit,
    /// SDV DeviceCreateFail: EvtDriverDeviceAdd succeeds though the control device's
    /// WdfDeviceCreate failed.
    CreateFailureIgnored,
    /// SDV ChildListConfiguration: the FDO created with no default child list configured.
    NoChildListConfig,
    /// SDV DriverCreate: DriverEntry returns success without WdfDriverCreate.
    NoDriverCreate,
    /// SDV CtlDeviceFinishInitDeviceAdd: the control device never finished initializing.
    ControlNotFinished,
    /// SDV NullCheck: the event log's packet used without checking that the pool gave one.
    ErrorLogUnchecked,
    /// SDV ParentObjectCheckLock: the bus's locks created with no parent object.
    LockWithoutParent,
    /// SDV DriverAttributeChanged: DriverEntry sets the driver object's execution level.
    DriverLevelChanged,
    /// SDV BufAfterReqCompletedIoctl: the output buffer written after the request is completed.
    WrittenAfterCompletion,
    /// SDV KmdfIrql2: the IOCTL queue's execution level inherited (KMDF may then call
    /// EvtIoDeviceControl at DISPATCH_LEVEL), not PASSIVE_LEVEL, while EvtIoDeviceControl
    /// opens the Parameters key (PASSIVE_LEVEL only).
    QueueLevelInherited,
    /// SDV DeviceInitAllocate, ControlDeviceInitAllocate: the control device created from the
    /// FDO's init (consumed) instead of WdfControlDeviceInitAllocate's.
    ControlFromPnpInit,
    /// SDV InitFreeDeviceCreate: the control device created though its name could not be
    /// assigned.
    CreateAfterFailedName,
    /// SDV InitFreeDeviceCallback: the control device's init not freed when its name could
    /// not be assigned.
    NameFailureNotFreed,
    /// SDV Cleanup4CtlDeviceRegistered: the control device created with no cleanup or destroy
    /// callback.
    ControlNoCleanupCallback,
    /// Race: the rundown protection is released before the call on the bus, not after it.
    RundownReleasedEarly,
    /// Race: the bus's context is one for every thread, so a callback running on another
    /// processor is taken for the caller's own and unregister does not wait for it.
    SharedContext,
    /// Race: release hardware says the bus is stopped only after its rundown wait, and
    /// prepare hardware says it is started before callers are let in, so a child's call in
    /// either window is told the device was removed.
    StoppedAfterRundown,
    // Defects an audit of the layer against KMDF's source found (issue 61's D1-D6).
    /// D5: a control device's number is never given back: after a disable and enable with
    /// the driver loaded, the first adapter is `HcaBus1`, and hcactl looks for `HcaBus0`.
    NamesDrift,
    /// D1: a child's call refused at the door reads `removed` and `stopped` after a start
    /// re-initialised the rundown and cleared `stopped`, and is told the device was removed.
    StartMissedAfterRefusal,
    /// D3: a start after a PnP stop that fails below the FDO is not heard: `stopped` stays
    /// set, and each child's unregister in its remove path waits the whole stopped wait.
    FailedRestartKeepsWaiting,
    /// D2: EvtDeviceQueryStop allows the stop and holds nothing: a reset can start before
    /// the stop, which drops the mapping its saved config space is in.
    ResetAfterQueryStop,
    /// EvtDriverUnload leaves the ETW provider registered (issue 65).
    EtwKeptAtUnload,
}

#[cfg(wdk_fake)]
static PLANTED: std::sync::Mutex<Option<Defect>> = std::sync::Mutex::new(None);

/// Plants `defect` (or none) for the model's next runs.
#[cfg(wdk_fake)]
pub fn plant(defect: Option<Defect>) {
    *PLANTED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = defect;
}

/// Whether `defect` is planted: always `false` outside the model's tests.
#[inline(always)]
pub(crate) fn planted(defect: Defect) -> bool {
    #[cfg(wdk_fake)]
    {
        *PLANTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            == Some(defect)
    }
    #[cfg(not(wdk_fake))]
    {
        let _ = defect;
        false
    }
}
