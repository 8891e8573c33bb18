//! The fake kernel: a [`Platform`] that records every call with the IRQL it was made at, runs
//! queued DPCs, work items and timers on virtual time when the test says so, and drives a
//! fake ConnectX register file. Rule breaches are collected as violations, never hidden.

use std::cell::Cell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::vec::Vec;

use hcabus::bus_abi::HcabusEvent;
use hcabus::host::Bus;
use hcabus::mmio::{MmioHca, RegisterAccess};
use hcabus::types::{ClientId, Event, PnpOp, TimerId};
use hcabus::{Duration, Instant};
use hcabus_sim::FakeConnectX;

use crate::kernel::{
    ChildFunction, EventLogEntry, Irql, KmdfPlatform, Lock, Platform, PlatformError, Scheduled,
};

thread_local! {
    static IRQL: Cell<Irql> = const { Cell::new(Irql::Passive) };
    /// The bus spin lock is held by this thread.
    static SPIN_HELD: Cell<bool> = const { Cell::new(false) };
    /// Allocations made by this thread, and those made at DISPATCH_LEVEL.
    pub static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    pub static DISPATCH_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// The calling thread's IRQL.
pub fn irql() -> Irql {
    IRQL.with(Cell::get)
}

/// Runs `f` at `level` on this thread, as the kernel would run a DPC or a work item.
pub fn at_irql<R>(level: Irql, f: impl FnOnce() -> R) -> R {
    let before = IRQL.with(|c| c.replace(level));
    let r = f();
    IRQL.with(|c| c.set(before));
    r
}

/// Counted by the test's global allocator (tests.rs).
pub fn count_allocation() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    if IRQL.try_with(Cell::get) == Ok(Irql::Dispatch) {
        let _ = DISPATCH_ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
    }
}

pub fn allocations() -> (u64, u64) {
    (
        ALLOCATIONS.with(Cell::get),
        DISPATCH_ALLOCATIONS.with(Cell::get),
    )
}

/// What the fake kernel saw.
#[derive(Debug, Default)]
pub struct Kernel {
    pub now: Instant,
    pub dpc_queued: bool,
    pub work_queued: bool,
    pub timers: [Option<Instant>; TimerId::COUNT],
    /// Every platform call: its name and the IRQL it came at.
    pub calls: Vec<(&'static str, Irql)>,
    pub violations: Vec<String>,
    /// Callbacks that returned (Unregister's rundown counts them).
    pub deliveries_ended: u64,
    pub children: Vec<ChildFunction>,
    pub children_missing: u32,
    pub reenumerations: u32,
    pub event_log: Vec<EventLogEntry>,
    /// Config-space accesses, and how many came above PASSIVE_LEVEL.
    pub config_accesses: u64,
    /// A creation call the fake refuses (STATUS_INSUFFICIENT_RESOURCES), as a short pool
    /// would make KMDF do.
    pub refuse: Option<&'static str>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A handle on the fake kernel's record, shared by the platform, its locks and registers.
#[derive(Debug, Clone)]
pub struct Shared(Arc<Mutex<Kernel>>);

impl Default for Shared {
    /// The record is reserved up front: keeping it never allocates, so the allocations a
    /// test counts are the driver's own.
    fn default() -> Self {
        Shared(Arc::new(Mutex::new(Kernel {
            calls: Vec::with_capacity(1 << 16),
            violations: Vec::with_capacity(64),
            children: Vec::with_capacity(8),
            event_log: Vec::with_capacity(64),
            ..Kernel::default()
        })))
    }
}

impl Shared {
    pub fn with<R>(&self, f: impl FnOnce(&mut Kernel) -> R) -> R {
        f(&mut lock(&self.0))
    }

    /// A creation call at PASSIVE_LEVEL, refused when the test said so.
    fn create(&self, name: &'static str) -> Result<(), PlatformError> {
        self.call(name, Irql::Passive);
        const STATUS_INSUFFICIENT_RESOURCES: u32 = 0xC000_009A;
        if self.with(|k| k.refuse == Some(name)) {
            return Err(PlatformError::Status(STATUS_INSUFFICIENT_RESOURCES));
        }
        Ok(())
    }

    fn call(&self, name: &'static str, max: Irql) {
        let level = irql();
        self.with(|k| {
            if k.calls.len() < k.calls.capacity() {
                k.calls.push((name, level));
            }
            if level > max {
                k.violations.push(format!("{name} at {level:?}"));
            }
        });
    }
}

/// A client's callback in the fake: any Rust closure.
pub type FakeCallback = Arc<dyn Fn(&HcabusEvent) + Send + Sync>;

/// What the fake can call: a Rust closure, or a C ABI callback (function and context).
pub trait FakeDeliver: Clone + Send {
    fn call(&self, event: &HcabusEvent);
}

impl FakeDeliver for FakeCallback {
    fn call(&self, event: &HcabusEvent) {
        self(event);
    }
}

impl FakeDeliver for hcabus_cabi::CCallback {
    fn call(&self, event: &HcabusEvent) {
        // SAFETY: the test registered this function and context; the event outlives the call.
        unsafe { (self.function)(self.context, event) };
    }
}

pub struct FakePlatform<C = FakeCallback> {
    pub kernel: Shared,
    device: Option<FakeConnectX>,
    callback: std::marker::PhantomData<C>,
}

impl<C> std::fmt::Debug for FakePlatform<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakePlatform").finish_non_exhaustive()
    }
}

impl<C> FakePlatform<C> {
    pub fn new(device: FakeConnectX) -> Self {
        FakePlatform {
            kernel: Shared::default(),
            device: Some(device),
            callback: std::marker::PhantomData,
        }
    }
}

/// The spin lock: raises to DISPATCH_LEVEL while held.
#[derive(Debug)]
pub struct FakeSpinLock<T> {
    data: Mutex<T>,
    kernel: Shared,
}

impl<T> Lock<T> for FakeSpinLock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        if irql() > Irql::Dispatch {
            self.kernel
                .with(|k| k.violations.push("spin lock above DISPATCH".into()));
        }
        if SPIN_HELD.with(Cell::get) {
            self.kernel
                .with(|k| k.violations.push("spin lock re-entered: deadlock".into()));
        }
        let mut data = lock(&self.data);
        SPIN_HELD.with(|c| c.set(true));
        let r = at_irql(Irql::Dispatch, || f(&mut data));
        SPIN_HELD.with(|c| c.set(false));
        r
    }
    fn into_inner(self) -> T {
        self.data
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The wait lock: PASSIVE_LEVEL only.
#[derive(Debug)]
pub struct FakeWaitLock<T> {
    data: Mutex<T>,
    kernel: Shared,
}

impl<T> Lock<T> for FakeWaitLock<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        if irql() != Irql::Passive {
            let level = irql();
            self.kernel
                .with(|k| k.violations.push(format!("wait lock taken at {level:?}")));
        }
        f(&mut lock(&self.data))
    }
    fn into_inner(self) -> T {
        self.data
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// The registers: config space only at PASSIVE_LEVEL (the PCI bus interface's rule).
#[derive(Debug)]
pub struct FakeRegs {
    device: FakeConnectX,
    kernel: Shared,
}

impl FakeRegs {
    fn sync(&mut self, config: bool) {
        let level = irql();
        let now = self.kernel.with(|k| {
            if config {
                k.config_accesses += 1;
                if level != Irql::Passive {
                    k.violations.push(format!("config space at {level:?}"));
                }
            }
            k.now
        });
        self.device.set_now(now);
    }
}

impl RegisterAccess for FakeRegs {
    fn config_read32(&mut self, offset: u16) -> Option<u32> {
        self.sync(true);
        self.device.config_read32(offset)
    }
    fn config_write32(&mut self, offset: u16, value: u32) -> bool {
        self.sync(true);
        self.device.config_write32(offset, value)
    }
    fn bar0_read32(&mut self, offset: u32) -> u32 {
        self.sync(false);
        self.device.bar0_read32(offset)
    }
    fn bar0_write32(&mut self, offset: u32, value: u32) {
        self.sync(false);
        self.device.bar0_write32(offset, value);
    }
}

/// Reservations from the test's heap.
impl<C: FakeDeliver> hcabus::reserve::Reserve for FakePlatform<C> {}

impl<C: FakeDeliver> Platform for FakePlatform<C> {
    type SpinLock<T: Send> = FakeSpinLock<T>;
    type WaitLock<T: Send> = FakeWaitLock<T>;
    type Hca = MmioHca<FakeRegs>;
    type Callback = C;

    fn now(&self) -> Instant {
        self.kernel.with(|k| k.now)
    }

    fn spin_lock<T: Send>(&self, value: T) -> Result<FakeSpinLock<T>, PlatformError> {
        self.kernel.create("WdfSpinLockCreate")?;
        Ok(FakeSpinLock {
            data: Mutex::new(value),
            kernel: self.kernel.clone(),
        })
    }

    fn wait_lock<T: Send>(&self, value: T) -> Result<FakeWaitLock<T>, PlatformError> {
        self.kernel.create("WdfWaitLockCreate")?;
        Ok(FakeWaitLock {
            data: Mutex::new(value),
            kernel: self.kernel.clone(),
        })
    }

    fn arm_timer(&self, timer: TimerId, due: Instant) {
        self.kernel.call("WdfTimerStart", Irql::Dispatch);
        self.kernel.with(|k| k.timers[timer as usize] = Some(due));
    }

    fn cancel_timer(&self, timer: TimerId) {
        self.kernel.call("WdfTimerStop", Irql::Dispatch);
        self.kernel.with(|k| k.timers[timer as usize] = None);
    }

    fn queue_dpc(&self) -> Scheduled {
        self.kernel.call("WdfDpcEnqueue", Irql::Dispatch);
        self.kernel.with(|k| k.dpc_queued = true);
        Scheduled::Queued
    }

    fn queue_work_item(&self) -> Scheduled {
        self.kernel.call("WdfWorkItemEnqueue", Irql::Dispatch);
        self.kernel.with(|k| k.work_queued = true);
        Scheduled::Queued
    }

    fn deliver(bus: &Bus<Self>, callback: &C, client: ClientId, event: Event) {
        let kernel = &bus.platform().kernel;
        kernel.call("client callback", Irql::Dispatch);
        if irql() != Irql::Dispatch {
            kernel.with(|k| k.violations.push("callback outside the DPC".into()));
        }
        if SPIN_HELD.with(Cell::get) {
            kernel.with(|k| k.violations.push("callback with the bus lock held".into()));
        }
        callback.call(&HcabusEvent::new(client, event));
    }

    fn pnp(&self, op: PnpOp) {
        match op {
            PnpOp::ReportChildrenMissing => {
                self.kernel.call(
                    "WdfChildListUpdateAllChildDescriptionsAsPresent",
                    Irql::Dispatch,
                );
                self.kernel.with(|k| k.children_missing += 1);
            }
            PnpOp::ReenumerateChildren => {
                self.kernel
                    .call("WdfChildListRetrieveNextDevice", Irql::Dispatch);
                self.kernel.with(|k| k.reenumerations += 1);
            }
        }
    }

    fn log_event(&self, entry: EventLogEntry) {
        self.kernel.call("IoWriteErrorLogEntry", Irql::Dispatch);
        self.kernel.with(|k| k.event_log.push(entry));
    }

    fn at_dispatch(&self) -> bool {
        irql() == Irql::Dispatch
    }

    /// One thread: every call is made from the one context.
    fn context(&self) -> usize {
        1
    }

    fn delivery_ended(&self) {
        self.kernel.with(|k| k.deliveries_ended += 1);
    }

    fn deliveries_ended(&self) -> u64 {
        self.kernel.with(|k| k.deliveries_ended)
    }

    /// Nothing else runs while the one thread waits: the wait could never end.
    fn wait_delivery_end(&self, _seen: u64) {
        self.kernel.call("KeDelayExecutionThread", Irql::Passive);
        self.kernel.with(|k| {
            k.violations
                .push("a rundown wait on the one-threaded kernel".into())
        });
        panic!("a rundown wait on the one-threaded kernel would never end");
    }
}

impl<C: FakeDeliver> KmdfPlatform for FakePlatform<C> {
    fn irql(&self) -> Irql {
        irql()
    }

    fn map_registers(&mut self) -> Result<MmioHca<FakeRegs>, PlatformError> {
        self.kernel.call("MmMapIoSpaceEx", Irql::Passive);
        let device = self.device.take().ok_or(PlatformError::NoRegisters)?;
        Ok(MmioHca::new(FakeRegs {
            device,
            kernel: self.kernel.clone(),
        }))
    }

    fn child_present(&self, child: ChildFunction) -> Result<(), PlatformError> {
        self.kernel.call(
            "WdfChildListAddOrUpdateChildDescriptionAsPresent",
            Irql::Passive,
        );
        self.kernel.with(|k| k.children.push(child));
        Ok(())
    }
}

/// The kernel's scheduler, run by the test: DPCs at DISPATCH_LEVEL, work items at
/// PASSIVE_LEVEL, until nothing is queued. Bounded: a livelock fails the test.
pub fn settle<C: FakeDeliver>(bus: &Bus<FakePlatform<C>>) {
    let kernel = bus.platform().kernel.clone();
    for _ in 0..100_000 {
        let (dpc, work) = kernel.with(|k| {
            (
                core::mem::take(&mut k.dpc_queued),
                !k.dpc_queued && core::mem::take(&mut k.work_queued),
            )
        });
        if dpc {
            at_irql(Irql::Dispatch, || bus.dpc());
        } else if work {
            at_irql(Irql::Passive, || bus.work_item());
        } else {
            return;
        }
    }
    panic!("the fake kernel never settled");
}

/// Moves virtual time forward by `ms`, firing each timer when due (at DISPATCH_LEVEL) and
/// settling after each.
pub fn advance<C: FakeDeliver>(bus: &Bus<FakePlatform<C>>, ms: u64) {
    let kernel = bus.platform().kernel.clone();
    let end = kernel.with(|k| k.now) + Duration::from_ms(ms);
    settle(bus);
    loop {
        let due = kernel.with(|k| {
            let next = TimerId::ALL
                .into_iter()
                .filter_map(|t| k.timers[t as usize].map(|at| (at, t)))
                .filter(|(at, _)| *at <= end)
                .min_by_key(|(at, _)| *at);
            if let Some((at, t)) = next {
                k.timers[t as usize] = None;
                k.now = k.now.max(at);
            }
            next
        });
        let Some((_, timer)) = due else {
            break;
        };
        at_irql(Irql::Dispatch, || bus.timer_fired(timer));
        settle(bus);
    }
    kernel.with(|k| k.now = end);
}
