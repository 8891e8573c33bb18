//! One table of ratios (issue 16): what a reset costs per client in the coordinator (with
//! the smallest host) and on the virtual-time host, against the floor of any bus (N dynamic
//! RESET callbacks that acknowledge, then N dynamic RESET_END callbacks), warm and cold; how
//! re-registration scales; page faults in a reset window; and how much faster than real
//! time hcasim's default run goes. Each goal is printed with its ratio and PASS or MISS.
//!
//! `cargo bench -p hcabus-tools --bench ratios` (about a minute). Rounds are interleaved in
//! one process and medians taken, so a slow moment of the machine touches every column
//! alike. Per-client cost is the marginal one, (t(N) - t(1)) / (N - 1): what one more
//! client adds to a reset, without the reset's fixed work (the hardware sequence, timers).

use std::hint::black_box;
use std::time::Instant as Wall;

use hcabus::sim::bench::{
    bench_setup, threaded_faults, FaultCounter, FaultScope, Floor, MinimalHost,
};
use hcabus::sim::{Fault, SimHost};
use hcabus::types::Epoch;
use hcabus::{Duration, Instant};
use ibal::stack::compare::{self, Cycle};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const SIZES: [usize; 5] = [1, 8, 64, 256, 1024];
const ROUNDS: usize = 15;
/// Fresh hosts per size for the cold figures.
const COLD: usize = 9;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Nanoseconds per call of `f`, over `reps` calls.
fn time_ns(reps: usize, mut f: impl FnMut()) -> f64 {
    let t = Wall::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_nanos() as f64 / reps as f64
}

fn reps_for(n: usize) -> usize {
    (8192 / n).clamp(4, 256)
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

/// Warm figures: floor, minimal host, virtual-time host, re-registering virtual-time host;
/// ns per reset by size.
struct Warm {
    floor: Vec<f64>,
    minimal: Vec<f64>,
    virtual_time: Vec<f64>,
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
            samples[1][i].push(time_ns(reps, || {
                black_box(minimals[i].reset());
            }));
            samples[2][i].push(time_ns(reps, || sim_reset(&mut sims[i])));
        }
    }
    let [floor, minimal, virtual_time] = samples.map(|s| s.into_iter().map(median).collect());
    Warm {
        floor,
        minimal,
        virtual_time,
    }
}

/// A first reset on fresh hosts: ns (median) and this thread's page faults (median).
fn cold(n: usize, faults: &mut FaultCounter) -> ((f64, u64), (f64, u64)) {
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
        minimal.push((ns, faults.read().unwrap_or(0) - f0));
        let f0 = faults.read().unwrap_or(0);
        let t = Wall::now();
        sim_reset(s);
        let ns = t.elapsed().as_nanos() as f64;
        sim.push((ns, faults.read().unwrap_or(0) - f0));
    }
    let pick = |v: Vec<(f64, u64)>| {
        let mut f: Vec<u64> = v.iter().map(|x| x.1).collect();
        f.sort_unstable();
        (median(v.iter().map(|x| x.0).collect()), f[f.len() / 2])
    };
    (pick(minimal), pick(sim))
}

/// Marginal ns per client of size index `i` (the size-1 figure for `i == 0`).
fn per_client(t: &[f64], i: usize) -> f64 {
    if i == 0 {
        t[0]
    } else {
        (t[i] - t[0]) / (SIZES[i] - 1) as f64
    }
}

/// Per-client cost when every client unregisters and registers again inside RESET, at 16
/// and at 1,024 clients.
fn reregistration() -> (f64, f64) {
    let sizes = [1usize, 16, 1024];
    let mut sims: Vec<SimHost> = sizes.iter().map(|n| warm_sim(*n, true)).collect();
    let mut samples = vec![Vec::new(); sizes.len()];
    for _ in 0..ROUNDS {
        for (i, n) in sizes.iter().enumerate() {
            samples[i].push(time_ns(reps_for(*n), || sim_reset(&mut sims[i])));
        }
    }
    let t: Vec<f64> = samples.into_iter().map(median).collect();
    ((t[1] - t[0]) / 15.0, (t[2] - t[0]) / 1023.0)
}

/// hcasim's default run (`cargo run --release --bin hcasim`: the embedded stack, its fault,
/// seed 1), building included: virtual seconds per wall second, and the wall time.
fn hcasim_speed() -> (f64, f64) {
    let mut samples = Vec::new();
    let mut virtual_s = 0.0;
    for _ in 0..3 {
        let mut setup = ibal::stack::boot_from_san();
        setup.sim.seed = 1;
        let t = Wall::now();
        let mut host = ibal::stack::build(&setup).expect("the default stack");
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
    let setup = ibal::stack::boot_from_san_fast();
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
    let mut faults = FaultCounter::new(FaultScope::Thread);
    let w = warm();
    println!("Per-client cost of one reset, ns (marginal; size 1: the whole reset)\n");
    println!(
        "| clients | floor | coordinator warm | ratio | coordinator cold | virtual-time warm | ratio | virtual-time cold | faults cold (coord / virtual) |"
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
        if *n >= 64 {
            worst = (worst.0.max(m / f), worst.1.max(s / f));
        }
        println!(
            "| {n} | {f:.1} | {m:.1} | {:.1}x | {:.1} | {s:.1} | {:.1}x | {:.1} | {} / {} |",
            m / f,
            per_client(&cold_t.0, i),
            s / f,
            per_client(&cold_t.1, i),
            cold_f[i].0,
            cold_f[i].1,
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
    println!(
        "| re-registration linear: per client at 1,024 <= 1.5x at 16 | {:.0} / {:.0} ns = {:.2}x | {} |",
        r1024,
        r16,
        r1024 / r16,
        verdict(r1024 / r16 <= 1.5)
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
}
