//! A reset's facts: each duration from the instants that bound it, and the names it goes by.

use super::*;

fn at(ms: u64) -> Instant {
    Instant::from_ms(ms)
}

fn ms(n: u64) -> Option<Duration> {
    Some(Duration::from_ms(n))
}

/// A reset that ran every phase: begun at 10 ms, RESET out at 12, quiesced at 20, the
/// device verified at 50, the last RESET_END at 70.
fn whole() -> ResetFacts {
    let mut f = ResetFacts::begun(Epoch(3), ResetReason::AdminPlanned, at(10), false);
    f.reset_sent_at = Some(at(12));
    f.quiesce_done_at = Some(at(20));
    f.hw_entered = true;
    f.hw_done_at = Some(at(50));
    f.finished_at = Some(at(70));
    f
}

/// Each phase runs from the instant the one before it ended: the quiesce from RESET (not
/// from the start, which a planned reset's query precedes), the hardware from the quiesce,
/// the restore from the device verified; the total from the start.
#[test]
fn each_phase_is_measured_between_the_instants_that_bound_it() {
    let f = whole();
    assert_eq!(f.quiesce(), ms(8));
    assert_eq!(f.hw_reset(), ms(30));
    assert_eq!(f.restore(), ms(20));
    assert_eq!(f.total(), ms(60));
    assert!(!f.is_open());
}

/// An open reset has no restore and no total; a reset that ended in the hardware (no
/// device verified) has no restore either, and its hardware time runs to its end.
#[test]
fn a_phase_that_did_not_end_has_no_duration() {
    let mut f = whole();
    f.finished_at = None;
    assert_eq!((f.restore(), f.total()), (None, None));
    assert!(f.is_open());
    let mut f = whole();
    f.hw_done_at = None;
    assert_eq!(f.restore(), None);
    assert_eq!(f.hw_reset(), ms(50));
}

/// The outcome is the result's name, `Unfinished` while there is none; an abort for an
/// unresponsive client names no vetoer, a veto does.
#[test]
fn the_outcome_and_the_abort_name_what_ended_the_reset() {
    let mut f = whole();
    assert_eq!(f.outcome(), "Unfinished");
    f.result = Some(ResetResult::Restored(ResetOutcome::FirmwareChanged));
    assert_eq!(f.outcome(), "FirmwareChanged");
    assert!(!f.aborted_unresponsive());
    let by = ClientId::from_raw(0x0000_0002_0000_0001);
    f.result = Some(ResetResult::Aborted {
        by,
        cause: AbortCause::Unresponsive,
    });
    assert!(f.aborted_unresponsive());
    assert_eq!((f.vetoer(), f.outcome()), (None, "AbortedUnresponsive"));
    f.result = Some(ResetResult::Aborted {
        by,
        cause: AbortCause::Veto,
    });
    assert!(!f.aborted_unresponsive());
    assert_eq!((f.vetoer(), f.outcome()), (Some(by), "Aborted"));
}

/// Clients forced through their deadline are kept by id up to the capacity reserved (the
/// list never grows: the reset path allocates nothing) and by name up to
/// [`FORCED_NAMES`].
#[test]
fn forced_clients_are_kept_within_the_room_reserved() {
    let mut r = ResetRecord::with_capacity(2);
    let room = r.room();
    assert_eq!(room, 2);
    r.begin(Epoch(1), ResetReason::AdminForced, at(0), false);
    assert!(r.forced().is_empty());
    for i in 0..room as u64 + 3 {
        r.force(ClientId::from_raw(i + 1), ShortText::cut("c"));
    }
    assert_eq!(r.forced(), [ClientId::from_raw(1), ClientId::from_raw(2)]);
    assert_eq!(r.room(), room, "the list did not grow");
    assert_eq!(usize::from(r.forced_count), room);
    // A copy is the same record, within its own room; a new reset forgets who was forced.
    let mut copy = ResetRecord::with_capacity(1);
    copy.copy_from(&r);
    assert_eq!(copy.forced(), [ClientId::from_raw(1)]);
    let mut same = ResetRecord::with_capacity(4);
    same.copy_from(&r);
    assert_eq!(same, r);
    r.begin(Epoch(2), ResetReason::AdminForced, at(0), false);
    assert!(r.forced().is_empty() && r != same);
    // The same facts with other clients forced are another record.
    let (mut a, mut b) = (ResetRecord::with_capacity(2), ResetRecord::with_capacity(2));
    a.force(ClientId::from_raw(1), ShortText::cut("c"));
    b.force(ClientId::from_raw(2), ShortText::cut("c"));
    assert_eq!(a.facts, b.facts);
    assert_ne!(a, b);
    // What is past the forced ones is not the record's: a record of the same reset prints
    // (and fingerprints) alike whatever an earlier reset left in its room.
    a.begin(Epoch(3), ResetReason::AdminForced, at(0), false);
    b.begin(Epoch(3), ResetReason::AdminForced, at(0), false);
    assert_eq!(a, b);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}

/// The first [`FORCED_NAMES`] forced clients are named, in the order they were forced;
/// all are counted.
#[test]
fn the_first_forced_clients_are_named() {
    let mut r = ResetRecord::with_capacity(8);
    r.begin(Epoch(1), ResetReason::AdminForced, at(0), false);
    let names = ["a", "b", "c", "d", "e", "f"];
    for (i, n) in names.iter().enumerate() {
        r.force(ClientId::from_raw(i as u64 + 1), ShortText::cut(n));
    }
    assert_eq!(r.forced_count, 6);
    let named: Vec<&str> = r.forced_names.iter().map(|n| n.as_str()).collect();
    assert_eq!(named, names[..FORCED_NAMES]);
}
