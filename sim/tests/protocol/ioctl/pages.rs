//! Answers that page through what fits, and QUERY_HEALTH's reporter, on a bus whose
//! hardware runs (a stepper) rather than on a bare coordinator.

use super::*;
use hcabus::recorder::{Record, RECORD_BYTES};
use hcabus_sim::Stepper;

/// The stepper's coordinator, served as a device at the stepper's time.
struct Hosted<'a> {
    coord: &'a mut Coordinator,
    now: Instant,
}

impl IoctlDevice for Hosted<'_> {
    fn coordinator(&mut self) -> &mut Coordinator {
        self.coord
    }
    fn now(&self) -> Instant {
        self.now
    }
}

/// A read-only request answered into a buffer of `cap` bytes.
fn ask(s: &mut Stepper, code: u32, input: &[u8], cap: usize) -> (Reply, Vec<u8>) {
    s.call(|coord, now| {
        let mut out = vec![0u8; cap];
        let r = dispatch(
            &mut Hosted { coord, now },
            code,
            input,
            &mut out,
            Rights::READ,
        );
        out.truncate(r.bytes);
        (r, out)
    })
}

/// A bus with clients `names`, each executing at once in every reset.
fn bus(names: &[&str]) -> (Stepper, Vec<ClientId>) {
    bus_with(names, 256)
}

fn bus_with(names: &[&str], recorder_capacity: usize) -> (Stepper, Vec<ClientId>) {
    let config = Config {
        max_clients: 8,
        recorder_capacity,
        policy: Policy::default(),
    };
    let mut s = Stepper::new(config, SimHca::new(SimHcaConfig::default())).expect("valid");
    let ids = names
        .iter()
        .map(|n| {
            let d = ClientDesc::new(n, ClientKind::Custom, ClientFlags::empty()).expect("name");
            s.call(|c, now| c.register(now, d)).expect("room").id
        })
        .collect();
    s.pump();
    (s, ids)
}

fn forced_reset(s: &mut Stepper, ids: &[ClientId]) {
    let epoch = s
        .call(|c, now| c.admin_reset(now, AdminReset::Forced))
        .expect("reset");
    s.pump();
    for id in ids {
        let _ = s.call(|c, now| c.reset_execute(now, *id, epoch));
        s.pump();
    }
    s.advance(2_000);
}

/// A buffer with room for `n` items of `each` bytes after `head`, and `each - 1` to spare.
fn room_for(n: usize, head: usize, each: usize) -> usize {
    head + n * each + each - 1
}

/// LIST_CLIENTS fills the whole items that fit, each in its place, and says how many.
#[test]
fn list_clients_writes_each_entry_that_fits_in_its_place() {
    let (mut s, _) = bus(&["first", "second", "third"]);
    let head = size_of::<ListClientsOut>();
    let each = size_of::<ClientEntry>();
    let mut input = vec![0u8; size_of::<ListClientsIn>()];
    encode_list_clients(0, &mut input);
    let (r, out) = ask(
        &mut s,
        IOCTL_HCABUS_LIST_CLIENTS,
        &input,
        room_for(2, head, each),
    );
    assert_eq!(r, Reply::ok(head + 2 * each));
    assert_eq!((get_u32(&out, 0), get_u32(&out, 4)), (Some(3), Some(2)));
    let names: Vec<String> = (0..2)
        .map(|i| {
            let e = ClientEntry::decode(&out[head + i * each..]).expect("entry");
            e.name().to_string()
        })
        .collect();
    assert_eq!(names, ["first", "second"]);
}

/// READ_RESETS gives the newest summaries that fit, oldest first, each in its place.
#[test]
fn read_resets_gives_the_newest_that_fit_in_order() {
    let (mut s, ids) = bus(&["a"]);
    for _ in 0..3 {
        forced_reset(&mut s, &ids);
    }
    let head = size_of::<ReadResetsOut>();
    let each = size_of::<ResetSummaryOut>();
    let (r, out) = ask(
        &mut s,
        IOCTL_HCABUS_READ_RESETS,
        &empty(),
        room_for(2, head, each),
    );
    assert_eq!(r, Reply::ok(head + 2 * each));
    assert_eq!((get_u32(&out, 0), get_u64(&out, 8)), (Some(2), Some(3)));
    let ordinals: Vec<u64> = (0..2)
        .map(|i| {
            let s = ResetSummaryOut::decode(&out[head + i * each..]).expect("summary");
            s.ordinal
        })
        .collect();
    assert_eq!(ordinals, [2, 3]);
}

/// READ_LOG fills the whole records that fit, from the oldest asked for, each in its place.
#[test]
fn read_log_writes_each_record_that_fits_in_its_place() {
    let (mut s, ids) = bus(&["a"]);
    forced_reset(&mut s, &ids);
    let head = size_of::<ReadLogOut>();
    let mut input = vec![0u8; size_of::<ReadLogIn>()];
    encode_read_log(0, 0, &mut input);
    let (r, out) = ask(
        &mut s,
        IOCTL_HCABUS_READ_LOG,
        &input,
        room_for(3, head, RECORD_BYTES),
    );
    assert_eq!(r, Reply::ok(head + 3 * RECORD_BYTES));
    assert_eq!(get_u32(&out, 0), Some(3));
    let seqs: Vec<u64> = (0..3)
        .map(|i| {
            let at = head + i * RECORD_BYTES;
            let bytes: &[u8; RECORD_BYTES] = out[at..at + RECORD_BYTES].try_into().expect("whole");
            Record::decode(bytes).expect("a record").seq
        })
        .collect();
    let first = s.c().recorder().iter().next().expect("records").seq;
    assert_eq!(seqs, [first, first + 1, first + 2]);
}

fn reporter(s: &mut Stepper) -> u32 {
    let cap = size_of::<HealthOut>();
    let (r, out) = ask(s, IOCTL_HCABUS_QUERY_HEALTH, &empty(), cap);
    assert_eq!(r, Reply::ok(cap));
    HealthOut::decode(&out).expect("health").reporter_state
}

/// QUERY_HEALTH's reporter says Failed for a device a reset could not bring back and
/// Removed for one that is gone, whatever error is open.
#[test]
fn the_health_reporter_says_failed_and_removed() {
    let (mut s, ids) = bus(&["a"]);
    assert_eq!(reporter(&mut s), ReporterState::Healthy as u32);
    s.hca_mut().fail_next_resets(4);
    s.hca_mut().inject_catastrophic(0xbad);
    s.advance(1_000);
    for id in &ids {
        let epoch = s.c().epoch();
        let _ = s.call(|c, now| c.reset_execute(now, *id, epoch));
        s.pump();
    }
    s.advance(5_000);
    assert_eq!(s.c().state(), State::Failed);
    assert_eq!(reporter(&mut s), ReporterState::Failed as u32);
    s.call(|c, now| c.surprise_removal(now));
    s.pump();
    assert_eq!(reporter(&mut s), ReporterState::Removed as u32);
}

/// Where to ask next, when no record came back: from the oldest the ring still keeps for
/// a caller behind it, from the next to be written for one ahead of it.
#[test]
fn read_log_with_nothing_to_give_says_where_to_ask_next() {
    let (mut s, ids) = bus_with(&["a"], 16);
    forced_reset(&mut s, &ids);
    let (oldest, next) = {
        let rec = s.c().recorder();
        assert!(rec.dropped() > 0, "the ring wrapped");
        (rec.iter().next().expect("records").seq, rec.next_seq())
    };
    let head = size_of::<ReadLogOut>();
    let mut input = vec![0u8; size_of::<ReadLogIn>()];
    for (since, cap, want) in [(0, head, oldest), (next + 10, 4096, next)] {
        encode_read_log(since, 0, &mut input);
        let (r, out) = ask(&mut s, IOCTL_HCABUS_READ_LOG, &input, cap);
        assert_eq!(r, Reply::ok(head), "since {since}");
        let answer = ReadLogOut::decode(&out).expect("head");
        assert_eq!((answer.count, answer.next_seq), (0, want), "since {since}");
    }
}
