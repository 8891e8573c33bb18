//! Version 9: READ_BUNDLE, the diagnostic bundle the last failure kept (or one taken now),
//! on the simulator's host: what it holds, that the resets after it leave it alone, and every
//! malformed request and damaged bundle refused.

use hcabus::coordinator::bundle::*;
use hcabus::recorder::{RecordKind, RECORD_BYTES};
use hcabus::time::Duration;
use hcabus_sim::{Fault, SimHost, SimSetup};

use super::*;

/// Two clients; a reset at 1 s whose four assertions fail (the three soft ones and the FLR): the device
/// ends Failed; an administrator's restart at 5 s brings it back, a catastrophic error at
/// 8 s resets it again.
fn host() -> SimHost {
    let setup = SimSetup {
        name: "bundle".into(),
        duration: Duration::from_ms(20_000),
        faults: vec![
            (Instant::from_ms(1_000), Fault::ResetFails(4)),
            (Instant::from_ms(1_000), Fault::AdminReset),
            (Instant::from_ms(5_000), Fault::AdminRestart),
            (Instant::from_ms(8_000), Fault::Catastrophic),
        ],
        clients: ["ipoib", "storage"]
            .iter()
            .map(|name| {
                let desc = ClientDesc::new(name, ClientKind::Custom, ClientFlags::CAN_VETO);
                (desc.expect("a name"), hcabus_sim::Behavior::default())
            })
            .collect(),
        ..SimSetup::default()
    };
    SimHost::new(&setup).expect("setup")
}

fn request(which: u32) -> [u8; 16] {
    let mut input = [0u8; 16];
    encode_read_bundle(which, &mut input);
    input
}

/// READ_BUNDLE with `room` bytes of answer: the reply and what it wrote.
fn read(h: &mut SimHost, input: &[u8], room: usize) -> (Reply, Vec<u8>) {
    let mut out = vec![0u8; room];
    let r = h.ioctl(IOCTL_HCABUS_READ_BUNDLE, input, &mut out, Rights::READ);
    out.truncate(r.bytes);
    (r, out)
}

#[test]
fn a_failure_keeps_a_bundle_that_the_resets_after_it_leave_alone() {
    let mut h = host();
    h.run_until(Instant::from_ms(500));
    let (r, _) = read(&mut h, &request(BUNDLE_KEPT), BUNDLE_MAX_BYTES);
    assert_eq!(r.status, NtStatus::NOT_FOUND, "no failure yet");

    h.run_until(Instant::from_ms(2_000));
    assert_eq!(h.coordinator().state(), State::Failed);
    let (r, kept) = read(&mut h, &request(BUNDLE_KEPT), BUNDLE_MAX_BYTES);
    assert_eq!(r.status, NtStatus::SUCCESS);
    let b = read_bundle(&kept).expect("a bundle");
    assert_eq!(b.cause(), Some(BundleCause::Failed));
    assert_eq!(b.state(), Some(State::Failed));
    assert_eq!(b.fail_reason(), Some(FailReason::HardwareDead));
    assert_eq!(b.header.epoch, 1);
    assert_eq!(b.taken_at(), Instant::from_ms(1_000));
    let c = h.coordinator();
    let recorded: Vec<_> = c.recorder().iter().copied().collect();
    assert_eq!(b.records, recorded, "the whole record up to the failure");
    // It ends with the move to Failed and the clients told so.
    let failed = b.records.iter().rposition(|r| {
        matches!(
            r.kind,
            RecordKind::Transition {
                to: State::Failed,
                ..
            }
        )
    });
    let told = &b.records[failed.expect("the move to Failed") + 1..];
    assert_eq!(told.len(), 2);
    assert!(told.iter().all(|r| matches!(
        r.kind,
        RecordKind::Event {
            event: EventKind::ResetFailed,
            ..
        }
    )));
    assert_eq!(b.policy, c.policy().values().to_vec());
    let listed: Vec<_> = c
        .clients()
        .map(|i| hcabus::ioctl::ClientEntry::of(&i))
        .collect();
    assert!(!listed.is_empty());
    assert_eq!(b.clients, listed, "the client table, in registration order");
    assert_eq!(usize::from(b.header.client_count), listed.len());
    assert_eq!(
        (b.header.node_guid, b.header.device_id),
        (c.identity().node_guid, c.identity().device_id)
    );
    assert_eq!(b.header.driver_version[..5], *b"0.1.0");
    // The config space saved before the reset: the simulated function's PCI header.
    assert_eq!(b.header.config_bytes, 64);
    let config = b.header.config;
    let word = |at: usize| u16::from_le_bytes([config[at], config[at + 1]]);
    assert_eq!(
        (word(0x00), word(0x02), word(0x2C), word(0x2E)),
        (
            c.identity().vendor_id,
            c.identity().device_id,
            c.identity().subsys_vendor_id,
            c.identity().subsys_id
        )
    );
    assert_eq!((config[0x0B], config[0x0A]), (0x0C, 0x06), "InfiniBand");
    assert!(config[64..].iter().all(|b| *b == 0));

    // Restarted, reset again: the kept bundle is the failure's, byte for byte.
    h.run_until(Instant::from_ms(20_000));
    assert_eq!(h.coordinator().state(), State::Operational);
    assert!(h.coordinator().epoch().0 >= 3);
    let (_, again) = read(&mut h, &request(BUNDLE_KEPT), BUNDLE_MAX_BYTES);
    assert_eq!(again, kept);

    // One taken now is of the bus as it is, and leaves the kept one as it was.
    let (r, now) = read(&mut h, &request(BUNDLE_NOW), BUNDLE_MAX_BYTES);
    assert_eq!(r.status, NtStatus::SUCCESS);
    let n = read_bundle(&now).expect("a bundle");
    assert_eq!(n.cause(), Some(BundleCause::OnDemand));
    assert_eq!(n.state(), Some(State::Operational));
    assert_eq!(n.fail_reason(), None);
    assert_eq!(n.header.epoch, h.coordinator().epoch().0);
    assert_eq!(n.records.len(), h.coordinator().recorder().len());
    assert_eq!(
        read(&mut h, &request(BUNDLE_KEPT), BUNDLE_MAX_BYTES).1,
        kept
    );
}

/// A bundle keeps the last 256 records, no more, and says where they start.
#[test]
fn a_bundle_keeps_the_last_records_and_says_where_they_start() {
    let mut h = host();
    let mut at = 21_000;
    while h.coordinator().recorder().len() <= BUNDLE_RECORDS {
        h.run_until(Instant::from_ms(at));
        h.inject(Fault::AdminReset);
        at += 2_000;
    }
    h.run_until(Instant::from_ms(at));
    let (r, now) = read(&mut h, &request(BUNDLE_NOW), BUNDLE_MAX_BYTES);
    assert_eq!(r.status, NtStatus::SUCCESS);
    let b = read_bundle(&now).expect("a bundle");
    let all: Vec<_> = h.coordinator().recorder().iter().copied().collect();
    assert_eq!(b.records.len(), BUNDLE_RECORDS);
    assert_eq!(b.records[..], all[all.len() - BUNDLE_RECORDS..]);
    assert_eq!(b.header.first_seq, b.records[0].seq);
    assert_eq!(
        now.len(),
        bundle_bytes(h.coordinator().client_count(), BUNDLE_RECORDS)
    );
}

/// Each malformed request is refused with its status and writes nothing; a room too small
/// for the bundle is refused, not cut.
#[test]
fn malformed_requests_and_short_rooms_are_refused() {
    let mut h = host();
    h.run_until(Instant::from_ms(2_000));
    let mut bad_which = request(BUNDLE_NOW);
    put_u32(&mut bad_which, 8, 2);
    let mut reserved = request(BUNDLE_KEPT);
    put_u32(&mut reserved, 12, 1);
    let cases: [(&[u8], usize, NtStatus); 5] = [
        (&bad_which, BUNDLE_MAX_BYTES, NtStatus::INVALID_PARAMETER),
        (&reserved, BUNDLE_MAX_BYTES, NtStatus::INVALID_PARAMETER),
        (
            &request(BUNDLE_KEPT)[..12],
            BUNDLE_MAX_BYTES,
            NtStatus::INVALID_BUFFER_SIZE,
        ),
        (
            &request(BUNDLE_KEPT),
            size_of::<BundleHeader>() - 1,
            NtStatus::BUFFER_TOO_SMALL,
        ),
        (
            &request(BUNDLE_NOW),
            size_of::<BundleHeader>(),
            NtStatus::BUFFER_TOO_SMALL,
        ),
    ];
    for (input, room, status) in cases {
        let (r, out) = read(&mut h, input, room);
        assert_eq!((r.status, out.len()), (status, 0), "{input:?} into {room}");
    }
    let (r, _) = read(&mut h, &request(BUNDLE_KEPT), size_of::<BundleHeader>());
    assert_eq!(
        r.status,
        NtStatus::BUFFER_TOO_SMALL,
        "the kept one is not cut either"
    );
}

/// Bytes that are not one whole bundle are refused with what is wrong.
#[test]
fn a_damaged_bundle_does_not_read() {
    let mut h = host();
    h.run_until(Instant::from_ms(2_000));
    let (_, good) = read(&mut h, &request(BUNDLE_KEPT), BUNDLE_MAX_BYTES);
    assert!(read_bundle(&good).is_ok());
    let mut magic = good.clone();
    magic[0] = b'X';
    assert_eq!(read_bundle(&magic), Err(BundleError::Magic));
    let mut format = good.clone();
    format[8] = 9;
    assert_eq!(read_bundle(&format), Err(BundleError::Format(9)));
    assert!(matches!(
        read_bundle(&good[..good.len() - 1]),
        Err(BundleError::Length { .. })
    ));
    let mut longer = good.clone();
    longer.push(0);
    assert!(matches!(
        read_bundle(&longer),
        Err(BundleError::Length { .. })
    ));
    let first_record = good.len() - RECORD_BYTES * good_records(&good);
    let mut record = good.clone();
    // The first record's tag byte (its kind) made one no record has.
    record[first_record + 16] = 0xFF;
    assert_eq!(read_bundle(&record), Err(BundleError::Record(0)));
    assert_eq!(read_bundle(&[]), Err(BundleError::Magic));
    // Counts past the format's: refused before any length is computed from them.
    let mut clients = good.clone();
    clients[13] = 65;
    assert!(matches!(
        read_bundle(&clients),
        Err(BundleError::Count {
            field: "client_count",
            ..
        })
    ));
    let mut records = good.clone();
    records[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(
        read_bundle(&records),
        Err(BundleError::Count {
            field: "record_count",
            ..
        })
    ));
    let mut old = good.clone();
    old[8] = 1;
    assert!(
        matches!(read_bundle(&old), Err(BundleError::Count { most: 0, .. })),
        "a format 1 bundle has no client table"
    );
}

/// A bundle of format 1 (no client table; its count byte was reserved, 0) still reads.
#[test]
fn a_format_1_bundle_still_reads() {
    let mut h = host();
    h.run_until(Instant::from_ms(2_000));
    let (_, good) = read(&mut h, &request(BUNDLE_KEPT), BUNDLE_MAX_BYTES);
    let b = read_bundle(&good).expect("a bundle");
    let table_at = size_of::<BundleHeader>() + b.policy.len() * 8;
    let table_len = b.clients.len() * size_of::<hcabus::ioctl::ClientEntry>();
    assert!(table_len > 0);
    let mut old = good[..table_at].to_vec();
    old.extend_from_slice(&good[table_at + table_len..]);
    old[8] = 1;
    old[13] = 0;
    let v1 = read_bundle(&old).expect("format 1 reads");
    assert!(v1.clients.is_empty());
    assert_eq!((v1.records, v1.policy), (b.records, b.policy));
}

fn good_records(bytes: &[u8]) -> usize {
    read_bundle(bytes).expect("a bundle").records.len()
}
