//! Each version's sizes, the room each answer needs, and what a device that implements
//! only what it must answers.

use super::*;
use std::mem::offset_of;

/// QUERY_STATE's answer grows at versions 3, 6 and 7, and at no other.
#[test]
fn each_version_of_query_state_has_its_size() {
    for (version, bytes) in [
        (1, STATE_V2_BYTES),
        (2, STATE_V2_BYTES),
        (3, STATE_V5_BYTES),
        (5, STATE_V5_BYTES),
        (6, STATE_V6_BYTES),
        (7, size_of::<StateOut>()),
    ] {
        assert_eq!(state_bytes(version), bytes, "version {version}");
        assert_eq!(min_output_of(IOCTL_HCABUS_QUERY_STATE, version), bytes);
    }
}

/// INJECT_FAULT's input is 16 bytes up to version 3 and whole from version 4; the policy
/// is 72 bytes in version 1, 96 in versions 2 to 7 and whole (its key slots) from version 8.
#[test]
fn each_version_of_an_input_has_its_size() {
    let inject = IOCTL_HCABUS_INJECT_FAULT;
    assert_eq!(input_size_of(inject, 3), Some(INJECT_V3_BYTES));
    assert_eq!(input_size_of(inject, 4), Some(size_of::<InjectFaultIn>()));
    let head = size_of::<InputHeader>();
    let set = IOCTL_HCABUS_SET_POLICY;
    assert_eq!(input_size_of(set, 1), Some(head + POLICY_V1_BYTES));
    assert_eq!(input_size_of(set, 2), Some(head + POLICY_NAMED_BYTES));
    assert_eq!(input_size_of(set, 7), Some(head + POLICY_NAMED_BYTES));
    assert_eq!(input_size_of(set, 8), Some(head + size_of::<PolicyAbi>()));
}

/// The current version's smallest answers are `min_output`'s, code by code.
#[test]
fn the_current_versions_smallest_answers_are_min_outputs() {
    for (code, name) in CODES {
        assert_eq!(min_output_of(code, ABI_VERSION), min_output(code), "{name}");
    }
    assert_eq!(min_output(IOCTL_HCABUS_QUERY_STATE), size_of::<StateOut>());
    assert_eq!(min_output(IOCTL_HCABUS_GET_POLICY), size_of::<PolicyAbi>());
}

/// A valid input of the current version for each code that takes a plain one.
fn input_of(code: u32) -> Vec<u8> {
    let mut b = vec![0u8; input_size(code).expect("a known code")];
    let size = b.len() as u32;
    InputHeader {
        size,
        version: ABI_VERSION,
        reserved: 0,
    }
    .encode(&mut b);
    b
}

/// Every declared code is its own `IoctlCode`, which the dispatcher matches exhaustively
/// (a code declared without its decoding does not compile); any other code is refused as
/// an unknown request.
#[test]
fn every_declared_code_is_its_own_and_an_unknown_one_is_refused() {
    let mut seen = Vec::new();
    for (code, name) in CODES {
        let which = IoctlCode::of(code).expect(name);
        assert!(!seen.contains(&which), "{name} twice");
        seen.push(which);
    }
    let unknown = 0x0022_2003;
    assert_eq!(IoctlCode::of(unknown), None);
    let (r, _) = call(&mut dev(), unknown, &empty(), 4096, ALL);
    assert_eq!(r.status, NtStatus::INVALID_DEVICE_REQUEST);
}

/// Every answer refuses a buffer one byte short of its smallest size, and changes nothing.
#[test]
fn an_answer_one_byte_short_of_its_room_is_refused() {
    for code in [
        IOCTL_HCABUS_QUERY_STATE,
        IOCTL_HCABUS_LIST_CLIENTS,
        IOCTL_HCABUS_READ_LOG,
        IOCTL_HCABUS_GET_POLICY,
        IOCTL_HCABUS_QUERY_HEALTH,
        IOCTL_HCABUS_READ_RESETS,
    ] {
        let mut d = dev();
        let room = min_output(code);
        assert!(room > 0);
        let (r, out) = call(&mut d, code, &input_of(code), room - 1, ALL);
        assert_eq!(r.status, NtStatus::BUFFER_TOO_SMALL, "{code:#x}");
        assert!(out.is_empty());
        let (r, _) = call(&mut d, code, &input_of(code), room, ALL);
        assert_eq!(r.status, NtStatus::SUCCESS, "{code:#x} with its room");
    }
}

/// A version-4 caller says a cable pull whole: its port and duration reach the device.
#[test]
fn a_version_4_inject_fault_carries_its_port_and_duration() {
    let mut d = dev();
    let mut input = vec![0u8; size_of::<InjectFaultIn>()];
    let pull = FaultRequest {
        code: FaultCode::PortDown,
        count: 0,
        port: 2,
        duration_ms: 1_500,
    };
    encode_inject_fault(&pull, &mut input);
    put_u16(&mut input, offset_of!(InputHeader, version), 4);
    let (r, _) = call(&mut d, IOCTL_HCABUS_INJECT_FAULT, &input, 0, ALL);
    assert_eq!(r, Reply::ok(0));
    assert_eq!(d.injected, [pull]);
}

/// A field no policy value can be (a count past 255) is refused: by name to a version-5
/// caller that gives room for the answer, as INVALID_PARAMETER to an older one.
#[test]
fn a_policy_field_out_of_its_type_is_named_to_a_version_5_caller_only() {
    let mut d = dev();
    let mut abi = PolicyAbi::from_policy(&Policy::default());
    abi.max_auto_resets = 256;
    for (version, status, bytes) in [
        (4, NtStatus::INVALID_PARAMETER, 0),
        (5, NtStatus::SUCCESS, size_of::<SetPolicyOut>()),
    ] {
        let input = set_policy_as(&abi, version);
        let room = size_of::<SetPolicyOut>();
        let (r, out) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &input, room, ALL);
        assert_eq!((r.status, r.bytes), (status, bytes), "version {version}");
        if version == 5 {
            let verdict = SetPolicyOut::decode(&out).expect("an answer");
            assert_eq!(verdict.applied, 0);
            assert_eq!(verdict.refusal().map(|(f, _)| f), Some("max_auto_resets"));
        }
    }
    assert_eq!(*d.coord.policy(), Policy::default(), "nothing changed");
}

/// An older answer decodes with the fields it has; those it lacks read as zero.
#[test]
fn an_older_query_state_answer_decodes_with_what_it_has() {
    let mut d = dev();
    let (_, out) = query_state(&mut d);
    let full = StateOut::decode(&out).expect("whole");
    let v2 = StateOut::decode_any(&out[..STATE_V2_BYTES]).expect("version 2");
    assert_eq!(
        (v2.state, v2.epoch, v2.node_guid),
        (full.state, full.epoch, full.node_guid)
    );
    assert_eq!(v2.clients, 2);
    assert_eq!(v2.admin_refusals, 0);
    assert_eq!(StateOut::decode_any(&out[..STATE_V2_BYTES - 1]), None);
}

/// A device that implements only what it must: no faults, no wall clock, no counters.
struct Bare(Coordinator);

impl IoctlDevice for Bare {
    fn coordinator(&mut self) -> &mut Coordinator {
        &mut self.0
    }
    fn now(&self) -> Instant {
        Instant::ZERO
    }
}

/// Real hardware takes no injected fault, has no wall clock to give, and counts no I/O.
#[test]
fn a_device_that_implements_only_what_it_must_refuses_faults_and_counters() {
    let mut bare = Bare(dev().coord);
    let mut out = vec![0u8; 512];
    let mut input = vec![0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut input);
    let r = dispatch(&mut bare, IOCTL_HCABUS_INJECT_FAULT, &input, &mut out, ALL);
    assert_eq!(r.status, NtStatus::NOT_SUPPORTED);
    let code = IOCTL_HCABUS_QUERY_COUNTERS;
    let r = dispatch(&mut bare, code, &input_of(code), &mut out, ALL);
    assert_eq!(r.status, NtStatus::NOT_SUPPORTED);
    let r = dispatch(&mut bare, IOCTL_HCABUS_QUERY_STATE, &empty(), &mut out, ALL);
    let state = StateOut::decode(&out[..r.bytes]).expect("state");
    assert_eq!(state.time_zero_unix_ms, 0, "no wall clock");
    assert_eq!(bare.0.state(), State::Operational, "no fault reached it");
}

/// The policy a structure names is its fields' (hcactl reads GET_POLICY with it); a
/// structure no policy can be names none.
#[test]
fn a_policy_structure_names_its_own_policy_or_none() {
    let custom = Policy {
        quiesce_deadline_ms: 4_321,
        reset_retries: 5,
        ..Policy::default()
    };
    let abi = PolicyAbi::from_policy(&custom);
    assert_eq!(abi.to_policy(), Some(custom));
    let bad = PolicyAbi { reserved: 1, ..abi };
    assert_eq!(bad.to_policy(), None);
}
