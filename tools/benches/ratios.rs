//! One table of ratios (issue 16): what a reset costs per client in the coordinator (with
//! the smallest host) and on the virtual-time host, against the floor of any bus (N dynamic
//! RESET callbacks that acknowledge, then N dynamic RESET_END callbacks), warm and cold; how
//! re-registration scales; page faults in a reset window; and how much faster than real
//! time hcasim's default run goes. Each goal is printed with its ratio and PASS or MISS.
//!
//! `cargo bench -p hcabus-tools --bench ratios` (it prints how long it took: about a minute
//! on 2 cores). Rounds are interleaved in one process, so a slow moment of the machine
//! touches every column alike. Per-client cost is the marginal one, (t(N) - t(1)) / (N - 1):
//! what one more client adds to a reset, without the reset's fixed work (the hardware
//! sequence, timers). It is taken within each round, against that round's own size-1 time,
//! and every figure is given as the median of the rounds with their spread (min-max): a
//! figure whose spread reaches zero would not be a measurement, and none does. Cold figures
//! are whole first resets (a difference of single first resets is noise).

use std::hint::black_box;
use std::time::Instant as Wall;

use hcabus::types::Epoch;
use hcabus::{Duration, Instant};
use hcabus_lab::stack::compare::{self, Cycle};
use hcabus_sim::bench::{
    bench_setup, threaded_faults, FaultCounter, FaultScope, Floor, MinimalHost,
};
use hcabus_sim::{Fault, SimHost};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Clients per reset. Below 64 the marginal cost is not a measurement: 7 more clients add
/// about 200 ns to a warm reset whose fixed work varies by as much from round to round (2.5
/// to 2.7 us), and at 8 clients its spread reached below zero; the size-1 row gives the
/// whole reset instead.
const SIZES: [usize; 4] = [1, 64, 256, 1024];
const ROUNDS: usize = 101;
/// Fresh hosts per size for the cold figures.
const COLD: usize = 15;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A figure over its rounds: the median, and the least and most of them.
#[derive(Debug, Clone, Copy)]
struct Spread {
    min: f64,
    median: f64,
    max: f64,
}

impl Spread {
    fn of(v: &[f64]) -> Spread {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        Spread {
            min: v[0],
            median: v[v.len() / 2],
            max: v[v.len() - 1],
        }
    }
}

impl std::fmt::Display for Spread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.1} ({:.1}-{:.1})", self.median, self.min, self.max)
    }
}

/// Nanoseconds per call of `f`, over `reps` calls.
fn time_ns(reps: usize, mut f: impl FnMut()) -> f64 {
    let t = Wall::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_nanos() as f64 / reps as f64
}

/// The median of `reps` calls of `f`, each timed alone: an interrupt or a page of someone
/// else's work lands on a few calls, which the median leaves out, where a mean over the
/// batch would carry it. (The clock's own cost, about 25 ns, is the same at every size and
/// leaves the marginal cost.)
fn median_call_ns(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut each = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Wall::now();
        f();
        each.push(t.elapsed().as_nanos() as f64);
    }
    median(each)
}

fn reps_for(n: usize) -> usize {
    (65_536 / n).clamp(16, 1024)
}

fn sim_reset(host: &mut SimHost) {
    host.inject(Fault::AdminReset);
    let until = host.now() + Duration::from_ms(1_000);
    host.run_until(until);
}

fn warm_sim(n: usize, reregister: bool) -> SimHost {
    let mut host = SimHost::new(&bench_setup(n, reregister)).expect("bench setup");
    host.run_until(Instant::from_ms(100));
    sim_reset(&mut host);
    host
}

/// Warm figures: floor, minimal host, virtual-time host; per size, ns per reset in each
/// round.
struct Warm {
    floor: Vec<Vec<f64>>,
    minimal: Vec<Vec<f64>>,
    virtual_time: Vec<Vec<f64>>,
}

fn warm() -> Warm {
    let mut floors: Vec<Floor> = SIZES.iter().map(|n| Floor::new(*n)).collect();
    let mut minimals: Vec<MinimalHost> = SIZES
        .iter()
        .map(|n| {
            let mut h = MinimalHost::new(*n, false).expect("minimal host");
            h.reset().expect("warm-up reset");
            h
        })
        .collect();
    let mut sims: Vec<SimHost> = SIZES.iter().map(|n| warm_sim(*n, false)).collect();
    let mut samples = [(); 3].map(|_| vec![Vec::new(); SIZES.len()]);
    let mut epoch = 2;
    for _ in 0..ROUNDS {
        for (i, n) in SIZES.iter().enumerate() {
            let reps = reps_for(*n);
            samples[0][i].push(time_ns(reps * 8, || {
                epoch += 1;
                black_box(floors[i].reset(Epoch(epoch)));
            }));
            samples[1][i].push(median_call_ns(reps, || {
                black_box(minimals[i].reset());
            }));
            samples[2][i].push(median_call_ns(reps, || sim_reset(&mut sims[i])));
        }
    }
    let [floor, minimal, virtual_time] = samples;
    Warm {
        floor,
        minimal,
        virtual_time,
    }
}

/// A first reset on fresh hosts: µs of each, and this thread's page faults (median).
fn cold(n: usize, faults: &mut FaultCounter) -> ((Spread, u64), (Spread, u64)) {
    let mut minimal = Vec::new();
    let mut sim = Vec::new();
    let mut hosts: Vec<(MinimalHost, SimHost)> = (0..COLD)
        .map(|_| {
            let mut s = SimHost::new(&bench_setup(n, false)).expect("bench setup");
            s.run_until(Instant::from_ms(100));
            (MinimalHost::new(n, false).expect("minimal host"), s)
        })
        .collect();
    for (m, s) in &mut hosts {
        let f0 = faults.read().unwrap_or(0);
        let t = Wall::now();
        black_box(m.reset());
        let ns = t.elapsed().as_nanos() as f64;
        minimal.push((ns / 1e3, faults.read().unwrap_or(0) - f0));
        let f0 = faults.read().unwrap_or(0);
        let t = Wall::now();
        sim_reset(s);
        let ns = t.elapsed().as_nanos() as f64;
        sim.push((ns / 1e3, faults.read().unwrap_or(0) - f0));
    }
    let pick = |v: Vec<(f64, u64)>| {
        let mut f: Vec<u64> = v.iter().map(|x| x.1).collect();
        f.sort_unstable();
        let t: Vec<f64> = v.iter().map(|x| x.0).collect();
        (Spread::of(&t), f[f.len() / 2])
    };
    (pick(minimal), pick(sim))
}

/// Marginal ns per client of size index `i` in each round, against that round's size-1
/// time (the size-1 time itself for `i == 0`).
fn per_client(t: &[Vec<f64>], i: usize) -> Spread {
    let rounds: Vec<f64> = t[i]
        .iter()
        .zip(&t[0])
        .map(|(n, one)| {
            if i == 0 {
                *n
            } else {
                (n - one) / (SIZES[i] - 1) as f64
            }
        })
        .collect();
    Spread::of(&rounds)
}

/// Per-client cost when every client unregisters and registers again inside RESET, at 16
/// and at 1,024 clients (each round against its own size-1 time).
fn reregistration() -> (Spread, Spread) {
    let sizes = [1usize, 16, 1024];
    let mut sims: Vec<SimHost> = sizes.iter().map(|n| warm_sim(*n, true)).collect();
    let mut samples = vec![Vec::new(); sizes.len()];
    for _ in 0..ROUNDS {
        for (i, n) in sizes.iter().enumerate() {
            samples[i].push(median_call_ns(reps_for(*n), || sim_reset(&mut sims[i])));
        }
    }
    let marginal = |i: usize, n: f64| -> Vec<f64> {
        samples[i]
            .iter()
            .zip(&samples[0])
            .map(|(t, one)| (t - one) / (n - 1.0))
            .collect()
    };
    (
        Spread::of(&marginal(1, 16.0)),
        Spread::of(&marginal(2, 1024.0)),
    )
}

/// hcasim's default run (`cargo run --release --bin hcasim`: the embedded stack, its fault,
/// seed 1), building included: virtual seconds per wall second, and the wall time.
fn hcasim_speed() -> (f64, f64) {
    let mut samples = Vec::new();
    let mut virtual_s = 0.0;
    for _ in 0..3 {
        let mut setup = hcabus_lab::stack::boot_from_san();
        setup.sim.seed = 1;
        let t = Wall::now();
        let mut host = hcabus_lab::stack::build(&setup).expect("the default stack");
        host.run();
        samples.push(t.elapsed().as_secs_f64());
        virtual_s = host.end().as_us() as f64 / 1e6;
    }
    let wall = median(samples);
    (virtual_s / wall, wall)
}

/// One way of resetting the default stack, on a fresh warm host: wall ns, allocations,
/// bytes allocated, and what it did to the stack.
struct Way {
    ns: f64,
    allocations: usize,
    bytes: usize,
    cycle: Cycle,
}

/// Wall time and allocations of one cycle.
fn measure(cycle: impl FnOnce() -> Cycle) -> Way {
    let (region, t) = (Region::new(GLOBAL), Wall::now());
    let cycle = cycle();
    let (ns, stats) = (t.elapsed().as_nanos() as f64, region.change());
    Way {
        ns,
        allocations: stats.allocations + stats.reallocations,
        bytes: stats.bytes_allocated,
        cycle,
    }
}

/// The soft reset and remove/add of the default stack (IBAL and its five clients; the
/// adapter, the coordinator and the setup kept), each from the fault to the stack being
/// back, on fresh warm hosts, interleaved; the median round of each by time.
fn soft_vs_remove_add() -> (Way, Way) {
    let setup = hcabus_lab::stack::boot_from_san_fast();
    let mut soft = Vec::new();
    let mut removal = Vec::new();
    for _ in 0..ROUNDS {
        let mut a = compare::warm(&setup).expect("the default stack");
        let mut b = compare::warm(&setup).expect("the default stack");
        soft.push(measure(|| compare::soft_reset(&mut a)));
        removal.push(measure(|| {
            compare::remove_add(&mut b, &setup).expect("the default stack")
        }));
        // Dropped here, outside the measured regions.
        drop((a, b));
    }
    let pick = |mut v: Vec<Way>| {
        v.sort_by(|x, y| x.ns.total_cmp(&y.ns));
        v.swap_remove(v.len() / 2)
    };
    (pick(soft), pick(removal))
}

fn print_ways(soft: &Way, removal: &Way) {
    println!("\nSoft reset vs remove/add of the default stack (IBAL + 5 clients), fault to stack back:\n");
    println!("| | wall us | allocations | bytes | I/O failed upward | clients built again | virtual ms | back |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for (name, w) in [("soft reset", soft), ("remove/add", removal)] {
        println!(
            "| {name} | {:.0} | {} | {} | {} | {} | {} | {} |",
            w.ns / 1e3,
            w.allocations,
            w.bytes,
            w.cycle.io_dropped,
            w.cycle.removed,
            w.cycle.took.as_ms(),
            w.cycle.back
        );
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// The threaded host's page faults and wall time per reset.
fn print_threaded() {
    println!("\nThe threaded host (real threads, a device ready 1 ms after its reset), 16 warm reset windows, every thread's page faults:\n");
    println!("| clients | page faults | wall per reset |");
    println!("|---:|---:|---:|");
    for n in [1usize, 64, 1024] {
        match threaded_faults(n, 16) {
            Some((f, wall)) => println!("| {n} | {f} | {:.2} ms |", wall.as_secs_f64() * 1e3),
            None => println!("| {n} | not measured (no /proc, or a reset did not end) | |"),
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to run quickly.
    if !std::env::args().any(|a| a == "--bench") {
        println!("ratios: run with `cargo bench -p hcabus-tools --bench ratios`");
        return;
    }
    let started = Wall::now();
    let mut faults = FaultCounter::new(FaultScope::Thread);
    let w = warm();
    println!("Per-client cost of one warm reset, ns (marginal; size 1: the whole reset): the median of {ROUNDS} rounds (min-max); a cold first reset, whole, in us: the median of {COLD} fresh hosts (min-max)\n");
    println!(
        "| clients | floor | coordinator warm | ratio | virtual-time warm | ratio | coordinator cold, us | virtual-time cold, us | faults cold (coord / virtual) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut cold_t = (Vec::new(), Vec::new());
    let mut cold_f = Vec::new();
    for n in SIZES {
        let ((m, mf), (s, sf)) = cold(n, &mut faults);
        cold_t.0.push(m);
        cold_t.1.push(s);
        cold_f.push((mf, sf));
    }
    let mut worst = (0f64, 0f64);
    for (i, n) in SIZES.iter().enumerate() {
        let f = per_client(&w.floor, i);
        let m = per_client(&w.minimal, i);
        let s = per_client(&w.virtual_time, i);
        let (mr, sr) = (m.median / f.median, s.median / f.median);
        if *n >= 64 {
            worst = (worst.0.max(mr), worst.1.max(sr));
        }
        println!(
            "| {n} | {f} | {m} | {mr:.1}x | {s} | {sr:.1}x | {} | {} | {} / {} |",
            cold_t.0[i], cold_t.1[i], cold_f[i].0, cold_f[i].1,
        );
    }
    let (r16, r1024) = reregistration();
    let (speed, wall) = hcasim_speed();
    let (soft, removal) = soft_vs_remove_add();
    print_ways(&soft, &removal);
    print_threaded();
    println!("\nGoals (issue 16):\n");
    println!("| goal | measured | |");
    println!("|---|---:|---|");
    println!(
        "| coordinator per client <= 5x the floor at >= 64 clients | {:.1}x | {} |",
        worst.0,
        verdict(worst.0 <= 5.0)
    );
    println!(
        "| virtual-time host per client <= 15x the floor at >= 64 clients | {:.1}x | {} |",
        worst.1,
        verdict(worst.1 <= 15.0)
    );
    let linear = r1024.median / r16.median;
    println!(
        "| re-registration linear: per client at 1,024 <= 1.5x at 16 | {r1024} / {r16} ns = {linear:.2}x | {} |",
        verdict(linear <= 1.5)
    );
    println!(
        "| hcasim's default run >= 100x real time | {speed:.0}x ({wall:.3} s wall) | {} |",
        verdict(speed >= 100.0)
    );
    let cheaper = removal.ns / soft.ns;
    println!(
        "| soft reset >= 2x cheaper than remove/add, 0 allocations, 0 I/O dropped | {cheaper:.1}x, {} allocations, {} dropped | {} |",
        soft.allocations,
        soft.cycle.io_dropped,
        verdict(cheaper >= 2.0 && soft.allocations == 0 && soft.cycle.io_dropped == 0)
    );
    println!(
        "\nratios: {} rounds, {} cold hosts per size; took {:.1} s",
        ROUNDS,
        COLD,
        started.elapsed().as_secs_f64()
    );
}
