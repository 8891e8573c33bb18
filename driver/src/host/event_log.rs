//! The entries the bus writes to the system event log (IoWriteErrorLogEntry on Windows), found
//! by scanning the flight recorder after each drain and written by the work item.

use crate::types::{FailReason, ResetReason};

/// Entries the driver writes to the System event log (IoWriteErrorLogEntry), with the
/// message ids of driver/kmdf/messages.mc (the Windows driver).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventLogEntry {
    /// A reset began (epoch, reason as its wire number).
    ResetStarted { epoch: u64, reason: u8 },
    /// The device is back on `epoch`.
    ResetRestored { epoch: u64 },
    /// The reset of `epoch` left the device failed (the failure's wire number).
    ResetFailed { epoch: u64, error: u8 },
    /// Another adapter answered after the reset: PnP re-enumerates the children.
    DeviceReplaced { epoch: u64 },
}

impl EventLogEntry {
    /// The message id in messages.mc: severity (bits 30-31), customer bit, facility 0xAB,
    /// code.
    pub const fn message_id(self) -> u32 {
        match self {
            EventLogEntry::ResetStarted { .. } => 0x60AB_1001,
            EventLogEntry::ResetRestored { .. } => 0x60AB_1002,
            EventLogEntry::ResetFailed { .. } => 0xE0AB_1003,
            EventLogEntry::DeviceReplaced { .. } => 0xE0AB_1004,
        }
    }
}

impl EventLogEntry {
    /// The message's insertion strings after the device name (%2, %3 in messages.mc), as
    /// NUL-terminated UTF-16 in `out`: the epoch (`e4`), then the reason or error's name.
    /// Returns how many strings and how many u16 were written; nothing is cut mid-string.
    pub fn insertion_strings(self, out: &mut [u16]) -> (u8, usize) {
        let (epoch, name) = match self {
            EventLogEntry::ResetStarted { epoch, reason } => (
                epoch,
                ResetReason::from_u8(reason).map_or("?", ResetReason::as_str),
            ),
            EventLogEntry::ResetFailed { epoch, error } => (
                epoch,
                FailReason::from_u8(error).map_or("?", FailReason::as_str),
            ),
            EventLogEntry::ResetRestored { epoch } | EventLogEntry::DeviceReplaced { epoch } => {
                (epoch, "")
            }
        };
        // "e" and up to 20 digits, written from the end.
        let mut digits = [0u8; 21];
        let mut n = digits.len();
        let mut v = epoch;
        loop {
            n -= 1;
            digits[n] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        n -= 1;
        digits[n] = b'e';
        let strings: [&[u8]; 2] = [&digits[n..], name.as_bytes()];
        let wanted = if name.is_empty() { 1 } else { 2 };
        let mut used = 0;
        let mut count = 0;
        for text in &strings[..wanted] {
            if used + text.len() + 1 > out.len() {
                break;
            }
            for (slot, b) in out[used..].iter_mut().zip(text.iter()) {
                *slot = u16::from(*b);
            }
            used += text.len();
            out[used] = 0;
            used += 1;
            count += 1;
        }
        (count, used)
    }
}
