//! Building the coordinator: everything the reset path will touch reserved at once, each
//! part asked of the allocator fallibly and refused with the key that sized it, and the
//! coordinator itself built where it is kept (a box, or room a kernel host took from its
//! pool), never moved through a caller's stack.

use alloc::boxed::Box;
use alloc::vec::Vec;

use super::order::Order;
use super::stage::{FwAllowance, Slot, Stage, Window};
use super::*;
use crate::reserve::{Heap, Reserve};

impl Coordinator {
    /// Reserves everything the reset path will touch and starts health polling.
    pub fn new(config: Config, identity: Identity, now: Instant) -> Result<Self, PolicyError> {
        Self::new_boxed(config, identity, now).map(|c| *c)
    }

    /// [`Coordinator::new`] in pool memory, for a host that keeps it there (the bus): built
    /// into its box, so that no caller's frame holds its kilobytes (a kernel stack is small).
    /// Every part it reserves is asked of the allocator fallibly (refused with the key that
    /// sized it); the box itself is `Box::new`'s, whose failure aborts: a host whose pool may
    /// run short (the kernel's) allocates the room itself and calls [`Coordinator::init_in`].
    pub fn new_boxed(
        config: Config,
        identity: Identity,
        now: Instant,
    ) -> Result<Box<Self>, PolicyError> {
        config.policy.validate()?;
        let mut c = Box::new(Self::empty(config.policy, identity, now));
        c.reserve(&config, &Heap)?;
        Ok(c)
    }

    /// The coordinator written into room the host allocated (fallibly, from its pool), its
    /// parts reserved from `pool`: nothing here can abort; memory it cannot have is refused
    /// with the key that sized it. On an error the room owns no memory (what was reserved is
    /// given back): the host frees it as it is, with no drop.
    pub fn init_in<'a>(
        slot: &'a mut core::mem::MaybeUninit<Self>,
        config: Config,
        identity: Identity,
        now: Instant,
        pool: &impl Reserve,
    ) -> Result<&'a mut Self, PolicyError> {
        config.policy.validate()?;
        let c = slot.write(Self::empty(config.policy, identity, now));
        if let Err(e) = c.reserve(&config, pool) {
            c.give_back();
            return Err(e);
        }
        Ok(c)
    }

    /// What [`Coordinator::reserve`] took, given back: the coordinator owns no memory after.
    pub(super) fn give_back(&mut self) {
        self.slots = Vec::new();
        self.requests = Vec::new();
        self.order = Order::empty();
        self.actions = Fifo::empty();
        self.recorder = FlightRecorder::empty();
        self.reset = ResetRecord::empty();
        self.concluded = ResetRecord::empty();
        self.history = ResetHistory::empty();
        self.kept.give_back();
    }

    /// Everything but what is reserved, which is empty (no allocation yet). Inlined into its
    /// caller, so that its fields are stored straight into the destination (a box, the
    /// host's room) rather than built on the stack and copied (a kernel stack is 24 KiB).
    #[inline(always)]
    pub(super) fn empty(policy: Policy, identity: Identity, now: Instant) -> Self {
        Coordinator {
            stage: Stage::Operational,
            policy,
            now,
            epoch: Epoch(1),
            identity,
            slots: Vec::new(),
            requests: Vec::new(),
            order: Order::empty(),
            free_from: 0,
            actions: Fifo::empty(),
            recorder: FlightRecorder::empty(),
            health: HealthMonitor::default(),
            health_outstanding: false,
            storm: Window::new(),
            timers: [None; TimerId::COUNT],
            next_token: 1,
            reset: ResetRecord::empty(),
            concluded: ResetRecord::empty(),
            history: ResetHistory::empty(),
            fw: FwAllowance::None,
            replacement: None,
            counters: Counters::default(),
            health_report: HealthReport::default(),
            ports: [None; MAX_PORTS as usize],
            awaiting_ports: 0,
            hold: super::hold::Hold::default(),
            kept: super::bundle::KeptBundle::default(),
            #[cfg(feature = "mutants")]
            mutant: None,
        }
    }

    /// Reserves, and writes once, everything the reset path will touch, each part asked of
    /// the allocator fallibly: a refusal names the key that sized it (`max_clients`,
    /// `recorder_capacity`). Then health polling starts.
    pub(super) fn reserve(
        &mut self,
        config: &Config,
        pool: &impl Reserve,
    ) -> Result<(), PolicyError> {
        const MAX: &str = "max_clients";
        let max = usize::from(config.max_clients.max(1));
        // Worst case between two drains: RESET_QUERY to everyone, a fatal cause's RESET to
        // everyone, then a removal's DEVICE_FATAL to everyone (or a RESET and an abort's
        // RESET_ABORTED), or RESET_END, a PORT_ACTIVE per port and a follow-up's RESET to
        // everyone, plus timers and steps.
        let action_capacity = (3 + usize::from(MAX_PORTS)) * max + 32;
        let free = Slot {
            generation: 0,
            entry: None,
        };
        let blank = Action::CancelTimer {
            timer: TimerId::HwPoll,
        };
        self.slots = pool.filled(MAX, max, free)?;
        self.requests = pool.filled(MAX, max, Window::new())?;
        self.order = Order::reserved(pool, max)?;
        self.actions = Fifo::reserved(pool, MAX, action_capacity, blank)?;
        // Each in place: a record built on the stack and moved is hundreds of bytes a frame.
        self.recorder.reserve(pool, config.recorder_capacity)?;
        self.reset.reserve(pool, max)?;
        self.concluded.reserve(pool, max)?;
        self.history.reserve(pool)?;
        self.kept.reserve(pool, max, config.recorder_capacity)?;
        let now = self.now;
        self.arm(
            TimerId::HealthPoll,
            now + self.policy.health_poll_interval(),
        );
        Ok(())
    }
}
