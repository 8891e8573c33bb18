//! The IOCTL dispatcher on the virtual-time host with the whole stack: an administrator's
//! reset, a failed device restarted, faults injected, the log read back.

use hcabus::ioctl::*;
use hcabus::{Instant, State};
use hcabus_lab::stack;
use hcabus_lab::stack::Node;

const ALL: Rights = Rights::READ.union(Rights::WRITE);

fn ioctl(host: &mut Node, code: u32, input: &[u8], cap: usize) -> (Reply, Vec<u8>) {
    let mut out = vec![0u8; cap];
    let r = host.ioctl(code, input, &mut out, ALL);
    out.truncate(r.bytes);
    (r, out)
}

fn state(host: &mut Node) -> StateOut {
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let (r, out) = ioctl(
        host,
        IOCTL_HCABUS_QUERY_STATE,
        &input,
        size_of::<StateOut>(),
    );
    assert_eq!(r.status, NtStatus::SUCCESS);
    StateOut::decode(&out).expect("state")
}

fn quiet_host() -> Node {
    let mut setup = stack::boot_from_san_fast();
    setup.sim.faults.clear();
    setup.sim.duration = hcabus::Duration::from_ms(60_000);
    stack::build(&setup).expect("stack")
}

#[test]
fn an_administrator_reset_through_the_dispatcher_restores_the_host_under_load() {
    let mut host = quiet_host();
    host.run_until(Instant::from_ms(500));
    let mut input = [0u8; 80];
    RequestResetIn::new(ResetMode::Forced, "from a test").encode(&mut input);
    let (r, out) = ioctl(&mut host, IOCTL_HCABUS_REQUEST_RESET, &input, 8);
    assert_eq!(
        r,
        Reply {
            status: NtStatus::SUCCESS,
            bytes: 8
        }
    );
    assert_eq!(out, 1u64.to_le_bytes());
    assert_eq!(state(&mut host).flags & 1, 1, "a reset is in progress");
    host.run_until(Instant::from_ms(1_500));
    let s = state(&mut host);
    assert_eq!((state_name(s.state), s.epoch), ("Operational", 2));
    assert_eq!(s.last_result, 1, "Restored");
    assert_eq!(s.last_hw_reset_us, 200_000);
    let io = stack::io_stats(&host);
    assert_eq!((io.lost, io.duplicated, io.failed), (0, 0, 0), "{io:?}");
    // The log shows the administrator's reset, with the reason given.
    let mut input = [0u8; 24];
    encode_read_log(0, 0, &mut input);
    let size = hcabus::recorder::RECORD_BYTES;
    let (_, out) = ioctl(&mut host, IOCTL_HCABUS_READ_LOG, &input, 24 + size * 512);
    let count = u32::from_le_bytes(out[0..4].try_into().expect("4 bytes")) as usize;
    let admin = host
        .coordinator()
        .recorder()
        .iter()
        .find(|r| r.to_string().contains("admin_reset"))
        .expect("recorded");
    assert!(
        admin
            .to_string()
            .ends_with("admin_reset: \"from a test\"  [by handle (read-write)]"),
        "{admin}"
    );
    assert!(
        out[24..24 + count * size]
            .chunks(size)
            .any(|c| c == admin.encode()),
        "READ_LOG returns the admin_reset record"
    );
    // And the reset's summary: the phases, the reason, no one forced.
    let each = size_of::<ResetSummaryOut>();
    let (_, out) = ioctl(
        &mut host,
        IOCTL_HCABUS_READ_RESETS,
        &[8, 0, 0, 0, 5, 0, 0, 0],
        16 + 4 * each,
    );
    assert_eq!(
        u32::from_le_bytes(out[0..4].try_into().expect("4 bytes")),
        1
    );
    let summary = ResetSummaryOut::decode(&out[16..]).expect("a summary");
    assert_eq!(text_of(&summary.admin_reason), Some("from a test"));
    assert_eq!(result_name(summary.result), Some("Restored"));
    assert_eq!(summary.hw_reset_us, 200_000);
    assert_eq!((summary.epoch, summary.new_epoch), (1, 2));
    assert_eq!((summary.soft_attempts, summary.forced), (1, 0));
    assert!(summary.quiesce_us != NONE_U64 && summary.restore_us != NONE_U64);
}

#[test]
fn a_failed_device_is_restarted_through_the_dispatcher() {
    let mut host = quiet_host();
    let mut input = [0u8; size_of::<InjectFaultIn>()];
    // Three soft resets and the FLR fail: the device is Failed; the restart then works.
    encode_inject_fault(&FaultRequest::new(FaultCode::ResetFails, 4), &mut input);
    assert_eq!(
        ioctl(&mut host, IOCTL_HCABUS_INJECT_FAULT, &input, 0)
            .0
            .status,
        NtStatus::SUCCESS
    );
    encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut input);
    assert_eq!(
        ioctl(&mut host, IOCTL_HCABUS_INJECT_FAULT, &input, 0)
            .0
            .status,
        NtStatus::SUCCESS
    );
    host.run_until(Instant::from_ms(3_000));
    assert_eq!(host.coordinator().state(), State::Failed);
    let mut empty = [0u8; 8];
    encode_empty(&mut empty);
    let (r, _) = ioctl(&mut host, IOCTL_HCABUS_RESTART, &empty, 8);
    assert_eq!(r.status, NtStatus::SUCCESS);
    host.run_until(Instant::from_ms(4_000));
    let s = state(&mut host);
    assert_eq!((state_name(s.state), s.epoch), ("Operational", 2));
    // The disks come back after the restart and I/O flows; what the failure failed was
    // failed once, nothing was lost.
    let before = stack::io_stats(&host).completed;
    host.run_until(Instant::from_ms(5_000));
    let io = stack::io_stats(&host);
    assert!(io.completed > before + 1_000, "{io:?}");
    assert_eq!((io.lost, io.duplicated), (0, 0), "{io:?}");
}

fn inject(host: &mut Node, fault: FaultRequest) -> NtStatus {
    let mut input = [0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&fault, &mut input);
    ioctl(host, IOCTL_HCABUS_INJECT_FAULT, &input, 0).0.status
}

/// `(state, lid)` of ports 1 and 2 as QUERY_STATE gives them.
fn ports(host: &mut Node) -> [(u32, u32); 2] {
    state(host).ports.map(|p| (p.state, p.lid))
}

#[test]
fn a_cable_pull_by_ioctl_on_a_host_without_a_modelled_fabric_is_reported_and_ridden_through() {
    let mut host = quiet_host();
    host.run_until(Instant::from_ms(500));
    assert_eq!(ports(&mut host), [(0, 0); 2], "the fabric is not modelled");
    let busy = FaultRequest::new(FaultCode::TargetBusy, 2);
    assert_eq!(inject(&mut host, busy), NtStatus::SUCCESS);
    let pull = FaultRequest::port_down(1, 2_000);
    assert_eq!(inject(&mut host, pull), NtStatus::SUCCESS);
    // From this request on the ports are reported: port 1 Down, port 2 as it was.
    let [p1, p2] = ports(&mut host);
    assert_eq!((p1, p2.0), ((1, 0), 4), "Down; Active");
    host.run_until(Instant::from_ms(10_000));
    let [p1, _] = ports(&mut host);
    assert_eq!(p1.0, 4, "port 1 Active again after the cable is back");
    assert_eq!(state(&mut host).epoch, 1, "no reset");
    let io = stack::io_stats(&host);
    assert_eq!((io.lost, io.duplicated, io.failed), (0, 0, 0), "{io:?}");
    let disks: Vec<_> = hcabus_lab::stack::disks(&host)
        .map(|d| *d.disk().stats())
        .collect();
    assert!(
        disks.iter().any(|s| s.port_losses == 1),
        "a disk on port 1 lost its port: {disks:?}"
    );
    let busy: u32 = disks.iter().map(|s| s.logins_refused_busy).sum();
    assert_eq!(
        busy, 2,
        "the busy target refused the re-logins twice: {disks:?}"
    );
    assert_eq!(host.checker().violations, Vec::<String>::new());
}

#[test]
fn a_cable_pull_on_a_port_the_adapter_lacks_is_refused_and_changes_nothing() {
    let mut setup = hcabus_sim::SimSetup::default();
    setup.hca.ports = 1;
    let mut host = hcabus_lab::stack::scripted(&setup).expect("host");
    let before = host.coordinator().recorder().next_seq();
    let pull = FaultRequest::port_down(2, 1_000);
    assert_eq!(inject(&mut host, pull), NtStatus::INVALID_PARAMETER);
    // The refusal is the one record: an administrator's act, even one refused.
    let after: Vec<String> = host
        .coordinator()
        .recorder()
        .since(before)
        .map(|r| r.what().to_string())
        .collect();
    assert_eq!(
        after,
        ["fault port_down injected, port 2 for 1000 ms: refused by the device"]
    );
    assert_eq!(ports(&mut host), [(0, 0); 2]);
}

fn health(host: &mut Node) -> HealthOut {
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let (r, out) = ioctl(
        host,
        IOCTL_HCABUS_QUERY_HEALTH,
        &input,
        size_of::<HealthOut>(),
    );
    assert_eq!(r.status, NtStatus::SUCCESS);
    HealthOut::decode(&out).expect("health")
}

#[test]
fn query_health_shows_the_catastrophic_syndrome_the_poll_read_and_the_recovery() {
    let mut host = quiet_host();
    host.run_until(Instant::from_ms(2_500));
    let h = health(&mut host);
    assert_eq!(h.reporter_state, ReporterState::Healthy as u32);
    assert_eq!(
        h.counter_moved_us, 2_000_000,
        "the counter moved at the last read"
    );
    host.inject(hcabus_sim::Fault::Catastrophic);
    host.run_until(Instant::from_ms(3_000));
    let h = health(&mut host);
    assert_eq!(
        h.reporter_state,
        ReporterState::InError as u32,
        "found at 3 s"
    );
    assert_eq!((h.error_count, h.recover_count), (1, 0));
    assert_eq!(h.last_error_cause, hcabus::ResetReason::Catastrophic as u32);
    assert_eq!(
        h.last_syndrome, 0x0bad_0001,
        "the word the simulator writes"
    );
    assert_eq!(h.last_error_us, 3_000_000);
    host.run_until(Instant::from_ms(5_000));
    let h = health(&mut host);
    assert_eq!(h.reporter_state, ReporterState::Healthy as u32);
    assert_eq!((h.error_count, h.recover_count), (1, 1));
}

#[test]
fn query_health_says_failed_when_auto_recover_is_off() {
    let mut setup = stack::boot_from_san_fast();
    setup.sim.faults.clear();
    setup.sim.policy.auto_recover = false;
    let mut host = stack::build(&setup).expect("stack");
    host.inject(hcabus_sim::Fault::Hang);
    host.run_until(Instant::from_ms(10_000));
    let h = health(&mut host);
    assert_eq!(h.reporter_state, ReporterState::Failed as u32);
    assert_eq!(h.auto_recover, 0);
    assert_eq!((h.error_count, h.recover_count), (1, 0));
    assert!(
        [
            hcabus::ResetReason::HealthStall as u32,
            hcabus::ResetReason::CommandTimeout as u32
        ]
        .contains(&h.last_error_cause),
        "a hang is a stall or a command timeout, whichever is first: {h:?}"
    );
}

#[test]
fn a_reset_that_dies_in_the_hardware_still_reports_its_hardware_time() {
    let mut host = quiet_host();
    host.run_until(Instant::from_ms(500));
    let mut input = [0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&FaultRequest::new(FaultCode::NeverReturns, 0), &mut input);
    let (r, _) = ioctl(&mut host, IOCTL_HCABUS_INJECT_FAULT, &input, 0);
    assert_eq!(r.status, NtStatus::SUCCESS);
    let mut input = [0u8; 80];
    RequestResetIn::new(ResetMode::Forced, "").encode(&mut input);
    ioctl(&mut host, IOCTL_HCABUS_REQUEST_RESET, &input, 8);
    let window_ms = host.coordinator().policy().auto_restart_window_ms;
    host.run_until(Instant::from_ms(2_000 + window_ms));
    let s = state(&mut host);
    assert_eq!(state_name(s.state), "Failed");
    assert_ne!(
        s.last_hw_reset_us, NONE_U64,
        "the time in the hardware is shown"
    );
    let each = size_of::<ResetSummaryOut>();
    let (_, out) = ioctl(
        &mut host,
        IOCTL_HCABUS_READ_RESETS,
        &[8, 0, 0, 0, 5, 0, 0, 0],
        16 + each,
    );
    let summary = ResetSummaryOut::decode(&out[16..]).expect("a summary");
    assert_eq!(summary.hw_reset_us, s.last_hw_reset_us);
    assert!(
        summary.hw_reset_us >= window_ms * 1000 * 9 / 10,
        "nearly the whole auto-restart window: {}",
        summary.hw_reset_us
    );
    assert_eq!(summary.restore_us, NONE_U64, "never restored");
    assert!(
        summary.soft_attempts > 1,
        "retried: {}",
        summary.soft_attempts
    );
    assert_ne!(summary.flags & SUMMARY_FLR, 0, "and a function-level reset");
}

#[test]
fn an_idle_minute_of_health_polls_is_one_record_not_sixty() {
    let mut host = quiet_host();
    let before = host.coordinator().recorder().next_seq();
    host.run_until(Instant::from_ms(60_000));
    let rec = host.coordinator().recorder();
    let polls: Vec<_> = rec
        .since(before)
        .filter(|r| {
            matches!(
                r.kind,
                hcabus::recorder::RecordKind::Hw {
                    step: hcabus::hca::HwStep::ReadHealth,
                    ..
                }
            )
        })
        .collect();
    let reads: u32 = polls.iter().map(|r| r.count).sum();
    assert!(reads >= 55, "about one read a second: {reads}");
    assert!(
        polls.len() <= 2,
        "repeats are counted, not written: {} records for {reads} reads",
        polls.len()
    );
    let newest = polls.last().expect("a poll record");
    assert!(newest.last_at > newest.at, "first and last time kept");
    assert!(rec.coalesced() >= u64::from(reads) - 2);
}

/// QUERY_COUNTERS: the host counts its clients' I/O by kind as `rdma statistic` gives a
/// device's counters, and every kind's accounting closes (submitted = completed + failed +
/// held); the reset's link downs and the disks' logins are there.
#[test]
fn query_counters_gives_the_stacks_io_by_kind_through_a_reset() {
    let mut host = stack::build(&stack::boot_from_san()).expect("the default stack");
    host.run();
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let (r, out) = ioctl(
        &mut host,
        IOCTL_HCABUS_QUERY_COUNTERS,
        &input,
        size_of::<CountersOut>(),
    );
    assert_eq!(r.status, NtStatus::SUCCESS);
    let c = CountersOut::decode(&out).expect("counters");
    assert_eq!(c.source, COUNTERS_FROM_HOST);
    let kind = |k: hcabus::types::ClientKind| c.kinds[k as usize];
    use hcabus::types::ClientKind::{BootDisk, Ipoib, Srp, Uverbs};
    for (k, clients) in [(BootDisk, 1), (Srp, 1), (Ipoib, 2), (Uverbs, 1)] {
        let n = kind(k);
        assert_eq!(n.clients, clients, "{k:?}");
        assert!(n.completed > 0, "{k:?}: {n:?}");
        assert_eq!(n.submitted, n.completed + n.failed + n.held, "{k:?}: {n:?}");
    }
    // The report agrees: the disks' I/O and logins, the network's sends and drops.
    let io = stack::io_stats(&host);
    let disks = kind(BootDisk).completed + kind(Srp).completed;
    assert_eq!(
        (disks, kind(BootDisk).failed + kind(Srp).failed),
        (io.completed, io.failed)
    );
    let net = stack::net_stats(&host);
    assert_eq!(
        (kind(Ipoib).completed, kind(Ipoib).failed),
        (net.sent, net.dropped)
    );
    assert_eq!(
        (c.logins, c.logins_refused),
        (4, 0),
        "each disk logged in twice"
    );
    assert_eq!(c.link_downed, [1, 1], "the reset took each link down once");
    assert_eq!((c.failovers, c.commands_moved), (0, 0), "one path each");
}
