//! Refusal statuses and descriptors refused with their status.

use super::*;

#[test]
fn every_refusal_has_its_own_status_and_comes_back_from_it() {
    for code in RefusalCode::ALL {
        let s = status::of_refusal(code);
        assert!(s < 0, "{code:?} is an error status");
        assert_eq!(status::refusal(s), Some(code));
        assert_eq!(status::name(s), code.as_str());
    }
    for s in [
        status::SUCCESS,
        status::ALREADY_READY,
        status::PAST_DEADLINE,
    ] {
        assert!(s >= 0, "NT_SUCCESS({})", status::name(s));
        assert_eq!(status::refusal(s), None);
    }
    assert_eq!(
        status::refusal(status::of_refusal(RefusalCode::Throttled) + 100),
        None
    );
}

#[test]
fn a_bad_descriptor_is_refused_with_its_status() {
    let size = size_of::<HcabusClientDesc>() as u16;
    let ok = client_desc(size, ClientKind::Ipoib as u16, 0, b"ipoib0");
    assert_eq!(ok.map(|d| d.kind), Ok(ClientKind::Ipoib));
    assert_eq!(
        client_desc(size - 8, 2, 0, b"x").err(),
        Some(status::INFO_LENGTH_MISMATCH)
    );
    for (kind, flags, name) in [
        (0u16, 0u32, &b"x"[..]),
        (99, 0, b"x"),
        (2, 1 << 9, b"x"),
        (2, 0, b""),
        (2, 0, &[0xFF, 0xFE]),
        (2, 0, &[b'a'; 33]),
    ] {
        assert_eq!(
            client_desc(size, kind, flags, name).err(),
            Some(status::INVALID_PARAMETER),
            "kind {kind} flags {flags:#x} name {name:?}"
        );
    }
}

/// Every status the C ABI defines has a name of its own (a log that says "unknown status"
/// for a status we return would hide which one it was).
#[test]
fn every_defined_status_has_its_own_name() {
    let all = status::ALL;
    let names: std::collections::BTreeSet<&str> = all.iter().map(|s| status::name(*s)).collect();
    assert_eq!(names.len(), all.len(), "{names:?}");
    assert!(!names.contains("unknown status"));
    assert_eq!(status::name(0x1234_5678), "unknown status");
}

/// A call's result is its status: SUCCESS, or the refusal its error stands for.
#[test]
fn a_calls_result_is_its_status() {
    use crate::errors::RequestError;
    assert_eq!(status_of::<(), RequestError>(Ok(())), status::SUCCESS);
    let refused = status_of::<(), _>(Err(RequestError::Throttled));
    assert_eq!(
        status::refusal(refused),
        Some(RequestError::Throttled.into())
    );
    assert_ne!(refused, status::SUCCESS);
}

/// What a RESET, RESET_QUERY, RESET_END and RESET_FAILED carry, field by field (the C tests
/// read the same through the union).
#[test]
fn an_events_data_carries_its_epoch_reason_and_result() {
    let deadline = crate::time::Instant::from_us(1_234);
    let reset = HcabusResetData::of(Epoch(3), ResetReason::HealthStall, false, deadline);
    let want = HcabusResetData {
        epoch: 3,
        deadline_us: 1_234,
        reason: ResetReason::HealthStall as u32,
        planned: 0,
    };
    assert_eq!(reset, want);
    let planned = HcabusResetData::of(Epoch(4), ResetReason::AdminPlanned, true, deadline);
    assert_eq!((planned.epoch, planned.planned), (4, 1));
    let end = HcabusResetEndData::of(Epoch(5), ResetOutcome::FirmwareChanged as u32);
    let want_end = HcabusResetEndData {
        epoch: 5,
        result: ResetOutcome::FirmwareChanged as u32,
        reserved: 0,
    };
    assert_eq!(end, want_end);
}
