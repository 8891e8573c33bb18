//! The matrix's records merged over seeds and shards, cell by cell: each stack's figures,
//! the verdict against every peer, a table and an SVG.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Record, HCABUS};
use crate::failslow::campaign::poisson_upper_95;

/// One stack's figures in one cell, over its seeds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    pub seeds: u64,
    pub ios: u64,
    pub failed: u64,
    pub spurious: u64,
    pub bad: u64,
    /// Each seed's detection, `None` (never) sorted last.
    pub detected_us: Vec<Option<u64>>,
    /// Medians over seeds of each seed's p50 and p99; the worst wait of any seed.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

impl Figures {
    /// The median seed's detection (never, when at least half never detected).
    pub fn detection_us(&self) -> Option<u64> {
        self.detected_us
            .get(self.detected_us.len() / 2)
            .copied()
            .flatten()
    }
    pub fn spurious_per_million(&self) -> f64 {
        per_million(self.spurious as f64, self.ios)
    }
    pub fn spurious_bound_per_million(&self) -> f64 {
        per_million(poisson_upper_95(self.spurious), self.ios)
    }
}

fn per_million(x: f64, ios: u64) -> f64 {
    if ios == 0 {
        0.0
    } else {
        x * 1e6 / ios as f64
    }
}

/// A cell: a trace, its path count and rate.
pub type CellKey = (String, usize, u32);

/// Every cell's figures by stack (the product's under [`HCABUS`]).
pub fn merge(records: &[Record]) -> BTreeMap<CellKey, BTreeMap<String, Figures>> {
    let mut seeds: BTreeMap<(CellKey, String), Vec<&Record>> = BTreeMap::new();
    for r in records {
        let key = ((r.trace.clone(), r.paths, r.iops), r.who.clone());
        seeds.entry(key).or_default().push(r);
    }
    let mut out: BTreeMap<CellKey, BTreeMap<String, Figures>> = BTreeMap::new();
    for ((cell, who), mut rs) in seeds {
        // A seed run twice (two shards that overlap) counts once.
        rs.sort_by_key(|r| r.seed);
        rs.dedup_by_key(|r| r.seed);
        let median = |f: &dyn Fn(&Record) -> u64| {
            let mut v: Vec<u64> = rs.iter().map(|r| f(r)).collect();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        let mut detected: Vec<Option<u64>> = rs.iter().map(|r| r.detected_us).collect();
        detected.sort_by_key(|d| d.unwrap_or(u64::MAX));
        let f = Figures {
            seeds: rs.len() as u64,
            ios: rs.iter().map(|r| r.ios).sum(),
            failed: rs.iter().map(|r| r.failed).sum(),
            spurious: rs.iter().map(|r| r.spurious).sum(),
            bad: rs.iter().map(|r| r.bad).sum(),
            detected_us: detected,
            p50_us: median(&|r| r.p50_us),
            p99_us: median(&|r| r.p99_us),
            max_us: rs.iter().map(|r| r.max_us).max().unwrap_or(0),
        };
        out.entry(cell).or_default().insert(who, f);
    }
    out
}

/// How the product fares in a cell against every peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// As good as each peer on detection and spurious rate, strictly better on one.
    Better,
    /// Nothing to tell them apart: no fault to find and no spurious give-up on any side.
    Even,
    /// Behind some peer on one of the two: which, and on what.
    Behind(Vec<String>),
}

/// The verdict of one cell; `None` without the product's figures.
pub fn verdict(stacks: &BTreeMap<String, Figures>) -> Option<Verdict> {
    let mine = stacks.get(HCABUS)?;
    let never = |d: Option<u64>| d.unwrap_or(u64::MAX);
    let mut behind = Vec::new();
    let mut all_better = true;
    for (who, peer) in stacks.iter().filter(|(w, _)| *w != HCABUS) {
        let (d, pd) = (never(mine.detection_us()), never(peer.detection_us()));
        let (s, ps) = (mine.spurious_per_million(), peer.spurious_per_million());
        if d > pd {
            behind.push(format!("{who}: detection"));
        }
        if s > ps {
            behind.push(format!("{who}: spurious"));
        }
        all_better &= d < pd || s < ps;
    }
    Some(if !behind.is_empty() {
        Verdict::Behind(behind)
    } else if all_better {
        Verdict::Better
    } else {
        Verdict::Even
    })
}

fn ms(us: Option<u64>) -> String {
    match us {
        Some(us) if us < 10_000 => format!("{:.1} ms", us as f64 / 1e3),
        Some(us) if us < 10_000_000 => format!("{:.0} ms", us as f64 / 1e3),
        Some(us) => format!("{:.1} s", us as f64 / 1e6),
        None => "never".into(),
    }
}

/// The summary: cells better, even and behind, and every cell behind with why.
pub fn render_summary(cells: &BTreeMap<CellKey, BTreeMap<String, Figures>>) -> String {
    let mut counts = [0usize; 3];
    let mut behind = String::new();
    for (cell, stacks) in cells {
        match verdict(stacks) {
            Some(Verdict::Better) => counts[0] += 1,
            Some(Verdict::Even) => counts[1] += 1,
            Some(Verdict::Behind(why)) => {
                counts[2] += 1;
                let _ = writeln!(
                    behind,
                    "- {} on {} paths at {} IOPS: {}",
                    cell.0,
                    cell.1,
                    cell.2,
                    why.join("; ")
                );
            }
            None => {}
        }
    }
    let total: usize = counts.iter().sum();
    let mut out = format!(
        "{total} cells: hcabus better than every peer in {}, even in {} (no fault, no \
         spurious give-up on any side), behind some peer in {}.\n",
        counts[0], counts[1], counts[2]
    );
    if !behind.is_empty() {
        out.push_str("\nBehind:\n");
        out.push_str(&behind);
    }
    out
}

/// Every cell, a row a stack: seeds, detection (median seed), spurious per 10^6 with its
/// 95% bound, p50/p99 (median seed), max (any seed), failed upward.
pub fn render_table(cells: &BTreeMap<CellKey, BTreeMap<String, Figures>>) -> String {
    let mut out = String::from(
        "| trace | paths | IOPS | stack | seeds | I/Os | detection | spurious per 10^6 (95% bound) | p50 | p99 | max | failed up | bad |\n\
         |---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (cell, stacks) in cells {
        let order = stacks
            .iter()
            .filter(|(w, _)| *w == HCABUS)
            .chain(stacks.iter().filter(|(w, _)| *w != HCABUS));
        for (who, f) in order {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {who} | {} | {} | {} | {:.2} ({:.2}) | {} | {} | {} | {} | {} |",
                cell.0,
                cell.1,
                cell.2,
                f.seeds,
                f.ios,
                ms(f.detection_us()),
                f.spurious_per_million(),
                f.spurious_bound_per_million(),
                ms(Some(f.p50_us)),
                ms(Some(f.p99_us)),
                ms(Some(f.max_us)),
                f.failed,
                f.bad
            );
        }
    }
    out
}

/// The verdicts as a grid: a row a trace, a column a path count and rate; each square
/// says the product's median detection over the best peer's, coloured by the verdict.
pub fn render_svg(cells: &BTreeMap<CellKey, BTreeMap<String, Figures>>) -> String {
    let mut traces: Vec<&str> = Vec::new();
    let mut columns: Vec<(usize, u32)> = Vec::new();
    for (t, p, i) in cells.keys() {
        if !traces.contains(&t.as_str()) {
            traces.push(t);
        }
        if !columns.contains(&(*p, *i)) {
            columns.push((*p, *i));
        }
    }
    columns.sort_unstable();
    let (left, top, w, h) = (170, 60, 112, 34);
    let width = left + w * columns.len() + 20;
    let height = top + h * traces.len() + 40;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" \
         font-family=\"sans-serif\" font-size=\"11\">\n\
         <text x=\"10\" y=\"20\" font-size=\"14\">The fail-slow matrix: hcabus against every \
         peer (detection, median seed: hcabus / best peer)</text>\n"
    );
    for (c, (p, i)) in columns.iter().enumerate() {
        let x = left + c * w + w / 2;
        let _ = writeln!(
            out,
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">{p} paths, {i} IOPS</text>",
            top - 8
        );
    }
    for (r, t) in traces.iter().enumerate() {
        let y = top + r * h;
        let _ = writeln!(out, "<text x=\"10\" y=\"{}\">{t}</text>", y + h / 2 + 4);
        for (c, (p, i)) in columns.iter().enumerate() {
            let Some(stacks) = cells.get(&(t.to_string(), *p, *i)) else {
                continue;
            };
            let (fill, _) = match verdict(stacks) {
                Some(Verdict::Better) => ("#9be39b", "better"),
                Some(Verdict::Even) => ("#dddddd", "even"),
                Some(Verdict::Behind(_)) => ("#f4a3a3", "behind"),
                None => ("#ffffff", "-"),
            };
            let mine = stacks.get(HCABUS).and_then(Figures::detection_us);
            let best = stacks
                .iter()
                .filter(|(w, _)| *w != HCABUS)
                .filter_map(|(_, f)| f.detection_us())
                .min();
            let label = if mine.is_none() && best.is_none() {
                "-".to_string()
            } else {
                format!("{} / {}", ms(mine), ms(best))
            };
            let x = left + c * w;
            let _ = writeln!(
                out,
                "<rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" \
                 stroke=\"#ffffff\"/><text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
                w - 2,
                h - 2,
                x + w / 2,
                y + h / 2 + 4
            );
        }
    }
    let _ = writeln!(
        out,
        "<text x=\"10\" y=\"{}\">green: as good as every peer on detection and spurious \
         rate and better on one; grey: nothing to find, nothing given up; red: behind a peer</text>\n</svg>",
        height - 12
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(who: &str, seed: u64, detected_us: Option<u64>, spurious: u64) -> Record {
        Record {
            trace: "blackhole".into(),
            paths: 2,
            iops: 200,
            seed,
            who: who.into(),
            ios: 1_000,
            failed: 0,
            spurious,
            detected_us,
            p50_us: 150,
            p99_us: 250,
            max_us: 300,
            bad: 0,
        }
    }

    #[test]
    fn a_cell_is_better_even_or_behind_against_every_peer() {
        let cells = merge(&[
            rec(HCABUS, 1, Some(5_000), 0),
            rec(HCABUS, 2, Some(6_000), 0),
            rec("peer", 1, Some(500_000), 0),
            rec("peer", 2, None, 0),
        ]);
        let stacks = cells.values().next().expect("one cell");
        assert_eq!(stacks[HCABUS].seeds, 2);
        // The median of two seeds is the later one; "never" sorts last.
        assert_eq!(stacks[HCABUS].detection_us(), Some(6_000));
        assert_eq!(stacks["peer"].detection_us(), None);
        assert_eq!(verdict(stacks), Some(Verdict::Better));
        let even = merge(&[rec(HCABUS, 1, None, 0), rec("peer", 1, None, 0)]);
        assert_eq!(
            verdict(even.values().next().expect("cell")),
            Some(Verdict::Even)
        );
        let behind = merge(&[
            rec(HCABUS, 1, Some(5_000), 1),
            rec("peer", 1, Some(9_000), 0),
        ]);
        assert_eq!(
            verdict(behind.values().next().expect("cell")),
            Some(Verdict::Behind(vec!["peer: spurious".into()]))
        );
        let text = render_summary(&behind);
        assert!(text.contains("behind some peer in 1"), "{text}");
        assert!(
            text.contains("blackhole on 2 paths at 200 IOPS: peer: spurious"),
            "{text}"
        );
    }

    #[test]
    fn shards_that_overlap_count_each_seed_once() {
        let a = rec(HCABUS, 1, Some(5_000), 0);
        let cells = merge(&[a.clone(), a, rec(HCABUS, 2, Some(5_000), 0)]);
        let f = &cells.values().next().expect("cell")[HCABUS];
        assert_eq!((f.seeds, f.ios), (2, 2_000));
        let svg = render_svg(&cells);
        assert!(
            svg.starts_with("<svg") && svg.contains("blackhole"),
            "{svg}"
        );
    }
}
