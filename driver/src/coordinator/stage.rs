//! The coordinator's state with the data that means something in that state only, and the
//! small types the reset path keeps between calls.
//!
//! [`State`] is the public tag (its numbers are in the IOCTL ABI and the flight recorder);
//! [`Stage`] is the same state carrying its data, so a barrier count cannot outlive its
//! quiesce nor a hardware phase its reset: a transition builds the next stage whole and the
//! previous one's data is gone with it. Nothing is cleared by hand.

use crate::hca::HwStep;
use crate::policy::{CLIENT_REQUEST_LIMIT_MAX, MAX_AUTO_RESETS_LIMIT};
use crate::time::{Duration, Instant};
use crate::types::*;

/// The coordinator's state and its per-state data. Changed only by
/// `Coordinator::transition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Operational,
    Preparing(Prepare),
    Quiescing(Quiesce),
    Resetting(HwReset),
    Restoring(Restore),
    Failed {
        /// Config space saved by the reset that failed: a restart restores to it.
        config_saved: bool,
    },
    Removed,
}

impl Stage {
    pub(super) const fn state(&self) -> State {
        match self {
            Stage::Operational => State::Operational,
            Stage::Preparing(_) => State::Preparing,
            Stage::Quiescing(_) => State::Quiescing,
            Stage::Resetting(_) => State::Resetting,
            Stage::Restoring(_) => State::Restoring,
            Stage::Failed { .. } => State::Failed,
            Stage::Removed => State::Removed,
        }
    }

    /// The stage as docs/protocol.md's table names it: the state, and inside a reset the
    /// part of it that decides what an input does (exhaustive, so a new stage or hardware
    /// phase is named before it can build).
    pub(super) const fn name(&self) -> &'static str {
        match self {
            Stage::Operational => "Operational",
            Stage::Preparing(_) => "Preparing",
            Stage::Quiescing(Quiesce { end: None, .. }) => "Quiescing",
            Stage::Quiescing(Quiesce { end: Some(_), .. }) => "Quiescing: last health read",
            Stage::Resetting(HwReset { phase, .. }) => match phase {
                HwPhase::SavingConfig => "Resetting: save_config",
                HwPhase::Asserting => "Resetting: assert",
                HwPhase::WaitingReady { .. } => "Resetting: probe_ready",
                HwPhase::LongWait => "Resetting: long wait",
                HwPhase::RestoringConfig => "Resetting: restore_config",
                HwPhase::InitCommandInterface => "Resetting: init_command_interface",
                HwPhase::ReadingIdentity => "Resetting: read_identity",
            },
            Stage::Restoring(_) => "Restoring",
            Stage::Failed { .. } => "Failed",
            Stage::Removed => "Removed",
        }
    }
}

/// While Preparing: the query of a planned reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Prepare {
    /// Queried clients that have neither answered nor left.
    pub(super) pending: u16,
}

/// While Quiescing: the barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Quiesce {
    /// Barrier members that have neither executed nor left.
    pub(super) pending: u16,
    /// This reset quiesces the clients and then fails the device with this reason (storm
    /// limit, or a fatal error with `auto_recover` off) instead of resetting it.
    pub(super) fail: Option<FailReason>,
    /// The barrier is done; a last health read decides how the quiesce ends.
    pub(super) end: Option<QuiesceEnd>,
    /// A health read issued before the barrier was done is still out: its sample may
    /// predate the clients' last acts, so the read that closes the quiesce follows its
    /// answer instead of being that answer.
    pub(super) read_before_end: bool,
}

impl Quiesce {
    pub(super) const fn new(fail: Option<FailReason>) -> Self {
        Quiesce {
            pending: 0,
            fail,
            end: None,
            read_before_end: false,
        }
    }
}

/// While Resetting: the hardware reset's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct HwReset {
    pub(super) phase: HwPhase,
    /// Resets asserted in this reset, soft and FLR.
    pub(super) attempts: u8,
    /// Config space is saved: every attempt restores to it.
    pub(super) config_saved: bool,
}

/// While Restoring: the RESET_END fan-out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Restore {
    /// RESET_END events queued whose delivery is not yet reported.
    pub(super) pending_end: u32,
    /// A reset asked for while restoring: it starts once this one has finished.
    pub(super) follow_up: Option<ResetReason>,
}

/// Progress of the hardware reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HwPhase {
    SavingConfig,
    Asserting,
    /// Probing for the device to come back; `looks` probes made so far.
    WaitingReady {
        looks: u8,
    },
    /// Retries and the FLR are spent on a device that stays silent: keep probing until the
    /// auto-restart window closes, in case it is being re-plugged or re-flashed.
    LongWait,
    RestoringConfig,
    InitCommandInterface,
    ReadingIdentity,
}

impl HwPhase {
    pub(super) fn expects(self, step: HwStep) -> bool {
        matches!(
            (self, step),
            (HwPhase::SavingConfig, HwStep::SaveConfig)
                | (
                    HwPhase::Asserting,
                    HwStep::AssertReset | HwStep::FunctionLevelReset
                )
                | (
                    HwPhase::WaitingReady { .. } | HwPhase::LongWait,
                    HwStep::ProbeReady
                )
                | (HwPhase::RestoringConfig, HwStep::RestoreConfig)
                | (HwPhase::InitCommandInterface, HwStep::InitCommandInterface)
                | (HwPhase::ReadingIdentity, HwStep::ReadIdentity)
        )
    }
}

/// Why one hardware attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AttemptFailure {
    /// The device reported an error.
    Error,
    /// The device did not come back within `hw_ready_timeout`.
    Silent,
}

/// How a quiesce ends once the health read that closes it is back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum QuiesceEnd {
    /// Barrier complete (or forced through): on to the hardware reset.
    Proceed,
    /// A planned reset's deadline passed with an unresponsive client: abort, unless the
    /// read finds a fatal cause, which makes the reset fatal instead.
    Abort(ClientId),
}

/// A firmware activation's allowance for a new firmware version: it lasts until a hardware
/// reset asserted after the request has verified the device, whatever happens in between
/// (a failed reset, a restart), so it is not per-state data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FwAllowance {
    None,
    /// Requested; no reset has been asserted since.
    Requested,
    /// A reset was asserted after the request: its verification may see new firmware.
    Asserted,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Entry {
    pub(super) id: ClientId,
    pub(super) desc: ClientDesc,
    pub(super) state: ClientState,
    pub(super) in_barrier: bool,
    /// Received this reset's RESET_QUERY (it hears RESET_ABORTED if the reset is vetoed).
    pub(super) queried: bool,
    pub(super) reset_sent_at: Instant,
    pub(super) last_ack_latency: Option<Duration>,
    /// The ports it believes Active (bit n-1 for port n): what it last heard.
    pub(super) ports: u8,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Slot {
    pub(super) generation: u32,
    pub(super) entry: Option<Entry>,
}

/// Which way a fan-out walks the registration order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Walk {
    /// RESET and DEVICE_FATAL: a client that registered on top of another stops first.
    NewestFirst,
    /// Everything else: the lower layers come back first.
    OldestFirst,
}

/// Times of recent resets (storm control) or of one client's recent requests (its
/// request limit); fixed size: the policy's limits are bounded by it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    starts: [Option<Instant>; WINDOW_SLOTS],
    next: usize,
}

const WINDOW_SLOTS: usize = MAX_AUTO_RESETS_LIMIT as usize;

// Every limit a policy may set fits the window: a larger one fails the build here.
const _: () = assert!(
    WINDOW_SLOTS >= MAX_AUTO_RESETS_LIMIT as usize
        && WINDOW_SLOTS >= CLIENT_REQUEST_LIMIT_MAX as usize
);

impl Window {
    pub(super) const fn new() -> Self {
        Window {
            starts: [None; WINDOW_SLOTS],
            next: 0,
        }
    }

    pub(super) fn count_within(&self, now: Instant, window: Duration) -> usize {
        self.starts
            .iter()
            .flatten()
            .filter(|t| now.saturating_since(**t) < window)
            .count()
    }

    pub(super) fn push(&mut self, at: Instant) {
        self.starts[self.next] = Some(at);
        self.next = (self.next + 1) % self.starts.len();
    }
}
