//! The little-endian encoding of the IOCTL structures: every field written and read at
//! `offset_of!` of its structure, by hand (nothing is transmuted).

use core::mem::offset_of;

use super::*;
use crate::policy::{Policy, PolicyError};
use crate::time::Duration;

pub(super) fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    if let Some(dst) = buf.get_mut(at..at + bytes.len()) {
        dst.copy_from_slice(bytes);
    }
}

pub(super) fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    put(buf, at, &v.to_le_bytes());
}

pub(super) fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    put(buf, at, &v.to_le_bytes());
}

pub(super) fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    put(buf, at, &v.to_le_bytes());
}

/// A boolean field: 0 or 1, anything else is not one.
fn flag(v: u32) -> Option<bool> {
    match v {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

pub(super) fn get<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at + N)?.try_into().ok()
}

pub(super) fn get_u16(buf: &[u8], at: usize) -> Option<u16> {
    get(buf, at).map(u16::from_le_bytes)
}

pub(super) fn get_u32(buf: &[u8], at: usize) -> Option<u32> {
    get(buf, at).map(u32::from_le_bytes)
}

pub(super) fn get_u64(buf: &[u8], at: usize) -> Option<u64> {
    get(buf, at).map(u64::from_le_bytes)
}

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

    pub fn encode(&self, buf: &mut [u8]) {
        put_u32(buf, offset_of!(InputHeader, size), self.size);
        put_u16(buf, offset_of!(InputHeader, version), self.version);
        put_u16(buf, offset_of!(InputHeader, reserved), self.reserved);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        Some(InputHeader {
            size: get_u32(buf, offset_of!(InputHeader, size))?,
            version: get_u16(buf, offset_of!(InputHeader, version))?,
            reserved: get_u16(buf, offset_of!(InputHeader, reserved))?,
        })
    }
}

impl PolicyAbi {
    pub fn from_policy(p: &Policy) -> Self {
        PolicyAbi {
            quiesce_deadline_ms: p.quiesce_deadline_ms,
            hw_ready_timeout_ms: p.hw_ready_timeout_ms,
            hw_poll_interval_ms: p.hw_poll_interval_ms,
            auto_restart_window_ms: p.auto_restart_window_ms,
            storm_window_ms: p.storm_window_ms,
            io_hold_timeout_ms: p.io_hold_timeout_ms,
            health_poll_interval_ms: p.health_poll_interval_ms,
            reset_retries: u32::from(p.reset_retries),
            max_auto_resets: u32::from(p.max_auto_resets),
            abort_on_unresponsive: u32::from(p.abort_on_unresponsive),
            reserved: 0,
            query_deadline_ms: p.query_deadline_ms,
            paging_io_hold_timeout_ms: p.paging_io_hold_timeout_ms,
            client_request_limit: u32::from(p.client_request_limit),
            auto_recover: u32::from(p.auto_recover),
        }
    }

    /// A version-1 structure carries no version-2 field: those keep `current`'s values.
    pub fn with_v2_fields_of(self, current: &Policy) -> Self {
        let now = PolicyAbi::from_policy(current);
        PolicyAbi {
            query_deadline_ms: now.query_deadline_ms,
            paging_io_hold_timeout_ms: now.paging_io_hold_timeout_ms,
            client_request_limit: now.client_request_limit,
            auto_recover: now.auto_recover,
            ..self
        }
    }

    /// The policy this names, or `None` if a field cannot be one (validation of the
    /// values themselves is `Policy::validate`'s).
    pub fn to_policy(&self) -> Option<Policy> {
        self.parse_policy().ok()
    }

    /// The policy this structure holds, or the field that no policy value can be (a count
    /// above 255, a flag other than 0 or 1, a reserved field set). Values are not validated
    /// as a whole here: [`Policy::validate`] does that.
    pub fn parse_policy(&self) -> Result<Policy, PolicyError> {
        let refuse = |field, problem| PolicyError { field, problem };
        let count =
            |field, v: u32| u8::try_from(v).map_err(|_| refuse(field, "must be at most 255"));
        let flag_of = |field, v: u32| flag(v).ok_or(refuse(field, "must be 0 or 1"));
        if self.reserved != 0 {
            return Err(refuse("reserved", "must be 0"));
        }
        Ok(Policy {
            quiesce_deadline_ms: self.quiesce_deadline_ms,
            hw_ready_timeout_ms: self.hw_ready_timeout_ms,
            hw_poll_interval_ms: self.hw_poll_interval_ms,
            reset_retries: count("reset_retries", self.reset_retries)?,
            auto_restart_window_ms: self.auto_restart_window_ms,
            max_auto_resets: count("max_auto_resets", self.max_auto_resets)?,
            storm_window_ms: self.storm_window_ms,
            io_hold_timeout_ms: self.io_hold_timeout_ms,
            abort_on_unresponsive: flag_of("abort_on_unresponsive", self.abort_on_unresponsive)?,
            health_poll_interval_ms: self.health_poll_interval_ms,
            query_deadline_ms: self.query_deadline_ms,
            client_request_limit: count("client_request_limit", self.client_request_limit)?,
            auto_recover: flag_of("auto_recover", self.auto_recover)?,
            paging_io_hold_timeout_ms: self.paging_io_hold_timeout_ms,
        })
    }

    /// Writes the whole (version-2) structure; a version-1 reply is its first
    /// [`POLICY_V1_BYTES`].
    pub fn encode(&self, buf: &mut [u8]) {
        put_u64(
            buf,
            offset_of!(PolicyAbi, quiesce_deadline_ms),
            self.quiesce_deadline_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, hw_ready_timeout_ms),
            self.hw_ready_timeout_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, hw_poll_interval_ms),
            self.hw_poll_interval_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, auto_restart_window_ms),
            self.auto_restart_window_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, storm_window_ms),
            self.storm_window_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, io_hold_timeout_ms),
            self.io_hold_timeout_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, health_poll_interval_ms),
            self.health_poll_interval_ms,
        );
        put_u32(
            buf,
            offset_of!(PolicyAbi, reset_retries),
            self.reset_retries,
        );
        put_u32(
            buf,
            offset_of!(PolicyAbi, max_auto_resets),
            self.max_auto_resets,
        );
        put_u32(
            buf,
            offset_of!(PolicyAbi, abort_on_unresponsive),
            self.abort_on_unresponsive,
        );
        put_u32(buf, offset_of!(PolicyAbi, reserved), self.reserved);
        put_u64(
            buf,
            offset_of!(PolicyAbi, query_deadline_ms),
            self.query_deadline_ms,
        );
        put_u64(
            buf,
            offset_of!(PolicyAbi, paging_io_hold_timeout_ms),
            self.paging_io_hold_timeout_ms,
        );
        put_u32(
            buf,
            offset_of!(PolicyAbi, client_request_limit),
            self.client_request_limit,
        );
        put_u32(buf, offset_of!(PolicyAbi, auto_recover), self.auto_recover);
    }

    /// Reads a version-2 structure, or with `version` 1 the version-1 one (its version-2
    /// fields zero: see [`PolicyAbi::with_v2_fields_of`]).
    pub fn decode_version(buf: &[u8], version: u16) -> Option<Self> {
        if version == 1 {
            let mut full = [0u8; size_of::<PolicyAbi>()];
            full[..POLICY_V1_BYTES].copy_from_slice(buf.get(..POLICY_V1_BYTES)?);
            return Self::decode(&full);
        }
        Self::decode(buf)
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        Some(PolicyAbi {
            quiesce_deadline_ms: get_u64(buf, offset_of!(PolicyAbi, quiesce_deadline_ms))?,
            hw_ready_timeout_ms: get_u64(buf, offset_of!(PolicyAbi, hw_ready_timeout_ms))?,
            hw_poll_interval_ms: get_u64(buf, offset_of!(PolicyAbi, hw_poll_interval_ms))?,
            auto_restart_window_ms: get_u64(buf, offset_of!(PolicyAbi, auto_restart_window_ms))?,
            storm_window_ms: get_u64(buf, offset_of!(PolicyAbi, storm_window_ms))?,
            io_hold_timeout_ms: get_u64(buf, offset_of!(PolicyAbi, io_hold_timeout_ms))?,
            health_poll_interval_ms: get_u64(buf, offset_of!(PolicyAbi, health_poll_interval_ms))?,
            reset_retries: get_u32(buf, offset_of!(PolicyAbi, reset_retries))?,
            max_auto_resets: get_u32(buf, offset_of!(PolicyAbi, max_auto_resets))?,
            abort_on_unresponsive: get_u32(buf, offset_of!(PolicyAbi, abort_on_unresponsive))?,
            reserved: get_u32(buf, offset_of!(PolicyAbi, reserved))?,
            query_deadline_ms: get_u64(buf, offset_of!(PolicyAbi, query_deadline_ms))?,
            paging_io_hold_timeout_ms: get_u64(
                buf,
                offset_of!(PolicyAbi, paging_io_hold_timeout_ms),
            )?,
            client_request_limit: get_u32(buf, offset_of!(PolicyAbi, client_request_limit))?,
            auto_recover: get_u32(buf, offset_of!(PolicyAbi, auto_recover))?,
        })
    }
}

/// Writes `ports` as an array of `PortOut` from `at`.
fn put_ports(buf: &mut [u8], at: usize, ports: &[PortOut]) {
    for (i, p) in ports.iter().enumerate() {
        let at = at + i * size_of::<PortOut>();
        put_u32(buf, at + offset_of!(PortOut, state), p.state);
        put_u32(buf, at + offset_of!(PortOut, lid), p.lid);
    }
}

impl HealthOut {
    /// Its u64 fields, with their offsets.
    fn wide(&self) -> [(usize, u64); 6] {
        [
            (offset_of!(HealthOut, error_count), self.error_count),
            (offset_of!(HealthOut, recover_count), self.recover_count),
            (offset_of!(HealthOut, last_error_us), self.last_error_us),
            (
                offset_of!(HealthOut, counter_moved_us),
                self.counter_moved_us,
            ),
            (offset_of!(HealthOut, now_us), self.now_us),
            (offset_of!(HealthOut, grace_period_ms), self.grace_period_ms),
        ]
    }

    /// Its u32 fields, with their offsets (the ports after them).
    fn narrow(&self) -> [(usize, u32); 7] {
        [
            (offset_of!(HealthOut, reporter_state), self.reporter_state),
            (offset_of!(HealthOut, auto_recover), self.auto_recover),
            (
                offset_of!(HealthOut, last_error_cause),
                self.last_error_cause,
            ),
            (offset_of!(HealthOut, last_syndrome), self.last_syndrome),
            (offset_of!(HealthOut, health_counter), self.health_counter),
            (offset_of!(HealthOut, unchanged_polls), self.unchanged_polls),
            (offset_of!(HealthOut, max_auto_resets), self.max_auto_resets),
        ]
    }

    pub fn encode(&self, buf: &mut [u8]) {
        for (at, v) in self.wide() {
            put_u64(buf, at, v);
        }
        for (at, v) in self.narrow() {
            put_u32(buf, at, v);
        }
        put_u32(
            buf,
            offset_of!(HealthOut, health_poll_ms),
            self.health_poll_ms,
        );
        put_ports(buf, offset_of!(HealthOut, ports), &self.ports);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let u64_at = |at| get_u64(buf, at);
        let u32_at = |at| get_u32(buf, at);
        let port = |i: usize| {
            let at = offset_of!(HealthOut, ports) + i * size_of::<PortOut>();
            Some(PortOut {
                state: u32_at(at)?,
                lid: u32_at(at + offset_of!(PortOut, lid))?,
            })
        };
        Some(HealthOut {
            reporter_state: u32_at(offset_of!(HealthOut, reporter_state))?,
            auto_recover: u32_at(offset_of!(HealthOut, auto_recover))?,
            error_count: u64_at(offset_of!(HealthOut, error_count))?,
            recover_count: u64_at(offset_of!(HealthOut, recover_count))?,
            last_error_us: u64_at(offset_of!(HealthOut, last_error_us))?,
            last_error_cause: u32_at(offset_of!(HealthOut, last_error_cause))?,
            last_syndrome: u32_at(offset_of!(HealthOut, last_syndrome))?,
            health_counter: u32_at(offset_of!(HealthOut, health_counter))?,
            unchanged_polls: u32_at(offset_of!(HealthOut, unchanged_polls))?,
            counter_moved_us: u64_at(offset_of!(HealthOut, counter_moved_us))?,
            now_us: u64_at(offset_of!(HealthOut, now_us))?,
            grace_period_ms: u64_at(offset_of!(HealthOut, grace_period_ms))?,
            max_auto_resets: u32_at(offset_of!(HealthOut, max_auto_resets))?,
            health_poll_ms: u32_at(offset_of!(HealthOut, health_poll_ms))?,
            ports: [port(0)?, port(1)?],
        })
    }
}

impl StateOut {
    pub fn encode(&self, buf: &mut [u8]) {
        put_u32(buf, offset_of!(StateOut, state), self.state);
        put_u32(buf, offset_of!(StateOut, flags), self.flags);
        for (at, v) in [
            (offset_of!(StateOut, epoch), self.epoch),
            (offset_of!(StateOut, node_guid), self.node_guid),
            (offset_of!(StateOut, serial), self.serial),
            (offset_of!(StateOut, fw_version), self.fw_version),
            (offset_of!(StateOut, resets_started), self.resets_started),
            (offset_of!(StateOut, resets_restored), self.resets_restored),
            (offset_of!(StateOut, resets_failed), self.resets_failed),
            (offset_of!(StateOut, resets_aborted), self.resets_aborted),
            (offset_of!(StateOut, refusals), self.refusals),
            (offset_of!(StateOut, pnp_operations), self.pnp_operations),
            (offset_of!(StateOut, last_epoch), self.last_epoch),
            (offset_of!(StateOut, last_quiesce_us), self.last_quiesce_us),
            (
                offset_of!(StateOut, last_hw_reset_us),
                self.last_hw_reset_us,
            ),
            (offset_of!(StateOut, last_restore_us), self.last_restore_us),
            (offset_of!(StateOut, last_total_us), self.last_total_us),
            (offset_of!(StateOut, log_next_seq), self.log_next_seq),
            (offset_of!(StateOut, admin_refusals), self.admin_refusals),
        ] {
            put_u64(buf, at, v);
        }
        put_u16(buf, offset_of!(StateOut, vendor_id), self.vendor_id);
        put_u16(buf, offset_of!(StateOut, device_id), self.device_id);
        put_u16(
            buf,
            offset_of!(StateOut, subsys_vendor_id),
            self.subsys_vendor_id,
        );
        put_u16(buf, offset_of!(StateOut, subsys_id), self.subsys_id);
        put_u32(buf, offset_of!(StateOut, clients), self.clients);
        put_u32(buf, offset_of!(StateOut, max_clients), self.max_clients);
        put_u32(buf, offset_of!(StateOut, last_reason), self.last_reason);
        put_u32(buf, offset_of!(StateOut, last_result), self.last_result);
        put_ports(buf, offset_of!(StateOut, ports), &self.ports);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        let u64_at = |at| get_u64(buf, at);
        Some(StateOut {
            state: get_u32(buf, offset_of!(StateOut, state))?,
            flags: get_u32(buf, offset_of!(StateOut, flags))?,
            epoch: u64_at(offset_of!(StateOut, epoch))?,
            node_guid: u64_at(offset_of!(StateOut, node_guid))?,
            serial: u64_at(offset_of!(StateOut, serial))?,
            fw_version: u64_at(offset_of!(StateOut, fw_version))?,
            vendor_id: get_u16(buf, offset_of!(StateOut, vendor_id))?,
            device_id: get_u16(buf, offset_of!(StateOut, device_id))?,
            subsys_vendor_id: get_u16(buf, offset_of!(StateOut, subsys_vendor_id))?,
            subsys_id: get_u16(buf, offset_of!(StateOut, subsys_id))?,
            clients: get_u32(buf, offset_of!(StateOut, clients))?,
            max_clients: get_u32(buf, offset_of!(StateOut, max_clients))?,
            resets_started: u64_at(offset_of!(StateOut, resets_started))?,
            resets_restored: u64_at(offset_of!(StateOut, resets_restored))?,
            resets_failed: u64_at(offset_of!(StateOut, resets_failed))?,
            resets_aborted: u64_at(offset_of!(StateOut, resets_aborted))?,
            refusals: u64_at(offset_of!(StateOut, refusals))?,
            pnp_operations: u64_at(offset_of!(StateOut, pnp_operations))?,
            last_epoch: u64_at(offset_of!(StateOut, last_epoch))?,
            last_reason: get_u32(buf, offset_of!(StateOut, last_reason))?,
            last_result: get_u32(buf, offset_of!(StateOut, last_result))?,
            last_quiesce_us: u64_at(offset_of!(StateOut, last_quiesce_us))?,
            last_hw_reset_us: u64_at(offset_of!(StateOut, last_hw_reset_us))?,
            last_restore_us: u64_at(offset_of!(StateOut, last_restore_us))?,
            last_total_us: u64_at(offset_of!(StateOut, last_total_us))?,
            log_next_seq: u64_at(offset_of!(StateOut, log_next_seq))?,
            // A version-2 answer stops before the ports: none reported.
            ports: core::array::from_fn(|i| {
                let at = offset_of!(StateOut, ports) + i * size_of::<PortOut>();
                PortOut {
                    state: get_u32(buf, at).unwrap_or(0),
                    lid: get_u32(buf, at + offset_of!(PortOut, lid)).unwrap_or(0),
                }
            }),
            // Before version 6 the administrator's refusals were in `refusals`.
            admin_refusals: get_u64(buf, offset_of!(StateOut, admin_refusals)).unwrap_or(0),
        })
    }
}

impl ClientEntry {
    pub fn encode(&self, buf: &mut [u8]) {
        put_u64(buf, offset_of!(ClientEntry, id), self.id);
        put_u32(buf, offset_of!(ClientEntry, kind), self.kind);
        put_u32(buf, offset_of!(ClientEntry, flags), self.flags);
        put_u32(buf, offset_of!(ClientEntry, state), self.state);
        put_u32(buf, offset_of!(ClientEntry, in_barrier), self.in_barrier);
        put_u64(
            buf,
            offset_of!(ClientEntry, last_ack_latency_us),
            self.last_ack_latency_us,
        );
        put(buf, offset_of!(ClientEntry, name), &self.name);
    }

    pub fn decode(buf: &[u8]) -> Option<Self> {
        Some(ClientEntry {
            id: get_u64(buf, offset_of!(ClientEntry, id))?,
            kind: get_u32(buf, offset_of!(ClientEntry, kind))?,
            flags: get_u32(buf, offset_of!(ClientEntry, flags))?,
            state: get_u32(buf, offset_of!(ClientEntry, state))?,
            in_barrier: get_u32(buf, offset_of!(ClientEntry, in_barrier))?,
            last_ack_latency_us: get_u64(buf, offset_of!(ClientEntry, last_ack_latency_us))?,
            name: get(buf, offset_of!(ClientEntry, name))?,
        })
    }

    /// The name, up to its first NUL.
    pub fn name(&self) -> &str {
        let end = self.name.iter().position(|b| *b == 0).unwrap_or(32);
        core::str::from_utf8(&self.name[..end]).unwrap_or("?")
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

    pub fn encode(&self, buf: &mut [u8]) {
        self.header.encode(buf);
        put_u32(buf, offset_of!(RequestResetIn, mode), self.mode);
        put_u32(buf, offset_of!(RequestResetIn, reserved), self.reserved);
        put(buf, offset_of!(RequestResetIn, reason), &self.reason);
    }
}

/// Encodes an input structure whose fields after the header are all `u32`/`u64`.
pub fn encode_list_clients(start: u32, buf: &mut [u8]) {
    InputHeader::for_input::<ListClientsIn>().encode(buf);
    put_u32(buf, offset_of!(ListClientsIn, start), start);
    put_u32(buf, offset_of!(ListClientsIn, reserved), 0);
}

pub fn encode_read_log(since_seq: u64, max_records: u32, buf: &mut [u8]) {
    InputHeader::for_input::<ReadLogIn>().encode(buf);
    put_u64(buf, offset_of!(ReadLogIn, since_seq), since_seq);
    put_u32(buf, offset_of!(ReadLogIn, max_records), max_records);
    put_u32(buf, offset_of!(ReadLogIn, reserved), 0);
}

pub fn encode_set_policy(policy: &PolicyAbi, buf: &mut [u8]) {
    InputHeader::for_input::<SetPolicyIn>().encode(buf);
    policy.encode(&mut buf[offset_of!(SetPolicyIn, policy)..]);
}

pub fn encode_inject_fault(fault: &FaultRequest, buf: &mut [u8]) {
    InputHeader::for_input::<InjectFaultIn>().encode(buf);
    put_u32(buf, offset_of!(InjectFaultIn, fault), fault.code as u32);
    put_u32(buf, offset_of!(InjectFaultIn, count), fault.count);
    put_u32(buf, offset_of!(InjectFaultIn, port), u32::from(fault.port));
    put_u32(
        buf,
        offset_of!(InjectFaultIn, duration_ms),
        fault.duration_ms,
    );
}

pub fn encode_empty(buf: &mut [u8]) {
    InputHeader::for_input::<EmptyIn>().encode(buf);
}

/// The input size each code takes (exactly).
/// Bytes of the policy structure in ABI `version`.
pub const fn policy_bytes(version: u16) -> usize {
    if version == 1 {
        POLICY_V1_BYTES
    } else {
        size_of::<PolicyAbi>()
    }
}

/// Bytes of QUERY_STATE's answer in ABI `version`.
pub const fn state_bytes(version: u16) -> usize {
    if version < 3 {
        STATE_V2_BYTES
    } else if version < 6 {
        STATE_V5_BYTES
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

/// The input size of `code` in the current ABI.
pub fn input_size(code: u32) -> Option<usize> {
    Some(match code {
        IOCTL_HCABUS_QUERY_STATE
        | IOCTL_HCABUS_GET_POLICY
        | IOCTL_HCABUS_QUERY_HEALTH
        | IOCTL_HCABUS_READ_RESETS
        | IOCTL_HCABUS_RESTART => size_of::<EmptyIn>(),
        IOCTL_HCABUS_LIST_CLIENTS => size_of::<ListClientsIn>(),
        IOCTL_HCABUS_READ_LOG => size_of::<ReadLogIn>(),
        IOCTL_HCABUS_REQUEST_RESET => size_of::<RequestResetIn>(),
        IOCTL_HCABUS_SET_POLICY => size_of::<SetPolicyIn>(),
        IOCTL_HCABUS_INJECT_FAULT => size_of::<InjectFaultIn>(),
        _ => return None,
    })
}

/// The smallest output buffer each code accepts in the current ABI.
pub fn min_output(code: u32) -> usize {
    match code {
        IOCTL_HCABUS_QUERY_STATE => size_of::<StateOut>(),
        IOCTL_HCABUS_LIST_CLIENTS => size_of::<ListClientsOut>(),
        IOCTL_HCABUS_READ_LOG => size_of::<ReadLogOut>(),
        IOCTL_HCABUS_GET_POLICY => size_of::<PolicyAbi>(),
        IOCTL_HCABUS_QUERY_HEALTH => size_of::<HealthOut>(),
        IOCTL_HCABUS_READ_RESETS => size_of::<ReadResetsOut>(),
        IOCTL_HCABUS_REQUEST_RESET | IOCTL_HCABUS_RESTART => size_of::<EpochOut>(),
        _ => 0,
    }
}
