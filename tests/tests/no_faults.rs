//! docs/design.md §6: the reset path never page-faults. On the virtual-time host, after one warm-up
//! reset, a whole reset window (RESET fan-out, every execute, the hardware sequence, the
//! restore, RESET_END fan-out, the invariant checks and the flight records) takes no minor
//! page fault on the thread that runs it: every buffer it writes was reserved and touched
//! at start. Counted from `/proc/thread-self/stat` (getrusage's RUSAGE_THREAD figure), so
//! the harness's other threads do not count. (Automatic NUMA balancing's hinting faults
//! would count as minor faults too; it is off on a one-node machine such as CI's.)

#![cfg(target_os = "linux")]

use hcabus::{Duration, Instant};
use hcabus_sim::bench::{bench_setup, FaultCounter, FaultScope};
use hcabus_sim::{Fault, SimHost};

/// Faults taken by this thread while `f` runs.
fn faults_in(f: impl FnOnce()) -> u64 {
    let mut counter = FaultCounter::new(FaultScope::Thread);
    // Twice, so the first reading's own first-time work is behind us.
    let _ = counter.read();
    let before = counter.read().expect("/proc/thread-self/stat");
    f();
    let after = counter.read().expect("/proc/thread-self/stat");
    after - before
}

fn reset_window(host: &mut SimHost) {
    let epoch = host.coordinator().epoch();
    host.inject(Fault::AdminReset);
    let until = host.now() + Duration::from_ms(1_000);
    host.run_until(until);
    assert_eq!(
        host.coordinator().epoch().0,
        epoch.0 + 1,
        "the reset concluded"
    );
}

fn no_fault_after_warm_up(clients: usize, reregister: bool) {
    let mut host = SimHost::new(&bench_setup(clients, reregister)).expect("setup");
    host.run_until(Instant::from_ms(100));
    reset_window(&mut host);
    // Several windows: a ring reserved but not touched faults a little further each time.
    for k in 0..8 {
        let faults = faults_in(|| reset_window(&mut host));
        assert_eq!(
            faults, 0,
            "{clients} clients (re-registering: {reregister}): page faults in warm reset window {k}"
        );
    }
    assert!(host.checker().violations.is_empty());
}

#[test]
fn a_warm_reset_window_takes_no_page_fault() {
    for clients in [1, 64, 1024] {
        no_fault_after_warm_up(clients, false);
    }
}

#[test]
fn a_warm_reset_window_of_re_registering_clients_takes_no_page_fault() {
    no_fault_after_warm_up(256, true);
}

/// The counter is real: a window that writes fresh pages is seen.
#[test]
fn fresh_pages_written_in_a_window_are_counted() {
    let mut keep = Vec::new();
    let faults = faults_in(|| {
        // Above glibc's largest mmap threshold (32 MiB), so a new mapping: memory another
        // test freed, already mapped, would fault nothing.
        let mut v: Vec<u8> = Vec::with_capacity(64 << 20);
        for i in (0..1 << 22).step_by(4096) {
            v.spare_capacity_mut()[i].write(1);
        }
        keep.push(v);
    });
    // Transparent huge pages may map several pages per fault: at least one is seen.
    assert!(faults > 0, "{faults} faults for 1,024 fresh pages");
}
