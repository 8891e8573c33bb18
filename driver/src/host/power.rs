//! Device power and PnP stops (docs/design.md, "Device power and PnP stops").
//!
//! KMDF calls D0Exit on every way out of D0: idle power-down and system sleep (a target of
//! D1 to D3) and every PnP stop (D3Final: a resource rebalance, a query-stop, shutdown, and
//! removal). None of them is removal by itself: a surprise removal has its own callback, and
//! in an orderly removal the PnP manager removes the children (which unregister) before the
//! bus. So D0Exit only quiets the bus: a reset in flight is waited for, then nothing touches
//! the device until D0Entry: no hardware step runs (the work item leaves them queued) and no
//! timer is armed (their due times are kept, and re-armed at D0Entry). The clients, their
//! registrations and the coordinator's state are untouched, and across a PnP stop they are
//! kept whole ([`Bus::park`], [`Bus::resume`]): a rebalance is invisible to the children.
//!
//! Calls made in Dx are answered from software state (QUERY_STATE, a registration); a reset
//! asked for in Dx is accepted, and its steps that need the device wait for D0Entry.

use crate::host::bus::Core;
use crate::host::{Bus, Lock, NewError, Platform, Scheduled};
use crate::types::TimerId;

/// How long D0Exit waits for a reset in flight to end before it holds the rest for D0Entry:
/// a reset's own deadlines end it well within this unless the device stays silent into the
/// auto-restart window, and a power IRP held for minutes is a bugcheck (0x9F).
pub const D0_EXIT_WAIT_MS: u32 = 10_000;

/// How often D0Exit looks again while it waits.
const D0_EXIT_LOOK_MS: u32 = 10;

/// The most looks D0Exit makes: twice the wait's worth, for a clock that stands still.
const MAX_LOOKS: u32 = 2 * D0_EXIT_WAIT_MS / D0_EXIT_LOOK_MS;

/// What D0Exit found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PowerDown {
    /// How long it waited for a reset in flight.
    pub waited_ms: u32,
    /// A reset still open when the wait ended (or could not wait): its remaining steps wait
    /// for D0Entry.
    pub reset_held: bool,
}

/// What outlives a PnP stop: the coordinator with every client's registration, state and
/// epoch, the clients' callbacks, the hardware steps not yet run and the timers' due times.
/// EvtDeviceReleaseHardware parks the bus; the next EvtDevicePrepareHardware resumes it on
/// the new resources.
pub struct Parked<C> {
    core: Core<C>,
}

impl<C> core::fmt::Debug for Parked<C> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Parked")
            .field("state", &self.core.coord.state())
            .field("held_steps", &self.core.hw_queue.len())
            .finish_non_exhaustive()
    }
}

impl<C> Parked<C> {
    /// The coordinator as it was parked (for a test, or a log line).
    pub fn coordinator(&self) -> &crate::coordinator::Coordinator {
        &self.core.coord
    }
}

impl<P: Platform> Bus<P> {
    /// EvtDeviceD0Exit, whatever the target (PASSIVE_LEVEL): waits (bounded) for a reset in
    /// flight, then stops touching the device: see the module's comment.
    pub fn d0_exit(&self) -> PowerDown {
        // Time elapsed, not the sleeps asked for: Windows rounds each sleep up to the clock
        // tick (15.6 ms by default), so a thousand 10 ms looks would be 15.6 s.
        let started = self.platform.now();
        let waited = || self.platform.now().saturating_since(started).as_ms();
        let mut waited_ms = 0;
        // A backstop on the looks too: a clock that does not move must not hold D0Exit.
        let mut looks = 0;
        while self.reset_in_flight() && waited_ms < u64::from(D0_EXIT_WAIT_MS) && looks < MAX_LOOKS
        {
            if !self.platform.delay_ms(D0_EXIT_LOOK_MS) {
                break;
            }
            looks += 1;
            waited_ms = waited();
        }
        let waited_ms = u32::try_from(waited_ms).unwrap_or(u32::MAX);
        let reset_held = self.core.with(|c| {
            c.powered = false;
            for timer in TimerId::ALL {
                if c.timers.armed(timer).is_some() {
                    self.platform.cancel_timer(timer);
                }
            }
            c.coord.reset_in_progress() || !c.hw_queue.is_empty()
        });
        // A hardware step the work item took before `powered` fell runs under the wait lock:
        // once this returns, it is over, and every later one sees the device powered down.
        self.hca.with(|_| ());
        if reset_held {
            log::warn!("D0Exit after {waited_ms} ms with a reset open: its steps wait for D0");
        }
        PowerDown {
            waited_ms,
            reset_held,
        }
    }

    /// EvtDeviceD0Entry (PASSIVE_LEVEL): the device is powered again: the timers kept are
    /// re-armed (one due meanwhile fires at once), held hardware steps run, and the DPC runs
    /// for whatever the coordinator asked while the device was down.
    pub fn d0_entry(&self) {
        let now = self.platform.now();
        let held = self.core.with(|c| {
            c.powered = true;
            // A health read held in Dx runs in the work item after this; a poll due long ago
            // (a wake after a sleep) would fire first and take that read for one the device
            // never answered. The poll waits a whole interval: the read answers first.
            let poll_from = now + c.coord.policy().health_poll_interval();
            for timer in TimerId::ALL {
                if let Some((at, _)) = c.timers.armed(timer) {
                    let at = match timer {
                        TimerId::HealthPoll if !c.hw_queue.is_empty() => at.max(poll_from),
                        _ => at,
                    };
                    self.platform.arm_timer(timer, at);
                }
            }
            // The restart after a PnP stop: resets held since the query may start again
            // (a fault found meanwhile now resets the adapter as the restart left it).
            c.coord.release_resets(self.platform.now());
            !c.hw_queue.is_empty()
        });
        self.kick();
        if held && self.platform.queue_work_item() == Scheduled::RunHere {
            self.work_item();
        }
    }

    /// EvtDeviceQueryStop: yes when no reset is open (the config space a reset saved names
    /// BARs a rebalance moves), and then no reset may start before the stop (which releases
    /// the mapping the config space is saved in) or its cancel: held, in the same step as
    /// the look, until D0Entry after the restart or [`Bus::release_resets`] at a cancel.
    pub fn query_stop(&self) -> bool {
        let now = self.platform.now();
        let granted = self.core.with(|c| {
            let open = c.coord.reset_in_progress() || !c.hw_queue.is_empty() || c.stepping;
            if !open {
                c.coord.hold_resets(now);
            }
            !open
        });
        self.kick();
        granted
    }

    /// The stop was cancelled: resets may start again.
    pub fn release_resets(&self) {
        self.input(|c, now| c.release_resets(now));
    }

    /// Whether the device is in D0 for the bus (from its start, and between D0Entry and
    /// D0Exit).
    pub fn powered(&self) -> bool {
        self.core.with(|c| c.powered)
    }

    /// Whether a reset is open or a hardware step waits: what a PnP stop must not cut across
    /// (the config space a reset saved names BARs a rebalance moves).
    pub fn reset_open(&self) -> bool {
        self.reset_in_flight()
    }

    fn reset_in_flight(&self) -> bool {
        self.core
            .with(|c| c.coord.reset_in_progress() || !c.hw_queue.is_empty() || c.stepping)
    }

    /// EvtDeviceReleaseHardware of a PnP stop, once nothing is inside the bus: its platform
    /// objects and locks are deleted and its registers unmapped, and what must outlive the
    /// stop is kept ([`Parked`]).
    pub fn park(self) -> Parked<P::Callback> {
        let Bus {
            platform,
            core,
            hca,
        } = self;
        drop(platform);
        drop(hca);
        let mut core = core.into_inner();
        core.powered = false;
        Parked { core }
    }

    /// EvtDevicePrepareHardware after a PnP stop: the parked bus on the new resources. It
    /// stays powered down until D0Entry, which re-arms its timers and runs what it held.
    /// The coordinator keeps the device's identity: a rebalance moves the same function.
    pub fn resume(platform: P, parked: Parked<P::Callback>, hca: P::Hca) -> Result<Self, NewError> {
        Ok(Bus {
            core: platform
                .spin_lock(parked.core)
                .map_err(NewError::Platform)?,
            hca: platform.wait_lock(hca).map_err(NewError::Platform)?,
            platform,
        })
    }

    /// [`Bus::resume`] written into `room` (as [`Bus::init_in`]); on an error nothing was
    /// written to it, and what was parked is gone.
    pub fn resume_in(
        room: &mut core::mem::MaybeUninit<Self>,
        platform: P,
        parked: Parked<P::Callback>,
        hca: P::Hca,
    ) -> Result<&mut Self, NewError> {
        let core = platform
            .spin_lock(parked.core)
            .map_err(NewError::Platform)?;
        let hca = platform.wait_lock(hca).map_err(NewError::Platform)?;
        Ok(room.write(Bus {
            core,
            hca,
            platform,
        }))
    }
}
