//! The IOCTL dispatcher on the virtual-time host with the whole stack: an administrator's
//! reset, a failed device restarted, faults injected, the log read back.

use hcabus::ioctl::*;
use hcabus::sim::SimHost;
use hcabus::{Instant, State};
use ibal::stack;

const ALL: Rights = Rights::READ.union(Rights::WRITE);

fn ioctl(host: &mut SimHost, code: u32, input: &[u8], cap: usize) -> (Reply, Vec<u8>) {
    let mut out = vec![0u8; cap];
    let r = host.ioctl(code, input, &mut out, ALL);
    out.truncate(r.bytes);
    (r, out)
}

fn state(host: &mut SimHost) -> StateOut {
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

fn quiet_host() -> SimHost {
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
    // The log shows the administrator's reset.
    let mut input = [0u8; 24];
    encode_read_log(0, 0, &mut input);
    let (_, out) = ioctl(&mut host, IOCTL_HCABUS_READ_LOG, &input, 24 + 64 * 512);
    let count = u32::from_le_bytes(out[0..4].try_into().expect("4 bytes")) as usize;
    let admin = host
        .coordinator()
        .recorder()
        .iter()
        .find(|r| r.to_string().contains("admin_reset"))
        .expect("recorded");
    assert!(
        out[24..24 + count * 64]
            .chunks(64)
            .any(|c| c == admin.encode()),
        "READ_LOG returns the admin_reset record"
    );
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

fn inject(host: &mut SimHost, fault: FaultRequest) -> NtStatus {
    let mut input = [0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(&fault, &mut input);
    ioctl(host, IOCTL_HCABUS_INJECT_FAULT, &input, 0).0.status
}

/// `(state, lid)` of ports 1 and 2 as QUERY_STATE gives them.
fn ports(host: &mut SimHost) -> [(u32, u32); 2] {
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
    let disks: Vec<_> = host
        .agents_of::<ibal::disk::SrpClient>()
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
    assert!(
        host.checker().violations.is_empty(),
        "{:?}",
        host.checker().violations
    );
}

#[test]
fn a_cable_pull_on_a_port_the_adapter_lacks_is_refused_and_changes_nothing() {
    let mut setup = hcabus::sim::SimSetup::default();
    setup.hca.ports = 1;
    let mut host = SimHost::new(&setup).expect("host");
    let before = host.flight_record_bytes();
    let pull = FaultRequest::port_down(2, 1_000);
    assert_eq!(inject(&mut host, pull), NtStatus::INVALID_PARAMETER);
    assert_eq!(host.flight_record_bytes(), before);
    assert_eq!(ports(&mut host), [(0, 0); 2]);
}

fn health(host: &mut SimHost) -> HealthOut {
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
    host.inject(hcabus::sim::Fault::Catastrophic);
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
    host.inject(hcabus::sim::Fault::Hang);
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
