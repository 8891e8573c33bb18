//! CPU cost of the reset path: one full reset (RESET fan-out, every execute, the hardware
//! sequence on SimHca, RESET_END fan-out) on the virtual-time host, by client count; and the
//! flight recorder's cost per record. Virtual time makes the 200 ms hardware wait free, so
//! these figures are the coordinator's and the host's own work.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use hcabus::recorder::{FlightRecorder, HwOutcome, RecordKind};
use hcabus::types::Epoch;
use hcabus::types::{ClientDesc, ClientFlags, ClientKind, ShortText};
use hcabus::{Duration, HwStep, Instant};
use hcabus_sim::bench::{bench_setup, Floor, MinimalHost};
use hcabus_sim::{Behavior, Fault, SimHost, SimSetup};

fn setup(clients: usize) -> SimSetup {
    SimSetup {
        name: "bench".into(),
        duration: Duration::from_ms(2_000),
        max_clients: 256,
        recorder_capacity: 8192,
        reported_resets: hcabus_sim::REPORTED_RESETS,
        derived_faults: hcabus_sim::DERIVED_FAULTS,
        clients: (0..clients)
            .map(|i| {
                let d = ClientDesc::new(&format!("c{i}"), ClientKind::Custom, ClientFlags::empty())
                    .expect("fits");
                (d, Behavior::default())
            })
            .collect(),
        ..SimSetup::default()
    }
}

fn reset_cycle(c: &mut Criterion) {
    let mut g = c.benchmark_group("reset_cycle");
    for n in [1usize, 16, 64, 256] {
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            let s = setup(n);
            b.iter_batched(
                || {
                    let mut host = SimHost::new(&s).expect("setup");
                    host.run_until(Instant::from_ms(100));
                    host
                },
                |mut host| {
                    host.inject(Fault::AdminReset);
                    host.run_until(Instant::from_ms(1_000));
                    assert_eq!(host.coordinator().epoch().0, 2);
                    host
                },
                BatchSize::SmallInput,
            );
        });
    }
    g.finish();
}

/// The same reset, side by side at each size: the floor of any bus (N dynamic RESET
/// callbacks that acknowledge, N RESET_END callbacks), the coordinator on the smallest host,
/// and the virtual-time host, each warm (one reset done before measuring). The per-client
/// ratios of these are what `cargo bench -p hcabus-tools --bench ratios` prints.
fn side_by_side(c: &mut Criterion) {
    let mut g = c.benchmark_group("side_by_side");
    for n in [1usize, 8, 64, 256, 1024] {
        g.throughput(Throughput::Elements(n as u64));
        let mut floor = Floor::new(n);
        let mut epoch = 1;
        g.bench_with_input(BenchmarkId::new("floor", n), &n, |b, _| {
            b.iter(|| {
                epoch += 1;
                floor.reset(Epoch(epoch))
            })
        });
        let mut minimal = MinimalHost::new(n, false).expect("minimal host");
        minimal.reset().expect("warm-up reset");
        g.bench_with_input(BenchmarkId::new("minimal_host", n), &n, |b, _| {
            b.iter(|| minimal.reset())
        });
        let mut host = SimHost::new(&bench_setup(n, false)).expect("bench setup");
        host.run_until(Instant::from_ms(100));
        g.bench_with_input(BenchmarkId::new("virtual_time", n), &n, |b, _| {
            b.iter(|| {
                host.inject(Fault::AdminReset);
                let until = host.now() + Duration::from_ms(1_000);
                host.run_until(until);
            })
        });
    }
    g.finish();
}

fn recorder(c: &mut Criterion) {
    let mut r = FlightRecorder::new(4096);
    let probe = |outcome| RecordKind::Hw {
        step: HwStep::ProbeReady,
        outcome,
        detail: 0,
    };
    // Alternating kinds: every call writes a record; the same kind twice is coalesced.
    let kinds = [probe(HwOutcome::Ready), probe(HwOutcome::NotReady)];
    let mut t = 0u64;
    c.bench_function("flight_recorder/record", |b| {
        b.iter(|| {
            t += 1;
            r.record(
                Instant::from_us(t),
                &ShortText::EMPTY,
                kinds[(t % 2) as usize],
            )
        })
    });
    c.bench_function("flight_recorder/repeat", |b| {
        b.iter(|| {
            t += 1;
            r.record(Instant::from_us(t), &ShortText::EMPTY, kinds[0])
        })
    });
}

criterion_group!(benches, reset_cycle, side_by_side, recorder);
criterion_main!(benches);
