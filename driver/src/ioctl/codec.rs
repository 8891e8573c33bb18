//! What the IOCTL structures need beyond their bytes ([`Wire`]): the policy's conversion
//! and checks, the older versions' sizes, and the inputs tools build.

use super::*;
use crate::time::Duration;

pub(super) fn us(d: Option<Duration>) -> u64 {
    d.map_or(NONE_U64, Duration::as_us)
}

impl InputHeader {
    /// The header a well-formed input of type `T` carries.
    pub const fn for_input<T>() -> Self {
        InputHeader {
            size: size_of::<T>() as u32,
            version: ABI_VERSION,
            reserved: 0,
        }
    }
}

impl StateOut {
    /// An answer of any version: one older than version 7 is shorter, and the fields it
    /// lacks read as zero (no port reported, no administrator's refusal counted apart, no
    /// wall clock).
    pub fn decode_any(buf: &[u8]) -> Option<Self> {
        let bytes = buf.get(..STATE_V2_BYTES.max(buf.len().min(size_of::<StateOut>())))?;
        let mut full = [0u8; size_of::<StateOut>()];
        full[..bytes.len()].copy_from_slice(bytes);
        StateOut::decode(&full)
    }
}

impl RequestResetIn {
    pub fn new(mode: ResetMode, reason: &str) -> Self {
        let mut r = [0u8; 64];
        // Cut at a character boundary so the field stays valid UTF-8.
        let mut n = reason.len().min(64);
        while !reason.is_char_boundary(n) {
            n -= 1;
        }
        r[..n].copy_from_slice(&reason.as_bytes()[..n]);
        RequestResetIn {
            header: InputHeader::for_input::<Self>(),
            mode: mode as u32,
            reserved: 0,
            reason: r,
        }
    }
}

/// LIST_CLIENTS' input: from the `start`th client.
pub fn encode_list_clients(start: u32, buf: &mut [u8]) {
    ListClientsIn {
        header: InputHeader::for_input::<ListClientsIn>(),
        start,
        reserved: 0,
    }
    .encode(buf);
}

/// READ_LOG's input: from `since_seq`, at most `max_records` (0: as many as fit).
pub fn encode_read_log(since_seq: u64, max_records: u32, buf: &mut [u8]) {
    ReadLogIn {
        header: InputHeader::for_input::<ReadLogIn>(),
        since_seq,
        max_records,
        reserved: 0,
    }
    .encode(buf);
}

pub fn encode_set_policy(policy: &PolicyAbi, buf: &mut [u8]) {
    SetPolicyIn {
        header: InputHeader::for_input::<SetPolicyIn>(),
        policy: *policy,
    }
    .encode(buf);
}

pub fn encode_inject_fault(fault: &FaultRequest, buf: &mut [u8]) {
    InjectFaultIn {
        header: InputHeader::for_input::<InjectFaultIn>(),
        fault: fault.code as u32,
        count: fault.count,
        port: u32::from(fault.port),
        duration_ms: fault.duration_ms,
    }
    .encode(buf);
}

/// The input of the codes that take the header alone.
pub fn encode_empty(buf: &mut [u8]) {
    InputHeader::for_input::<EmptyIn>().encode(buf);
}

/// Bytes of QUERY_STATE's answer in ABI `version`.
pub const fn state_bytes(version: u16) -> usize {
    if version < 3 {
        STATE_V2_BYTES
    } else if version < 6 {
        STATE_V5_BYTES
    } else if version < 7 {
        STATE_V6_BYTES
    } else {
        size_of::<StateOut>()
    }
}

/// The input size of `code` in ABI `version`.
pub fn input_size_of(code: u32, version: u16) -> Option<usize> {
    match code {
        IOCTL_HCABUS_SET_POLICY => Some(size_of::<InputHeader>() + policy_bytes(version)),
        IOCTL_HCABUS_INJECT_FAULT if version < 4 => Some(INJECT_V3_BYTES),
        _ => input_size(code),
    }
}

/// The smallest output buffer `code` accepts in ABI `version`.
pub fn min_output_of(code: u32, version: u16) -> usize {
    match code {
        IOCTL_HCABUS_GET_POLICY => policy_bytes(version),
        IOCTL_HCABUS_QUERY_STATE => state_bytes(version),
        // Before version 5 SET_POLICY had no answer; in 5 the answer is optional.
        _ => min_output(code),
    }
}
