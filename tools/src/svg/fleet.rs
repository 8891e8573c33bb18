//! A fleet's picture (docs/design.md §11): for each fleet fault, how many hosts had every
//! path back over the time since it struck, one line per retry policy, against the
//! theoretical minimum; under it the fault's blast radius, a cell a leaf switch shaded by
//! how many of the leaf's hosts it took a path from.

use std::fmt::Write as _;

use super::{escape, span, tick_step};
use crate::fleet::{policy_label, FleetRun};

const LEFT: f64 = 90.0;
const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 260.0;
const PANEL: f64 = HEIGHT + 90.0;
const COLOURS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

/// The runs of one seed, one policy each: a panel per fault.
pub fn render(name: &str, runs: &[FleetRun]) -> String {
    let faults = runs.first().map_or(0, |r| r.figures.faults.len());
    let total_h = 50.0 + PANEL * faults.max(1) as f64;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{total_h}" font-family="sans-serif" font-size="12">"#,
        w = LEFT + WIDTH + 200.0
    );
    let _ = write!(
        s,
        r#"<rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}: hosts with every path back</text>"#,
        escape(name)
    );
    for k in 0..faults {
        panel(&mut s, runs, k, 50.0 + PANEL * k as f64);
    }
    if faults == 0 {
        let _ = write!(
            s,
            r#"<text x="{LEFT}" y="70">no fleet fault in this run</text>"#
        );
    }
    s.push_str("</svg>\n");
    s
}

fn panel(s: &mut String, runs: &[FleetRun], k: usize, top: f64) {
    let Some(first) = runs.first().and_then(|r| r.figures.faults.get(k)) else {
        return;
    };
    let hosts = first.hosts.max(1) as f64;
    let min_us = first.theoretical_min.as_us();
    // The slowest policy's last host, or twice the minimum, whichever is later.
    let end_us = runs
        .iter()
        .filter_map(|r| {
            r.figures
                .faults
                .get(k)?
                .back_after
                .last()
                .map(|d| d.as_us())
        })
        .max()
        .unwrap_or(0)
        .max(min_us * 2)
        .max(1);
    let x = |us: u64| LEFT + WIDTH * us as f64 / end_us as f64;
    let y = |n: f64| top + 20.0 + HEIGHT * (1.0 - n / hosts);
    if first.no_host() {
        // Listed, as every fault of the file is, with nothing to draw.
        let _ = write!(
            s,
            r#"<text x="{LEFT}" y="{}" font-weight="bold">{} at {}: no host lost a path, no host to recover</text>"#,
            top + 8.0,
            first.fault.name(),
            span(first.at.as_us()),
        );
        return;
    }
    let _ = write!(
        s,
        r#"<text x="{LEFT}" y="{}" font-weight="bold">{} at {}: {} hosts lost a path, on {} of {} leaves; {} boot disks cut</text>"#,
        top + 8.0,
        first.fault.name(),
        span(first.at.as_us()),
        first.hosts,
        first.leaves_touched().0,
        first.per_leaf.len(),
        first.boot_disks_cut
    );
    blast(s, &first.per_leaf, top + 62.0 + HEIGHT);
    let _ = write!(
        s,
        r##"<rect x="{LEFT}" y="{}" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#999"/>"##,
        top + 20.0
    );
    let step = tick_step(end_us);
    let mut t = 0;
    while t <= end_us {
        let _ = write!(
            s,
            r##"<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#eee"/><text x="{0}" y="{3}" text-anchor="middle">{4}</text>"##,
            x(t),
            top + 20.0,
            top + 20.0 + HEIGHT,
            top + 36.0 + HEIGHT,
            span(t)
        );
        t += step;
    }
    for frac in [0.0, 0.5, 1.0] {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            LEFT - 6.0,
            y(hosts * frac) + 4.0,
            (hosts * frac).round()
        );
    }
    let _ = write!(
        s,
        r##"<line x1="{0}" x2="{0}" y1="{1}" y2="{2}" stroke="#555" stroke-dasharray="5,4"/><text x="{0}" y="{3}" text-anchor="middle" fill="#555">theoretical minimum {4}</text>"##,
        x(min_us),
        top + 20.0,
        top + 20.0 + HEIGHT,
        top + 54.0 + HEIGHT,
        span(min_us)
    );
    for (i, r) in runs.iter().enumerate() {
        let Some(f) = r.figures.faults.get(k) else {
            continue;
        };
        let colour = COLOURS[i % COLOURS.len()];
        let mut points = format!("{},{}", x(0), y(0.0));
        for (n, d) in f.back_after.iter().enumerate() {
            let _ = write!(
                points,
                " {0},{1} {0},{2}",
                x(d.as_us()),
                y(n as f64),
                y(n as f64 + 1.0)
            );
        }
        let _ = write!(points, " {},{}", x(end_us), y(f.back_after.len() as f64));
        let _ = write!(
            s,
            r#"<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>"#
        );
        let all = f
            .all_back_after
            .map_or("not all back".into(), |d| span(d.as_us()));
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" fill="{colour}">{}: {}</text>"#,
            LEFT + WIDTH + 12.0,
            top + 36.0 + 18.0 * i as f64,
            escape(&policy_label(&r.figures)),
            all
        );
    }
}

/// The blast radius at `y`: a cell a leaf, darker for more of its hosts touched.
fn blast(s: &mut String, per_leaf: &[u32], y: f64) {
    let most = per_leaf.iter().copied().max().unwrap_or(0).max(1);
    let w = WIDTH / per_leaf.len().max(1) as f64;
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="end">leaves</text>"#,
        LEFT - 6.0,
        y + 9.0
    );
    for (i, n) in per_leaf.iter().enumerate() {
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{y}" width="{:.1}" height="10" fill="#d62728" fill-opacity="{:.2}" stroke="#ccc" stroke-width="0.5"><title>leaf {i}: {n} hosts</title></rect>"##,
            LEFT + w * i as f64,
            w,
            f64::from(*n) / f64::from(most)
        );
    }
}
