//! The event log's entries (event_log.rs): their message ids and insertion strings, written
//! whole or not at all into the room given.

use super::*;

/// The strings written into `room` u16s, which start as 0xFFFF so that a write past the
/// count shows.
fn strings(entry: EventLogEntry, room: usize) -> (u8, usize, Vec<u16>) {
    let mut out = vec![0xFFFF; room];
    let (count, used) = entry.insertion_strings(&mut out);
    (count, used, out)
}

fn utf16(text: &str) -> Vec<u16> {
    text.encode_utf16().collect()
}

/// The message ids of messages.mc: informational for a start and a restore, errors for a
/// failure and a replacement.
#[test]
fn each_entry_has_its_message_id() {
    let ids = [
        EventLogEntry::ResetStarted {
            epoch: 1,
            reason: 1,
        }
        .message_id(),
        EventLogEntry::ResetRestored { epoch: 1 }.message_id(),
        EventLogEntry::ResetFailed { epoch: 1, error: 1 }.message_id(),
        EventLogEntry::DeviceReplaced { epoch: 1 }.message_id(),
    ];
    assert_eq!(ids, [0x60AB_1001, 0x60AB_1002, 0xE0AB_1003, 0xE0AB_1004]);
}

/// The epoch as `e` and its decimal digits, then the reason's or error's name where the
/// entry has one, each NUL-terminated; nothing written past them.
#[test]
fn the_strings_are_the_epoch_then_the_name() {
    let cases = [
        (
            EventLogEntry::ResetStarted {
                epoch: 1207,
                reason: ResetReason::Catastrophic as u8,
            },
            "e1207\0catastrophic\0",
            2,
        ),
        (EventLogEntry::ResetRestored { epoch: 0 }, "e0\0", 1),
        (
            EventLogEntry::DeviceReplaced { epoch: u64::MAX },
            "e18446744073709551615\0",
            1,
        ),
        (
            EventLogEntry::ResetFailed {
                epoch: 42,
                error: FailReason::DeviceReplaced as u8,
            },
            "e42\0DeviceReplaced\0",
            2,
        ),
        (
            EventLogEntry::ResetStarted {
                epoch: 5,
                reason: 200,
            },
            "e5\0?\0",
            2,
        ),
        (
            EventLogEntry::ResetFailed {
                epoch: 90,
                error: 0,
            },
            "e90\0?\0",
            2,
        ),
    ];
    for (entry, text, count) in cases {
        let want = utf16(text);
        let (n, used, out) = strings(entry, 64);
        assert_eq!((n, used), (count, want.len()), "{entry:?}");
        assert_eq!(out[..used], want[..], "{entry:?}");
        assert!(out[used..].iter().all(|c| *c == 0xFFFF), "{entry:?}");
    }
}

/// A string that does not fit whole is not written, nor any after it: "e12" needs 4 u16s,
/// "admin_planned" 14 more.
#[test]
fn a_string_is_written_whole_or_not_at_all() {
    let entry = EventLogEntry::ResetStarted {
        epoch: 12,
        reason: ResetReason::AdminPlanned as u8,
    };
    let both = utf16("e12\0admin_planned\0");
    for (room, count, used) in [(0, 0, 0), (3, 0, 0), (4, 1, 4), (17, 1, 4), (18, 2, 18)] {
        let (n, written, out) = strings(entry, room);
        assert_eq!((n, written), (count, used), "room {room}");
        assert_eq!(out[..written], both[..written], "room {room}");
        assert!(out[written..].iter().all(|c| *c == 0xFFFF), "room {room}");
    }
}
