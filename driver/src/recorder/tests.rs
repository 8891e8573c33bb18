use super::*;
use crate::hca::HealthSample;
use crate::policy::Policy;
use crate::types::*;

fn id() -> ClientId {
    ClientId {
        index: 3,
        generation: 9,
    }
}

fn every_kind() -> Vec<RecordKind> {
    vec![
        RecordKind::Transition {
            from: State::Operational,
            to: State::Quiescing,
        },
        RecordKind::ResetStarted {
            epoch: Epoch(4),
            reason: ResetReason::Catastrophic,
            planned: false,
        },
        RecordKind::ResetJoined {
            reason: ResetReason::ClientRequest,
        },
        RecordKind::FollowUpScheduled {
            reason: ResetReason::HealthStall,
        },
        RecordKind::ResetFinished {
            epoch: Epoch(5),
            outcome: ResetOutcome::FirmwareChanged,
        },
        RecordKind::ResetFailed {
            epoch: Epoch(5),
            error: FailReason::AutoRestartExpired,
        },
        RecordKind::Event {
            client: id(),
            event: EventKind::ResetAborted,
            epoch: Epoch(2),
        },
        RecordKind::Call {
            client: None,
            call: Call::AdminReset,
        },
        RecordKind::Refused {
            client: Some(id()),
            call: Call::ResetVeto,
            code: RefusalCode::TooLate,
        },
        RecordKind::Unresponsive {
            client: id(),
            aborts: false,
        },
        RecordKind::Throttled { client: id() },
        // A reason fills all 32 bytes it is given, the multi-byte character included.
        RecordKind::Vetoed {
            client: id(),
            reason: VetoReason::cut("backup running: 4 TB left, né, ok"),
        },
        RecordKind::Vetoed {
            client: id(),
            reason: VetoReason::cut(""),
        },
        RecordKind::Hw {
            step: HwStep::FunctionLevelReset,
            outcome: HwOutcome::Timeout,
            detail: 0,
        },
        RecordKind::Hw {
            step: HwStep::ReadHealth,
            outcome: HwOutcome::Catastrophic,
            detail: 0x0bad_0001,
        },
        RecordKind::Pnp {
            op: PnpOp::ReenumerateChildren,
        },
        RecordKind::Port {
            port: 2,
            state: PortState::Active,
            lid: 0xBFFF,
        },
        RecordKind::Port {
            port: 1,
            state: PortState::Down,
            lid: 0,
        },
        RecordKind::PolicyChanged {
            key: 13,
            old: 0,
            new: u64::MAX,
        },
        RecordKind::FaultInjected {
            fault: crate::fault::FaultCode::PortDown,
            count: 0,
            port: 2,
            duration_ms: 3_600_000,
            accepted: true,
        },
        RecordKind::FaultInjected {
            fault: crate::fault::FaultCode::ResetFails,
            count: 64,
            port: 0,
            duration_ms: 0,
            accepted: false,
        },
    ]
}

#[test]
fn every_kind_of_record_decodes_to_itself_and_garbage_does_not_decode() {
    let names = ["", "srp-bootdisk", "a name of exactly thirty-two b.."];
    let actors = [
        Actor::Nobody,
        Actor::Local {
            uid: 1000,
            rights: 3,
        },
        Actor::Handle { rights: 3 },
        Actor::Local { uid: 0, rights: 1 },
    ];
    for (n, kind) in every_kind().into_iter().enumerate() {
        let r = Record {
            seq: n as u64 + 100,
            at: Instant::from_us(1_234_567),
            last_at: Instant::from_us(9_234_567),
            count: 7,
            name: ShortText::cut(names[n % names.len()]),
            kind,
            by: actors[n % actors.len()],
        };
        assert_eq!(Record::decode(&r.encode()), Some(r));
    }
    let good = hw(HwOutcome::Healthy).encode_at(1);
    for (at, value, why) in [
        (16, 99, "unknown tag"),
        (18, 0, "no such outcome"),
        (20, 0, "a count of zero"),
        (60, 0xff, "a name that is not UTF-8"),
        (112, 3, "no such actor"),
        (113, 4, "no such access"),
    ] {
        let mut bad = good;
        bad[at] = value;
        if at == 20 {
            bad[20..24].fill(0);
        }
        assert_eq!(Record::decode(&bad), None, "{why}");
    }
}

/// A field out of its range does not decode: a port outside 1..=MAX_PORTS, a policy key
/// past the last, an `aborts` flag that is neither 0 nor 1. The largest legal value of each
/// still decodes.
#[test]
fn a_record_field_out_of_its_range_does_not_decode() {
    let client = id();
    let cases: [(RecordKind, &[u8], u8); 3] = [
        (
            RecordKind::Port {
                port: MAX_PORTS,
                state: PortState::Active,
                lid: 1,
            },
            &[0, MAX_PORTS + 1],
            MAX_PORTS,
        ),
        (
            RecordKind::PolicyChanged {
                key: (Policy::KEYS.len() - 1) as u8,
                old: 1,
                new: 2,
            },
            &[Policy::KEYS.len() as u8, u8::MAX],
            (Policy::KEYS.len() - 1) as u8,
        ),
        (
            RecordKind::Unresponsive {
                client,
                aborts: true,
            },
            &[2, u8::MAX],
            1,
        ),
    ];
    for (kind, bad_values, good_value) in cases {
        let good = kind.encode_at(1);
        assert_eq!(good[17], good_value, "{kind:?}: the field is byte 17");
        assert_eq!(Record::decode(&good).map(|r| r.kind), Some(kind));
        for &v in bad_values {
            let mut bad = good;
            bad[17] = v;
            assert_eq!(Record::decode(&bad), None, "{kind:?} with {v}");
        }
    }
}

#[test]
fn the_version_4_encoding_keeps_its_layout() {
    let mut r = Record::once(
        3,
        Instant::from_us(77),
        ShortText::cut("a-name-longer-than-24-bytes"),
        RecordKind::Unresponsive {
            client: id(),
            aborts: true,
        },
    );
    r.count = 5;
    let b = r.encode_v4();
    assert_eq!(&b[0..8], &3u64.to_le_bytes());
    assert_eq!(&b[8..16], &77u64.to_le_bytes());
    assert_eq!(b[16], 10, "tag");
    assert_eq!(
        &b[20..24],
        &5u32.to_le_bytes(),
        "count in the reserved word"
    );
    assert_eq!(&b[24..32], &id().to_raw().to_le_bytes());
    assert_eq!(&b[40..64], b"a-name-longer-than-24-by");
    // A not-ready probe read the device: ok to a version-4 reader, with no detail.
    let probe = Record::once(
        1,
        Instant::ZERO,
        ShortText::EMPTY,
        RecordKind::Hw {
            step: HwStep::ProbeReady,
            outcome: HwOutcome::NotReady,
            detail: 9,
        },
    );
    let b = probe.encode_v4();
    assert_eq!((b[16], b[17], b[18]), (11, HwStep::ProbeReady as u8, 1));
    assert_eq!(&b[32..40], &[0; 8]);
    let failed = Record {
        kind: RecordKind::Hw {
            step: HwStep::ProbeReady,
            outcome: HwOutcome::Absent,
            detail: 0,
        },
        ..probe
    };
    assert_eq!(failed.encode_v4()[18], 0);
    // Only forced and throttled clients' names were ever in a version-4 record.
    let event = Record {
        kind: RecordKind::Event {
            client: id(),
            event: EventKind::Reset,
            epoch: Epoch(1),
        },
        ..r
    };
    assert_eq!(&event.encode_v4()[40..64], &[0; 24]);
}

#[test]
fn outcomes_say_what_the_step_found() {
    let health = |catastrophic, counter| {
        HwResult::Health(HealthSample {
            catastrophic,
            counter,
        })
    };
    assert_eq!(
        HwOutcome::of(&health(0, 5), Some(4)),
        (HwOutcome::Healthy, 0)
    );
    assert_eq!(
        HwOutcome::of(&health(0, 5), Some(5)),
        (HwOutcome::CounterUnchanged, 0)
    );
    assert_eq!(
        HwOutcome::of(&health(0xbad, 5), Some(4)),
        (HwOutcome::Catastrophic, 0xbad)
    );
    assert_eq!(
        HwOutcome::of(&HwResult::Readiness(Readiness::NotReady), None),
        (HwOutcome::NotReady, 0)
    );
    assert_eq!(
        HwOutcome::of(&HwResult::Failed(HwError::Absent), None),
        (HwOutcome::Absent, 0)
    );
    let text = Record::once(
        0,
        Instant::ZERO,
        ShortText::EMPTY,
        RecordKind::Hw {
            step: HwStep::ReadHealth,
            outcome: HwOutcome::Catastrophic,
            detail: 0x0bad_0001,
        },
    )
    .to_string();
    assert!(
        text.ends_with("hw read_health catastrophic error (syndrome 0x0bad0001)"),
        "{text}"
    );
    assert!(!text.contains(" ok"), "{text}");
}

#[test]
fn records_name_their_client_and_the_administrators_reason() {
    let event = Record::once(
        0,
        Instant::ZERO,
        ShortText::cut("ipoib"),
        RecordKind::Event {
            client: id(),
            event: EventKind::Reset,
            epoch: Epoch(1),
        },
    );
    assert!(event.to_string().contains("-> 'ipoib' (#3.9)"), "{event}");
    let admin = Record::once(
        1,
        Instant::ZERO,
        ShortText::cut("firmware update"),
        RecordKind::Call {
            client: None,
            call: Call::AdminReset,
        },
    );
    assert!(
        admin
            .to_string()
            .ends_with("admin_reset: \"firmware update\""),
        "{admin}"
    );
}

fn hw(outcome: HwOutcome) -> RecordKind {
    RecordKind::Hw {
        step: HwStep::ProbeReady,
        outcome,
        detail: 0,
    }
}

impl RecordKind {
    fn encode_at(self, seq: u64) -> [u8; RECORD_BYTES] {
        Record::once(seq, Instant::ZERO, ShortText::EMPTY, self).encode()
    }
}

fn probe(i: u64) -> RecordKind {
    hw(if i.is_multiple_of(2) {
        HwOutcome::Ready
    } else {
        HwOutcome::NotReady
    })
}

#[test]
fn keeps_everything_until_full() {
    let mut r = FlightRecorder::new(4);
    for i in 0..3 {
        r.record(Instant::from_ms(i), &ShortText::EMPTY, probe(i));
    }
    assert_eq!(r.len(), 3);
    assert_eq!(r.dropped(), 0);
    let seqs: Vec<u64> = r.iter().map(|x| x.seq).collect();
    assert_eq!(seqs, [0, 1, 2]);
}

#[test]
fn wraps_with_drop_count_and_monotonic_sequence() {
    let mut r = FlightRecorder::new(4);
    for i in 0..11 {
        r.record(Instant::from_ms(i), &ShortText::EMPTY, probe(i));
    }
    assert_eq!(r.len(), 4);
    assert_eq!(r.dropped(), 7);
    assert_eq!(r.next_seq(), 11);
    let seqs: Vec<u64> = r.iter().map(|x| x.seq).collect();
    assert_eq!(seqs, [7, 8, 9, 10]);
    let times: Vec<u64> = r.iter().map(|x| x.at.as_ms()).collect();
    assert_eq!(times, [7, 8, 9, 10]);
    let since: Vec<u64> = r.since(9).map(|x| x.seq).collect();
    assert_eq!(since, [9, 10]);
    // Asking for overwritten history yields what is left, not an error.
    assert_eq!(r.since(0).count(), 4);
}

#[test]
fn a_repeat_of_the_newest_record_is_counted_not_written() {
    let mut r = FlightRecorder::new(4);
    let none = ShortText::EMPTY;
    let first = r.record(Instant::from_ms(1), &none, hw(HwOutcome::Ready));
    for ms in 2..=5_000 {
        assert_eq!(
            r.record(Instant::from_ms(ms), &none, hw(HwOutcome::NotReady)),
            first + 1
        );
    }
    // The same kind about another client is not a repeat.
    r.record(
        Instant::from_ms(6_000),
        &ShortText::cut("a"),
        hw(HwOutcome::NotReady),
    );
    r.record(
        Instant::from_ms(6_001),
        &ShortText::cut("b"),
        hw(HwOutcome::NotReady),
    );
    let all: Vec<_> = r.iter().map(|x| (x.seq, x.count)).collect();
    assert_eq!(all, [(0, 1), (1, 4_999), (2, 1), (3, 1)]);
    let silent = r.iter().nth(1).copied().expect("record");
    assert_eq!(
        (silent.at.as_ms(), silent.last_at.as_ms()),
        (2, 5_000),
        "first and last time"
    );
    assert_eq!((r.dropped(), r.coalesced(), r.next_seq()), (0, 4_998, 4));
    assert!(
        silent.to_string().ends_with("(x4999, last 5.000000s)"),
        "{silent}"
    );
}

/// The writers the fan-out uses take fields instead of a kind: what they write, and what
/// they count as a repeat, must be what `record` would.
#[test]
fn the_field_by_field_writers_record_and_coalesce_as_record_does() {
    let (a, b) = (ShortText::cut("a"), ShortText::cut("b"));
    let other = ClientId {
        index: 4,
        generation: 1,
    };
    let event = |c| RecordKind::Event {
        client: c,
        event: EventKind::Reset,
        epoch: Epoch(2),
    };
    let call = |c| RecordKind::Call {
        client: Some(c),
        call: Call::ResetExecute,
    };
    // (name, kind) in order: repeats, a change of client, of name, of epoch, of call.
    let script = [
        (a, event(id())),
        (a, event(id())),
        (a, event(other)),
        (b, event(other)),
        (
            b,
            RecordKind::Event {
                client: other,
                event: EventKind::Reset,
                epoch: Epoch(3),
            },
        ),
        (b, call(other)),
        (b, call(other)),
        (a, call(other)),
        (
            a,
            RecordKind::Call {
                client: Some(other),
                call: Call::Unregister,
            },
        ),
        (a, event(id())),
    ];
    let (mut general, mut fields) = (FlightRecorder::new(16), FlightRecorder::new(16));
    for (i, (name, kind)) in script.iter().enumerate() {
        let at = Instant::from_ms(i as u64);
        let expected = general.record(at, name, *kind);
        let got = match *kind {
            RecordKind::Event {
                client,
                event,
                epoch,
            } => fields.record_event(at, name, client, event, epoch),
            RecordKind::Call {
                client: Some(client),
                call,
            } => fields.record_call(at, name, client, call),
            _ => unreachable!("the script holds events and calls"),
        };
        assert_eq!(got, expected, "step {i}: the same sequence number");
    }
    let all = |r: &FlightRecorder| r.iter().copied().collect::<Vec<_>>();
    assert_eq!(all(&fields), all(&general));
    assert_eq!(fields.coalesced(), 2, "the two repeats, and only they");
    assert_eq!(fields.coalesced(), general.coalesced());
}

#[test]
fn recording_never_grows_the_ring() {
    let mut r = FlightRecorder::new(8);
    let (cap_before, at_before) = (r.ring.capacity(), r.ring.as_ptr());
    for i in 0..100 {
        r.record(Instant::from_us(i), &ShortText::EMPTY, probe(i));
    }
    assert_eq!(
        (r.ring.capacity(), r.ring.as_ptr()),
        (cap_before, at_before)
    );
    assert_eq!((r.len(), r.capacity(), r.dropped()), (8, 8, 92));
}

#[test]
fn encoding_is_fixed_size_and_distinguishes_records() {
    let a = hw(HwOutcome::Ready).encode_at(1);
    let b = hw(HwOutcome::NotReady).encode_at(1);
    assert_ne!(a, b);
    assert_eq!(&a[0..8], &1u64.to_le_bytes());
    let u = Record::once(
        2,
        Instant::ZERO,
        ShortText::cut("wedged"),
        RecordKind::Unresponsive {
            client: id(),
            aborts: true,
        },
    );
    assert_eq!(&u.encode()[48..54], b"wedged");
}

/// The log line says what a person needs of each kind: who called (or the administrator's
/// reason), the settle an assert asked for, an Active port's LID.
#[test]
fn a_records_text_says_the_detail_of_its_kind() {
    let text = |name: &str, kind| {
        let line = Record::once(1, Instant::ZERO, ShortText::cut(name), kind).to_string();
        let head = format!("#{:<5} {:>14}  ", 1, Instant::ZERO);
        line.strip_prefix(&head).expect("the head").to_string()
    };
    let admin = RecordKind::Call {
        client: None,
        call: Call::AdminReset,
    };
    assert_eq!(text("", admin), "admin_reset");
    assert_eq!(text("new firmware", admin), "admin_reset: \"new firmware\"");
    let assert = RecordKind::Hw {
        step: HwStep::AssertReset,
        outcome: HwOutcome::Asserted,
        detail: 1_000,
    };
    assert_eq!(
        text("", assert),
        "hw assert_reset asserted (settle 1000 ms)"
    );
    let active = RecordKind::Port {
        port: 1,
        state: PortState::Active,
        lid: 16,
    };
    assert_eq!(text("", active), "port 1 active, lid 16");
    let down = RecordKind::Port {
        port: 2,
        state: PortState::Down,
        lid: 0,
    };
    assert_eq!(text("", down), "port 2 down");
}

/// An empty recorder says so; one record makes it not empty.
#[test]
fn a_recorder_is_empty_until_its_first_record() {
    let mut r = FlightRecorder::new(4);
    assert!(r.is_empty());
    r.record(Instant::ZERO, &ShortText::EMPTY, probe(1));
    assert!(!r.is_empty());
    assert_eq!(r.len(), 1);
}

/// What a record's fields are, as a visitor of [`Record::describe`] sees them: `name=value`,
/// `-` for a field the record does not have this time.
#[derive(Default)]
struct FieldList(Vec<String>);

impl Describe for FieldList {
    fn phrase(&mut self, _: fmt::Arguments<'_>) -> fmt::Result {
        Ok(())
    }
    fn word(&mut self, name: &'static str, value: &'static str) {
        self.0.push(format!("{name}={value}"));
    }
    fn state(&mut self, name: &'static str, value: &'static str) {
        self.0.push(format!("{name}={value}"));
    }
    fn number(&mut self, name: &'static str, value: Option<u64>) {
        let v = value.map_or("-".into(), |v| v.to_string());
        self.0.push(format!("{name}={v}"));
    }
    fn flag(&mut self, name: &'static str, value: bool) {
        self.0.push(format!("{name}={value}"));
    }
    fn client(&mut self, name: &'static str, value: Option<ClientId>) {
        let v = value.map_or("-".into(), |c| c.to_string());
        self.0.push(format!("{name}={v}"));
    }
    fn text(&mut self, name: &'static str, value: Option<&str>) {
        self.0.push(format!("{name}={}", value.unwrap_or("-")));
    }
    fn hex(&mut self, name: &'static str, value: u32) {
        self.0.push(format!("{name}={value:#x}"));
    }
}

fn fields(kind: RecordKind) -> Vec<String> {
    let mut list = FieldList::default();
    let r = Record::once(1, Instant::ZERO, ShortText::EMPTY, kind);
    r.describe(&mut list).expect("a list takes every field");
    list.0
}

/// A record's fields are what JSON shows (`hcactl log --json`): an injected fault's count,
/// port and duration only where it took them, and a line that says the same.
#[test]
fn a_record_describes_its_fields_and_says_them_in_its_line() {
    let fault = |count, port, duration_ms| RecordKind::FaultInjected {
        fault: FaultCode::PortDown,
        count,
        port,
        duration_ms,
        accepted: true,
    };
    assert_eq!(
        fields(fault(0, 2, 500)),
        [
            "fault=port_down",
            "fault_count=-",
            "port=2",
            "duration_ms=500",
            "accepted=true"
        ]
    );
    assert_eq!(
        fields(fault(3, 0, 0))[1..4],
        ["fault_count=3", "port=-", "duration_ms=-"]
    );
    let text = |kind| what(kind);
    assert_eq!(text(fault(3, 0, 0)), "fault port_down injected, count 3");
    let started = |planned| RecordKind::ResetStarted {
        epoch: Epoch(4),
        reason: ResetReason::Catastrophic,
        planned,
    };
    assert_eq!(
        fields(started(true)),
        ["epoch=4", "reason=catastrophic", "planned=true"]
    );
    assert_eq!(
        text(started(true)),
        "reset of e4 started: catastrophic (planned)"
    );
    assert_eq!(text(started(false)), "reset of e4 started: catastrophic");
    let late = |aborts| RecordKind::Unresponsive {
        client: id(),
        aborts,
    };
    assert_eq!(
        fields(late(true)),
        [format!("client={}", id()), "aborts=true".into()]
    );
    assert_eq!(
        text(late(false)),
        format!("client {} unresponsive at deadline: forced", id())
    );
    assert!(text(late(true)).ends_with("called off (abort_on_unresponsive)"));
}

fn what(kind: RecordKind) -> String {
    Record::once(1, Instant::ZERO, ShortText::EMPTY, kind)
        .what()
        .to_string()
}
