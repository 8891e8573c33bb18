//! The capacity curve's picture (`hcasim fleet FILE --curve ... --svg OUT`): each fault's
//! time until every host was back against the disks a target carries, a line a fault; a
//! load where a host never came back is marked at the top.

use std::fmt::Write as _;

use super::{escape, span, tick_step};
use crate::fleet::curve::CurvePoint;

const LEFT: f64 = 90.0;
const TOP: f64 = 50.0;
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 320.0;
const COLOURS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];

/// The curve of `points` (each with the same faults), titled `name`.
pub fn render(name: &str, points: &[CurvePoint]) -> String {
    let faults = points.first().map_or(0, |p| p.run.figures.faults.len());
    let max_load = points
        .iter()
        .map(|p| p.disks_per_target)
        .max()
        .unwrap_or(1)
        .max(1);
    let max_us = points
        .iter()
        .flat_map(|p| p.run.figures.faults.iter())
        .filter_map(|f| f.all_back_after.map(|d| d.as_us()))
        .max()
        .unwrap_or(1)
        .max(1);
    let x = |load: u32| LEFT + WIDTH * f64::from(load) / f64::from(max_load);
    let y = |us: u64| TOP + HEIGHT * (1.0 - us as f64 / max_us as f64);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="24" font-size="15" font-weight="bold">{}: all back after, by the disks a target carries</text><rect x="{LEFT}" y="{TOP}" width="{WIDTH}" height="{HEIGHT}" fill="none" stroke="#999"/>"##,
        LEFT + WIDTH + 220.0,
        TOP + HEIGHT + 60.0,
        escape(name)
    );
    let step = tick_step(max_us);
    let mut t = 0;
    while t <= max_us {
        let _ = write!(
            s,
            r##"<line x1="{LEFT}" x2="{0}" y1="{1}" y2="{1}" stroke="#eee"/><text x="{2}" y="{3}" text-anchor="end">{4}</text>"##,
            LEFT + WIDTH,
            y(t),
            LEFT - 6.0,
            y(t) + 4.0,
            span(t)
        );
        t += step;
    }
    for p in points {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            x(p.disks_per_target),
            TOP + HEIGHT + 18.0,
            p.disks_per_target
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">disks logging in to each target</text>"#,
        LEFT + WIDTH / 2.0,
        TOP + HEIGHT + 40.0
    );
    for k in 0..faults {
        let colour = COLOURS[k % COLOURS.len()];
        let mut line = String::new();
        for p in points {
            let Some(f) = p.run.figures.faults.get(k) else {
                continue;
            };
            match f.all_back_after {
                Some(d) => {
                    let _ = write!(line, "{},{} ", x(p.disks_per_target), y(d.as_us()));
                }
                None if !f.no_host() => {
                    // Never all back: marked at the top.
                    let _ = write!(
                        s,
                        r#"<text x="{}" y="{}" fill="{colour}" text-anchor="middle">never</text>"#,
                        x(p.disks_per_target),
                        TOP - 4.0
                    );
                }
                None => {}
            }
        }
        let _ = write!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
            line.trim_end()
        );
        if let Some(f) = points.first().and_then(|p| p.run.figures.faults.get(k)) {
            let _ = write!(
                s,
                r#"<text x="{}" y="{}" fill="{colour}">{} at {}</text>"#,
                LEFT + WIDTH + 12.0,
                TOP + 16.0 + 18.0 * k as f64,
                f.fault.name(),
                span(f.at.as_us())
            );
        }
    }
    s.push_str("</svg>\n");
    s
}
