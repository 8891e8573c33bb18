//! The user process on the user-verbs provider, simulated: behind the product's
//! `ibal::uverbs::UserProcess`. It makes a call at a steady rate; on EIO it closes the dead
//! context and opens a new one after a delay (twenty times longer when the device is gone).

use hcabus::{Duration, Instant};
use ibal::uverbs::{CtxHandle, UserProcess, UserVerbs, UverbsError};

/// How the lab's user process behaves (the `uverbs` client of a stack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UverbsSpec {
    /// Verbs calls a second the process makes (none at 0).
    pub ops_per_sec: u32,
    /// How long it waits before opening again after EIO or a refused open.
    pub reopen_delay: Duration,
}

impl Default for UverbsSpec {
    fn default() -> Self {
        UverbsSpec {
            ops_per_sec: 200,
            reopen_delay: Duration::from_ms(5),
        }
    }
}

/// A process that calls at `ops_per_sec`, from time 0.
#[derive(Debug, Clone, Copy)]
pub struct SteadyProcess {
    interval: Duration,
    reopen_delay: Duration,
    next: Option<Instant>,
    ctx: Option<CtxHandle>,
    reopen_at: Instant,
}

impl SteadyProcess {
    pub fn new(spec: &UverbsSpec) -> Self {
        SteadyProcess {
            interval: Duration::from_us(1_000_000 / u64::from(spec.ops_per_sec.max(1))),
            reopen_delay: spec.reopen_delay,
            next: (spec.ops_per_sec > 0).then_some(Instant::ZERO),
            ctx: None,
            reopen_at: Instant::ZERO,
        }
    }

    /// Its first call at `at` (its host powers on then), as at 0.
    pub fn starting_at(mut self, at: Instant) -> Self {
        self.next = self.next.map(|t| t.max(at));
        self.reopen_at = self.reopen_at.max(at);
        self
    }

    /// One step: a call on its context, or an open when it has none and may try again.
    fn step(&mut self, verbs: &mut dyn UserVerbs, now: Instant) {
        match self.ctx {
            // Closing a context the provider disassociated always succeeds.
            Some(ctx) if verbs.work(ctx).is_err() => {
                let _ = verbs.close(ctx);
                self.ctx = None;
                self.reopen_at = now + self.reopen_delay;
            }
            Some(_) => {}
            None if now >= self.reopen_at => match verbs.open() {
                Ok(ctx) => self.ctx = Some(ctx),
                Err(UverbsError::DeviceGone) => {
                    self.reopen_at = now + Duration::from_us(self.reopen_delay.as_us() * 20);
                }
                Err(_) => self.reopen_at = now + self.reopen_delay,
            },
            None => {}
        }
    }
}

impl UserProcess for SteadyProcess {
    fn next_due(&self) -> Option<Instant> {
        self.next
    }

    fn run(&mut self, verbs: &mut dyn UserVerbs, now: Instant) {
        // One call a turn: a late turn does not catch up on the calls it missed.
        if let Some(t) = self.next.filter(|t| *t <= now) {
            self.next = Some(t + self.interval);
            self.step(verbs, now);
        }
    }
}
