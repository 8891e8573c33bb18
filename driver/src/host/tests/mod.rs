//! Unit tests of the one locked host, fast and deterministic, for mutation testing of
//! driver/src/host. The bus runs over [`Fake`]: one thread, a clock the test moves, timers
//! the test fires by hand, and a DPC and work item that either run where they are queued or
//! wait for the test to run them. The threaded platform, the IRQL verifier and std's threads
//! are tested on real threads in on_threads.rs, with joins and channels, never with sleeps.
//!
//! The fake records everything the bus asks of it, so that each test can pin what the bus
//! did exactly: deliveries in order, timers armed and cancelled, hardware steps, PnP
//! operations, event log entries.
#![cfg(feature = "std")]

use std::cell::{RefCell, RefMut};
use std::rc::{Rc, Weak};
use std::sync::Arc;

use rand_core::RngCore;

use super::bus::Running;
use super::*;
use crate::coordinator::{Config, ExecuteOutcome, Registration};
use crate::errors::*;
use crate::hca::{Hca, HealthSample, HwError, HwStep, Identity, Readiness};
use crate::policy::Policy;
use crate::reserve::{try_filled, OutOfMemory, Reserve};
use crate::time::Instant;
use crate::types::*;

mod building;
mod clients;
mod log_entries;
mod on_threads;
mod powering;
mod reset;

/// STATUS_INSUFFICIENT_RESOURCES: what the fake answers a creation it refuses.
const REFUSED: u32 = 0xC000_009A;

/// What the fake's delay runs, as the other processors would meanwhile (D0Exit's wait).
type Hook = Rc<dyn Fn(&Bus<Fake>)>;

/// Everything the fake platform was asked, and what the test set it to answer.
#[derive(Default)]
struct World {
    now: Instant,
    /// The DPC (resp. the work item) runs on the caller's thread ([`Scheduled::RunHere`]);
    /// otherwise it is queued and the test runs it ([`settle`]).
    dpc_here: bool,
    work_here: bool,
    dpc_pending: bool,
    work_pending: bool,
    dpc_asks: u32,
    work_asks: u32,
    /// The platform's own timers: what is armed now, and every arm and cancel in order.
    armed: [Option<Instant>; TimerId::COUNT],
    arms: Vec<(TimerId, Instant)>,
    cancels: Vec<TimerId>,
    delivered: Vec<(ClientId, Event)>,
    pnp: Vec<PnpOp>,
    log: Vec<EventLogEntry>,
    /// Each record the tracing was handed: its number, its kind and the reset it falls in.
    traced: Vec<(u64, crate::recorder::RecordTag, Option<ResetSpan>)>,
    settled: u32,
    at_dispatch: bool,
    context: usize,
    ended: u64,
    /// The `seen` of each rundown wait.
    waits: Vec<u64>,
    can_delay: bool,
    delays: Vec<u32>,
    /// The clock tick a delay ends on, in µs (Windows': 15,625); 0 ends it when asked.
    tick_us: u64,
    on_delay: Option<Hook>,
    wall_ms: Option<u64>,
    /// A creation ("spin", "wait") or a reservation key the fake refuses.
    refuse: Option<&'static str>,
    /// The bus, for what plays another processor (a rundown's end, a delay's hook).
    me: Weak<Bus<Fake>>,
}

/// The fake platform: a handle on its [`World`], which the test keeps too.
struct Fake(Rc<RefCell<World>>);

/// A lock on one thread: a re-entry (a callback under the bus lock, say) panics instead of
/// deadlocking, so a bug fails the test at once.
struct OneThread<T>(RefCell<T>);

impl<T> Lock<T> for OneThread<T> {
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.borrow_mut())
    }
    fn into_inner(self) -> T {
        self.0.into_inner()
    }
}

/// A client's callback: any closure over the bus, as a C child's function and context.
#[derive(Clone)]
struct Cb(Arc<OnEvent>);

type OnEvent = dyn Fn(&Bus<Fake>, ClientId, Event) + Send + Sync;

impl Fake {
    fn create<T>(&self, what: &'static str, value: T) -> Result<OneThread<T>, PlatformError> {
        if self.0.borrow().refuse == Some(what) {
            return Err(PlatformError::Status(REFUSED));
        }
        Ok(OneThread(RefCell::new(value)))
    }
}

impl Reserve for Fake {
    fn filled<T: Clone>(
        &self,
        key: &'static str,
        len: usize,
        fill: T,
    ) -> Result<Vec<T>, OutOfMemory> {
        if self.0.borrow().refuse == Some(key) {
            return Err(OutOfMemory { key });
        }
        try_filled(key, len, fill)
    }
}

impl Platform for Fake {
    type SpinLock<T: Send> = OneThread<T>;
    type WaitLock<T: Send> = OneThread<T>;
    type Hca = FakeHca;
    type Callback = Cb;

    fn now(&self) -> Instant {
        self.0.borrow().now
    }
    fn wall_clock_unix_ms(&self) -> Option<u64> {
        self.0.borrow().wall_ms
    }
    fn spin_lock<T: Send>(&self, value: T) -> Result<OneThread<T>, PlatformError> {
        self.create("spin", value)
    }
    fn wait_lock<T: Send>(&self, value: T) -> Result<OneThread<T>, PlatformError> {
        self.create("wait", value)
    }
    fn arm_timer(&self, timer: TimerId, due: Instant) {
        let mut w = self.0.borrow_mut();
        w.armed[timer as usize] = Some(due);
        w.arms.push((timer, due));
    }
    fn cancel_timer(&self, timer: TimerId) {
        let mut w = self.0.borrow_mut();
        w.armed[timer as usize] = None;
        w.cancels.push(timer);
    }
    fn queue_dpc(&self) -> Scheduled {
        let mut w = self.0.borrow_mut();
        w.dpc_asks += 1;
        if w.dpc_here {
            return Scheduled::RunHere;
        }
        w.dpc_pending = true;
        Scheduled::Queued
    }
    fn queue_work_item(&self) -> Scheduled {
        let mut w = self.0.borrow_mut();
        w.work_asks += 1;
        if w.work_here {
            return Scheduled::RunHere;
        }
        w.work_pending = true;
        Scheduled::Queued
    }
    fn deliver(bus: &Bus<Self>, callback: &Cb, client: ClientId, event: Event) {
        // Callbacks run with the bus lock released: taking it here must succeed.
        assert!(
            bus.core.0.try_borrow_mut().is_ok(),
            "a callback ran under the bus lock"
        );
        bus.platform()
            .0
            .borrow_mut()
            .delivered
            .push((client, event));
        (callback.0)(bus, client, event);
    }
    fn pnp(&self, op: PnpOp) {
        self.0.borrow_mut().pnp.push(op);
    }
    fn log_event(&self, entry: EventLogEntry) {
        self.0.borrow_mut().log.push(entry);
    }
    fn trace(&self, record: &crate::recorder::Record, reset: Option<ResetSpan>) {
        let mut world = self.0.borrow_mut();
        world.traced.push((record.seq, record.kind.tag(), reset));
    }
    fn settled(&self) {
        self.0.borrow_mut().settled += 1;
    }
    fn at_dispatch(&self) -> bool {
        self.0.borrow().at_dispatch
    }
    fn context(&self) -> usize {
        self.0.borrow().context
    }
    fn delivery_ended(&self) {
        self.0.borrow_mut().ended += 1;
    }
    fn deliveries_ended(&self) -> u64 {
        self.0.borrow().ended
    }
    /// One thread cannot wait for another: the callback the rundown waits for "returns on
    /// the other processor" here, so that the wait ends as it would.
    fn wait_delivery_end(&self, seen: u64) {
        let bus = {
            let mut w = self.0.borrow_mut();
            w.waits.push(seen);
            assert!(w.waits.len() < 100, "a rundown that never ends");
            w.me.upgrade()
        };
        let bus = bus.expect("a test that lets a rundown wait keeps its bus in an Rc");
        bus.core.with(|c| c.running = None);
        self.0.borrow_mut().ended += 1;
    }
    fn delay_ms(&self, ms: u32) -> bool {
        let (hook, bus) = {
            let mut w = self.0.borrow_mut();
            w.delays.push(ms);
            // Bounded, so that a broken wait loop fails instead of running for ever.
            if !w.can_delay || w.delays.len() > 5_000 {
                return false;
            }
            // The other processors' time passes: to the first tick at or after the end.
            let end = w.now.as_us() + u64::from(ms) * 1_000;
            let end = match w.tick_us {
                0 => end,
                tick => end.div_ceil(tick) * tick,
            };
            w.now = Instant::from_us(end);
            (w.on_delay.clone(), w.me.upgrade())
        };
        if let (Some(hook), Some(bus)) = (hook, bus) {
            hook(&bus);
        }
        true
    }
}

/// A platform that keeps every default of [`Platform`], to pin them.
struct Bare;

impl Reserve for Bare {}

impl Platform for Bare {
    type SpinLock<T: Send> = OneThread<T>;
    type WaitLock<T: Send> = OneThread<T>;
    type Hca = FakeHca;
    type Callback = ();

    fn now(&self) -> Instant {
        at(3)
    }
    fn spin_lock<T: Send>(&self, value: T) -> Result<OneThread<T>, PlatformError> {
        Ok(OneThread(RefCell::new(value)))
    }
    fn wait_lock<T: Send>(&self, value: T) -> Result<OneThread<T>, PlatformError> {
        Ok(OneThread(RefCell::new(value)))
    }
    fn arm_timer(&self, _timer: TimerId, _due: Instant) {}
    fn cancel_timer(&self, _timer: TimerId) {}
    fn queue_dpc(&self) -> Scheduled {
        Scheduled::Queued
    }
    fn queue_work_item(&self) -> Scheduled {
        Scheduled::Queued
    }
    fn deliver(_bus: &Bus<Self>, _callback: &(), _client: ClientId, _event: Event) {}
    fn pnp(&self, _op: PnpOp) {}
    fn log_event(&self, _entry: EventLogEntry) {}
    fn at_dispatch(&self) -> bool {
        false
    }
    fn context(&self) -> usize {
        0
    }
    fn delivery_ended(&self) {}
    fn deliveries_ended(&self) -> u64 {
        0
    }
    fn wait_delivery_end(&self, _seen: u64) {}
}

/// A small adapter: every call recorded, each answer set by the test.
#[derive(Debug, Clone)]
struct FakeHca {
    calls: Vec<&'static str>,
    identity: Identity,
    /// Another adapter, answering every identity read after the bus's first (a device
    /// replaced behind the reset).
    swap: Option<Identity>,
    identity_reads: u32,
    fail_identity: bool,
    fail_save: bool,
    /// A save worked: [`FAKE_CONFIG`] is its config space.
    saved: bool,
    counter: u32,
}

/// The config space the fake's save keeps.
const FAKE_CONFIG: [u8; 8] = [0xB3, 0x15, 0x03, 0x10, 0x06, 0x00, 0x10, 0x00];

impl Hca for FakeHca {
    fn save_config(&mut self) -> Result<(), HwError> {
        self.calls.push("save_config");
        if self.fail_save {
            return Err(HwError::DeviceError);
        }
        self.saved = true;
        Ok(())
    }
    fn saved_config(&self, out: &mut [u8]) -> usize {
        if !self.saved {
            return 0;
        }
        let n = out.len().min(FAKE_CONFIG.len());
        out[..n].copy_from_slice(&FAKE_CONFIG[..n]);
        n
    }
    fn restore_config(&mut self) -> Result<(), HwError> {
        self.calls.push("restore_config");
        Ok(())
    }
    fn assert_reset(&mut self) -> Result<(), HwError> {
        self.calls.push("assert_reset");
        Ok(())
    }
    fn function_level_reset(&mut self) -> Result<(), HwError> {
        self.calls.push("function_level_reset");
        Ok(())
    }
    fn probe_ready(&mut self) -> Result<Readiness, HwError> {
        self.calls.push("probe_ready");
        Ok(Readiness::Ready)
    }
    fn init_command_interface(&mut self) -> Result<(), HwError> {
        self.calls.push("init_command_interface");
        Ok(())
    }
    fn identity(&mut self) -> Result<Identity, HwError> {
        self.calls.push("identity");
        if self.fail_identity {
            return Err(HwError::Absent);
        }
        self.identity_reads += 1;
        Ok(match self.swap {
            Some(other) if self.identity_reads > 1 => other,
            _ => self.identity,
        })
    }
    fn read_health(&mut self) -> Result<HealthSample, HwError> {
        self.calls.push("read_health");
        self.counter += 1;
        Ok(HealthSample {
            catastrophic: 0,
            counter: self.counter,
        })
    }
}

/// A generator that counts: only its being handed through matters.
#[derive(Debug)]
struct Steps(u64);

impl RngCore for Steps {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        dest.fill(7);
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

// ----- building blocks of the tests ----------------------------------------------------------

fn at(ms: u64) -> Instant {
    Instant::from_ms(ms)
}

/// Not the default policy, so that a policy read back as the default is caught. The first
/// readiness probe comes an eighth of the poll interval after the assert: 1 ms.
fn policy() -> Policy {
    Policy {
        quiesce_deadline_ms: 500,
        hw_poll_interval_ms: 8,
        hw_ready_timeout_ms: 2_000,
        auto_restart_window_ms: 60_000,
        query_deadline_ms: 300,
        ..Policy::default()
    }
}

fn config() -> Config {
    Config {
        max_clients: 4,
        recorder_capacity: 256,
        policy: policy(),
    }
}

fn identity() -> Identity {
    Identity {
        node_guid: 0x0002_c903_0000_1234,
        vendor_id: 0x15B3,
        device_id: 0x1003,
        subsys_vendor_id: 0x15B3,
        subsys_id: 0x0050,
        serial: 7,
        fw_version: Identity::fw_version(2, 42, 5000),
    }
}

fn hca() -> FakeHca {
    FakeHca {
        calls: Vec::new(),
        identity: identity(),
        swap: None,
        identity_reads: 0,
        fail_identity: false,
        fail_save: false,
        saved: false,
        counter: 0,
    }
}

/// A fake platform whose DPC and work item run where queued (`here`) or wait for the test.
fn fake(here: bool) -> (Fake, Rc<RefCell<World>>) {
    let world = Rc::new(RefCell::new(World {
        dpc_here: here,
        work_here: here,
        context: 1,
        ..World::default()
    }));
    (Fake(Rc::clone(&world)), world)
}

/// A bus on `hca`, its first DPC run.
fn bus_with(here: bool, hca: FakeHca) -> Bus<Fake> {
    let (platform, _) = fake(here);
    let bus = Bus::new(platform, config(), hca).expect("the bus builds");
    settle(&bus);
    bus
}

fn new_bus(here: bool) -> Bus<Fake> {
    bus_with(here, hca())
}

/// A bus in an `Rc` the fake can reach: for a rundown's wait and D0Exit's delays.
fn shared(here: bool) -> Rc<Bus<Fake>> {
    let bus = Rc::new(new_bus(here));
    w(&bus).me = Rc::downgrade(&bus);
    bus
}

fn w(bus: &Bus<Fake>) -> RefMut<'_, World> {
    bus.platform().0.borrow_mut()
}

/// The kernel's scheduler, run by the test: queued DPCs first, then work items, until
/// nothing is queued. Bounded: a livelock fails the test.
fn settle(bus: &Bus<Fake>) {
    for _ in 0..10_000 {
        let (dpc, work) = {
            let mut w = w(bus);
            let dpc = core::mem::take(&mut w.dpc_pending);
            let work = !dpc && core::mem::take(&mut w.work_pending);
            (dpc, work)
        };
        if dpc {
            bus.dpc();
        } else if work {
            bus.work_item();
        } else {
            return;
        }
    }
    panic!("the fake platform never settled");
}

/// The platform's timer goes off at its due time (the clock moved there), then the rest
/// settles.
fn fire(bus: &Bus<Fake>, timer: TimerId) {
    let due = w(bus).armed[timer as usize]
        .take()
        .expect("the timer is armed on the platform");
    {
        let mut w = w(bus);
        w.now = w.now.max(due);
    }
    bus.timer_fired(timer);
    settle(bus);
}

fn hw_calls(bus: &Bus<Fake>) -> Vec<&'static str> {
    bus.with_hca(|h| h.calls.clone())
}

fn desc(name: &str) -> ClientDesc {
    ClientDesc::new(name, ClientKind::Custom, ClientFlags::empty()).expect("a valid name")
}

fn veto_desc(name: &str) -> ClientDesc {
    ClientDesc::new(name, ClientKind::BootDisk, ClientFlags::CAN_VETO).expect("a valid name")
}

/// The id the `index`th registration on a fresh bus gets.
fn id(index: u16) -> ClientId {
    ClientId {
        index,
        generation: 0,
    }
}

fn on(f: impl Fn(&Bus<Fake>, ClientId, Event) + Send + Sync + 'static) -> Cb {
    Cb(Arc::new(f))
}

fn quiet() -> Cb {
    on(|_, _, _| {})
}

/// Executes from inside its RESET callback, as a well-behaved child does.
fn executes() -> Cb {
    on(|bus, id, event| {
        if let Event::Reset { epoch, .. } = event {
            assert_eq!(bus.reset_execute(id, epoch), Ok(ExecuteOutcome::Accepted));
        }
    })
}

fn reset_event(epoch: u64, reason: ResetReason, planned: bool, deadline_ms: u64) -> Event {
    Event::Reset {
        epoch: Epoch(epoch),
        reason,
        planned,
        deadline: at(deadline_ms),
    }
}

fn end_event(epoch: u64) -> Event {
    Event::ResetEnd {
        epoch: Epoch(epoch),
        outcome: ResetOutcome::Restored,
    }
}

/// The steps of one hardware reset that finds the device ready at the first probe.
const HW_RESET: [&str; 6] = [
    "save_config",
    "assert_reset",
    "probe_ready",
    "restore_config",
    "init_command_interface",
    "identity",
];
