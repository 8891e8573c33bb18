//! Version 5: READ_LOG's 128-byte records (64 for older callers), READ_RESETS, and
//! SET_POLICY's answer that names the refused field.

use super::*;
use hcabus::recorder::{Record, RECORD_BYTES, RECORD_V4_BYTES};
use std::mem::offset_of;

fn with_version(input: &mut [u8], version: u16) {
    put_u16(input, offset_of!(InputHeader, version), version);
}

#[test]
fn read_log_returns_records_from_a_sequence_number() {
    let mut d = dev();
    let mut input = vec![0u8; 24];
    encode_read_log(0, 0, &mut input);
    let (r, out) = call(&mut d, IOCTL_HCABUS_READ_LOG, &input, 4096, Rights::READ);
    let count = get_u32(&out, 0).expect("count") as usize;
    assert!(count >= 2, "the two registrations");
    assert_eq!(r.bytes, 24 + count * RECORD_BYTES);
    assert_eq!(
        get_u32(&out, offset_of!(ReadLogOut, record_bytes)),
        Some(RECORD_BYTES as u32)
    );
    let next = get_u64(&out, 8).expect("next");
    assert_eq!(next, d.coord.recorder().next_seq());
    let first = *d.coord.recorder().iter().next().expect("one");
    assert_eq!(&out[24..24 + RECORD_BYTES], &first.encode()[..]);
    let raw: [u8; RECORD_BYTES] = out[24..24 + RECORD_BYTES].try_into().expect("size");
    let decoded = Record::decode(&raw).expect("decodes");
    assert_eq!(decoded.name.as_str(), "ibal", "the client is named");
    encode_read_log(next, 0, &mut input);
    let (r, out) = call(&mut d, IOCTL_HCABUS_READ_LOG, &input, 4096, Rights::READ);
    assert_eq!((r.bytes, get_u32(&out, 0)), (24, Some(0)), "nothing new");
    encode_read_log(0, 1, &mut input);
    let (_, out) = call(&mut d, IOCTL_HCABUS_READ_LOG, &input, 4096, Rights::READ);
    assert_eq!(get_u32(&out, 0), Some(1), "max_records");
}

#[test]
fn a_version_4_caller_gets_64_byte_records_as_before() {
    let mut d = dev();
    let mut input = vec![0u8; 24];
    encode_read_log(0, 0, &mut input);
    with_version(&mut input, 4);
    let (r, out) = call(&mut d, IOCTL_HCABUS_READ_LOG, &input, 4096, Rights::READ);
    let count = get_u32(&out, 0).expect("count") as usize;
    assert!(count >= 2);
    assert_eq!(r.bytes, 24 + count * RECORD_V4_BYTES);
    assert_eq!(get_u32(&out, 4), Some(0), "reserved before version 5");
    let first = *d.coord.recorder().iter().next().expect("one");
    assert_eq!(&out[24..24 + RECORD_V4_BYTES], &first.encode_v4()[..]);
    // Room for one 128-byte record is room for two of 64.
    let (_, out) = call(
        &mut d,
        IOCTL_HCABUS_READ_LOG,
        &input,
        24 + RECORD_BYTES,
        Rights::READ,
    );
    assert_eq!(get_u32(&out, 0), Some(2));
}

#[test]
fn set_policy_names_the_refused_field_to_a_version_5_caller() {
    let mut d = dev();
    let room = size_of::<PolicyAbi>();
    let (_, out) = call(
        &mut d,
        IOCTL_HCABUS_GET_POLICY,
        &empty(),
        room,
        Rights::READ,
    );
    let abi = PolicyAbi::decode(&out).expect("policy");
    let mut input = vec![0u8; size_of::<SetPolicyIn>()];
    let answer = size_of::<SetPolicyOut>();
    for (bad, field, index, problem) in [
        (
            PolicyAbi {
                quiesce_deadline_ms: 0,
                ..abi
            },
            "quiesce_deadline_ms",
            1,
            "must be greater than zero",
        ),
        (
            PolicyAbi {
                reset_retries: 300,
                ..abi
            },
            "reset_retries",
            4,
            "must be at most 255",
        ),
        (
            PolicyAbi {
                auto_recover: 2,
                ..abi
            },
            "auto_recover",
            13,
            "must be 0 or 1",
        ),
        (PolicyAbi { reserved: 1, ..abi }, "reserved", 0, "must be 0"),
    ] {
        let before = fingerprint(&d);
        encode_set_policy(&bad, &mut input);
        let (r, out) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &input, answer, ALL);
        assert_eq!(r, Reply::ok(answer), "{field}");
        let said = SetPolicyOut::decode(&out).expect("answer");
        assert_eq!(said.applied, 0);
        assert_eq!(said.field, index, "{field}");
        assert_eq!(said.refusal(), Some((field, problem)));
        assert_eq!(fingerprint(&d), before, "nothing changed");
        // No room for the answer, or an older caller: the bare status, as before.
        let (r, _) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &input, 0, ALL);
        assert_eq!(r.status, NtStatus::INVALID_PARAMETER);
        let older = set_policy_as(&bad, 4);
        let (r, _) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &older, answer, ALL);
        assert_eq!(r.status, NtStatus::INVALID_PARAMETER);
        assert_eq!(fingerprint(&d), before, "nothing changed");
    }
    let good = PolicyAbi {
        quiesce_deadline_ms: 777,
        ..abi
    };
    encode_set_policy(&good, &mut input);
    let (r, out) = call(&mut d, IOCTL_HCABUS_SET_POLICY, &input, answer, ALL);
    assert_eq!(r, Reply::ok(answer));
    let said = SetPolicyOut::decode(&out).expect("answer");
    assert_eq!((said.applied, said.refusal()), (1, None));
    assert_eq!(d.coord.policy().quiesce_deadline_ms, 777);
}

#[test]
fn read_resets_is_empty_before_any_reset_and_answers_every_version() {
    let mut d = dev();
    for version in [1, 4, 5] {
        let mut input = empty();
        with_version(&mut input, version);
        let (r, out) = call(&mut d, IOCTL_HCABUS_READ_RESETS, &input, 4096, Rights::READ);
        assert_eq!(r, Reply::ok(16), "version {version}");
        assert_eq!((get_u32(&out, 0), get_u64(&out, 8)), (Some(0), Some(0)));
    }
    let (r, _) = call(&mut d, IOCTL_HCABUS_READ_RESETS, &empty(), 15, Rights::READ);
    assert_eq!(r.status, NtStatus::BUFFER_TOO_SMALL);
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_READ_RESETS,
        &empty(),
        4096,
        Rights::empty(),
    );
    assert_eq!(r.status, NtStatus::ACCESS_DENIED);
}

#[test]
fn a_vetoed_planned_reset_is_summarised_with_its_vetoer_and_both_reasons() {
    let mut d = dev();
    let flags = ClientFlags::CAN_VETO;
    let desc = ClientDesc::new("backup", ClientKind::Custom, flags).expect("name");
    let backup = d.coord.register(d.now, desc).expect("room").id;
    discard_actions(&mut d.coord);
    let mut input = vec![0u8; 80];
    RequestResetIn::new(ResetMode::Planned, "firmware 2.42 staged").encode(&mut input);
    let (r, out) = call(&mut d, IOCTL_HCABUS_REQUEST_RESET, &input, 8, ALL);
    assert_eq!(r, Reply::ok(8));
    let epoch = Epoch(get_u64(&out, 0).expect("epoch"));
    let reason = VetoReason::cut("nightly backup running");
    d.coord
        .reset_veto(d.now, backup, epoch, reason)
        .expect("a veto");
    let each = size_of::<ResetSummaryOut>();
    let (r, out) = call(
        &mut d,
        IOCTL_HCABUS_READ_RESETS,
        &empty(),
        16 + 2 * each,
        Rights::READ,
    );
    assert_eq!(r, Reply::ok(16 + each));
    assert_eq!((get_u32(&out, 0), get_u64(&out, 8)), (Some(1), Some(1)));
    let s = ResetSummaryOut::decode(&out[16..]).expect("a summary");
    assert_eq!(s.ordinal, 1);
    assert_eq!(result_name(s.result), Some("Aborted"));
    assert_eq!(s.vetoer, backup.to_raw());
    assert_eq!(text_of(&s.vetoer_name), Some("backup"));
    assert_eq!(text_of(&s.veto_reason), Some("nightly backup running"));
    assert_eq!(text_of(&s.admin_reason), Some("firmware 2.42 staged"));
    assert_eq!(s.flags & SUMMARY_PLANNED, SUMMARY_PLANNED);
    assert_eq!(
        (s.quiesce_us, s.hw_reset_us),
        (NONE_U64, NONE_U64),
        "nothing was torn down"
    );
    // The flight recorder has the administrator's reason, who asked (a handle, as on
    // Windows) and the vetoer by name.
    let said: Vec<String> = d.coord.recorder().iter().map(|r| r.to_string()).collect();
    assert!(
        said.iter().any(|l| l
            .ends_with("admin_reset: \"firmware 2.42 staged\"  [by handle (read-write)]")),
        "{said:#?}"
    );
    assert!(
        said.iter().any(|l| l.contains("client 'backup'")
            && l.ends_with("vetoed the planned reset: nightly backup running")),
        "{said:#?}"
    );
}
