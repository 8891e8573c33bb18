//! Several adapters in one host and a boot disk with a path through each (docs/design.md §7
//! "Multipath", §9 `[[hcas]]`): failover at RESET, the hold queue only with no path, every
//! I/O exactly once.

use hcabus::bus::ClientReport;
use hcabus::types::EventKind;
use hcabus::{Duration, Instant};
use hcabus_lab::srp_target::Route;
use hcabus_lab::stack::{self, ClientSpec, MultiNode, MultiSetup};
use hcabus_sim::Fault;
use ibal::disk::{PathTimeout, SrpClient};

fn run(setup: &MultiSetup) -> MultiNode {
    let mut world = stack::build_multi(setup).expect("valid host");
    world.run();
    world
}

fn boot_paths(world: &MultiNode) -> Vec<(&str, &SrpClient)> {
    let disks = stack::multipath_disks(world);
    assert_eq!(disks.len(), 1, "one multipath disk");
    disks.into_iter().next().expect("one").1
}

/// The boot disk's own accounting, and its queue's statistics.
fn boot_disk(world: &MultiNode) -> (ibal::io::IoStats, ibal::multipath::MultipathStats) {
    let disks = stack::multipath_disks(world);
    let (mp, paths) = &disks[0];
    let live = paths.iter().any(|(_, c)| c.is_live_path());
    let mp = mp.lock();
    let io = mp.io_stats(live, |id| paths.iter().any(|(_, c)| c.disk().tracks(id)));
    (io, mp.stats())
}

fn assert_exactly_once(world: &MultiNode) {
    assert_io_once(world);
    let (checked, violated) = world.invariants();
    assert!(checked > 0);
    assert_eq!(violated, Vec::<String>::new());
}

/// Every I/O completed or failed exactly once, none lost, every read what was last written.
fn assert_io_once(world: &MultiNode) {
    let io = stack::io_stats_all(world);
    assert_eq!(io.lost, 0, "{io:?}");
    assert_eq!(io.duplicated, 0, "{io:?}");
    assert_eq!(io.read_mismatches, 0, "{io:?}");
    assert_eq!(io.unaccounted(), 0, "{io:?}");
    let (_, violated) = world.invariants();
    assert_eq!(violated, Vec::<String>::new());
}

#[test]
fn the_boot_disk_fails_over_at_reset_and_uses_both_paths_again() {
    let world = run(&stack::boot_from_san_multipath());
    assert_exactly_once(&world);
    let resets = world.resets();
    assert_eq!(resets.len(), 1, "only hca0 resets");
    assert_eq!(resets[0].hca.as_deref(), Some("hca0"));
    assert_eq!(resets[0].outcome(), "Restored");
    // The path's request started it; the catastrophic error found while quiescing joined
    // it, and is the graver reason.
    assert_eq!(resets[0].reason.as_str(), "catastrophic", "{:?}", resets[0]);
    let paths = boot_paths(&world);
    let [(a, p0), (b, p1)] = paths[..] else {
        panic!("two paths: {paths:?}");
    };
    assert_eq!((a, b), ("hca0", "hca1"));
    assert_eq!(
        p0.events(),
        [
            EventKind::Reset,
            EventKind::ResetEnd,
            EventKind::PortActive,
            EventKind::PortActive
        ]
    );
    assert!(
        p1.events().is_empty(),
        "hca1 never reset: {:?}",
        p1.events()
    );
    let disks = stack::multipath_disks(&world);
    let mp = disks[0].0.lock();
    let (s0, s1) = (
        mp.path_stats(0).expect("path 0"),
        mp.path_stats(1).expect("1"),
    );
    // The dead adapter held its oldest command 100 ms (path_io_timeout) while hca1 answered:
    // fast path failover gave it up to hca1, and since the adapter had completed none of
    // its sends, the path asked for the adapter's reset at once, half a second before the
    // health poll would have found the error; the RESET moved the rest.
    assert_eq!(s0.slow_failovers, 1, "{s0:?}");
    assert!(s0.given_up >= 1, "{s0:?}");
    // Everything stuck was given up; the path then took only probes, one at a time, and
    // the RESET moved at most those (a whole request limit, 32, before the probes).
    assert!(s0.failovers <= 1, "{s0:?}");
    assert!(
        (s0.given_up..=s0.given_up + s0.probes).contains(&s0.moved),
        "{s0:?}"
    );
    assert_eq!((s1.failovers, s1.slow_failovers), (0, 0), "{s1:?}");
    assert!(
        s0.down_us > 3_000_000,
        "hca0's path was down for seconds: {s0:?}"
    );
    assert!(
        mp.path_up(0) && mp.path_up(1),
        "both paths serve at the end"
    );
    assert_eq!(mp.stats().no_path_us, 0, "never without a path");
    drop(mp);
    // Both paths carried I/O after the reset too: the last second of I/O is shared.
    let (io, _) = boot_disk(&world);
    assert_eq!(io.failed, 0, "{io:?}");
    assert!(s0.ios > 1_000 && s1.ios > 1_000, "{s0:?} {s1:?}");
}

#[test]
fn the_multipath_boot_disk_waits_far_less_than_the_single_path_one() {
    let mut host = stack::build(&stack::boot_from_san()).expect("valid");
    host.run();
    let boot = hcabus_lab::stack::disks(&host).find(|d| d.name() == "bootdisk");
    let single = boot.expect("boot disk").io_stats().max_latency_us;
    let multi = boot_disk(&run(&stack::boot_from_san_multipath()))
        .0
        .max_latency_us;
    // The single path waits for detection, the device, the link and the subnet manager;
    // the multipath one only for detection, after which its commands move at once.
    assert!(single > 4_000_000, "single path: {single} us");
    assert!(multi < 1_000_000, "multipath: {multi} us");
}

#[test]
fn both_adapters_reset_at_once_hold_the_io_until_a_path_is_back() {
    let mut setup = stack::boot_from_san_multipath();
    setup.adapters[1]
        .stack
        .sim
        .faults
        .push((Instant::from_ms(1_400), Fault::Catastrophic));
    let world = run(&setup);
    assert_exactly_once(&world);
    assert_eq!(world.resets().len(), 2);
    let (io, stats) = boot_disk(&world);
    assert_eq!(io.failed, 0, "the paging path holds: {io:?}");
    assert!(stats.no_path_us > 3_000_000, "{stats:?}");
    assert!(stats.max_held > 0, "the hold queue was used: {stats:?}");
}

#[test]
fn a_path_whose_adapter_is_replaced_is_dropped_and_nothing_fails() {
    let mut setup = stack::boot_from_san_multipath();
    setup.adapters[0]
        .stack
        .sim
        .faults
        .insert(0, (Instant::from_ms(1_000), Fault::DeviceReplaced));
    let world = run(&setup);
    assert_exactly_once(&world);
    let resets = world.resets();
    assert_eq!(resets.len(), 1);
    assert_eq!(resets[0].outcome(), "DeviceReplaced");
    // The new adapter is PnP's to bring up as a new device; the disk carries on through
    // hca1 and fails nothing, where a single path would fail everything it held.
    let (io, _) = boot_disk(&world);
    assert_eq!(io.failed, 0, "{io:?}");
    assert!(io.completed > 10_000, "{io:?}");
    let disks = stack::multipath_disks(&world);
    let mp = disks[0].0.lock();
    assert!(mp.path_dead(0), "hca0's path is gone");
    assert!(mp.path_up(1), "hca1's path serves");
    // The replaced device stopped answering: its commands went to hca1 once past the
    // path's learned timeout (fast path failover); the path then took only probes, so
    // the RESET it asked for moved at most those.
    let s0 = mp.path_stats(0).expect("path 0");
    assert_eq!(s0.slow_failovers, 1, "{s0:?}");
    assert!(s0.given_up >= 1 && s0.failovers <= 1, "{s0:?}");
    assert!(
        (s0.given_up..=s0.given_up + s0.probes).contains(&s0.moved),
        "{s0:?}"
    );
}

#[test]
fn a_run_is_the_same_for_a_seed() {
    let a = run(&stack::boot_from_san_multipath());
    let b = run(&stack::boot_from_san_multipath());
    for ((_, x), (_, y)) in a.hosts().iter().zip(b.hosts()) {
        assert_eq!(x.flight_record_bytes(), y.flight_record_bytes());
    }
    assert_eq!(boot_disk(&a), boot_disk(&b));
}

/// Random faults on both adapters (every kind, cables pulled, slow fabrics, short hold
/// timeouts): every I/O exactly once, no invariant broken. `HCABUS_RANDOM_SEEDS` runs more.
#[test]
fn random_faults_on_both_adapters_never_lose_duplicate_or_corrupt_io() {
    let seeds: u64 = std::env::var("HCABUS_RANDOM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let mut failovers = 0;
    for seed in 0..seeds {
        let world = run(&stack::random_multipath(seed));
        let io = stack::io_stats_all(&world);
        let what = format!("seed {seed}: {io:?}");
        assert_eq!(
            (io.lost, io.duplicated, io.read_mismatches),
            (0, 0, 0),
            "{what}"
        );
        assert_eq!(io.unaccounted(), 0, "{what}");
        let (_, violated) = world.invariants();
        assert!(violated.is_empty(), "seed {seed}: {violated:?}");
        for r in world.resets() {
            assert_eq!(r.allocations, None, "no probe in this suite");
        }
        let disks = stack::multipath_disks(&world);
        let mp = disks[0].0.lock();
        failovers += (0..2)
            .filter_map(|p| mp.path_stats(p))
            .map(|s| s.failovers)
            .sum::<u32>();
    }
    // Many faults strike a path with nothing in flight, or are vetoed: 1,500 seeds made
    // 664 failovers.
    assert!(
        u64::from(failovers) * 4 >= seeds,
        "the faults made paths fail over: {failovers} in {seeds} runs"
    );
}

/// Sets fast path failover's timeout and the target's answer latency of every path of the
/// boot disk through adapter `adapter` (`None`: every adapter).
fn tune_paths(
    setup: &mut MultiSetup,
    adapter: Option<usize>,
    timeout: PathTimeout,
    latency: Duration,
) {
    for d in &mut setup.disks {
        d.config.path_timeout = timeout;
    }
    for (i, a) in setup.adapters.iter_mut().enumerate() {
        for c in &mut a.stack.clients {
            if let ClientSpec::DiskPath { config, .. } = c {
                config.initiator.path_timeout = timeout;
                if adapter.is_none_or(|x| x == i) {
                    config.route = Route::constant(latency);
                }
            }
        }
    }
}

/// The paths' disk statistics, summed.
fn path_disk_stats(world: &MultiNode) -> ibal::disk::DiskStats {
    let mut sum = ibal::disk::DiskStats::default();
    for (_, c) in boot_paths(world) {
        let s = c.disk().stats();
        sum.given_up += s.given_up;
        sum.late_discarded += s.late_discarded;
        sum.aborts_answered += s.aborts_answered;
        sum.stale_responses += s.stale_responses;
        sum.aborts_unsent += s.aborts_unsent;
    }
    sum
}

#[test]
fn fast_path_failover_bounds_the_boot_disks_wait_by_its_path_timeout() {
    // The catastrophic error on hca0 at 1.4 s is found by the health poll at 2.0 s. Without
    // fast failover the commands stuck on the dead adapter wait for that (600 ms); with it,
    // they move to hca1 once they are older than hca0's learned timeout (SRTT + 5 ms:
    // a healthy path answers in well under a millisecond).
    let default = stack::boot_from_san_multipath();
    assert_eq!(default.disks[0].config.path_timeout, PathTimeout::DEFAULT);
    let world = run(&default);
    assert_exactly_once(&world);
    let (io, _) = boot_disk(&world);
    let floor = ibal::disk::rtt::DEFAULT_PATH_TIMEOUT_MIN;
    assert!(
        io.max_latency_us <= floor.as_us() + 10_000,
        "at most the timeout's floor + 10 ms: {} us",
        io.max_latency_us
    );
    let s = path_disk_stats(&world);
    assert!(s.given_up >= 1, "{s:?}");
    assert_eq!(
        s.late_discarded, 0,
        "a dead adapter answers nothing late: {s:?}"
    );
    assert_eq!(
        s.aborts_answered, 0,
        "a dead adapter brings no abort's answer back: {s:?}"
    );

    let mut off = stack::boot_from_san_multipath();
    tune_paths(&mut off, None, PathTimeout::Off, Duration::ZERO);
    let world = run(&off);
    assert_exactly_once(&world);
    let (slow, _) = boot_disk(&world);
    assert!(
        slow.max_latency_us > 500_000,
        "without it, the wait is the health poll's: {} us",
        slow.max_latency_us
    );
    assert_eq!(path_disk_stats(&world).given_up, 0);
}

#[test]
fn a_slow_path_gives_its_commands_up_and_their_late_answers_are_discarded() {
    // No fault: hca0's route to the target answers after 300 ms, hca1's at once, so every
    // command on hca0 is overtaken by hca1's and given up after 100 ms.
    let mut setup = stack::boot_from_san_multipath();
    for a in &mut setup.adapters {
        a.stack.sim.faults.clear();
    }
    let timeout = Duration::from_ms(100);
    tune_paths(
        &mut setup,
        Some(0),
        PathTimeout::Fixed(timeout),
        Duration::from_ms(300),
    );
    let world = run(&setup);
    assert_io_once(&world);
    assert!(world.resets().is_empty(), "a slow path is not a reset");
    let s = path_disk_stats(&world);
    assert!(s.given_up > 0, "{s:?}");
    // Each given-up command ran at the target before its abort came: its answer came late
    // and was thrown away, then the abort's answer freed its slot.
    assert!(s.late_discarded > 0, "{s:?}");
    assert!(s.aborts_answered > 0, "{s:?}");
    assert_eq!(s.stale_responses, 0, "{s:?}");
    let (io, _) = boot_disk(&world);
    assert_eq!(io.failed, 0, "{io:?}");
    // Nothing waits for the slow route twice over: a command waits at most the timeout
    // before moving, and a newer write to the block of a given-up write waits for that
    // abort's answer (300 ms away) so no stale copy can overwrite it.
    assert!(io.max_latency_us < 2 * 300_000, "{} us", io.max_latency_us);
    let disks = stack::multipath_disks(&world);
    let mp = disks[0].0.lock();
    let s1 = mp.path_stats(1).expect("path 1");
    assert_eq!(
        s1.slow_failovers, 0,
        "the fast path gave nothing up: {s1:?}"
    );
    assert!(
        s1.ios > mp.path_stats(0).expect("0").ios,
        "the fast path carries most"
    );
}

#[test]
fn a_target_slow_on_every_path_moves_nothing() {
    let mut setup = stack::boot_from_san_multipath();
    for a in &mut setup.adapters {
        a.stack.sim.faults.clear();
    }
    tune_paths(
        &mut setup,
        None,
        PathTimeout::Fixed(Duration::from_ms(100)),
        Duration::from_ms(300),
    );
    let world = run(&setup);
    assert_io_once(&world);
    let s = path_disk_stats(&world);
    assert_eq!(
        (s.given_up, s.late_discarded),
        (0, 0),
        "no path answered sooner: a slow target is not a dead path: {s:?}"
    );
    let (io, _) = boot_disk(&world);
    assert!(io.max_latency_us >= 300_000, "{io:?}");
}

/// QUERY_COUNTERS of each adapter counts the boot disk's I/O that went through that adapter,
/// after hca0's commands failed over to hca1: both carry a share, each adapter's accounting
/// closes (a command moved off a path counts on the path that took it last, not on both),
/// and the adapters' sums are the disk's own figures, the disk counted once.
#[test]
fn each_adapter_counts_the_multipath_disks_io_that_went_through_it() {
    use hcabus::ioctl::IoctlDevice;
    use hcabus::types::ClientKind;
    let world = run(&stack::boot_from_san_multipath());
    assert_io_once(&world);
    let (disk, _) = boot_disk(&world);
    let mut sum = hcabus::bus::ClientCounters::default();
    let mut moved = 0;
    for (name, host) in world.hosts() {
        let c = host.counters().expect("the host counts its clients");
        let boot = c.kinds[ClientKind::BootDisk as usize];
        assert!(
            boot.completed > 0,
            "{name} carried none of the disk's I/O: {boot:?}"
        );
        assert_eq!(
            boot.submitted,
            boot.completed + boot.failed + boot.held,
            "{name}'s accounting closes: {boot:?}"
        );
        sum.submitted += boot.submitted;
        sum.completed += boot.completed;
        sum.failed += boot.failed;
        sum.held += boot.held;
        moved += c.commands_moved;
    }
    assert!(moved > 0, "the run failed over: commands moved to hca1");
    assert_eq!(
        (sum.submitted, sum.completed, sum.failed, sum.held),
        (
            disk.submitted,
            disk.completed,
            disk.failed,
            disk.in_flight + disk.lost
        ),
        "the disk counted once over its adapters"
    );
}
