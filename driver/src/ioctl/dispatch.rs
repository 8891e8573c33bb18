//! The one IOCTL dispatcher every host uses (the KMDF queue, the simulator's socket server,
//! tests): decodes and validates a request completely, then acts.

use super::codec::*;
use super::*;
use crate::coordinator::Coordinator;
use crate::errors::{AdminResetError, RefusalCode, RestartError};
use crate::policy::{Policy, PolicyError};
use crate::recorder::RECORD_V4_BYTES;
use crate::types::{Actor, State};

/// What the dispatcher acts on: the coordinator, the time, and (in the simulator) the
/// fault injector. A host drains the coordinator's actions after each call.
pub trait IoctlDevice {
    fn coordinator(&mut self) -> &mut Coordinator;
    fn now(&self) -> Instant;
    /// Whether the device takes `fault` (valid: [`FaultRequest::is_valid`]). Simulator only:
    /// real hardware answers NOT_SUPPORTED; a device without the port it names answers
    /// INVALID_PARAMETER.
    fn can_inject(&self, fault: &FaultRequest) -> Result<(), NtStatus> {
        let _ = fault;
        Err(NtStatus::NOT_SUPPORTED)
    }
    /// Applies `fault`, which [`IoctlDevice::can_inject`] took; the dispatcher has recorded
    /// it first, so the record comes before what it causes.
    fn inject(&mut self, fault: FaultRequest) {
        let _ = fault;
    }
    /// The system's time of day in milliseconds since the Unix epoch, for QUERY_STATE's
    /// `time_zero_unix_ms`; `None` for a host with no wall clock (virtual time).
    fn wall_clock_unix_ms(&self) -> Option<u64> {
        None
    }
    /// The stack's counters (QUERY_COUNTERS); `None` for a host that hosts no clients and
    /// so sees no I/O (the KMDF driver): NOT_SUPPORTED.
    fn counters(&self) -> Option<CountersOut> {
        None
    }
}

/// Who sends a request: the access the caller's handle (or socket) was granted, and where
/// the host knows it, the caller's uid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller {
    pub rights: Rights,
    /// SO_PEERCRED's uid on the simulator's socket; `None` on Windows, where the handle's
    /// access is what the control device knows.
    pub uid: Option<u32>,
}

impl From<Rights> for Caller {
    fn from(rights: Rights) -> Self {
        Caller { rights, uid: None }
    }
}

impl Caller {
    /// Who the flight recorder names for this caller's requests.
    pub fn actor(&self) -> Actor {
        let rights = self.rights.bits() as u8;
        match self.uid {
            Some(uid) => Actor::Local { uid, rights },
            None => Actor::Handle { rights },
        }
    }
}

/// The outcome of one request: a status and the bytes written to the output buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub status: NtStatus,
    pub bytes: usize,
}

impl Reply {
    const fn status(status: NtStatus) -> Self {
        Reply { status, bytes: 0 }
    }

    pub const fn ok(bytes: usize) -> Self {
        Reply {
            status: NtStatus::SUCCESS,
            bytes,
        }
    }
}

/// A request, decoded and validated: nothing has been done yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoded<'a> {
    QueryState {
        version: u16,
    },
    ListClients {
        start: u32,
    },
    ReadLog {
        since: u64,
        max: u32,
        version: u16,
    },
    ReadResets,
    QueryCounters,
    GetPolicy {
        version: u16,
    },
    QueryHealth,
    Reset {
        mode: AdminReset,
        reason: &'a str,
    },
    Restart,
    /// The structure as sent, its size checked; read when acting, where an older version's
    /// is completed from the current policy. Borrowed, not copied: its 232 bytes would make
    /// every decoded request that size on a kernel stack.
    SetPolicy {
        policy: &'a [u8],
        version: u16,
    },
    InjectFault(FaultRequest),
    ReadBundle {
        now: bool,
    },
}

/// The input's header, checked against the code: a known code, a version this bus speaks,
/// the size that version has, nothing in the reserved field.
fn checked_header(code: u32, input: &[u8]) -> Result<InputHeader, NtStatus> {
    input_size(code).ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let header = InputHeader::decode(input).ok_or(NtStatus::INVALID_BUFFER_SIZE)?;
    if !(ABI_VERSION_MIN..=ABI_VERSION).contains(&header.version) {
        return Err(NtStatus::REVISION_MISMATCH);
    }
    let expected = input_size_of(code, header.version).ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    if header.size as usize != expected || input.len() != expected {
        return Err(NtStatus::INVALID_BUFFER_SIZE);
    }
    if header.reserved != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(header)
}

fn decode(code: u32, input: &[u8]) -> Result<Decoded<'_>, NtStatus> {
    let header = checked_header(code, input)?;
    let which = IoctlCode::of(code).ok_or(NtStatus::INVALID_DEVICE_REQUEST)?;
    let bad = NtStatus::INVALID_PARAMETER;
    let size = NtStatus::INVALID_BUFFER_SIZE;
    Ok(match which {
        IoctlCode::QueryState => Decoded::QueryState {
            version: InputHeader::decode(input).map_or(ABI_VERSION, |h| h.version),
        },
        IoctlCode::GetPolicy => Decoded::GetPolicy {
            version: header.version,
        },
        IoctlCode::Restart => Decoded::Restart,
        IoctlCode::QueryHealth => Decoded::QueryHealth,
        IoctlCode::ReadResets => Decoded::ReadResets,
        IoctlCode::QueryCounters => Decoded::QueryCounters,
        IoctlCode::ListClients => {
            let r = ListClientsIn::decode(input).ok_or(size)?;
            if r.reserved != 0 {
                return Err(bad);
            }
            Decoded::ListClients { start: r.start }
        }
        IoctlCode::ReadLog => {
            let r = ReadLogIn::decode(input).ok_or(size)?;
            if r.reserved != 0 {
                return Err(bad);
            }
            Decoded::ReadLog {
                since: r.since_seq,
                max: r.max_records,
                version: header.version,
            }
        }
        IoctlCode::RequestReset => decode_reset(input)?,
        IoctlCode::SetPolicy => {
            let at = offset_of!(SetPolicyIn, policy);
            // Its fields are parsed when acting, in one place: a caller of version 5 or
            // later is told which field was refused, an older one INVALID_PARAMETER.
            // The header check made the input its version's size: the structure is all there.
            let policy = input.get(at..).ok_or(size)?;
            Decoded::SetPolicy {
                policy,
                version: header.version,
            }
        }
        IoctlCode::InjectFault => Decoded::InjectFault(decode_fault(input, header.version)?),
        IoctlCode::ReadBundle => {
            let r = ReadBundleIn::decode(input).ok_or(size)?;
            if r.reserved != 0 {
                return Err(bad);
            }
            match r.which {
                BUNDLE_KEPT => Decoded::ReadBundle { now: false },
                BUNDLE_NOW => Decoded::ReadBundle { now: true },
                _ => return Err(bad),
            }
        }
    })
}

/// REQUEST_RESET's mode and reason (UTF-8, NUL-padded: nothing after the first NUL).
fn decode_reset(input: &[u8]) -> Result<Decoded<'_>, NtStatus> {
    let (bad, size) = (NtStatus::INVALID_PARAMETER, NtStatus::INVALID_BUFFER_SIZE);
    // The reason is borrowed from the caller's buffer: the structure is read in place.
    let (r, _) = RequestResetIn::ref_from_prefix(input).map_err(|_| size)?;
    let mode = ResetMode::try_from(r.mode).map_err(|_| bad)?.admin();
    if r.reserved != 0 {
        return Err(bad);
    }
    let end = r
        .reason
        .iter()
        .position(|b| *b == 0)
        .unwrap_or(r.reason.len());
    if r.reason[end..].iter().any(|b| *b != 0) {
        return Err(bad);
    }
    let reason = core::str::from_utf8(&r.reason[..end]).map_err(|_| bad)?;
    Ok(Decoded::Reset { mode, reason })
}

/// INJECT_FAULT's request, in its ranges.
fn decode_fault(input: &[u8], version: u16) -> Result<FaultRequest, NtStatus> {
    let (bad, size) = (NtStatus::INVALID_PARAMETER, NtStatus::INVALID_BUFFER_SIZE);
    // Before version 4 there is no port and no duration (the input stops after `count`): a
    // cable pull cannot be said, and is refused as invalid below.
    let mut full = [0u8; size_of::<InjectFaultIn>()];
    let n = input.len().min(full.len());
    full[..n].copy_from_slice(&input[..n]);
    if version < 4 {
        full[INJECT_V3_BYTES..].fill(0);
    }
    let r = InjectFaultIn::decode(&full).ok_or(size)?;
    let fault = FaultRequest {
        code: FaultCode::try_from(r.fault).map_err(|_| bad)?,
        count: r.count,
        port: u8::try_from(r.port).map_err(|_| bad)?,
        duration_ms: r.duration_ms,
    };
    if !fault.is_valid() {
        return Err(bad);
    }
    Ok(fault)
}

/// Serves one request: decode, validate, act, encode. `caller` is who sends it (its
/// rights, or a [`Caller`] with its uid); `output` is the caller's output buffer (its length
/// is the output capacity). Every record an administrator's write request causes names them.
pub fn dispatch<D: IoctlDevice + ?Sized>(
    dev: &mut D,
    code: u32,
    input: &[u8],
    output: &mut [u8],
    caller: impl Into<Caller>,
) -> Reply {
    let caller = caller.into();
    let rights = caller.rights;
    if input_size(code).is_none() {
        return Reply::status(NtStatus::INVALID_DEVICE_REQUEST);
    }
    let needed = if needs_write(code) {
        Rights::READ | Rights::WRITE
    } else {
        Rights::READ
    };
    if !rights.contains(needed) {
        return Reply::status(NtStatus::ACCESS_DENIED);
    }
    let request = match decode(code, input) {
        Ok(r) => r,
        Err(s) => return Reply::status(s),
    };
    // Decoded, so the header is there and its version served.
    let version = InputHeader::decode(input).map_or(ABI_VERSION, |h| h.version);
    if output.len() < min_output_of(code, version) {
        return Reply::status(NtStatus::BUFFER_TOO_SMALL);
    }
    if !needs_write(code) {
        return act(dev, request, output);
    }
    dev.coordinator().set_actor(caller.actor());
    let reply = if dev.coordinator().state() == State::Removed {
        refuse_removed(dev, request)
    } else {
        act(dev, request, output)
    };
    dev.coordinator().set_actor(Actor::Nobody);
    reply
}

/// A removed device takes no orders: every write code is refused alike (docs/ioctl.md), so
/// no policy or fault lands on a device that is gone; each refusal is recorded and counted
/// as the administrator's, like any other.
fn refuse_removed<D: IoctlDevice + ?Sized>(dev: &mut D, request: Decoded<'_>) -> Reply {
    let now = dev.now();
    let coord = dev.coordinator();
    match request {
        // The coordinator refuses these itself (DeviceRemoved), recorded and counted.
        Decoded::Reset { mode, reason } => {
            let _ = coord.admin_reset_because(now, mode, reason);
        }
        Decoded::Restart => {
            let _ = coord.admin_restart(now);
        }
        Decoded::SetPolicy { .. } => {
            coord.refuse_admin(
                now,
                crate::types::Call::SetPolicy,
                RefusalCode::DeviceRemoved,
            );
        }
        Decoded::InjectFault(fault) => coord.fault_injected(now, &fault, false),
        _ => {}
    }
    Reply::status(NtStatus::INVALID_DEVICE_REQUEST)
}

fn act<D: IoctlDevice + ?Sized>(dev: &mut D, request: Decoded<'_>, out: &mut [u8]) -> Reply {
    let now = dev.now();
    match request {
        Decoded::QueryState { version } => {
            let mut full = [0u8; size_of::<StateOut>()];
            let mut state = state_out(dev.coordinator(), now);
            // The bus's time zero on the system's clock as it reads now, so that a clock set
            // since is followed, as the system log follows it.
            state.time_zero_unix_ms = dev
                .wall_clock_unix_ms()
                .map_or(0, |wall| wall.saturating_sub(now.as_us() / 1000));
            state.encode(&mut full);
            let n = state_bytes(version);
            out[..n].copy_from_slice(&full[..n]);
            Reply::ok(n)
        }
        Decoded::QueryHealth => {
            health_out(dev.coordinator(), now).encode(out);
            Reply::ok(size_of::<HealthOut>())
        }
        Decoded::ListClients { start } => list_clients(dev.coordinator(), start, out),
        Decoded::ReadLog {
            since,
            max,
            version,
        } => read_log(dev.coordinator(), since, max, version, out),
        Decoded::ReadResets => read_resets(dev.coordinator(), out),
        Decoded::ReadBundle { now: taken_now } => read_bundle(dev.coordinator(), taken_now, out),
        Decoded::QueryCounters => match dev.counters() {
            Some(c) => {
                c.encode(out);
                Reply::ok(size_of::<CountersOut>())
            }
            None => Reply::status(NtStatus::NOT_SUPPORTED),
        },
        Decoded::GetPolicy { version } => {
            let mut full = [0u8; size_of::<PolicyAbi>()];
            PolicyAbi::from_policy(dev.coordinator().policy()).encode(&mut full);
            let n = policy_bytes(version);
            out[..n].copy_from_slice(&full[..n]);
            Reply::ok(n)
        }
        Decoded::SetPolicy { policy, version } => {
            let Some(abi) = PolicyAbi::decode_version(policy, version) else {
                return Reply::status(NtStatus::INVALID_BUFFER_SIZE);
            };
            let coord = dev.coordinator();
            let abi = abi.with_newer_keys_of(version, coord.policy());
            // A field no policy can hold is refused here, before the coordinator sees a
            // policy; it records and counts it as it does its own refusals.
            let verdict = match abi.parse_policy() {
                Ok(p) => coord.set_policy(now, p).map_err(|e| (e, p.conflict(&e))),
                Err(e) => Err((coord.refuse_policy(now, e), None)),
            };
            set_policy_reply(verdict, version, out)
        }
        Decoded::Reset { mode, reason } => {
            match dev.coordinator().admin_reset_because(now, mode, reason) {
                Ok(epoch) => {
                    EpochOut { epoch: epoch.0 }.encode(out);
                    Reply::ok(size_of::<EpochOut>())
                }
                // PnP may stop the adapter: ask again once it has restarted.
                Err(AdminResetError::StopPending) => Reply::status(NtStatus::DEVICE_BUSY),
                Err(_) => Reply::status(NtStatus::INVALID_DEVICE_REQUEST),
            }
        }
        Decoded::Restart => {
            let coord = dev.coordinator();
            let busy = coord.reset_in_progress();
            match coord.admin_restart(now) {
                Ok(epoch) => {
                    EpochOut { epoch: epoch.0 }.encode(out);
                    Reply::ok(size_of::<EpochOut>())
                }
                Err(_) if busy => Reply::status(NtStatus::DEVICE_BUSY),
                Err(RestartError::StopPending) => Reply::status(NtStatus::DEVICE_BUSY),
                Err(_) => Reply::status(NtStatus::INVALID_DEVICE_REQUEST),
            }
        }
        Decoded::InjectFault(fault) => {
            let verdict = dev.can_inject(&fault);
            dev.coordinator()
                .fault_injected(now, &fault, verdict.is_ok());
            match verdict {
                Ok(()) => {
                    dev.inject(fault);
                    Reply::ok(0)
                }
                Err(s) => Reply::status(s),
            }
        }
    }
}

/// QUERY_STATE's flags: a reset in progress, or the service still recovering and the ports
/// it waits for; a PnP stop pending.
fn state_flags(coord: &Coordinator) -> u32 {
    let awaited = u32::from(coord.awaiting_ports());
    let mut flags = awaited << STATE_AWAITED_PORTS_SHIFT;
    if coord.reset_in_progress() {
        flags |= STATE_RESET_IN_PROGRESS;
    } else if awaited != 0 {
        flags |= STATE_RECOVERING;
    }
    if coord.resets_held() {
        flags |= STATE_STOP_PENDING;
    }
    flags
}

/// QUERY_STATE's answer for `coord` at `now`: a reset still open gives the time since it
/// began as its total, so an operator sees how long it has run.
pub fn state_out(coord: &Coordinator, now: Instant) -> StateOut {
    let id = *coord.identity();
    let c = *coord.counters();
    let last = coord.last_reset();
    StateOut {
        state: coord.state() as u32,
        flags: state_flags(coord),
        epoch: coord.epoch().0,
        node_guid: id.node_guid,
        serial: id.serial,
        fw_version: id.fw_version,
        vendor_id: id.vendor_id,
        device_id: id.device_id,
        subsys_vendor_id: id.subsys_vendor_id,
        subsys_id: id.subsys_id,
        clients: coord.client_count() as u32,
        max_clients: coord.max_clients() as u32,
        resets_started: c.resets_started,
        resets_restored: c.resets_restored,
        resets_failed: c.resets_failed,
        resets_aborted: c.resets_aborted,
        refusals: c.refusals,
        admin_refusals: c.admin_refusals,
        pnp_operations: c.pnp_operations,
        last_epoch: last.map_or(NONE_U64, |r| r.epoch.0),
        last_reason: last.map_or(0, |r| r.reason as u32),
        last_result: result_code(last.and_then(|r| r.result)),
        last_quiesce_us: us(last.and_then(|r| r.quiesce())),
        last_hw_reset_us: us(last.and_then(|r| r.hw_reset())),
        last_restore_us: us(last.and_then(|r| r.restore())),
        // A reset with no total yet is one still open.
        last_total_us: us(last.map(|r| {
            r.total()
                .unwrap_or_else(|| now.saturating_since(r.started_at))
        })),
        log_next_seq: coord.recorder().next_seq(),
        ports: ports_out(coord),
        time_zero_unix_ms: 0,
        port_info: core::array::from_fn(|i| port_info(coord, i as u8 + 1)),
        resets_by_reason: core::array::from_fn(|i| c.by_reason.get(i).copied().unwrap_or(0)),
    }
}

/// QUERY_STATE's full view of `port`; all zero for a port the hardware never reported.
fn port_info(coord: &Coordinator, port: u8) -> PortInfoOut {
    coord
        .port(port)
        .map_or(PortInfoOut::default(), |p| PortInfoOut {
            state: p.state as u32,
            phys_state: p.phys as u32,
            lid: p.lid.into(),
            sm_lid: p.sm_lid.into(),
            width: p.width.into(),
            speed: p.speed.map_or(0, |s| s as u32),
            rate_mbps: p.rate_mbps(),
            reserved: 0,
            gid: p.gid,
        })
}

/// The ports as QUERY_STATE and QUERY_HEALTH give them.
fn ports_out(coord: &Coordinator) -> [PortOut; 2] {
    core::array::from_fn(|i| {
        coord
            .port(i as u8 + 1)
            .map_or(PortOut::default(), |p| PortOut {
                state: p.state as u32,
                lid: p.lid.into(),
            })
    })
}

/// QUERY_HEALTH's answer for `coord` at `now`.
pub fn health_out(coord: &Coordinator, now: Instant) -> HealthOut {
    let h = coord.health_report();
    let policy = coord.policy();
    let reporter = match coord.state() {
        State::Removed => ReporterState::Removed,
        State::Failed => ReporterState::Failed,
        _ if h.open => ReporterState::InError,
        _ => ReporterState::Healthy,
    };
    HealthOut {
        reporter_state: reporter as u32,
        auto_recover: u32::from(policy.auto_recover),
        error_count: h.errors,
        recover_count: h.recovers,
        last_error_us: h.last_error.map_or(NONE_U64, |e| e.at.as_us()),
        last_error_cause: h.last_error.map_or(0, |e| e.cause as u32),
        last_syndrome: h.last_error.map_or(0, |e| e.syndrome),
        health_counter: h.counter.unwrap_or(0),
        unchanged_polls: u32::from(coord.health_unchanged_polls()),
        counter_moved_us: h.counter_moved_at.map_or(NONE_U64, |t| t.as_us()),
        now_us: now.as_us(),
        grace_period_ms: policy.storm_window_ms,
        max_auto_resets: u32::from(policy.max_auto_resets),
        health_poll_ms: u32::try_from(policy.health_poll_interval_ms).unwrap_or(u32::MAX),
        ports: ports_out(coord),
    }
}

fn list_clients(coord: &Coordinator, start: u32, out: &mut [u8]) -> Reply {
    let head = size_of::<ListClientsOut>();
    let entry = size_of::<ClientEntry>();
    let room = (out.len() - head) / entry;
    let mut count = 0usize;
    for c in coord.clients().skip(start as usize).take(room) {
        ClientEntry::of(&c).encode(&mut out[head + count * entry..]);
        count += 1;
    }
    ListClientsOut {
        total: coord.client_count() as u32,
        count: count as u32,
    }
    .encode(out);
    Reply::ok(head + count * entry)
}

/// Why a policy was refused, and for a rule between two keys the other key and its value
/// ([`Policy::conflict`]).
type Refusal<'a> = (PolicyError, Option<(&'a str, u64)>);

/// SET_POLICY's answer: a version-5 caller with room for [`SetPolicyOut`] is told which
/// field was refused and why (with the key it conflicts with and that key's value); anyone
/// else gets the bare status.
fn set_policy_reply(verdict: Result<(), Refusal<'_>>, version: u16, out: &mut [u8]) -> Reply {
    let answer = version >= 5 && out.len() >= size_of::<SetPolicyOut>();
    match verdict {
        Ok(()) if answer => {
            SetPolicyOut {
                applied: 1,
                ..SetPolicyOut::default()
            }
            .encode(out);
            Reply::ok(size_of::<SetPolicyOut>())
        }
        Ok(()) => Reply::ok(0),
        Err((e, conflict)) if answer => {
            let index = Policy::KEYS.iter().position(|k| *k == e.field);
            SetPolicyOut {
                applied: 0,
                field: index.map_or(0, |i| i as u32 + 1),
                field_name: text_field(e.field),
                problem: SetPolicyOut::problem_of(&e, conflict)
                    .unwrap_or_else(|| text_field(e.problem)),
            }
            .encode(out);
            Reply::ok(size_of::<SetPolicyOut>())
        }
        Err(_) => Reply::status(NtStatus::INVALID_PARAMETER),
    }
}

/// READ_RESETS: as many of the newest summaries as fit, oldest first.
fn read_resets(coord: &Coordinator, out: &mut [u8]) -> Reply {
    let head = size_of::<ReadResetsOut>();
    let each = size_of::<ResetSummaryOut>();
    let room = (out.len() - head) / each;
    let history = coord.history();
    let skip = history.iter().count().saturating_sub(room);
    let mut count = 0;
    for s in history.iter().skip(skip) {
        ResetSummaryOut::from_summary(s).encode(&mut out[head + count * each..]);
        count += 1;
    }
    ReadResetsOut {
        count: count as u32,
        reserved: 0,
        total: history.written(),
    }
    .encode(out);
    Reply::ok(head + count * each)
}

fn read_log(coord: &Coordinator, since: u64, max: u32, version: u16, out: &mut [u8]) -> Reply {
    let head = size_of::<ReadLogOut>();
    let size = if version >= 5 {
        RECORD_BYTES
    } else {
        RECORD_V4_BYTES
    };
    let room = (out.len() - head) / size;
    let limit = if max == 0 {
        room
    } else {
        room.min(max as usize)
    };
    let rec = coord.recorder();
    let mut count = 0usize;
    let mut next = since.max(rec.next_seq() - rec.len() as u64);
    for r in rec.since(since).take(limit) {
        let at = head + count * size;
        if version >= 5 {
            out[at..at + size].copy_from_slice(&r.encode());
        } else {
            out[at..at + size].copy_from_slice(&r.encode_v4());
        }
        count += 1;
        next = r.seq + 1;
    }
    if count == 0 {
        next = next.min(rec.next_seq());
    }
    ReadLogOut {
        count: count as u32,
        record_bytes: if version >= 5 { size as u32 } else { 0 },
        next_seq: next,
        dropped: rec.dropped(),
    }
    .encode(out);
    Reply::ok(head + count * size)
}

/// Names of `State` numbers, for tools.
pub fn state_name(v: u32) -> &'static str {
    State::try_from(v).map_or("?", State::as_str)
}

/// Names of `ClientState` numbers, for tools.
pub fn client_state_name(v: u32) -> &'static str {
    ClientState::try_from(v).map_or("?", ClientState::as_str)
}

/// READ_BUNDLE: the kept bundle, or one taken now, whole into `out` (too small: nothing is
/// written and BUFFER_TOO_SMALL says so; docs/ioctl.md gives the most a bundle takes).
fn read_bundle(coord: &Coordinator, taken_now: bool, out: &mut [u8]) -> Reply {
    use crate::coordinator::bundle::BundleCause;
    if taken_now {
        return match coord.bundle_now(BundleCause::OnDemand, out) {
            Ok(n) => Reply::ok(n),
            Err(_) => Reply::status(NtStatus::BUFFER_TOO_SMALL),
        };
    }
    match coord.kept_bundle() {
        None => Reply::status(NtStatus::NOT_FOUND),
        Some(kept) => match out.get_mut(..kept.len()) {
            Some(room) => {
                room.copy_from_slice(kept);
                Reply::ok(kept.len())
            }
            None => Reply::status(NtStatus::BUFFER_TOO_SMALL),
        },
    }
}
