//! Version 7: QUERY_STATE's wall clock, ports as `ibstat` shows them and resets by reason;
//! every administrator's act a flight-recorder record naming who asked.

use super::*;
use hcabus::recorder::{Record, RecordKind};
use std::mem::offset_of;

fn policy_in(p: &Policy) -> Vec<u8> {
    let mut input = vec![0u8; size_of::<SetPolicyIn>()];
    encode_set_policy(&PolicyAbi::from_policy(p), &mut input);
    input
}

fn records(d: &Dev) -> Vec<Record> {
    d.coord.recorder().iter().copied().collect()
}

const ADMIN: Caller = Caller {
    rights: ALL,
    uid: Some(1000),
};

#[test]
fn query_state_gives_the_wall_clock_of_time_zero_as_the_host_reads_it_now() {
    let mut d = dev();
    d.now = Instant::from_ms(2_500);
    let (_, out) = query_state(&mut d);
    let s = StateOut::decode(&out).expect("state");
    assert_eq!(
        s.time_zero_unix_ms, 0,
        "no wall clock: unknown, never made up"
    );
    d.wall_ms = Some(1_795_564_802_500);
    let (_, out) = query_state(&mut d);
    let s = StateOut::decode(&out).expect("state");
    assert_eq!(
        s.time_zero_unix_ms, 1_795_564_800_000,
        "now less the bus's 2.5 s"
    );
    // A version-6 caller gets its 184 bytes: nothing of version 7.
    let mut v6 = empty();
    put_u16(&mut v6, offset_of!(InputHeader, version), 6);
    let (r, _) = call(&mut d, IOCTL_HCABUS_QUERY_STATE, &v6, 512, ALL);
    assert_eq!((r.status, r.bytes), (NtStatus::SUCCESS, STATE_V6_BYTES));
}

#[test]
fn query_state_gives_each_port_as_ibstat_shows_it() {
    let mut d = dev();
    let attrs = PortAttrs {
        state: PortState::Active,
        phys: PhysState::LinkUp,
        lid: 0x12,
        sm_lid: 1,
        width: 4,
        speed: Some(LinkSpeed::Edr),
        gid: default_gid(0x0002_c903_0010_f5e0, 2),
    };
    d.coord.port_changed(d.now, 2, attrs).expect("port 2");
    let (_, out) = query_state(&mut d);
    let s = StateOut::decode(&out).expect("state");
    assert_eq!(
        s.port_info[0],
        PortInfoOut::default(),
        "port 1 never reported"
    );
    let p = s.port_info[1];
    assert_eq!(
        (p.state, p.phys_state, p.lid, p.sm_lid),
        (PortState::Active as u32, PhysState::LinkUp as u32, 0x12, 1)
    );
    assert_eq!(
        (p.width, p.speed, p.rate_mbps),
        (4, LinkSpeed::Edr as u32, 100_000)
    );
    assert_eq!(p.gid, attrs.gid);
    assert_eq!(
        s.ports[1],
        PortOut {
            state: 4,
            lid: 0x12
        },
        "version 3's view agrees"
    );
}

#[test]
fn query_state_counts_resets_by_reason() {
    let mut d = dev();
    let (r, _) = call(&mut d, IOCTL_HCABUS_REQUEST_RESET, &reset_in(0), 8, ALL);
    assert_eq!(r.status, NtStatus::SUCCESS);
    let (_, out) = query_state(&mut d);
    let s = StateOut::decode(&out).expect("state");
    let forced = ResetReason::AdminForced as usize;
    assert_eq!(s.resets_by_reason[forced], 1);
    assert_eq!(s.resets_by_reason.iter().sum::<u64>(), s.resets_started);
}

#[test]
fn a_policy_change_is_recorded_key_by_key_with_old_and_new_values_and_who_asked() {
    let mut d = dev();
    let mut p = *d.coord.policy();
    let old = p.quiesce_deadline_ms;
    p.quiesce_deadline_ms = 2_000;
    p.auto_recover = !p.auto_recover;
    let mut out = vec![0u8; size_of::<SetPolicyOut>()];
    let r = dispatch(
        &mut d,
        IOCTL_HCABUS_SET_POLICY,
        &policy_in(&p),
        &mut out,
        ADMIN,
    );
    assert_eq!(r.status, NtStatus::SUCCESS);
    let changes: Vec<(RecordKind, Actor)> = records(&d)
        .iter()
        .filter(|r| matches!(r.kind, RecordKind::PolicyChanged { .. }))
        .map(|r| (r.kind, r.by))
        .collect();
    let by = Actor::Local {
        uid: 1000,
        rights: 3,
    };
    let key = |name| Policy::KEYS.iter().position(|k| *k == name).expect("a key") as u8;
    let flag = |on: bool| u64::from(on);
    assert_eq!(
        changes,
        [
            (
                RecordKind::PolicyChanged {
                    key: key("quiesce_deadline_ms"),
                    old,
                    new: 2_000
                },
                by
            ),
            (
                RecordKind::PolicyChanged {
                    key: key("auto_recover"),
                    old: flag(!p.auto_recover),
                    new: flag(p.auto_recover)
                },
                by
            ),
        ]
    );
    let line = records(&d)
        .iter()
        .find(|r| matches!(r.kind, RecordKind::PolicyChanged { .. }))
        .map(Record::to_string)
        .unwrap_or_default();
    assert!(
        line.ends_with(&format!(
            "policy quiesce_deadline_ms: {old} -> 2000  [by uid 1000 (read-write)]"
        )),
        "{line}"
    );
}

#[test]
fn a_refused_policy_and_a_refused_restart_are_recorded_with_who_asked() {
    let mut d = dev();
    let mut p = *d.coord.policy();
    p.quiesce_deadline_ms = 0;
    let mut out = vec![0u8; size_of::<SetPolicyOut>()];
    dispatch(
        &mut d,
        IOCTL_HCABUS_SET_POLICY,
        &policy_in(&p),
        &mut out,
        ADMIN,
    );
    let r = dispatch(&mut d, IOCTL_HCABUS_RESTART, &empty(), &mut [0u8; 8], ADMIN);
    assert_eq!(r.status, NtStatus::INVALID_DEVICE_REQUEST, "not Failed");
    let refused: Vec<(Call, Actor)> = records(&d)
        .iter()
        .filter_map(|r| match r.kind {
            RecordKind::Refused {
                client: None, call, ..
            } => Some((call, r.by)),
            _ => None,
        })
        .collect();
    let by = ADMIN.actor();
    assert_eq!(
        refused,
        [(Call::SetPolicy, by), (Call::AdminRestart, by)],
        "both refusals, each naming the administrator"
    );
    assert!(
        !records(&d)
            .iter()
            .any(|r| matches!(r.kind, RecordKind::PolicyChanged { .. })),
        "a refused policy changes nothing"
    );
    // What a reader sends leaves no actor behind: the next record is nobody's.
    query_state(&mut d);
    d.coord
        .port_changed(d.now, 1, PortAttrs::bare(PortState::Down, 0))
        .expect("port 1");
    assert_eq!(records(&d).last().map(|r| r.by), Some(Actor::Nobody));
}

#[test]
fn an_injected_fault_is_recorded_accepted_or_refused() {
    let mut d = dev();
    let mut input = vec![0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&FaultRequest::port_down(2, 1_500), &mut input);
    let r = dispatch(&mut d, IOCTL_HCABUS_INJECT_FAULT, &input, &mut [], ADMIN);
    assert_eq!(r.status, NtStatus::SUCCESS);
    d.simulator = false;
    dispatch(&mut d, IOCTL_HCABUS_INJECT_FAULT, &input, &mut [], ADMIN);
    let said: Vec<String> = records(&d)
        .iter()
        .filter(|r| matches!(r.kind, RecordKind::FaultInjected { .. }))
        .map(|r| r.what().to_string())
        .collect();
    assert_eq!(
        said,
        [
            "fault port_down injected, port 2 for 1500 ms",
            "fault port_down injected, port 2 for 1500 ms: refused by the device",
        ]
    );
}

#[test]
fn query_counters_is_not_supported_by_a_device_that_counts_no_clients() {
    let mut d = dev();
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_QUERY_COUNTERS,
        &empty(),
        size_of::<CountersOut>(),
        Rights::READ,
    );
    assert_eq!(r.status, NtStatus::NOT_SUPPORTED);
    let (r, _) = call(
        &mut d,
        IOCTL_HCABUS_QUERY_COUNTERS,
        &empty(),
        16,
        Rights::READ,
    );
    assert_eq!(
        r.status,
        NtStatus::BUFFER_TOO_SMALL,
        "the room is checked first"
    );
}

#[test]
fn every_order_to_a_removed_device_is_refused_recorded_and_counted_as_the_administrators() {
    let mut d = dev();
    d.coord.surprise_removal(d.now);
    discard_actions(&mut d.coord);
    let before = d.coord.counters().admin_refusals;
    let seq = d.coord.recorder().next_seq();
    let mut inject = vec![0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut inject);
    let requests: [(u32, Vec<u8>); 4] = [
        (IOCTL_HCABUS_REQUEST_RESET, reset_in(0)),
        (IOCTL_HCABUS_RESTART, empty()),
        (IOCTL_HCABUS_SET_POLICY, policy_in(&Policy::default())),
        (IOCTL_HCABUS_INJECT_FAULT, inject),
    ];
    for (code, input) in &requests {
        let r = dispatch(&mut d, *code, input, &mut [0u8; 128], ADMIN);
        assert_eq!(r.status, NtStatus::INVALID_DEVICE_REQUEST, "{code:#x}");
    }
    assert_eq!(
        d.coord.counters().admin_refusals,
        before + 3,
        "reset, restart, policy"
    );
    let said: Vec<(String, Actor)> = d
        .coord
        .recorder()
        .since(seq)
        .filter(|r| !matches!(r.kind, RecordKind::Call { .. }))
        .map(|r| (r.what().to_string(), r.by))
        .collect();
    let by = ADMIN.actor();
    assert_eq!(
        said,
        [
            ("admin_reset refused: device removed".into(), by),
            ("admin_restart refused: device removed".into(), by),
            ("set_policy refused: device removed".into(), by),
            (
                "fault catastrophic injected: refused by the device".into(),
                by
            ),
        ]
    );
    assert_eq!(d.coord.state(), State::Removed, "nothing landed");
}

/// Every NTSTATUS the interface returns is printed by its own name (hcactl says which one).
#[test]
fn every_status_the_interface_returns_has_its_own_name() {
    let all = [
        NtStatus::SUCCESS,
        NtStatus::INVALID_BUFFER_SIZE,
        NtStatus::BUFFER_TOO_SMALL,
        NtStatus::INVALID_DEVICE_REQUEST,
        NtStatus::REVISION_MISMATCH,
        NtStatus::ACCESS_DENIED,
        NtStatus::INVALID_PARAMETER,
        NtStatus::NOT_SUPPORTED,
        NtStatus::DEVICE_BUSY,
        NtStatus::DEVICE_REMOVED,
        NtStatus::DEVICE_NOT_READY,
    ];
    let names: std::collections::BTreeSet<&str> = all.iter().map(|s| s.name()).collect();
    assert_eq!(names.len(), all.len(), "{names:?}");
    assert!(names
        .iter()
        .all(|n| n.starts_with("STATUS_") && *n != "STATUS_UNKNOWN"));
    assert_eq!(NtStatus(0xC000_0001).name(), "STATUS_UNKNOWN");
    assert!(NtStatus::SUCCESS.is_success() && !NtStatus::DEVICE_BUSY.is_success());
}

/// docs/ioctl.md's errors table says which versions are served, as the dispatcher serves
/// them: the oldest and the newest taken, one either side refused.
#[test]
fn the_errors_table_names_the_versions_the_dispatcher_serves() {
    let doc = include_str!("../../../../docs/ioctl.md");
    let row = format!(
        "| `version` is not {ABI_VERSION_MIN} to {ABI_VERSION} | `STATUS_REVISION_MISMATCH`"
    );
    assert!(doc.contains(&row), "docs/ioctl.md lacks {row:?}");
    let mut d = dev();
    for (version, status) in [
        (ABI_VERSION_MIN - 1, NtStatus::REVISION_MISMATCH),
        (ABI_VERSION_MIN, NtStatus::SUCCESS),
        (ABI_VERSION, NtStatus::SUCCESS),
        (ABI_VERSION + 1, NtStatus::REVISION_MISMATCH),
    ] {
        let mut input = empty();
        put_u16(&mut input, offset_of!(InputHeader, version), version);
        let (r, _) = call(&mut d, IOCTL_HCABUS_QUERY_STATE, &input, 512, ALL);
        assert_eq!(r.status, status, "version {version}");
    }
}
