//! The IOCTL ABI and dispatcher: every code's happy path, and every malformed input refused
//! with its NTSTATUS while changing nothing.

use hcabus::coordinator::ResetResult;
use hcabus::coordinator::{Config, Coordinator};
use hcabus::hca::Identity;
use hcabus::ioctl::*;
use hcabus::policy::Policy;
use hcabus::time::Instant;
use hcabus::types::State;
use hcabus::types::*;
use hcabus_sim::{SimHca, SimHcaConfig};
use std::mem::offset_of;

/// An IOCTL code of the bus's device type (`CTL_CODE`, METHOD_BUFFERED).
const fn code(function: u32, access: u32) -> u32 {
    ctl_code(FILE_DEVICE_INFINIBAND, function, METHOD_BUFFERED, access)
}
use std::vec;
use std::vec::Vec;

mod malformed;
mod pages;
mod refusals;
mod sizes;
mod summary;
mod v5;
mod v7;
mod v8;
mod v9;

// Raw little-endian access, for inputs no well-formed structure spells and for reading
// answers without trusting the decoder under test.
fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn get_u32(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn get_u64(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}

/// A coordinator with two clients, served as a device; `injected` records injections.
struct Dev {
    coord: Coordinator,
    now: Instant,
    simulator: bool,
    injected: Vec<FaultRequest>,
    /// The host's time of day, where it has one.
    wall_ms: Option<u64>,
}

impl IoctlDevice for Dev {
    fn coordinator(&mut self) -> &mut Coordinator {
        &mut self.coord
    }
    fn now(&self) -> Instant {
        self.now
    }
    fn can_inject(&self, _: &FaultRequest) -> Result<(), NtStatus> {
        if self.simulator {
            Ok(())
        } else {
            Err(NtStatus::NOT_SUPPORTED)
        }
    }
    fn inject(&mut self, fault: FaultRequest) {
        self.injected.push(fault);
    }
    fn wall_clock_unix_ms(&self) -> Option<u64> {
        self.wall_ms
    }
}

fn dev() -> Dev {
    let identity: Identity = SimHca::new(SimHcaConfig::default()).current_identity();
    let mut coord = Coordinator::new(
        Config {
            max_clients: 8,
            recorder_capacity: 64,
            policy: Policy::default(),
        },
        identity,
        Instant::ZERO,
    )
    .expect("valid");
    for (name, kind) in [
        ("ibal", ClientKind::Ibal),
        ("bootdisk", ClientKind::BootDisk),
    ] {
        let d = ClientDesc::new(name, kind, ClientFlags::empty()).expect("name");
        coord.register(Instant::ZERO, d).expect("room");
    }
    discard_actions(&mut coord);
    Dev {
        coord,
        now: Instant::from_ms(5),
        simulator: true,
        injected: Vec::new(),
        wall_ms: None,
    }
}

/// Drops what the coordinator queued (nobody hosts these tests' clients), counting the
/// pops so that a queue that never empties fails the test instead of hanging it.
fn discard_actions(coord: &mut Coordinator) {
    for _ in 0..=coord.pending_actions() {
        coord.pop_action();
    }
    assert_eq!(coord.pending_actions(), 0, "the queue emptied");
}

const ALL: Rights = Rights::READ.union(Rights::WRITE);

fn call(d: &mut Dev, code: u32, input: &[u8], cap: usize, rights: Rights) -> (Reply, Vec<u8>) {
    let mut out = vec![0u8; cap];
    let r = dispatch(d, code, input, &mut out, rights);
    out.truncate(r.bytes);
    (r, out)
}

/// QUERY_STATE in the current ABI, with room for all of it.
fn query_state(d: &mut Dev) -> (Reply, Vec<u8>) {
    call(
        d,
        IOCTL_HCABUS_QUERY_STATE,
        &empty(),
        size_of::<StateOut>(),
        ALL,
    )
}

fn empty() -> Vec<u8> {
    let mut b = vec![0u8; 8];
    encode_empty(&mut b);
    b
}

fn reset_in(mode: u32) -> Vec<u8> {
    let mut b = vec![0u8; size_of::<RequestResetIn>()];
    RequestResetIn::new(ResetMode::Forced, "test").encode(&mut b);
    put_u32(&mut b, offset_of!(RequestResetIn, mode), mode);
    b
}

/// What a refused request must leave alone.
/// SET_POLICY's input as a caller of ABI `version` sends it: that version's size, its
/// header saying so.
fn set_policy_as(abi: &PolicyAbi, version: u16) -> Vec<u8> {
    let mut input = vec![0u8; size_of::<SetPolicyIn>()];
    encode_set_policy(abi, &mut input);
    let n = input_size_of(IOCTL_HCABUS_SET_POLICY, version).expect("a size");
    put_u32(&mut input, offset_of!(InputHeader, size), n as u32);
    put_u16(&mut input, offset_of!(InputHeader, version), version);
    input.truncate(n);
    input
}

fn fingerprint(d: &Dev) -> (State, Epoch, u64, Policy, usize) {
    (
        d.coord.state(),
        d.coord.epoch(),
        d.coord.counters().resets_started,
        *d.coord.policy(),
        d.coord.pending_actions(),
    )
}

#[test]
fn codes_follow_ctl_code() {
    assert_eq!(
        ctl_code(0x3B, 0x900, 0, 1),
        (0x3B << 16) | (1 << 14) | (0x900 << 2)
    );
    let want = [
        (IOCTL_HCABUS_QUERY_STATE, 0x900, 1),
        (IOCTL_HCABUS_LIST_CLIENTS, 0x901, 1),
        (IOCTL_HCABUS_READ_LOG, 0x902, 1),
        (IOCTL_HCABUS_GET_POLICY, 0x903, 1),
        (IOCTL_HCABUS_REQUEST_RESET, 0x910, 3),
        (IOCTL_HCABUS_RESTART, 0x911, 3),
        (IOCTL_HCABUS_SET_POLICY, 0x912, 3),
        (IOCTL_HCABUS_INJECT_FAULT, 0x9F0, 3),
    ];
    for (code, function, access) in want {
        assert_eq!(code, (0x3B << 16) | (access << 14) | (function << 2));
        assert_eq!(needs_write(code), access == 3);
    }
    assert_eq!(
        NtStatus::DEVICE_BUSY.to_string(),
        "STATUS_DEVICE_BUSY (0x80000011)"
    );
}

#[test]
fn query_state_reports_state_identity_and_counters() {
    let mut d = dev();
    let (r, out) = call(
        &mut d,
        IOCTL_HCABUS_QUERY_STATE,
        &empty(),
        4096,
        Rights::READ,
    );
    assert_eq!(r, Reply::ok(size_of::<StateOut>()));
    let s = StateOut::decode(&out).expect("decodes");
    assert_eq!(state_name(s.state), "Operational");
    assert_eq!((s.epoch, s.clients, s.max_clients), (1, 2, 8));
    assert_eq!(s.vendor_id, 0x15b3);
    assert_eq!(s.last_epoch, NONE_U64, "no reset yet");
    assert_eq!(s, state_out(&d.coord, d.now));
}

/// An administrator's refused requests are counted apart from the clients' refused calls
/// (ABI version 6): a refused policy and a restart of a running device are not the clients'.
#[test]
fn the_administrators_refusals_are_counted_apart_from_the_clients() {
    let mut d = dev();
    let bad = hcabus::policy::Policy {
        quiesce_deadline_ms: 0,
        ..*d.coord.policy()
    };
    assert!(d.coord.set_policy(d.now, bad).is_err());
    assert!(d.coord.admin_restart(d.now).is_err(), "not Failed");
    let stale = hcabus::types::ClientId::from_raw(0xFFFF_0007);
    assert!(d.coord.unregister(d.now, stale).is_err());
    let s = StateOut::decode(&query_state(&mut d).1).expect("decodes");
    assert_eq!((s.admin_refusals, s.refusals), (2, 1));
}

/// An operator asking while a reset runs sees how long it has run: its total so far, not
/// NONE (which hcactl showed as "- so far").
#[test]
fn query_state_during_a_reset_gives_the_time_it_has_run() {
    let mut d = dev();
    let started = d.now;
    d.coord
        .admin_reset_because(started, AdminReset::Forced, "")
        .expect("a reset starts");
    assert!(d.coord.reset_in_progress());
    d.now = started + hcabus::time::Duration::from_ms(250);
    let s = StateOut::decode(&query_state(&mut d).1).expect("decodes");
    assert_eq!(s.flags & 1, 1, "in progress");
    assert_eq!(s.last_total_us, 250_000);
    assert_eq!(s.last_result, 0, "unfinished");
}

#[test]
fn list_clients_pages_through_what_fits() {
    let mut d = dev();
    let mut input = vec![0u8; 16];
    encode_list_clients(0, &mut input);
    let (r, out) = call(
        &mut d,
        IOCTL_HCABUS_LIST_CLIENTS,
        &input,
        8 + 64,
        Rights::READ,
    );
    assert_eq!(r, Reply::ok(72));
    assert_eq!(get_u32(&out, 0), Some(2), "total");
    assert_eq!(get_u32(&out, 4), Some(1), "one fits");
    let first = ClientEntry::decode(&out[8..]).expect("entry");
    assert_eq!(first.name(), "ibal");
    assert_eq!(first.last_ack_latency_us, NONE_U64);
    encode_list_clients(1, &mut input);
    let (_, out) = call(
        &mut d,
        IOCTL_HCABUS_LIST_CLIENTS,
        &input,
        4096,
        Rights::READ,
    );
    let second = ClientEntry::decode(&out[8..]).expect("entry");
    assert_eq!(second.name(), "bootdisk");
    assert_eq!(second.kind, ClientKind::BootDisk as u32);
    assert_eq!(client_state_name(second.state), "active");
}

#[test]
fn policy_round_trips_and_an_invalid_one_is_refused_and_changes_nothing() {
    let mut d = dev();
    let (r, out) = call(
        &mut d,
        IOCTL_HCABUS_GET_POLICY,
        &empty(),
        size_of::<PolicyAbi>(),
        Rights::READ,
    );
    assert_eq!(r, Reply::ok(size_of::<PolicyAbi>()));
    let mut abi = PolicyAbi::decode(&out).expect("policy");
    assert_eq!(abi.to_policy(), Some(Policy::default()));
    abi.quiesce_deadline_ms = 1_234;
    abi.client_request_limit = 5;
    let mut input = vec![0u8; size_of::<SetPolicyIn>()];
    encode_set_policy(&abi, &mut input);
    let (r, _) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &input, 0, ALL);
    assert_eq!(r, Reply::ok(0));
    assert_eq!(d.coord.policy().quiesce_deadline_ms, 1_234);
    assert_eq!(d.coord.policy().client_request_limit, 5);
    for bad in [
        PolicyAbi {
            quiesce_deadline_ms: 0,
            ..abi
        },
        PolicyAbi {
            abort_on_unresponsive: 2,
            ..abi
        },
        PolicyAbi {
            reset_retries: 300,
            ..abi
        },
        PolicyAbi { reserved: 1, ..abi },
        PolicyAbi {
            auto_recover: 2,
            ..abi
        },
        PolicyAbi {
            client_request_limit: 0,
            ..abi
        },
        PolicyAbi {
            query_deadline_ms: 0,
            ..abi
        },
    ] {
        let before = fingerprint(&d);
        encode_set_policy(&bad, &mut input);
        let (r, _) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &input, 0, ALL);
        assert_eq!(r.status, NtStatus::INVALID_PARAMETER, "{bad:?}");
        assert_eq!(fingerprint(&d), before);
    }
}

#[test]
fn request_reset_starts_one_and_returns_its_epoch() {
    let mut d = dev();
    let mut input = vec![0u8; 80];
    RequestResetIn::new(ResetMode::Planned, "maintenance window").encode(&mut input);
    let (r, out) = call(&mut d, IOCTL_HCABUS_REQUEST_RESET, &input, 8, ALL);
    assert_eq!(r, Reply::ok(8));
    assert_eq!(get_u64(&out, 0), Some(1));
    assert_eq!(d.coord.state(), State::Quiescing);
    assert_eq!(d.coord.last_reset().map(|r| r.planned), Some(true));
}

#[test]
fn restart_is_refused_when_healthy_and_busy_during_a_reset() {
    let mut d = dev();
    let (r, _) = call(&mut d, IOCTL_HCABUS_RESTART, &empty(), 8, ALL);
    assert_eq!(
        r.status,
        NtStatus::INVALID_DEVICE_REQUEST,
        "nothing to restart"
    );
    let (_, _) = call(&mut d, IOCTL_HCABUS_REQUEST_RESET, &reset_in(0), 8, ALL);
    let (r, _) = call(&mut d, IOCTL_HCABUS_RESTART, &empty(), 8, ALL);
    assert_eq!(r.status, NtStatus::DEVICE_BUSY, "a reset is under way");
}

#[test]
fn inject_fault_reaches_the_simulator_and_not_real_hardware() {
    let mut d = dev();
    let mut input = vec![0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&FaultRequest::new(FaultCode::ResetFails, 3), &mut input);
    let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &input, 0, ALL);
    assert_eq!(r, Reply::ok(0));
    assert_eq!(d.injected, [FaultRequest::new(FaultCode::ResetFails, 3)]);
    d.simulator = false;
    encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut input);
    let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &input, 0, ALL);
    assert_eq!(r.status, NtStatus::NOT_SUPPORTED);
    d.simulator = true;
    // (fault, count, port, duration_ms): each names a field its fault does not take, or a
    // value out of range.
    let refused = [
        (FaultCode::Catastrophic as u32, 1, 0, 0),
        (99, 0, 0, 0),
        (FaultCode::ResetFails as u32, 0, 0, 0),
        (FaultCode::ResetFails as u32, 65, 0, 0),
        (FaultCode::ResetFails as u32, 1, 1, 0),
        (FaultCode::Hang as u32, 0, 0, 5),
        (FaultCode::TargetBusy as u32, 0, 0, 0),
        (FaultCode::TargetBusy as u32, MAX_BUSY_LOGINS + 1, 0, 0),
        (FaultCode::PortDown as u32, 0, 0, 1_000),
        (FaultCode::PortDown as u32, 0, 3, 1_000),
        (FaultCode::PortDown as u32, 0, 256 + 1, 1_000),
        (FaultCode::PortDown as u32, 0, 1, 0),
        (FaultCode::PortDown as u32, 0, 1, MAX_FAULT_DURATION_MS + 1),
        (FaultCode::PortDown as u32, 2, 1, 1_000),
    ];
    for (fault, count, port, duration_ms) in refused {
        put_u32(&mut input, 8, fault);
        put_u32(&mut input, 12, count);
        put_u32(&mut input, 16, port);
        put_u32(&mut input, 20, duration_ms);
        let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &input, 0, ALL);
        assert_eq!(
            r.status,
            NtStatus::INVALID_PARAMETER,
            "{fault} {count} {port} {duration_ms}"
        );
    }
    assert_eq!(
        d.injected.len(),
        1,
        "no refused request reached the simulator"
    );
    let busy = FaultRequest::new(FaultCode::TargetBusy, 7);
    let pull = FaultRequest::port_down(2, 1_500);
    for f in [busy, pull] {
        encode_inject_fault(&f, &mut input);
        let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &input, 0, ALL);
        assert_eq!(r, Reply::ok(0), "{f:?}");
    }
    assert_eq!(d.injected[1..], [busy, pull]);
}

#[test]
fn a_version_3_inject_fault_is_16_bytes_and_cannot_say_a_cable_pull() {
    let mut d = dev();
    let mut v3 = vec![0u8; INJECT_V3_BYTES];
    InputHeader {
        size: INJECT_V3_BYTES as u32,
        version: 3,
        reserved: 0,
    }
    .encode(&mut v3);
    put_u32(&mut v3, 8, FaultCode::TargetBusy as u32);
    put_u32(&mut v3, 12, 4);
    let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &v3, 0, ALL);
    assert_eq!(r, Reply::ok(0));
    assert_eq!(d.injected, [FaultRequest::new(FaultCode::TargetBusy, 4)]);
    put_u32(&mut v3, 8, FaultCode::PortDown as u32);
    put_u32(&mut v3, 12, 0);
    let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &v3, 0, ALL);
    assert_eq!(
        r.status,
        NtStatus::INVALID_PARAMETER,
        "no port in version 3"
    );
    // The version-4 size with a version-3 header, and the other way round.
    let mut long = vec![0u8; size_of::<InjectFaultIn>()];
    long[..INJECT_V3_BYTES].copy_from_slice(&v3);
    put_u32(&mut long, 0, size_of::<InjectFaultIn>() as u32);
    let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &long, 0, ALL);
    assert_eq!(r.status, NtStatus::INVALID_BUFFER_SIZE);
    encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut long);
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_INJECT_FAULT,
        &long[..INJECT_V3_BYTES],
        0,
        ALL,
    );
    assert_eq!(r.status, NtStatus::INVALID_BUFFER_SIZE);
    assert_eq!(d.injected.len(), 1);
}

#[test]
fn every_write_code_on_a_removed_device_is_an_invalid_device_request_and_changes_nothing() {
    let mut d = dev();
    d.coord.surprise_removal(d.now);
    discard_actions(&mut d.coord);
    let mut policy = vec![0u8; size_of::<SetPolicyIn>()];
    let mut changed = PolicyAbi::from_policy(&Policy::default());
    changed.quiesce_deadline_ms = 1_234;
    encode_set_policy(&changed, &mut policy);
    let mut inject = vec![0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut inject);
    let before = fingerprint(&d);
    for (what, code, input, cap) in [
        ("SET_POLICY", IOCTL_HCABUS_SET_POLICY, policy, 0),
        ("INJECT_FAULT", IOCTL_HCABUS_INJECT_FAULT, inject, 0),
        ("REQUEST_RESET", IOCTL_HCABUS_REQUEST_RESET, reset_in(0), 8),
        ("RESTART", IOCTL_HCABUS_RESTART, empty(), 8),
    ] {
        let (r, _) = call(&mut d, code, &input, cap, ALL);
        assert_eq!(r.status, NtStatus::INVALID_DEVICE_REQUEST, "{what}");
    }
    assert_eq!(fingerprint(&d), before);
    assert!(d.injected.is_empty(), "nothing reached the simulator");
    // Reading still works: an administrator can see what happened.
    let (r, out) = query_state(&mut d);
    assert!(r.status.is_success());
    assert_eq!(get_u32(&out, 0), Some(State::Removed as u32));
}

#[test]
fn every_reset_result_code_names_the_result_it_encodes() {
    let by = ClientId::from_raw(7);
    let mut results: Vec<ResetResult> = ResetOutcome::ALL
        .into_iter()
        .map(ResetResult::Restored)
        .collect();
    results.extend(FailReason::ALL.into_iter().map(ResetResult::Failed));
    results.extend(
        AbortCause::ALL
            .into_iter()
            .map(|cause| ResetResult::Aborted { by, cause }),
    );
    results.push(ResetResult::Removed);
    let mut codes = std::collections::HashSet::new();
    for r in results {
        let code = result_code(Some(r));
        assert!(codes.insert(code), "{r:?}: code {code:#x} taken twice");
        assert_eq!(result_name(code), Some(r.as_str()), "{r:?}");
    }
    assert_eq!(result_name(result_code(None)), Some("unfinished"));
    for stranger in [3, 0x10, 0x16, 0x22, 0x31, u32::MAX] {
        assert_eq!(result_name(stranger), None, "{stranger:#x}");
    }
}

#[test]
fn a_version_1_caller_gets_the_version_1_policy_and_keeps_the_newer_keys() {
    let mut d = dev();
    // Every key version 1 cannot name differs from what its zero-filled tail would say.
    let custom = Policy {
        client_request_limit: 7,
        query_deadline_ms: 1_500,
        paging_io_hold_timeout_ms: Policy::default().paging_io_hold_timeout_ms + 1_000,
        auto_recover: true,
        ..Policy::default()
    };
    d.coord.set_policy(d.now, custom).expect("valid");
    let mut v1 = empty();
    put_u16(&mut v1, 4, 1);
    // GET_POLICY in version 1: 72 bytes, which a 72-byte buffer takes.
    let (r, out) = call(&mut d, IOCTL_HCABUS_GET_POLICY, &v1, 72, Rights::READ);
    assert_eq!(r, Reply::ok(POLICY_V1_BYTES));
    let mut abi = PolicyAbi::decode_version(&out, 1).expect("v1 policy");
    assert_eq!(abi.quiesce_deadline_ms, custom.quiesce_deadline_ms);
    // A version-2 caller's buffer of 72 bytes is too small.
    let (r, _) = call(&mut d, IOCTL_HCABUS_GET_POLICY, &empty(), 72, Rights::READ);
    assert_eq!(r.status, NtStatus::BUFFER_TOO_SMALL);
    // SET_POLICY in version 1: 80 bytes; the keys it cannot name keep their values.
    abi.quiesce_deadline_ms = 4_321;
    let mut input = vec![0u8; size_of::<SetPolicyIn>()];
    encode_set_policy(&abi, &mut input);
    put_u32(&mut input, 0, 80);
    put_u16(&mut input, 4, 1);
    input.truncate(80);
    let (r, _) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &input, 0, ALL);
    assert_eq!(r, Reply::ok(0));
    assert_eq!(
        *d.coord.policy(),
        Policy {
            quiesce_deadline_ms: 4_321,
            ..custom
        }
    );
    // The current size under a version-1 header is refused.
    let mut wrong = vec![0u8; size_of::<SetPolicyIn>()];
    encode_set_policy(&abi, &mut wrong);
    put_u16(&mut wrong, 4, 1);
    let (r, _) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &wrong, 0, ALL);
    assert_eq!(r.status, NtStatus::INVALID_BUFFER_SIZE);
}

#[test]
fn query_state_reports_preparing_as_state_7() {
    let mut d = dev();
    let v = ClientDesc::new("vetoer", ClientKind::Custom, ClientFlags::CAN_VETO).expect("name");
    d.coord.register(d.now, v).expect("room");
    let mut input = [0u8; 80];
    RequestResetIn::new(ResetMode::Planned, "maintenance").encode(&mut input);
    let (r, _) = call(&mut d, IOCTL_HCABUS_REQUEST_RESET, &input, 8, ALL);
    assert_eq!(r.status, NtStatus::SUCCESS);
    let (_, out) = call(
        &mut d,
        IOCTL_HCABUS_QUERY_STATE,
        &empty(),
        size_of::<StateOut>(),
        Rights::READ,
    );
    let s = StateOut::decode(&out).expect("state");
    assert_eq!(s.state, 7);
    assert_eq!(state_name(s.state), "Preparing");
    assert_eq!(s.flags & 1, 1, "a reset is in progress");
}

#[test]
fn query_state_answers_each_version_in_its_own_size_and_version_3_carries_the_ports() {
    let mut d = dev();
    d.coord
        .port_changed(d.now, 2, PortAttrs::bare(PortState::Active, 0x21))
        .expect("port 2 exists");
    let mut v2 = empty();
    put_u16(&mut v2, offset_of!(InputHeader, version), 2);
    let (r, out) = call(&mut d, IOCTL_HCABUS_QUERY_STATE, &v2, STATE_V2_BYTES, ALL);
    assert_eq!((r.status, r.bytes), (NtStatus::SUCCESS, STATE_V2_BYTES));
    let s = StateOut::decode_any(&out).expect("a version-2 answer decodes");
    assert_eq!(
        s.ports,
        [PortOut::default(); 2],
        "no ports before version 3"
    );
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_QUERY_STATE,
        &empty(),
        STATE_V2_BYTES,
        ALL,
    );
    assert_eq!(
        r.status,
        NtStatus::BUFFER_TOO_SMALL,
        "version 3 needs the ports' room"
    );
    // Version 5 stops before the administrator's refusals (version 6).
    let mut v5 = empty();
    put_u16(&mut v5, offset_of!(InputHeader, version), 5);
    let (r, out) = call(&mut d, IOCTL_HCABUS_QUERY_STATE, &v5, STATE_V5_BYTES, ALL);
    assert_eq!((r.status, r.bytes), (NtStatus::SUCCESS, STATE_V5_BYTES));
    assert_eq!(
        StateOut::decode_any(&out).map(|s| s.admin_refusals),
        Some(0)
    );
    let (r, out) = query_state(&mut d);
    assert_eq!(
        (r.status, r.bytes),
        (NtStatus::SUCCESS, size_of::<StateOut>())
    );
    let s = StateOut::decode(&out).expect("state");
    assert_eq!(s.ports[0], PortOut::default(), "port 1 never reported");
    assert_eq!(
        s.ports[1],
        PortOut {
            state: hcabus::types::PortState::Active as u32,
            lid: 0x21
        }
    );
}

fn query_health(d: &mut Dev, cap: usize, rights: Rights) -> (Reply, Option<HealthOut>) {
    let (r, out) = call(d, IOCTL_HCABUS_QUERY_HEALTH, &empty(), cap, rights);
    (r, HealthOut::decode(&out))
}

#[test]
fn query_health_is_read_only_and_reports_an_error_found_by_interrupt_as_open() {
    let mut d = dev();
    let (r, h) = query_health(&mut d, size_of::<HealthOut>(), Rights::READ);
    assert_eq!(r, Reply::ok(96));
    let h = h.expect("decoded");
    assert_eq!(h.reporter_state, ReporterState::Healthy as u32);
    assert_eq!((h.error_count, h.recover_count), (0, 0));
    assert_eq!((h.last_error_us, h.last_error_cause), (NONE_U64, 0));
    assert_eq!(h.counter_moved_us, NONE_U64, "never read");
    assert_eq!(h.now_us, 5_000);
    let p = Policy::default();
    assert_eq!(h.auto_recover, 1);
    assert_eq!(h.grace_period_ms, p.storm_window_ms);
    assert_eq!(h.max_auto_resets, u32::from(p.max_auto_resets));
    assert_eq!(u64::from(h.health_poll_ms), p.health_poll_interval_ms);

    // A catastrophic error by interrupt: found, not recovered, no syndrome word read.
    d.coord.catastrophic_error(Instant::from_ms(7));
    discard_actions(&mut d.coord);
    let (_, h) = query_health(&mut d, 96, Rights::READ);
    let h = h.expect("decoded");
    assert_eq!(h.reporter_state, ReporterState::InError as u32);
    assert_eq!((h.error_count, h.recover_count), (1, 0));
    assert_eq!(h.last_error_us, 7_000);
    assert_eq!(h.last_error_cause, ResetReason::Catastrophic as u32);
    assert_eq!(h.last_syndrome, 0);

    let (r, _) = query_health(&mut d, 95, Rights::READ);
    assert_eq!(r.status, NtStatus::BUFFER_TOO_SMALL);
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_QUERY_HEALTH,
        &empty(),
        96,
        Rights::empty(),
    );
    assert_eq!(r.status, NtStatus::ACCESS_DENIED);
}
