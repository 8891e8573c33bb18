//! The I/O lanes: under the client lanes, one per disk workload, how many I/Os were
//! outstanding (a blue area) and whether any completed (a green strip) or failed (red)
//! interval by interval. I/O that piles up between a fault and its detection shows as a
//! full queue over an empty strip, before any reset band starts.

use std::fmt::Write as _;

use hcabus::bus::ClientReport;
use hcabus_lab::block::{IoBucket, IoSeries};
use hcabus_lab::stack::{LabParts, Node};
use ibal::multipath::{Multipath, PathEventKind, SharedMultipath};

use super::{escape, span, Canvas, LEFT, WIDTH};

/// An I/O lane's height: taller than a client lane, so a queue's depth reads.
pub const IO_LANE: f64 = 46.0;
/// The strip of completions and failures at the bottom of the lane.
const STRIP: f64 = 5.0;
/// The narrowest column a tooltip covers, so a long run is not thousands of elements.
const MIN_COLUMN: f64 = 4.0;

const DEPTH_COLOUR: &str = "#4361ee";
const OK_COLOUR: &str = "#52b788";
const FAILED_COLOUR: &str = "#d00000";
const PATH_DOWN_COLOUR: &str = "#9d0208";
const PATH_UP_COLOUR: &str = "#2d6a4f";
const GAVE_UP_COLOUR: &str = "#fb8500";

/// The legend's I/O row.
pub const LEGEND: [(&str, &str); 6] = [
    (DEPTH_COLOUR, "I/O outstanding"),
    (OK_COLOUR, "I/O completed"),
    (FAILED_COLOUR, "I/O failed"),
    (PATH_DOWN_COLOUR, "path down / moved"),
    (GAVE_UP_COLOUR, "given up (slow path)"),
    (PATH_UP_COLOUR, "path up"),
];

/// One disk's workload as drawn.
pub struct IoLane {
    pub name: String,
    pub series: IoSeries,
    /// The run's end: nothing is drawn past it.
    pub end_us: u64,
    /// A multipath disk's path events: when, what (for the tooltip), and its colour.
    pub marks: Vec<(u64, String, &'static str)>,
    /// A multipath disk's paths, a line each (I/Os, commands moved, time down): the
    /// tooltip of the lane's name.
    pub paths: Vec<String>,
}

/// The lanes of `host`'s disks that carry their own workload (a multipath path's is the
/// disk's, drawn by [`multipath_lanes`]).
pub fn disk_lanes(host: &Node) -> Vec<IoLane> {
    hcabus_lab::stack::disks(host)
        .filter(|c| c.multipath().is_none())
        .map(|c| IoLane {
            name: format!("I/O {}", c.name()),
            series: c.lab_workload().series().clone(),
            end_us: host.end().as_us(),
            marks: Vec::new(),
            paths: Vec::new(),
        })
        .collect()
}

/// The lanes of the multipath disks over `hosts`, one per disk however many paths it has.
pub fn multipath_lanes(hosts: &[(String, Node)]) -> Vec<IoLane> {
    let end_us = hosts
        .iter()
        .map(|(_, h)| h.end().as_us())
        .max()
        .unwrap_or(0);
    let mut seen: Vec<ibal::multipath::SharedMultipath> = Vec::new();
    let mut lanes = Vec::new();
    for (_, host) in hosts {
        for c in hcabus_lab::stack::disks(host) {
            let Some((mp, _)) = c.multipath() else {
                continue;
            };
            if seen.iter().any(|m| m.same(mp)) {
                continue;
            }
            seen.push(mp.clone());
            let disk = mp.lock();
            lanes.push(IoLane {
                name: format!("I/O {} (multipath)", disk.name()),
                series: hcabus_lab::stack::multipath_workload(&disk)
                    .series()
                    .clone(),
                end_us,
                marks: path_marks(hosts, mp, &disk),
                paths: path_lines(hosts, mp, &disk),
            });
        }
    }
    lanes
}

/// Each path of a multipath disk in a line: its adapter, I/Os, commands moved off it (and
/// given up slow), its time down.
fn path_lines(hosts: &[(String, Node)], mp: &SharedMultipath, disk: &Multipath) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, host) in hosts {
        for c in hcabus_lab::stack::disks(host) {
            let Some((m, i)) = c.multipath() else {
                continue;
            };
            let Some(s) = disk.path_stats(i).filter(|_| m.same(mp)) else {
                continue;
            };
            lines.push(format!(
                "{name}: {} I/Os, {} commands moved off it ({} given up slow), down {}",
                s.ios,
                s.moved,
                s.given_up,
                span(s.down_us)
            ));
        }
    }
    lines
}

/// A multipath disk's path events as marks: each path named by its adapter.
fn path_marks(
    hosts: &[(String, Node)],
    mp: &SharedMultipath,
    disk: &Multipath,
) -> Vec<(u64, String, &'static str)> {
    let adapter = |path: usize| {
        hosts
            .iter()
            .find(|(_, h)| {
                hcabus_lab::stack::disks(h)
                    .any(|c| c.multipath().is_some_and(|(m, i)| i == path && m.same(mp)))
            })
            .map_or("?", |(n, _)| n.as_str())
    };
    let (events, _) = disk.path_events();
    events
        .filter_map(|e| {
            let (what, colour) = match e.kind {
                PathEventKind::Down => ("down".to_string(), PATH_DOWN_COLOUR),
                PathEventKind::Dead => ("device gone".to_string(), PATH_DOWN_COLOUR),
                PathEventKind::Moved { n } => {
                    (format!("{n} command(s) moved off"), PATH_DOWN_COLOUR)
                }
                PathEventKind::GaveUp { n } => {
                    (format!("{n} command(s) given up, slow"), GAVE_UP_COLOUR)
                }
                PathEventKind::Up | PathEventKind::Serves => {
                    ("serving".to_string(), PATH_UP_COLOUR)
                }
            };
            // The first login of each path is the start, not news.
            (e.at.as_us() > 1_000 || e.kind != PathEventKind::Up)
                .then(|| (e.at.as_us(), format!("{}: {what}", adapter(e.path)), colour))
        })
        .collect()
}

/// One interval as drawn: `depth` is carried over from the last change when nothing moved.
#[derive(Clone, Copy)]
struct Interval {
    from_us: u64,
    to_us: u64,
    depth: u32,
    bucket: IoBucket,
}

/// The intervals of `lane` that overlap `lo..hi`, each with its queue depth.
fn intervals(lane: &IoLane, lo: u64, hi: u64) -> Vec<Interval> {
    let step = lane.series.interval_us();
    let hi = hi.min(lane.end_us);
    let mut carried = 0;
    let mut out = Vec::new();
    for (i, b) in lane.series.buckets().iter().enumerate() {
        let from_us = i as u64 * step;
        if from_us >= hi {
            break;
        }
        let depth = if b.touched {
            b.peak_outstanding
        } else {
            carried
        };
        if b.touched {
            carried = b.last_outstanding;
        }
        if from_us + step > lo {
            out.push(Interval {
                from_us,
                to_us: (from_us + step).min(hi),
                depth,
                bucket: *b,
            });
        }
    }
    out
}

impl Canvas {
    /// Where I/O lane `k` starts.
    fn io_lane_y(&self, k: usize) -> f64 {
        super::TOP + self.lanes as f64 * super::LANE + k as f64 * IO_LANE
    }

    pub(super) fn io_lanes(&mut self, lanes: &[IoLane]) {
        for (k, lane) in lanes.iter().enumerate() {
            let y = self.io_lane_y(k);
            let fill = if k % 2 == 0 { "#eef1fd" } else { "#f6f8fe" };
            let title = if lane.paths.is_empty() {
                String::new()
            } else {
                format!("<title>{}</title>", escape(&lane.paths.join("\n")))
            };
            let _ = writeln!(
                self.s,
                r#"<g class="io-lane"><rect x="{LEFT}" y="{y}" width="{WIDTH}" height="{IO_LANE}" fill="{fill}"/><text x="10" y="{}">{}{title}</text>"#,
                y + IO_LANE / 2.0 + 4.0,
                escape(&lane.name)
            );
            let iv = intervals(lane, self.lo, self.hi);
            self.depth_area(&iv, y);
            self.strip(&iv, y);
            self.worst_wait(&iv, y);
            self.columns(&iv, y);
            self.path_marks(&lane.marks, y);
            self.s.push_str("</g>\n");
        }
    }

    /// The queue's depth as a stepped area, scaled to the deepest it got in the window.
    fn depth_area(&mut self, iv: &[Interval], y: f64) {
        let peak = iv.iter().map(|i| i.depth).max().unwrap_or(0).max(1);
        let base = y + IO_LANE - STRIP - 1.0;
        let scale = (IO_LANE - STRIP - 14.0) / f64::from(peak);
        let Some(first) = iv.first() else {
            return;
        };
        let mut d = format!("M{:.1},{base:.1}", self.x(first.from_us));
        for i in iv {
            let top = base - f64::from(i.depth) * scale;
            let _ = write!(
                d,
                " L{:.1},{top:.1} L{:.1},{top:.1}",
                self.x(i.from_us),
                self.x(i.to_us)
            );
        }
        let last = iv.last().map_or(first.to_us, |i| i.to_us);
        let _ = write!(d, " L{:.1},{base:.1} Z", self.x(last));
        let _ = writeln!(
            self.s,
            r##"<path class="io-depth" d="{d}" fill="{DEPTH_COLOUR}" fill-opacity="0.45" stroke="{DEPTH_COLOUR}" stroke-width="0.8"/><text x="{:.1}" y="{:.1}" font-size="9" fill="#495057">peak {peak} outstanding</text>"##,
            LEFT + 4.0,
            y + 10.0
        );
    }

    /// Green where I/O completed, red where any failed, nothing where none finished.
    fn strip(&mut self, iv: &[Interval], y: f64) {
        let sy = y + IO_LANE - STRIP;
        for i in iv {
            let colour = if i.bucket.failed > 0 {
                FAILED_COLOUR
            } else if i.bucket.completed > 0 {
                OK_COLOUR
            } else {
                continue;
            };
            let (x0, x1) = (self.x(i.from_us), self.x(i.to_us));
            let _ = writeln!(
                self.s,
                r#"<rect class="io-done" x="{x0:.1}" y="{sy:.1}" width="{:.1}" height="{STRIP}" fill="{colour}"/>"#,
                (x1 - x0).max(0.5)
            );
        }
    }

    /// Where the slowest I/O in the window finished, and how long it had waited: the
    /// cost of the pile-up, said in the lane.
    fn worst_wait(&mut self, iv: &[Interval], y: f64) {
        let Some(worst) = iv
            .iter()
            .filter(|i| i.bucket.max_latency_us > 0)
            .max_by_key(|i| i.bucket.max_latency_us)
        else {
            return;
        };
        let text = format!("waited up to {}", span(worst.bucket.max_latency_us));
        let x = self.x(worst.from_us);
        // Ending where the slow I/O finished, above the pile it came from; after it when
        // that would run into the "peak" label at the lane's left end.
        let (tx, anchor) = if x - 3.0 - super::text_width(&text, 9.0) < LEFT + 110.0 {
            (x + 3.0, "start")
        } else {
            (x - 3.0, "end")
        };
        let _ = writeln!(
            self.s,
            r##"<text class="io-wait" x="{tx:.1}" y="{:.1}" font-size="9" fill="#212529" text-anchor="{anchor}">{}</text>"##,
            y + 10.0,
            escape(&text)
        );
    }

    /// Each path event a small triangle at the top of the lane, pointing down.
    fn path_marks(&mut self, marks: &[(u64, String, &'static str)], y: f64) {
        for (at, what, colour) in marks {
            let x = self.x(*at);
            let _ = writeln!(
                self.s,
                r#"<path class="path-event" d="M{:.1},{y:.1} L{:.1},{y:.1} L{x:.1},{:.1} Z" fill="{colour}"><title>{} at {}</title></path>"#,
                x - 4.0,
                x + 4.0,
                y + 7.0,
                escape(what),
                span(*at)
            );
        }
    }

    /// Transparent columns, each at least [`MIN_COLUMN`] wide, whose tooltips give the
    /// numbers of the intervals under them.
    fn columns(&mut self, iv: &[Interval], y: f64) {
        let mut k = 0;
        while k < iv.len() {
            let x0 = self.x(iv[k].from_us);
            let mut j = k;
            while j + 1 < iv.len() && self.x(iv[j].to_us) - x0 < MIN_COLUMN {
                j += 1;
            }
            let group = &iv[k..=j];
            let sum = |f: fn(&IoBucket) -> u32| group.iter().map(|i| u64::from(f(&i.bucket))).sum();
            let (completed, failed): (u64, u64) = (sum(|b| b.completed), sum(|b| b.failed));
            let depth = group.iter().map(|i| i.depth).max().unwrap_or(0);
            let wait = group
                .iter()
                .map(|i| i.bucket.max_latency_us)
                .max()
                .unwrap_or(0);
            let waited = if completed + failed > 0 {
                format!(", longest wait {}", span(wait))
            } else {
                String::new()
            };
            let title = format!(
                "{} to {}: {completed} completed, {failed} failed, up to {depth} outstanding{waited}",
                span(group[0].from_us),
                span(group[group.len() - 1].to_us),
            );
            let _ = writeln!(
                self.s,
                r#"<rect class="io-column" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{IO_LANE}" fill="transparent"><title>{}</title></rect>"#,
                (self.x(group[group.len() - 1].to_us) - x0).max(0.5),
                escape(&title)
            );
            k = j + 1;
        }
    }
}
