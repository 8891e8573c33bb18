//! Version 5's structures: READ_RESETS (the reset history, which polling cannot evict) and
//! SET_POLICY's verdict, which names the field it refused and says why, whole.

use core::fmt::{self, Write as _};
use core::mem::{offset_of, size_of};

use static_assertions::const_assert_eq;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::{result_code, NONE_U64};
use crate::coordinator::{ResetSummary, FORCED_NAMES};
use crate::policy::PolicyError;
use crate::types::{ClientId, ShortText};

/// Head of READ_RESETS' output; `count` summaries (`ResetSummaryOut`) follow, oldest first.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ReadResetsOut {
    pub count: u32,
    pub reserved: u32,
    /// Resets concluded since the bus started: the ordinal of the newest summary.
    pub total: u64,
}
const_assert_eq!(size_of::<ReadResetsOut>(), 16);
const_assert_eq!(offset_of!(ReadResetsOut, total), 8);

/// Text fields: UTF-8, NUL-padded.
pub type Text32 = [u8; ShortText::CAPACITY];

/// `ResetSummaryOut::flags`.
pub const SUMMARY_PLANNED: u8 = 1;
pub const SUMMARY_RESTART: u8 = 2;
pub const SUMMARY_FLR: u8 = 4;

/// One concluded reset. Durations in microseconds, `NONE_U64` where a phase did not run.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, IntoBytes, FromBytes, KnownLayout, Immutable,
)]
pub struct ResetSummaryOut {
    /// 1 for the first reset since the bus started.
    pub ordinal: u64,
    pub epoch: u64,
    pub new_epoch: u64,
    pub started_us: u64,
    pub quiesce_us: u64,
    /// Time in the hardware even when the reset failed there.
    pub hw_reset_us: u64,
    pub restore_us: u64,
    pub total_us: u64,
    /// `ResetReason` number.
    pub reason: u32,
    /// As `StateOut::last_result` ([`result_code`]).
    pub result: u32,
    pub requests: u32,
    pub pnp_operations: u32,
    pub barrier_size: u16,
    /// Clients that passed their quiesce deadline (the first four are named): forced
    /// through it, or, for an AbortedUnresponsive result, the reason the reset was called off.
    pub forced: u16,
    /// Soft resets asserted, retries included.
    pub soft_attempts: u8,
    /// `SUMMARY_PLANNED | SUMMARY_RESTART | SUMMARY_FLR`.
    pub flags: u8,
    pub reserved: u16,
    /// The vetoing client's id, `NONE_U64` when nobody vetoed.
    pub vetoer: u64,
    pub vetoer_name: Text32,
    pub veto_reason: Text32,
    /// The administrator's reason, for a reset they asked for.
    pub admin_reason: Text32,
    pub forced_names: [Text32; FORCED_NAMES],
}
const_assert_eq!(size_of::<ResetSummaryOut>(), 320);
const_assert_eq!(offset_of!(ResetSummaryOut, reason), 64);
const_assert_eq!(offset_of!(ResetSummaryOut, barrier_size), 80);
const_assert_eq!(offset_of!(ResetSummaryOut, soft_attempts), 84);
const_assert_eq!(offset_of!(ResetSummaryOut, vetoer), 88);
const_assert_eq!(offset_of!(ResetSummaryOut, vetoer_name), 96);
const_assert_eq!(offset_of!(ResetSummaryOut, veto_reason), 128);
const_assert_eq!(offset_of!(ResetSummaryOut, admin_reason), 160);
const_assert_eq!(offset_of!(ResetSummaryOut, forced_names), 192);

/// The text a field holds, up to its first NUL; `None` when it is not UTF-8.
pub fn text_of(raw: &Text32) -> Option<&str> {
    let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
    core::str::from_utf8(&raw[..end]).ok()
}

impl ResetSummaryOut {
    pub fn from_summary(s: &ResetSummary) -> Self {
        let us = |d: Option<crate::time::Duration>| d.map_or(NONE_U64, |d| d.as_us());
        // An abort for an unresponsive client is not a veto: its clients are the forced ones.
        let vetoer = s.vetoer().map_or(NONE_U64, ClientId::to_raw);
        let mut flags = 0;
        for (on, bit) in [
            (s.planned, SUMMARY_PLANNED),
            (s.restart, SUMMARY_RESTART),
            (s.flr_used, SUMMARY_FLR),
        ] {
            if on {
                flags |= bit;
            }
        }
        ResetSummaryOut {
            ordinal: s.ordinal,
            epoch: s.epoch.0,
            new_epoch: s.new_epoch.map_or(NONE_U64, |e| e.0),
            started_us: s.started_at.as_us(),
            // A restart has no quiesce here (the report and QUERY_STATE say 0 µs).
            quiesce_us: us(s.quiesce().filter(|_| !s.restart)),
            hw_reset_us: us(s.hw_reset()),
            restore_us: us(s.restore()),
            total_us: us(s.total()),
            reason: s.reason as u32,
            result: result_code(s.result),
            requests: s.requests,
            pnp_operations: s.pnp_operations,
            barrier_size: s.barrier_size,
            forced: s.forced_count,
            soft_attempts: s.soft_attempts,
            flags,
            reserved: 0,
            vetoer,
            vetoer_name: *s.vetoer_name.as_bytes(),
            veto_reason: *s.veto_reason.unwrap_or(ShortText::EMPTY).as_bytes(),
            admin_reason: *s.admin_reason.as_bytes(),
            forced_names: s.forced_names.map(|n| *n.as_bytes()),
        }
    }

    /// The named forced clients.
    pub fn forced_names(&self) -> impl Iterator<Item = &str> {
        let named = usize::from(self.forced).min(FORCED_NAMES);
        self.forced_names[..named].iter().filter_map(text_of)
    }
}

/// Bytes of SET_POLICY's `problem`.
pub const PROBLEM_BYTES: usize = 56;

/// SET_POLICY's answer in version 5, for a caller that gives an output buffer: on Windows
/// the I/O manager copies no output back for an error status, so a refusal that names its
/// field completes with success and says so here (as SCSI pass-through reports a check
/// condition in its buffer). A caller with no output buffer gets INVALID_PARAMETER.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoBytes, FromBytes, KnownLayout, Immutable)]
pub struct SetPolicyOut {
    /// 1: the policy is in force; 0: refused, nothing changed.
    pub applied: u32,
    /// The refused field, one more than its index in `Policy::KEYS` (0 when applied).
    pub field: u32,
    pub field_name: Text32,
    /// What is wrong with it, whole: [`SetPolicyOut::problem_of`].
    pub problem: [u8; PROBLEM_BYTES],
}
const_assert_eq!(size_of::<SetPolicyOut>(), 96);
const_assert_eq!(offset_of!(SetPolicyOut, field_name), 8);
const_assert_eq!(offset_of!(SetPolicyOut, problem), 40);

impl Default for SetPolicyOut {
    fn default() -> Self {
        SetPolicyOut {
            applied: 0,
            field: 0,
            field_name: [0; ShortText::CAPACITY],
            problem: [0; PROBLEM_BYTES],
        }
    }
}

impl SetPolicyOut {
    /// The refused field's name and problem; `None` when the policy was applied or the
    /// texts are not UTF-8.
    pub fn refusal(&self) -> Option<(&str, &str)> {
        if self.applied == 1 {
            return None;
        }
        let end = self
            .problem
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(self.problem.len());
        let problem = core::str::from_utf8(&self.problem[..end]).ok()?;
        Some((text_of(&self.field_name)?, problem))
    }

    /// The `problem` that says why `e` was refused: its text, and for a rule between two
    /// keys the other key's value in the policy asked for (`conflict`, from
    /// [`Policy::conflict`](crate::policy::Policy::conflict)): "must not exceed
    /// auto_restart_window_ms (600000)". `None` when it would not fit whole, which no
    /// refusal does (`ioctl::tests::refusals::every_policy_refusal_fits_set_policys_answer_whole`).
    pub fn problem_of(
        e: &PolicyError,
        conflict: Option<(&str, u64)>,
    ) -> Option<[u8; PROBLEM_BYTES]> {
        let mut out = [0u8; PROBLEM_BYTES];
        let mut fill = Fill {
            buf: &mut out,
            len: 0,
        };
        let written = match conflict {
            Some((_, value)) => write!(fill, "{} ({value})", e.problem),
            None => fill.write_str(e.problem),
        };
        written.ok().map(|()| out)
    }
}

/// Text written into a fixed field; a write that does not fit fails instead of cutting.
struct Fill<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl fmt::Write for Fill<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len.checked_add(s.len()).ok_or(fmt::Error)?;
        self.buf
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Copies `text` NUL-padded into `N` bytes, cut at a character boundary.
pub fn text_field<const N: usize>(text: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let mut len = 0;
    for ch in text.chars() {
        let w = ch.len_utf8();
        if len + w > N {
            break;
        }
        ch.encode_utf8(&mut out[len..len + w]);
        len += w;
    }
    out
}
