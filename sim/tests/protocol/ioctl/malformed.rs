//! Malformed requests: every refusal the code, the caller's rights, the input's length and
//! fields, and the output's room decide, each with its status and nothing changed.

use super::*;

/// What, code, input, output capacity, rights, expected status.
type Case = (&'static str, u32, Vec<u8>, usize, Rights, NtStatus);

/// The REQUEST_RESET input `good` with one edit.
fn edited(good: &[u8], f: &dyn Fn(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = good.to_vec();
    f(&mut b);
    b
}

/// Refusals decided by the code, the caller's rights and the input's length.
fn header_cases(good: &[u8]) -> Vec<Case> {
    let with = |f: &dyn Fn(&mut Vec<u8>)| edited(good, f);
    vec![
        (
            "unknown code",
            code(0x9AB, 3),
            good.to_vec(),
            8,
            ALL,
            NtStatus::INVALID_DEVICE_REQUEST,
        ),
        (
            "another device type",
            ctl_code(0x22, 0x910, 0, 3),
            good.to_vec(),
            8,
            ALL,
            NtStatus::INVALID_DEVICE_REQUEST,
        ),
        (
            "write code, read-only caller",
            IOCTL_HCABUS_REQUEST_RESET,
            good.to_vec(),
            8,
            Rights::READ,
            NtStatus::ACCESS_DENIED,
        ),
        (
            "truncated header",
            IOCTL_HCABUS_REQUEST_RESET,
            good[..6].to_vec(),
            8,
            ALL,
            NtStatus::INVALID_BUFFER_SIZE,
        ),
        (
            "truncated body",
            IOCTL_HCABUS_REQUEST_RESET,
            good[..40].to_vec(),
            8,
            ALL,
            NtStatus::INVALID_BUFFER_SIZE,
        ),
        (
            "longer than the structure",
            IOCTL_HCABUS_REQUEST_RESET,
            with(&|b| b.push(0)),
            8,
            ALL,
            NtStatus::INVALID_BUFFER_SIZE,
        ),
        (
            "wrong size field",
            IOCTL_HCABUS_REQUEST_RESET,
            with(&|b| put_u32(b, 0, 72)),
            8,
            ALL,
            NtStatus::INVALID_BUFFER_SIZE,
        ),
    ]
}

/// Refusals decided by the input's version, reserved bits and body.
fn body_cases(good: &[u8]) -> Vec<Case> {
    let with = |f: &dyn Fn(&mut Vec<u8>)| edited(good, f);
    vec![
        (
            "a version from the future",
            IOCTL_HCABUS_REQUEST_RESET,
            with(&|b| put_u16(b, 4, ABI_VERSION + 1)),
            8,
            ALL,
            NtStatus::REVISION_MISMATCH,
        ),
        (
            "version zero",
            IOCTL_HCABUS_REQUEST_RESET,
            with(&|b| put_u16(b, 4, 0)),
            8,
            ALL,
            NtStatus::REVISION_MISMATCH,
        ),
        (
            "reserved header bits",
            IOCTL_HCABUS_REQUEST_RESET,
            with(&|b| put_u16(b, 6, 1)),
            8,
            ALL,
            NtStatus::INVALID_PARAMETER,
        ),
        (
            "unknown mode",
            IOCTL_HCABUS_REQUEST_RESET,
            reset_in(7),
            8,
            ALL,
            NtStatus::INVALID_PARAMETER,
        ),
        (
            "reason not UTF-8",
            IOCTL_HCABUS_REQUEST_RESET,
            with(&|b| b[16] = 0xff),
            8,
            ALL,
            NtStatus::INVALID_PARAMETER,
        ),
        (
            "garbage after the reason's NUL",
            IOCTL_HCABUS_REQUEST_RESET,
            with(&|b| b[78] = b'x'),
            8,
            ALL,
            NtStatus::INVALID_PARAMETER,
        ),
    ]
}

/// Refusals decided by the room for the answer, the caller's rights, or no input at all.
fn answer_cases(good: &[u8]) -> Vec<Case> {
    vec![
        (
            "output too small",
            IOCTL_HCABUS_REQUEST_RESET,
            good.to_vec(),
            7,
            ALL,
            NtStatus::BUFFER_TOO_SMALL,
        ),
        (
            "query with no output room",
            IOCTL_HCABUS_QUERY_STATE,
            empty(),
            size_of::<StateOut>() - 1,
            Rights::READ,
            NtStatus::BUFFER_TOO_SMALL,
        ),
        (
            "no rights at all",
            IOCTL_HCABUS_QUERY_STATE,
            empty(),
            160,
            Rights::empty(),
            NtStatus::ACCESS_DENIED,
        ),
        (
            "empty input",
            IOCTL_HCABUS_QUERY_STATE,
            Vec::new(),
            160,
            Rights::READ,
            NtStatus::INVALID_BUFFER_SIZE,
        ),
    ]
}

#[test]
fn malformed_requests_get_their_status_and_change_nothing() {
    let mut d = dev();
    let good = reset_in(0);
    let mut cases = header_cases(&good);
    cases.extend(body_cases(&good));
    cases.extend(answer_cases(&good));
    for (what, code, input, cap, rights, want) in cases {
        let before = fingerprint(&d);
        let (r, out) = call(&mut d, code, &input, cap, rights);
        assert_eq!(r.status, want, "{what}");
        assert!(out.is_empty(), "{what}: no output on a refusal");
        assert_eq!(fingerprint(&d), before, "{what}: nothing changed");
    }
}
