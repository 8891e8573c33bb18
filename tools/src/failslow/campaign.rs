//! The spurious-give-up campaign: the traces where no path is worse than another, under the
//! shipped adaptive timeout, over many seeds and several rates, so that "no spurious
//! give-up" is a rate with its denominator and a 95% upper bound, not one trace's zero
//! (docs/failslow.md "Spurious give-ups over seeds").

use std::ops::Range;
use std::path::Path;

use super::{load, run, TraceError, MODES, TRACES};

/// One trace at one rate over a range of seeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub trace: &'static str,
    pub iops: u32,
    pub seeds: Range<u64>,
    pub ios: u64,
    pub given_up: u64,
    /// Lost, duplicated or mismatched I/Os (0 in every healthy run).
    pub bad: u64,
}

/// Runs each no-fault trace at each of `rates` for every seed of `seeds`, on `threads`
/// threads (each run is deterministic for its seed: the figures do not depend on them).
pub fn spurious(
    dir: &Path,
    seeds: Range<u64>,
    rates: &[u32],
    threads: usize,
) -> Result<Vec<Cell>, TraceError> {
    let adaptive = MODES[0];
    let mut cells = Vec::new();
    for trace in TRACES.into_iter().filter(|(_, degraded)| !degraded) {
        let base = load(dir, trace.0)?;
        for &iops in rates {
            let mut setup = base.clone();
            for d in &mut setup.disks {
                d.load.iops = iops;
            }
            let all: Vec<u64> = seeds.clone().collect();
            let results = crate::par::map(&all, threads, |&seed| {
                let mut one = setup.clone();
                one.seed = seed;
                run(&one, trace, adaptive)
                    .map(|r| (r.ios, r.given_up, r.lost + r.duplicated + r.mismatched))
            });
            let mut cell = Cell {
                trace: trace.0,
                iops,
                seeds: seeds.clone(),
                ios: 0,
                given_up: 0,
                bad: 0,
            };
            for r in results {
                let (ios, given_up, bad) = r?;
                cell.ios += ios;
                cell.given_up += given_up;
                cell.bad += bad;
            }
            cells.push(cell);
        }
    }
    Ok(cells)
}

/// The rate `λ` a Poisson count of `k` events bounds from above with 95% confidence (one
/// sided: P(X <= k; λ) = 0.05): 3.0 for no event (the rule of three), 4.74 for one.
pub fn poisson_upper_95(k: u64) -> f64 {
    let cdf = |lambda: f64| {
        let mut term = (-lambda).exp();
        let mut sum = term;
        for i in 1..=k {
            term *= lambda / i as f64;
            sum += term;
        }
        sum
    };
    let (mut lo, mut hi) = (0.0_f64, 10.0 + 3.0 * k as f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if cdf(mid) > 0.05 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Each cell, and all of them together: give-ups per 10^6 I/Os and the 95% upper bound.
pub fn render(cells: &[Cell]) -> String {
    let mut out = String::from(
        "| trace | IOPS | seeds | I/Os | give-ups | per 10^6 | 95% upper bound per 10^6 | lost / dup / mismatched |\n\
         |---|---:|---|---:|---:|---:|---:|---:|\n",
    );
    let row =
        |out: &mut String, name: &str, iops: String, seeds: String, ios: u64, k: u64, bad: u64| {
            let per = |x: f64| if ios == 0 { 0.0 } else { x * 1e6 / ios as f64 };
            out.push_str(&format!(
                "| {name} | {iops} | {seeds} | {ios} | {k} | {:.2} | {:.2} | {bad} |\n",
                per(k as f64),
                per(poisson_upper_95(k)),
            ));
        };
    for c in cells {
        let seeds = format!("{}..{}", c.seeds.start, c.seeds.end);
        row(
            &mut out,
            c.trace,
            c.iops.to_string(),
            seeds,
            c.ios,
            c.given_up,
            c.bad,
        );
    }
    let (ios, k, bad) = cells.iter().fold((0, 0, 0), |(a, b, c), x| {
        (a + x.ios, b + x.given_up, c + x.bad)
    });
    let runs: u64 = cells.iter().map(|c| c.seeds.end - c.seeds.start).sum();
    row(
        &mut out,
        "all",
        "-".into(),
        format!("{runs} runs"),
        ios,
        k,
        bad,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upper_bound_is_the_poisson_one() {
        // The rule of three, and the tabulated one-sided 95% bounds for 1 and 5 events.
        assert!((poisson_upper_95(0) - 2.996).abs() < 0.001);
        assert!((poisson_upper_95(1) - 4.744).abs() < 0.001);
        assert!((poisson_upper_95(5) - 10.513).abs() < 0.001);
    }

    #[test]
    fn the_total_row_sums_the_cells_and_bounds_their_rate() {
        let cell = |trace, ios, given_up| Cell {
            trace,
            iops: 2_000,
            seeds: 1..31,
            ios,
            given_up,
            bad: 0,
        };
        let text = render(&[cell("a", 1_000_000, 0), cell("b", 2_000_000, 0)]);
        let last = text.lines().last().expect("a total row");
        assert_eq!(
            last,
            "| all | - | 60 runs | 3000000 | 0 | 0.00 | 1.00 | 0 |"
        );
    }
}
