//! User verbs: contexts opened by user processes, through IBAL.
//!
//! On RESET every open context is disassociated: its resources are destroyed and every
//! later call on it returns EIO (`DeviceReset`), but the process keeps running. After
//! RESET_END a fresh open gives a new context on the new epoch. Opening a device known to
//! be gone fails; it never hands out a stale instance.
//!
//! The provider is the product; the process that calls it is not. It meets its user as a
//! [`UserProcess`] that calls through [`UserVerbs`] when it is due (the lab's makes a call
//! at a steady rate and reopens after EIO).

use std::vec::Vec;

use hcabus::bus::Client;
use hcabus::types::*;
use hcabus::verbs::*;
use hcabus::{Instant, State};

use crate::access::{ClientBus, MrFlags, MrSpec, QpSpec};
use crate::errors::CreateError;
use crate::handle::*;
use crate::ibal_client::{EventLog, SharedIbal};

/// Contexts open at once.
pub const MAX_CONTEXTS: usize = 4;
const CTX_BUF: u64 = 1024;
/// Each context's completion queue.
pub const CQ_ENTRIES: u32 = 16;
/// Each work queue a context's work creates.
pub const WORK_REQUESTS: u32 = 4;

/// DMA memory the process reserves at start: a buffer per context.
pub const fn dma_bytes() -> u64 {
    CTX_BUF * MAX_CONTEXTS as u64
}

/// A user context, as the process holds it (a file descriptor, in effect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CtxHandle {
    index: u16,
    generation: u32,
}

/// What a user-verbs call returns instead of success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum UverbsError {
    /// EIO: the context was disassociated by a reset; close it and open a new one.
    #[error("EIO: context disassociated by a device reset")]
    DeviceReset,
    /// EAGAIN: a reset is under way; open again later.
    #[error("EAGAIN: device resetting")]
    Resetting,
    /// ENODEV: the device failed or is gone.
    #[error("ENODEV: device failed or removed")]
    DeviceGone,
    /// EMFILE: every context slot is taken.
    #[error("EMFILE: no context slot free")]
    NoResources,
    /// EBADF: not an open context.
    #[error("EBADF: not an open context")]
    BadHandle,
}

fn open_error(e: CreateError) -> UverbsError {
    match e {
        CreateError::Resetting => UverbsError::Resetting,
        CreateError::DeviceFailed => UverbsError::DeviceGone,
        CreateError::NoResources => UverbsError::NoResources,
        // The device refused a command: treat it as a reset in the making.
        _ => UverbsError::Resetting,
    }
}

#[derive(Debug, Clone, Copy)]
struct Context {
    live: bool,
    generation: u32,
    epoch: Epoch,
    disassociated: bool,
    consumer: Option<ConsumerId>,
    pd: Option<PdHandle>,
    cq: Option<CqHandle>,
}

/// What the provider answered its user processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserStats {
    /// Contexts opened.
    pub opens: u32,
    /// Calls on an open context that succeeded.
    pub ops_ok: u64,
    /// Calls on a context that failed: EIO on a disassociated one (ENODEV once the device
    /// is gone).
    pub eio: u32,
    /// Opens refused while a reset is under way or every slot is taken (EAGAIN, EMFILE).
    pub refused_resetting: u32,
    /// Opens refused on a failed or removed device (ENODEV).
    pub refused_gone: u32,
    /// Epoch of the context opened last.
    pub last_epoch: Option<Epoch>,
}

/// The calls a user process makes on the provider.
pub trait UserVerbs {
    /// Opens a context (`ibv_open_device` and what it sets up).
    fn open(&mut self) -> Result<CtxHandle, UverbsError>;
    /// One unit of work on `ctx`.
    fn work(&mut self, ctx: CtxHandle) -> Result<(), UverbsError>;
    /// Closes `ctx`.
    fn close(&mut self, ctx: CtxHandle) -> Result<(), UverbsError>;
}

/// A user process using the provider, run on the provider's turn when it is due.
pub trait UserProcess: core::fmt::Debug + core::marker::Send {
    /// When it next calls.
    fn next_due(&self) -> Option<Instant>;
    /// Makes the calls due at `now`.
    fn run(&mut self, verbs: &mut dyn UserVerbs, now: Instant);
}

/// The provider and the bus it calls through, as a process's [`UserVerbs`].
struct Calls<'a, B: ?Sized> {
    provider: &'a mut UverbsClient,
    bus: &'a mut B,
}

impl<B: ClientBus + ?Sized> UserVerbs for Calls<'_, B> {
    fn open(&mut self) -> Result<CtxHandle, UverbsError> {
        self.provider.open(self.bus)
    }
    fn work(&mut self, ctx: CtxHandle) -> Result<(), UverbsError> {
        self.provider.work(self.bus, ctx)
    }
    fn close(&mut self, ctx: CtxHandle) -> Result<(), UverbsError> {
        self.provider.close(self.bus, ctx)
    }
}

/// The user-verbs provider on the bus, with the user process using it.
#[derive(Debug)]
pub struct UverbsClient {
    desc: ClientDesc,
    ibal: SharedIbal,
    id: Option<ClientId>,
    events: EventLog,
    contexts: Vec<Context>,
    /// The device failed or left: opens fail until a RESET_END.
    gone: bool,
    buf_base: u64,
    /// Its user (`None`: tests that call the provider themselves).
    process: Option<Box<dyn UserProcess>>,
    stats: UserStats,
    problem: Option<crate::retry::ClientProblem>,
    pub refusals: u32,
}

impl UverbsClient {
    /// The provider `name` on the access layer `ibal`, used by `process`.
    pub fn new(
        name: &str,
        ibal: SharedIbal,
        process: Option<Box<dyn UserProcess>>,
    ) -> Option<Self> {
        let blank = Context {
            live: false,
            generation: 0,
            epoch: Epoch(0),
            disassociated: false,
            consumer: None,
            pd: None,
            cq: None,
        };
        Some(UverbsClient {
            desc: ClientDesc::new(name, ClientKind::Uverbs, ClientFlags::USER_MODE)?,
            ibal,
            id: None,
            events: EventLog::new(),
            contexts: std::vec![blank; MAX_CONTEXTS],
            gone: false,
            buf_base: 0,
            process,
            stats: UserStats::default(),
            problem: None,
            refusals: 0,
        })
    }

    pub fn stats(&self) -> &UserStats {
        &self.stats
    }

    /// Stops the user process (tests that drive the interface themselves).
    pub fn stop_process(&mut self) {
        self.process = None;
    }

    /// The epoch a context was opened in, while it is open.
    pub fn context_epoch(&self, ctx: CtxHandle) -> Option<Epoch> {
        self.context(ctx).ok().map(|c| c.epoch)
    }

    fn context(&self, ctx: CtxHandle) -> Result<&Context, UverbsError> {
        self.contexts
            .get(usize::from(ctx.index))
            .filter(|c| c.live && c.generation == ctx.generation)
            .ok_or(UverbsError::BadHandle)
    }

    /// Opens a context: an IBAL consumer with a PD, a CQ and a registered buffer.
    pub fn open<B: ClientBus + ?Sized>(&mut self, bus: &mut B) -> Result<CtxHandle, UverbsError> {
        let opened = self.open_context(bus);
        match opened {
            Ok(ctx) => {
                self.stats.opens += 1;
                self.stats.last_epoch = self.context_epoch(ctx);
            }
            Err(UverbsError::DeviceGone) => self.stats.refused_gone += 1,
            Err(_) => self.stats.refused_resetting += 1,
        }
        opened
    }

    fn open_context<B: ClientBus + ?Sized>(
        &mut self,
        bus: &mut B,
    ) -> Result<CtxHandle, UverbsError> {
        if self.gone || matches!(bus.state(), State::Failed | State::Removed) {
            return Err(UverbsError::DeviceGone);
        }
        let i = self
            .contexts
            .iter()
            .position(|c| !c.live)
            .ok_or(UverbsError::NoResources)?;
        let mut ibal = self.ibal.lock();
        let c = ibal
            .open(self.desc.name.as_str())
            .map_err(|_| UverbsError::NoResources)?;
        let addr = self.buf_base + i as u64 * CTX_BUF;
        let made = (|| {
            let pd = ibal.alloc_pd(bus, c)?;
            let cq = ibal.create_cq(bus, c, CQ_ENTRIES)?;
            ibal.reg_mr(
                bus,
                c,
                MrSpec {
                    pd,
                    addr,
                    len: CTX_BUF,
                    access: Access::LOCAL_WRITE,
                    flags: MrFlags::empty(),
                },
            )?;
            Ok((pd, cq))
        })();
        let (pd, cq) = match made {
            Ok(r) => r,
            Err(e) => {
                let _ = ibal.close(bus, c);
                return Err(open_error(e));
            }
        };
        let epoch = ibal.epoch();
        let slot = &mut self.contexts[i];
        slot.live = true;
        slot.generation = slot.generation.wrapping_add(1);
        slot.epoch = epoch;
        slot.disassociated = false;
        slot.consumer = Some(c);
        slot.pd = Some(pd);
        slot.cq = Some(cq);
        Ok(CtxHandle {
            index: i as u16,
            generation: slot.generation,
        })
    }

    /// One unit of user work: create and destroy a queue pair, poll the CQ.
    pub fn work<B: ClientBus + ?Sized>(
        &mut self,
        bus: &mut B,
        ctx: CtxHandle,
    ) -> Result<(), UverbsError> {
        let done = self.work_on(bus, ctx);
        match done {
            Ok(()) => self.stats.ops_ok += 1,
            Err(_) => self.stats.eio += 1,
        }
        done
    }

    fn work_on<B: ClientBus + ?Sized>(
        &mut self,
        bus: &mut B,
        ctx: CtxHandle,
    ) -> Result<(), UverbsError> {
        let cx = *self.context(ctx)?;
        if cx.disassociated {
            return Err(UverbsError::DeviceReset);
        }
        let (Some(c), Some(pd), Some(cq)) = (cx.consumer, cx.pd, cx.cq) else {
            return Err(UverbsError::BadHandle);
        };
        let mut ibal = self.ibal.lock();
        let qp = ibal
            .create_qp(
                bus,
                c,
                QpSpec::on_one_cq(pd, QpType::Ud, cq, 1, WORK_REQUESTS),
            )
            .map_err(|e| match e {
                CreateError::DeviceFailed => UverbsError::DeviceGone,
                _ => UverbsError::DeviceReset,
            })?;
        let _ = ibal.destroy_qp(bus, c, qp);
        ibal.poll_cq(bus, c, cq)
            .map_err(|_| UverbsError::DeviceReset)?;
        Ok(())
    }

    /// Closes a context. Always succeeds for an open one, disassociated or not.
    pub fn close<B: ClientBus + ?Sized>(
        &mut self,
        bus: &mut B,
        ctx: CtxHandle,
    ) -> Result<(), UverbsError> {
        self.context(ctx)?;
        let slot = &mut self.contexts[usize::from(ctx.index)];
        slot.live = false;
        if let Some(c) = slot.consumer.take() {
            let _ = self.ibal.lock().close(bus, c);
        }
        Ok(())
    }

    /// RESET (or failure): every open context loses its resources and answers EIO.
    fn disassociate_all<B: ClientBus + ?Sized>(&mut self, bus: &mut B) {
        let mut ibal = self.ibal.lock();
        for cx in self
            .contexts
            .iter_mut()
            .filter(|c| c.live && !c.disassociated)
        {
            if let Some(c) = cx.consumer {
                let _ = ibal.destroy_all(bus, c);
            }
            cx.disassociated = true;
            cx.pd = None;
            cx.cq = None;
        }
    }
}

impl<B: ClientBus + ?Sized> Client<B> for UverbsClient {
    fn start(&mut self, bus: &mut B) {
        let Some(base) = bus.device().dma_alloc(dma_bytes()) else {
            self.refusals += 1;
            self.problem = Some(crate::retry::ClientProblem::NoDmaMemory { bytes: dma_bytes() });
            return;
        };
        self.buf_base = base;
        match bus.register(self.desc) {
            Ok(r) => self.id = Some(r.id),
            Err(e) => {
                self.refusals += 1;
                self.problem = Some(crate::retry::ClientProblem::NotRegistered(e));
            }
        }
    }

    fn on_event(&mut self, bus: &mut B, id: ClientId, event: Event) {
        self.events.push(event.kind());
        match event {
            Event::Reset { epoch, .. } => {
                self.disassociate_all(bus);
                if bus.reset_execute(id, epoch).is_err() {
                    self.refusals += 1;
                }
            }
            Event::ResetEnd { .. } | Event::ResetAborted { .. } => self.gone = false,
            // Not CAN_VETO, so never asked; were it, silence would be consent.
            Event::ResetQuery { .. } => {}
            Event::ResetFailed { .. } | Event::DeviceFatal { .. } => {
                self.gone = true;
                self.disassociate_all(bus);
            }
            // A user process sees port changes through its own verbs (ibv_query_port).
            Event::PortActive { .. } | Event::PortDown { .. } => {}
        }
    }

    /// Its process is its own.
    fn wake_is_own(&self) -> bool {
        true
    }

    fn next_wake(&self) -> Option<Instant> {
        self.process.as_ref().and_then(|p| p.next_due())
    }

    fn wake(&mut self, bus: &mut B) {
        let now = bus.now();
        let Some(mut process) = self.process.take() else {
            return;
        };
        if process.next_due().is_some_and(|t| t <= now) {
            process.run(
                &mut Calls {
                    provider: self,
                    bus,
                },
                now,
            );
        }
        self.process = Some(process);
    }
}

// A verbs call is its I/O: answered, or failed with EIO on a disassociated context.
crate::ibal_client::report_fields!(UverbsClient, |c| c.problem.map(|p| p.to_string()), |c| {
    let (completed, failed) = (c.stats.ops_ok, u64::from(c.stats.eio));
    let submitted = completed + failed;
    hcabus::bus::ClientCounters {
        submitted,
        completed,
        failed,
        ..Default::default()
    }
});
