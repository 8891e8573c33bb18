//! The fail-slow trace set (tests/scenarios/failslow/) against the goals of docs/design.md §7
//! "Adaptive path timeout", on the very figures `cargo bench --bench failover` prints: each
//! is virtual time from the simulator, the same for the traces' seeds on any machine. And the
//! keys the traces need, each refused by name when wrong.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hcabus_lab::peers::Peer;
use hcabus_tools::failslow::{self, TraceRun};
use hcabus_tools::scenario::parse_any;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/failslow")
}

/// Every trace under every mode, run once for the tests below.
fn runs() -> &'static [TraceRun] {
    static RUNS: OnceLock<Vec<TraceRun>> = OnceLock::new();
    RUNS.get_or_init(|| failslow::run_all(&dir()).expect("the trace set runs"))
}

fn run(trace: &str, mode: &str) -> &'static TraceRun {
    runs()
        .iter()
        .find(|r| r.trace == trace && r.mode == mode)
        .expect("that run")
}

const ADAPTIVE: &str = "adaptive";

#[test]
fn the_set_is_the_files_in_the_directory() {
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .expect("tests/scenarios/failslow")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut traces: Vec<String> = failslow::TRACES
        .iter()
        .map(|(t, _)| format!("{t}.toml"))
        .collect();
    traces.sort();
    assert_eq!(files, traces, "every trace file is in the benchmark, once");
}

#[test]
fn no_mode_loses_duplicates_or_corrupts_io_on_any_trace() {
    for r in runs() {
        let what = format!("{} under {}", r.trace, r.mode);
        assert_eq!((r.lost, r.duplicated, r.mismatched), (0, 0, 0), "{what}");
        assert_eq!(
            r.failed, 0,
            "a boot disk fails nothing while a path lives: {what}"
        );
        assert!(r.ios > 5_000, "{what}: {} I/Os", r.ios);
    }
}

#[test]
fn the_adaptive_timeout_finds_a_dead_path_within_three_healthy_p99s_or_two_floors() {
    let s = failslow::summary(runs(), ADAPTIVE);
    // Two timeouts: the late command's, then its path's own test's (docs/design.md §7
    // "Evidence on demand").
    let floor_us = ibal::disk::rtt::DEFAULT_PATH_TIMEOUT_MIN.as_us();
    let goal_us = (3 * s.healthy_p99_us).max(2 * floor_us);
    assert!(
        s.dead_path_us <= goal_us,
        "the blackhole's commands moved after {} us; goal {goal_us} us ({s:?})",
        s.dead_path_us
    );
    for (name, _) in &failslow::MODES[1..] {
        let fixed = failslow::summary(runs(), name);
        assert!(
            s.dead_path_us < fixed.dead_path_us,
            "faster than {name}: {s:?} against {fixed:?}"
        );
    }
}

#[test]
fn the_adaptive_timeout_gives_up_nothing_where_no_path_is_worse() {
    let s = failslow::summary(runs(), ADAPTIVE);
    assert!(s.spurious_per_million <= 1.0, "{s:?}");
    // Fixed 100 ms fails over a target slow by nature on every path (80 ms and more).
    let fixed = failslow::summary(runs(), "fixed 100 ms");
    assert!(fixed.spurious_per_million > 100.0, "{fixed:?}");
    assert_eq!(run("slow-every-path", ADAPTIVE).given_up, 0);
    assert_eq!(
        run("spikes", ADAPTIVE).given_up,
        0,
        "stragglers wait on a moving path"
    );
}

#[test]
fn a_slow_route_is_given_up_a_bounded_number_of_times_and_waits_no_longer_than_without_failover() {
    // 300 ms on hca0 from 5 s to 20 s: probes back off to 2 s, so at most about one
    // give-up per 1.5 s once the backoff is there, and a few on the way (5 ms doubling).
    let r = run("slow-writes", ADAPTIVE);
    assert!((1..=25).contains(&r.given_up), "{r:?}");
    assert!(r.probes <= r.given_up + 10, "{r:?}");
    let off_worst = 300_000 + 1_000;
    assert!(r.max_latency_us < off_worst, "{r:?}");
    // 15 ms (100x) on hca0: its commands are given up while it is new to the path, its
    // probes' late answers teach it the route's latency, and it serves again at that
    // latency, as a path slow by nature does: a bounded number of give-ups, then none, and
    // no I/O worse than without failover. Priced at 15 ms beside a 150 us path, it carries
    // what the fast path cannot take at once and a stale path's I/O: out of the tail.
    let slow = run("slow-100x", ADAPTIVE);
    assert!((1..=10).contains(&slow.given_up), "{slow:?}");
    let off = run("slow-100x", "fixed 30 s");
    assert!(
        slow.max_latency_us <= off.max_latency_us,
        "{slow:?} {off:?}"
    );
    assert!(
        slow.max_latency_us > 10_000,
        "the slow path carries I/O: {slow:?}"
    );
    assert!(
        slow.p999_us() < 1_000,
        "and the tail is the fast path's: {slow:?}"
    );
}

/// The patterns a timeout alone cannot handle well, each priced away by the selector:
/// a ramp that a learned timeout follows (a fixed 100 ms one gives up what crosses it), a
/// heavy tail and a congestion that spreads to a second path of three, both kept out of
/// the disk's tail, and slowness shared by both paths, where nothing is worth giving up.
#[test]
fn a_ramp_a_heavy_tail_and_spreading_congestion_are_priced_away_not_given_up() {
    let ramp = run("ramp", ADAPTIVE);
    assert_eq!(ramp.given_up, 0, "{ramp:?}");
    let fixed = run("ramp", "fixed 100 ms");
    assert!(fixed.given_up > 0, "the ramp crosses 100 ms: {fixed:?}");
    for trace in ["heavy-tail", "congestion-spreading"] {
        let r = run(trace, ADAPTIVE);
        assert_eq!(r.given_up, 0, "{r:?}");
        assert!(r.p999_us() < 1_000, "the tail is the healthy path's: {r:?}");
    }
    let shared = run("shared-slowness", ADAPTIVE);
    assert_eq!(shared.given_up, 0, "{shared:?}");
}

/// The flapping route at 200 IOPS, seed 4 (a matrix cell): a command its first blackhole
/// held, given up and then delivered 470 ms late by the reliable connection, is a sample
/// of the outage, not of the route. Once the path's probes restore it, its timeout starts
/// over from them, so the next blackhole's command is given up in two of the route's own
/// timeouts (it was held 485 ms when the late sample kept the timeout at 310 ms: the
/// selector leaves a restored path idle, and an idle path's estimate never decays).
#[test]
fn a_path_back_from_a_blackhole_meets_the_next_at_its_own_timeout() {
    let recs =
        failslow::matrix::run_cell(&dir(), "flapping", (2, 200, 4), &[]).expect("the cell runs");
    let mine = &recs[0];
    assert_eq!(
        (mine.bad, mine.failed, mine.spurious),
        (0, 0, 0),
        "{mine:?}"
    );
    assert!(mine.detected_us.is_some(), "{mine:?}");
    assert!(mine.max_us < 20_000, "{mine:?}");
}

/// Slow in proportion to the size: a link trained down to 250 MB/s, one I/O in five of 64
/// KiB. Every stack moves and checks every block (0 bad) and none moves a command (the
/// narrow link answers within any timeout); the product's selector prices the path by
/// what its commands cost and keeps its p99 a healthy link's, where round robin sends
/// half the large commands across the narrow link (263 us each, more in a queue).
#[test]
fn a_narrow_link_is_priced_by_the_size_of_what_crosses_it() {
    let recs = failslow::matrix::run_cell(&dir(), "reduced-width", (2, 2_000, 1), &Peer::ALL)
        .expect("the cell runs");
    for r in &recs {
        assert_eq!((r.bad, r.failed, r.spurious), (0, 0, 0), "{r:?}");
        assert_eq!(
            r.detected_us, None,
            "nothing moved off the narrow link: {r:?}"
        );
        assert!(r.ios > 39_000, "{r:?}");
    }
    let mine = &recs[0];
    for rr in recs
        .iter()
        .filter(|r| r.who.contains("round-robin") || r.who.contains("round robin"))
    {
        assert!(mine.p99_us + 200 < rr.p99_us, "{mine:?} {rr:?}");
    }
    assert!(recs.iter().all(|r| r.p99_us >= mine.p99_us), "{recs:?}");
}

#[test]
fn a_blackhole_drops_the_connection_once_its_aborts_go_unanswered() {
    let r = run("blackhole", ADAPTIVE);
    assert!(r.abort_timeouts >= 1, "{r:?}");
    // A write fenced behind a given-up write drops the connection at two of the path's
    // timeouts (docs/design.md §7 "The write fence"), not at the abort's half second, nor
    // after the 40 s of the fault.
    assert!(r.max_latency_us < 20_000, "{r:?}");
    // Under a 30 s timeout nothing is given up for 30 s, but the adapter's transport ends
    // what the route swallows at its retry budget (7 retries of 67.1 ms: 537 ms): the path
    // goes down, its commands move, and none waits 30 s.
    let fixed = run("blackhole", "fixed 30 s");
    assert!(
        (500_000..600_000).contains(&fixed.max_latency_us),
        "{fixed:?}"
    );
    assert_eq!(
        fixed.dead_found_us,
        Some(536_864),
        "the first swallowed send's retry budget: {fixed:?}"
    );
}

#[test]
fn the_tables_name_every_mode_and_trace() {
    let text = failslow::render(runs());
    for (mode, _) in failslow::MODES {
        assert!(text.contains(&format!("| {mode} |")), "{mode}");
    }
    for (trace, _) in failslow::TRACES {
        assert!(text.contains(&format!("| {trace} |")), "{trace}");
    }
}

#[test]
fn bad_route_and_path_timeout_keys_are_refused_by_name() {
    let two = |hca0: &str, disk: &str| {
        format!(
            "name = \"x\"\n[[hcas]]\nname = \"h0\"\n{hca0}\n[[hcas]]\nname = \"h1\"\n\
             [[clients]]\nname = \"d\"\nkind = \"bootdisk\"\npaths = [\"h0\", \"h1\"]\n{disk}\n"
        )
    };
    let one =
        |disk: &str| format!("name = \"x\"\n[[clients]]\nname = \"d\"\nkind = \"srp\"\n{disk}\n");
    let cases = [
        (
            two("route = [{ at_ms = 5, latency_us = 60000001 }]", ""),
            "hcas[0].route[0].latency_us",
        ),
        (
            two("route = [{ at_ms = 5, service_max_us = 10 }]", ""),
            "hcas[0].route[0].service_max_us",
        ),
        (
            two("route = [{ at_ms = 5, load_us = 100001 }]", ""),
            "hcas[0].route[0].load_us",
        ),
        (
            two("route = [{ at_ms = 5, spike_ms = 50 }]", ""),
            "hcas[0].route[0].spike_ms",
        ),
        (
            two("route = [{ at_ms = 5, spike_per_million = 5 }]", ""),
            "hcas[0].route[0].spike_per_million",
        ),
        (
            two(
                "route = [{ at_ms = 5, spike_ms = 5, spike_per_million = 0 }]",
                "",
            ),
            "hcas[0].route[0].spike_per_million",
        ),
        (
            two("route = [{ at_ms = 9 }, { at_ms = 5 }]", ""),
            "hcas[0].route[1].at_ms",
        ),
        (
            two("target_latency_ms = 3\nroute = [{ at_ms = 0 }]", ""),
            "hcas[0].route[0].at_ms",
        ),
        (two("route = [{ at_ms = 5, colour = 1 }]", ""), "colour"),
        (
            two("route = [{ at_ms = 5, tail_us = 500 }]", ""),
            "hcas[0].route[0].tail_us",
        ),
        (
            two(
                "route = [{ at_ms = 5, tail_us = 500, tail_shape = 1.0 }]",
                "",
            ),
            "hcas[0].route[0].tail_shape",
        ),
        (
            two("route = [{ at_ms = 5, tail_us = 0, tail_shape = 1.5 }]", ""),
            "hcas[0].route[0].tail_us",
        ),
        (
            two(
                "route = [{ at_ms = 5 }, { at_ms = 9, disk = \"nope\" }]",
                "",
            ),
            "hcas[0].route[1].disk",
        ),
        (
            two(
                &format!(
                    "route = [{}]",
                    (1..=13)
                        .map(|i| format!("{{ at_ms = {i} }}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "",
            ),
            "hcas[0].route[12].at_ms",
        ),
        (
            two("", "command_timeout_ms = 99"),
            "clients[0].command_timeout_ms",
        ),
        (
            two("", "command_timeout_ms = 600001"),
            "clients[0].command_timeout_ms",
        ),
        (
            two("local_ack_timeout = 32", ""),
            "hcas[0].local_ack_timeout",
        ),
        (two("retry_count = 8", ""), "hcas[0].retry_count"),
        (
            two("", "path_io_timeout_ms = 50\npath_timeout_min_ms = 2"),
            "clients[0].path_timeout_min_ms",
        ),
        (
            two("", "path_timeout_min_ms = 0"),
            "clients[0].path_timeout_min_ms",
        ),
        (
            two("", "path_timeout_min_ms = 50\npath_timeout_max_ms = 10"),
            "clients[0].path_timeout_max_ms",
        ),
        (
            two("", "path_timeout_min_ms = 5000"),
            "clients[0].path_timeout_min_ms",
        ),
        (
            two("", "path_timeout_max_ms = 600001"),
            "clients[0].path_timeout_max_ms",
        ),
        (
            one("path_timeout_max_ms = 10"),
            "clients[0].path_timeout_max_ms",
        ),
        (
            one("path_timeout_min_ms = 10"),
            "clients[0].path_timeout_min_ms",
        ),
        // Writes-only slowness, pauses, loss: bounded, pauses as a pair shorter than their
        // period.
        (
            two("route = [{ at_ms = 5, write_extra_us = 60000001 }]", ""),
            "hcas[0].route[0].write_extra_us",
        ),
        (
            two("route = [{ at_ms = 5, pause_ms = 10 }]", ""),
            "hcas[0].route[0].pause_ms",
        ),
        (
            two("route = [{ at_ms = 5, pause_every_ms = 10 }]", ""),
            "hcas[0].route[0].pause_every_ms",
        ),
        (
            two(
                "route = [{ at_ms = 5, pause_every_ms = 10, pause_ms = 10 }]",
                "",
            ),
            "hcas[0].route[0].pause_ms",
        ),
        (
            two(
                "route = [{ at_ms = 5, pause_every_ms = 60001, pause_ms = 1 }]",
                "",
            ),
            "hcas[0].route[0].pause_every_ms",
        ),
        (
            two("route = [{ at_ms = 5, loss_per_million = 1000001 }]", ""),
            "hcas[0].route[0].loss_per_million",
        ),
        // A link's data rate, bounded; large transfers as a pair, within the LUN and 1 MiB.
        (
            two("route = [{ at_ms = 5, bandwidth_mb_s = 0 }]", ""),
            "hcas[0].route[0].bandwidth_mb_s",
        ),
        (
            two("route = [{ at_ms = 5, bandwidth_mb_s = 100001 }]", ""),
            "hcas[0].route[0].bandwidth_mb_s",
        ),
        (two("", "large_pct = 20"), "clients[0].large_pct"),
        (two("", "large_blocks = 16"), "clients[0].large_blocks"),
        (
            two("", "large_pct = 0\nlarge_blocks = 16"),
            "clients[0].large_pct",
        ),
        (
            two("", "large_pct = 20\nlarge_blocks = 257"),
            "clients[0].large_blocks",
        ),
        (
            two("", "large_pct = 20\nlarge_blocks = 32\nblocks = 64"),
            "clients[0].large_blocks",
        ),
        (
            one("large_pct = 20\nlarge_blocks = 1"),
            "clients[0].large_blocks",
        ),
        // Path groups: one per path, on a disk with paths, and a failback within an hour.
        (two("", "path_groups = [0]"), "clients[0].path_groups"),
        (two("", "path_groups = [0, 1, 2]"), "clients[0].path_groups"),
        (two("", "path_groups = [0, 256]"), "path_groups"),
        (one("path_groups = [0]"), "clients[0].path_groups"),
        (one("failback_ms = 10"), "clients[0].failback_ms"),
        (two("", "failback_ms = 3600001"), "clients[0].failback_ms"),
    ];
    for (text, key) in cases {
        let e = parse_any(&text).expect_err(&text);
        assert!(
            e.to_string().contains(key),
            "{text}\n-> {e} should name {key}"
        );
    }
    // And the good ones parse: twelve phases and a base latency, bounds of the adaptive mode,
    // a transport with no timer, the least command bound; twelve from 0 too.
    let phases = |from: u64| {
        (from..from + 12)
            .map(|i| format!("{{ at_ms = {i}, blackhole = true }}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let ok = two(
        &format!(
            "target_latency_ms = 2\nlocal_ack_timeout = 0\nretry_count = 0\nroute = [{}]",
            phases(1)
        ),
        "path_timeout_min_ms = 2\npath_timeout_max_ms = 2\ncommand_timeout_ms = 100",
    );
    parse_any(&ok).expect("twelve phases after a base latency, min = max");
    parse_any(&two(&format!("route = [{}]", phases(0)), "")).expect("twelve from 0");
    parse_any(&two("", "path_groups = [1, 0]\nfailback_ms = 3600000")).expect("groups");
}

/// README.md, docs/design.md and docs/failslow.md quote the benchmark's tables: each must
/// be what the benchmark prints now.
#[test]
fn the_docs_quote_the_tables_the_benchmark_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let summary = failslow::render_summary(runs());
    let traces = failslow::render_traces(runs());
    let indented: String = summary.lines().map(|l| format!("  {l}\n")).collect();
    for (doc, want) in [
        ("README.md", &summary),
        ("docs/design.md", &indented),
        ("docs/failslow.md", &summary),
        ("docs/failslow.md", &traces),
    ] {
        let text = std::fs::read_to_string(root.join(doc)).expect("a doc");
        assert!(
            text.contains(want.as_str()),
            "{doc} does not quote the table the benchmark prints now:\n{want}"
        );
    }
}
