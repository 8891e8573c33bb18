//! The events as a decoder reads them back (src/etw_reader.rs), for every kind of record at
//! its longest, and the constants as Microsoft's TraceLogging crate has them.

use super::*;
use crate::etw_reader::{self, decode, expected, DecodeError, Value};
use hcabus::fault::FaultCode;
use hcabus::hca::HwStep;
use hcabus::recorder::RecordTag;
use hcabus::time::Instant;
use hcabus::types::*;
use hcabus::Policy;

/// The value of an enum whose name is longest: the widest a field of it gets.
macro_rules! longest {
    ($ty:ty) => {
        <$ty>::ALL
            .into_iter()
            .max_by_key(|v| v.as_str().len())
            .expect("an enum has values")
    };
}

fn id() -> ClientId {
    ClientId {
        index: u16::MAX,
        generation: u32::MAX,
    }
}

/// A record of each kind, every field at its widest (and the client-less variants).
fn every_kind() -> Vec<RecordKind> {
    let reason = longest!(ResetReason);
    let call = longest!(Call);
    vec![
        RecordKind::Transition {
            from: longest!(State),
            to: longest!(State),
        },
        RecordKind::ResetStarted {
            epoch: Epoch(u64::MAX),
            reason,
            planned: true,
        },
        RecordKind::ResetJoined { reason },
        RecordKind::FollowUpScheduled { reason },
        RecordKind::ResetFinished {
            epoch: Epoch(u64::MAX),
            outcome: longest!(ResetOutcome),
        },
        RecordKind::ResetFailed {
            epoch: Epoch(u64::MAX),
            error: longest!(FailReason),
        },
        RecordKind::Event {
            client: id(),
            event: longest!(EventKind),
            epoch: Epoch(u64::MAX),
        },
        RecordKind::Call { client: None, call },
        RecordKind::Call {
            client: Some(id()),
            call,
        },
        RecordKind::Refused {
            client: Some(id()),
            call,
            code: longest!(hcabus::errors::RefusalCode),
        },
        RecordKind::Refused {
            client: None,
            call,
            code: longest!(hcabus::errors::RefusalCode),
        },
        RecordKind::Unresponsive {
            client: id(),
            aborts: true,
        },
        RecordKind::Throttled { client: id() },
        RecordKind::Vetoed {
            client: id(),
            reason: VetoReason::cut("backup running: 4 TB left, né, ok"),
        },
        RecordKind::Hw {
            step: longest!(HwStep),
            outcome: HwOutcome::Catastrophic,
            detail: 0x0bad_0001,
        },
        RecordKind::Hw {
            step: longest!(HwStep),
            outcome: HwOutcome::Asserted,
            detail: u32::MAX,
        },
        RecordKind::Hw {
            step: longest!(HwStep),
            outcome: longest!(HwOutcome),
            detail: 0,
        },
        RecordKind::Pnp {
            op: longest!(PnpOp),
        },
        RecordKind::Port {
            port: 2,
            state: longest!(PortState),
            lid: u16::MAX,
        },
        RecordKind::PolicyChanged {
            key: (0..Policy::KEYS.len())
                .max_by_key(|&k| Policy::KEYS[k].len())
                .expect("keys") as u8,
            old: u64::MAX,
            new: u64::MAX,
        },
        RecordKind::FaultInjected {
            fault: longest!(FaultCode),
            count: u32::MAX,
            port: 2,
            duration_ms: u32::MAX,
            accepted: false,
        },
    ]
}

/// The record of `kind` with the widest name, time and actor.
fn record(kind: RecordKind, by: Actor) -> Record {
    Record {
        seq: u64::MAX,
        at: Instant::from_us(u64::MAX / 2),
        last_at: Instant::from_us(u64::MAX / 2),
        count: u32::MAX,
        name: ShortText::cut("a client name of 32 bytes, full!"),
        kind,
        by,
    }
}

fn span() -> ResetSpan {
    ResetSpan {
        epoch: Epoch(u64::MAX),
        reason: longest!(ResetReason),
        started: Instant::from_us(1),
    }
}

/// Every kind, at its widest, in a reset and out of one, asked by an administrator or not:
/// the event fits its room, reads back under its kind's name from the provider `hcabus`,
/// and carries exactly the fields and values the record says.
#[test]
fn every_kind_at_its_widest_reads_back_as_the_record_says() {
    let widest_by = Actor::Local {
        uid: u32::MAX,
        rights: 3,
    };
    let mut tags: Vec<RecordTag> = Vec::new();
    let mut event = EtwEvent::default();
    for kind in every_kind() {
        tags.push(kind.tag());
        for by in [Actor::Nobody, widest_by, Actor::Handle { rights: 1 }] {
            for reset in [None, Some(span())] {
                let r = record(kind, by);
                event.encode(&r, reset).expect("fits");
                let got = decode(&PROVIDER_METADATA, event.metadata(), event.data())
                    .unwrap_or_else(|e| panic!("{kind:?}: {e}"));
                let (name, fields) = expected(&r, reset);
                assert_eq!(got.provider, "hcabus");
                assert_eq!(got.name, name);
                assert_eq!(got.fields, fields, "{kind:?}");
                assert_eq!((event.level(), event.keywords()), (level(&r), keywords(&r)));
            }
        }
    }
    for tag in RecordTag::ALL {
        assert!(tags.contains(&tag), "{tag:?} untested");
    }
}

/// The fields a reader can count on: the number, the time and the count first; a reset's
/// epoch, reason and elapsed time; the client as its id and name.
#[test]
fn a_clients_answer_in_a_reset_names_the_reset_and_the_client() {
    let mut r = record(
        RecordKind::Event {
            client: ClientId {
                index: 3,
                generation: 1,
            },
            event: EventKind::ResetEnd,
            epoch: Epoch(2),
        },
        Actor::Nobody,
    );
    r.seq = 41;
    r.at = Instant::from_ms(1_250);
    r.count = 1;
    r.name = ShortText::cut("ipoib0");
    let reset = ResetSpan {
        epoch: Epoch(1),
        reason: ResetReason::Catastrophic,
        started: Instant::from_ms(250),
    };
    let mut event = EtwEvent::default();
    event.encode(&r, Some(reset)).expect("fits");
    let got = decode(&PROVIDER_METADATA, event.metadata(), event.data()).expect("reads");
    let field = |n: &str| got.get(n).cloned();
    assert_eq!(got.name, "event");
    assert_eq!(&got.fields[0].0, "seq");
    assert_eq!(field("seq"), Some(Value::U64(41)));
    assert_eq!(field("at_us"), Some(Value::U64(1_250_000)));
    assert_eq!(field("count"), Some(Value::U32(1)));
    assert_eq!(field("reset_epoch"), Some(Value::U64(1)));
    assert_eq!(
        field("reset_reason"),
        Some(Value::Str("catastrophic".into()))
    );
    assert_eq!(field("reset_elapsed_us"), Some(Value::U64(1_000_000)));
    assert_eq!(field("client"), Some(Value::Str("#3.1".into())));
    assert_eq!(field("client_name"), Some(Value::Str("ipoib0".into())));
    assert_eq!(field("epoch"), Some(Value::U64(2)));
    assert_eq!(field("by"), None);
    assert_eq!(
        (event.level(), event.keywords()),
        (LEVEL_VERBOSE, Keywords::CLIENT)
    );
}

/// Levels and keywords: a failure is an error, a refusal a warning, an administrator's act
/// carries ADMIN whatever its kind.
#[test]
fn levels_and_keywords_sort_the_events_as_a_session_asks() {
    let failed = record(
        RecordKind::ResetFailed {
            epoch: Epoch(1),
            error: FailReason::AutoRestartExpired,
        },
        Actor::Nobody,
    );
    assert_eq!(
        (level(&failed), keywords(&failed)),
        (LEVEL_ERROR, Keywords::RESET)
    );
    let started = record(
        RecordKind::ResetStarted {
            epoch: Epoch(1),
            reason: ResetReason::AdminForced,
            planned: false,
        },
        Actor::Handle { rights: 3 },
    );
    assert_eq!(
        (level(&started), keywords(&started)),
        (LEVEL_INFO, Keywords::RESET | Keywords::ADMIN)
    );
    let step = |outcome| {
        record(
            RecordKind::Hw {
                step: HwStep::AssertReset,
                outcome,
                detail: 0,
            },
            Actor::Nobody,
        )
    };
    assert_eq!(level(&step(HwOutcome::Done)), LEVEL_VERBOSE);
    assert_eq!(level(&step(HwOutcome::Timeout)), LEVEL_WARNING);
    assert_eq!(keywords(&step(HwOutcome::Done)), Keywords::HARDWARE);
    let admin_call = record(
        RecordKind::Call {
            client: None,
            call: Call::AdminReset,
        },
        Actor::Nobody,
    );
    assert_eq!(keywords(&admin_call), Keywords::ADMIN);
}

/// The provider's block, its GUID, the channel and the type numbers, as Microsoft's
/// TraceLogging crate has them.
#[test]
fn the_provider_and_the_types_are_tracelogging_s() {
    assert_eq!(&PROVIDER_METADATA[..], b"\x09\x00hcabus\x00");
    let (d1, d2, d3, d4) = PROVIDER_GUID;
    assert_eq!(
        tracelogging::Guid::from_name(PROVIDER_NAME).to_fields(),
        (d1, d2, d3, d4)
    );
    assert_eq!(
        CHANNEL_TRACELOGGING,
        tracelogging::Channel::TraceLogging.as_int()
    );
    use tracelogging::{InType, OutType};
    for (ours, theirs) in [
        (IN_CSTR8, InType::CStr8),
        (IN_U8, InType::U8),
        (IN_U32, InType::U32),
        (IN_U64, InType::U64),
        (IN_HEX32, InType::Hex32),
        (etw_reader::IN_CSTR8, InType::CStr8),
        (etw_reader::IN_U8, InType::U8),
        (etw_reader::IN_U32, InType::U32),
        (etw_reader::IN_U64, InType::U64),
        (etw_reader::IN_HEX32, InType::Hex32),
    ] {
        assert_eq!(ours, theirs.as_int());
    }
    assert_eq!(etw_reader::IN_TYPE_MASK, InType::TypeMask);
    assert_eq!(etw_reader::IN_FLAG_MASK, InType::FlagMask);
    for (ours, theirs) in [
        (OUT_BOOLEAN, OutType::Boolean),
        (OUT_UTF8, OutType::Utf8),
        (etw_reader::OUT_BOOLEAN, OutType::Boolean),
        (etw_reader::OUT_UTF8, OutType::Utf8),
    ] {
        assert_eq!(ours, theirs.as_int());
    }
}

/// The reader refuses what it cannot read, rather than showing something else: a size that
/// is not the block's, a value cut short, data left over, a type it does not know.
#[test]
fn the_reader_refuses_a_damaged_event() {
    let r = record(
        RecordKind::Pnp {
            op: PnpOp::ReenumerateChildren,
        },
        Actor::Nobody,
    );
    let mut event = EtwEvent::default();
    event.encode(&r, None).expect("fits");
    let (meta, data) = (event.metadata().to_vec(), event.data().to_vec());
    assert!(decode(&PROVIDER_METADATA, &meta, &data).is_ok());
    let short_meta = &meta[..meta.len() - 1];
    assert!(matches!(
        decode(&PROVIDER_METADATA, short_meta, &data),
        Err(DecodeError::Size { .. })
    ));
    assert!(matches!(
        decode(&PROVIDER_METADATA, &meta, &data[..data.len() - 3]),
        Err(DecodeError::Short(_))
    ));
    let mut more = data.clone();
    more.push(7);
    assert_eq!(
        decode(&PROVIDER_METADATA, &meta, &more),
        Err(DecodeError::Trailing(1))
    );
    // The first field's in-type (after "seq\0") made a double.
    let mut odd = meta.clone();
    let at = 3 + "pnp\0seq\0".len();
    assert_eq!(odd[at], IN_U64);
    odd[at] = 12;
    assert!(matches!(
        decode(&PROVIDER_METADATA, &odd, &data),
        Err(DecodeError::Type { in_type: 12, .. })
    ));
    assert!(matches!(
        decode(&PROVIDER_METADATA[..4], &meta, &data),
        Err(DecodeError::Size { .. })
    ));
}

/// docs/operations.md names the provider's GUID as it is, every kind of event under its
/// keyword, and each keyword's bit.
#[test]
fn the_operators_page_names_the_provider_and_every_event() {
    let page = include_str!("../../../../docs/operations.md");
    let (d1, d2, d3, d4) = PROVIDER_GUID;
    let guid = format!(
        "{d1:08x}-{d2:04x}-{d3:04x}-{:02x}{:02x}-{}",
        d4[0],
        d4[1],
        d4[2..]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    assert!(page.contains(&format!("{{{guid}}}")), "the GUID {guid}");
    let section = page
        .split("## ETW")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("an ETW section");
    for tag in RecordTag::ALL {
        assert!(
            section.contains(&format!("`{}`", tag.as_str())),
            "{} missing",
            tag.as_str()
        );
    }
    for (name, bit) in Keywords::all().iter_names() {
        let row = format!("| {name} | {:#x} |", bit.bits());
        assert!(section.contains(&row), "{row}");
    }
}
