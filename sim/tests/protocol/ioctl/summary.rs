//! READ_RESETS' summary as the facts make it, and the codes and texts it is written with.

use super::*;
use hcabus::coordinator::{ResetFacts, ResetResult, ResetSummary};
use hcabus::time::Duration;

fn at(ms: u64) -> Instant {
    Instant::from_ms(ms)
}

/// A reset of epoch 3 begun at 10 ms and quiesced at 20.
fn facts(restart: bool) -> ResetFacts {
    let mut f = ResetFacts::begun(Epoch(3), ResetReason::AdminForced, at(10), restart);
    f.quiesce_done_at = Some(at(20));
    f.finished_at = Some(at(40));
    f.result = Some(ResetResult::Restored(ResetOutcome::Restored));
    f
}

fn summary(f: ResetFacts) -> ResetSummaryOut {
    ResetSummaryOut::from_summary(&ResetSummary {
        ordinal: 1,
        facts: f,
    })
}

/// A restart has no quiesce (its clients are zombies, nothing is quiesced): NONE, where a
/// reset gives the time its quiesce took.
#[test]
fn a_restart_has_no_quiesce_and_a_reset_has_its_own() {
    let reset = summary(facts(false));
    assert_eq!(reset.quiesce_us, Duration::from_ms(10).as_us());
    assert_eq!(reset.flags & SUMMARY_RESTART, 0);
    let restart = summary(facts(true));
    assert_eq!(restart.quiesce_us, NONE_U64);
    assert_eq!(restart.flags & SUMMARY_RESTART, SUMMARY_RESTART);
    assert_eq!(restart.total_us, Duration::from_ms(30).as_us());
}

/// The forced clients are named as many as were named, in order; none when none were.
#[test]
fn the_summary_names_its_forced_clients() {
    let none = summary(facts(false));
    assert_eq!(none.forced_names().count(), 0);
    let mut f = facts(false);
    f.forced_count = 2;
    f.forced_names[0] = ShortText::cut("ipoib");
    f.forced_names[1] = ShortText::cut("srp-bootdisk");
    let s = summary(f);
    assert_eq!(s.forced, 2);
    assert_eq!(
        s.forced_names().collect::<Vec<_>>(),
        ["ipoib", "srp-bootdisk"]
    );
}

/// A text field keeps what fits whole, exactly N bytes included, and cuts before a
/// character that would not fit rather than through it.
#[test]
fn a_text_field_is_cut_at_a_character_boundary() {
    assert_eq!(&text_field::<4>("abcd"), b"abcd");
    assert_eq!(&text_field::<4>("abcde"), b"abcd");
    assert_eq!(&text_field::<4>("ab"), b"ab\0\0");
    // "é" is two bytes: at bytes 3-4 it does not fit in four.
    assert_eq!(&text_field::<4>("abcé"), b"abc\0");
    assert_eq!(&text_field::<4>("aé"), "aé\0".as_bytes());
    assert_eq!(&text_field::<5>("ééé"), "éé\0".as_bytes());
}

/// The named abort codes are the ones [`result_code`] gives and [`result_name`] reads.
#[test]
fn the_abort_result_constants_are_the_codes_of_their_aborts() {
    let by = ClientId::from_raw(1);
    assert_eq!(RESULT_VETOED, 0x20);
    assert_eq!(RESULT_ABORTED_UNRESPONSIVE, 0x21);
    for (code, cause) in [
        (RESULT_VETOED, AbortCause::Veto),
        (RESULT_ABORTED_UNRESPONSIVE, AbortCause::Unresponsive),
    ] {
        let r = ResetResult::Aborted { by, cause };
        assert_eq!(result_code(Some(r)), code);
        assert_eq!(result_name(code), Some(r.as_str()));
    }
}

/// `CTL_CODE` is winioctl.h's: its fields are ORed, so bits two fields share stay set.
#[test]
fn ctl_code_ors_its_fields_as_winioctl_does() {
    // Each pair of neighbouring fields made to share a bit: device type and access,
    // access and function, function and method.
    assert_eq!(ctl_code(1, 0, 0, 4), 1 << 16);
    assert_eq!(ctl_code(0, 0x1000, 0, 1), 1 << 14);
    assert_eq!(ctl_code(0, 1, 4, 0), 1 << 2);
}
