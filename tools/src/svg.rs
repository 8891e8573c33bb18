//! The reset timeline as an SVG picture: one lane per client under a bus lane that shows
//! each reset's phases as coloured bands, faults as red lines, and every event and call as
//! a marker on its client's lane. Built from the flight recorder, like the text timeline.

use std::fmt::Write as _;

use hcabus::hca::HwStep;
use hcabus::recorder::{Record, RecordKind};
use hcabus::types::EventKind;
use hcabus::types::{Call, State};
use hcabus_lab::stack::Node;

pub mod curve;
pub mod fleet;
mod io;
mod ports;
use io::{IoLane, IO_LANE};

const LEFT: f64 = 150.0;
const WIDTH: f64 = 1100.0;
const LANE: f64 = 34.0;
const TOP: f64 = 56.0;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A duration or an instant as a person reads it: "980 us", "1.250 ms", "2.000 s".
pub fn span(us: u64) -> String {
    if us >= 1_000_000 {
        format!("{:.3} s", us as f64 / 1e6)
    } else if us >= 1_000 {
        format!("{:.3} ms", us as f64 / 1e3)
    } else {
        format!("{us} us")
    }
}

/// A round step (1, 2 or 5 times a power of ten, in us) giving four to eight ticks over
/// `width`.
pub fn tick_step(width_us: u64) -> u64 {
    let raw = (width_us / 8).max(1);
    let mut p = 1u64;
    while p.saturating_mul(10) <= raw {
        p *= 10;
    }
    [1, 2, 5, 10]
        .into_iter()
        .map(|m| p.saturating_mul(m))
        .find(|s| *s >= raw)
        .unwrap_or(p.saturating_mul(10))
}

/// A tick's label, with as many decimals as its step needs.
fn tick_label(t_us: u64, step_us: u64) -> String {
    let ms = t_us as f64 / 1e3;
    match step_us {
        s if s % 1_000 == 0 => format!("{} ms", t_us / 1_000),
        s if s % 100 == 0 => format!("{ms:.1} ms"),
        _ => format!("{ms:.3} ms"),
    }
}

/// About how wide `text` is in sans-serif of `size` px: capitals are wider.
fn text_width(text: &str, size: f64) -> f64 {
    text.chars()
        .map(|c| if c.is_ascii_uppercase() { 0.68 } else { 0.55 })
        .sum::<f64>()
        * size
}

/// RESET's colour: its own, not the hardware band's.
const RESET_COLOUR: &str = "#7b2cbf";

fn phase_colour(state: State) -> Option<(&'static str, &'static str)> {
    match state {
        State::Preparing => Some(("#e9c46a", "query")),
        State::Quiescing => Some(("#f4a261", "quiesce")),
        State::Resetting => Some(("#e76f51", "hardware reset")),
        State::Restoring => Some(("#2a9d8f", "restore")),
        State::Failed => Some(("#6c757d", "failed")),
        // Serving, or gone: no phase band.
        State::Operational | State::Removed => None,
    }
}

fn marker(kind: EventKind) -> (&'static str, &'static str) {
    match kind {
        EventKind::Reset => (RESET_COLOUR, "RESET"),
        EventKind::ResetEnd => ("#2a9d8f", "RESET_END"),
        EventKind::ResetFailed => ("#6c757d", "RESET_FAILED"),
        EventKind::ResetAborted => ("#8d99ae", "RESET_ABORTED"),
        EventKind::DeviceFatal => ("#000000", "DEVICE_FATAL"),
        EventKind::ResetQuery => ("#e9c46a", "RESET_QUERY"),
        EventKind::PortActive => ("#52b788", "PORT_ACTIVE"),
        EventKind::PortDown => ("#9d0208", "PORT_DOWN"),
    }
}

/// The picture of `host`'s run, focused on its resets.
pub fn render(host: &Node) -> String {
    let records: Vec<&Record> = host.coordinator().recorder().iter().collect();
    render_in(host, window(host, &records), None, io::disk_lanes(host)).0
}

/// The picture of a run of several adapters: one lane group per adapter, one above the
/// other on one time axis (the window spans every adapter's resets).
pub fn render_many(hosts: &[(String, Node)]) -> String {
    // An adapter where nothing happened does not stretch the window to the whole run.
    let windows: Vec<(u64, u64)> = hosts
        .iter()
        .filter_map(|(_, h)| {
            let records: Vec<&Record> = h.coordinator().recorder().iter().collect();
            busy_window(h, &records)
        })
        .collect();
    let whole = hosts
        .iter()
        .map(|(_, h)| h.end().as_us())
        .max()
        .unwrap_or(1)
        .max(1);
    let lo = windows.iter().map(|w| w.0).min().unwrap_or(0);
    let hi = windows.iter().map(|w| w.1).max().unwrap_or(whole);
    let w = LEFT + WIDTH + 30.0;
    let mut body = String::new();
    let mut y = 0.0;
    // A multipath disk spans adapters: its lane goes under the last adapter's.
    let mut multipath = Some(io::multipath_lanes(hosts));
    for (k, (name, host)) in hosts.iter().enumerate() {
        let mut io = io::disk_lanes(host);
        if k + 1 == hosts.len() {
            io.extend(multipath.take().unwrap_or_default());
        }
        let (svg, height) = render_in(host, (lo, hi), Some(name), io);
        let _ = writeln!(body, r#"<g transform="translate(0 {y})">"#);
        // The group's own <svg> element nests as is: SVG allows it inside another.
        body.push_str(&svg);
        body.push_str("</g>\n");
        y += height;
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{y}\" viewBox=\"0 0 {w} {y}\">\n{body}</svg>\n"
    )
}

/// The picture of one adapter over `lo..hi`, titled with its adapter's name in a host of
/// several, with the I/O lanes `io`; with its height.
fn render_in(
    host: &Node,
    (lo, hi): (u64, u64),
    adapter: Option<&str>,
    io: Vec<IoLane>,
) -> (String, f64) {
    let records: Vec<&Record> = host.coordinator().recorder().iter().collect();
    let mut c = Canvas {
        s: String::new(),
        lo,
        hi,
        lanes: host.agents().len() + 1,
        io_lanes: io.len(),
    };
    let height = c.height();
    c.header(host, adapter);
    c.lanes(host);
    c.io_lanes(&io);
    c.phase_bands(&records);
    c.ports(host, &records);
    c.attempts(&records);
    c.captions(host, &records);
    c.faults(host);
    c.markers(host, &records);
    let axis_y = c.axis();
    c.legend(axis_y);
    c.s.push_str("</svg>\n");
    (c.s, height)
}

/// Whether the picture draws `r`: the window must hold every one.
fn drawn(r: &Record) -> bool {
    match r.kind {
        RecordKind::Transition { .. }
        | RecordKind::Event { .. }
        | RecordKind::Unresponsive { .. }
        | RecordKind::Throttled { .. }
        | RecordKind::Vetoed { .. } => true,
        RecordKind::Call { call, .. } => matches!(call, Call::ResetExecute | Call::ResetConsent),
        RecordKind::Hw { step, .. } => is_attempt(step),
        _ => false,
    }
}

fn is_attempt(step: HwStep) -> bool {
    matches!(step, HwStep::AssertReset | HwStep::FunctionLevelReset)
}

/// The window: from a little before the first thing drawn (a fault, a reset, a marker) to a
/// little after the last; the whole run if nothing happened.
fn window(host: &Node, records: &[&Record]) -> (u64, u64) {
    busy_window(host, records).unwrap_or((0, host.end().as_us().max(1)))
}

/// [`window`], or `None` when nothing happened.
fn busy_window(host: &Node, records: &[&Record]) -> Option<(u64, u64)> {
    let interesting: Vec<u64> = records
        .iter()
        .filter(|r| drawn(r))
        .flat_map(|r| [r.at.as_us(), r.last_at.as_us()])
        .chain(host.faults_applied().iter().map(|(t, _)| t.as_us()))
        .collect();
    let (a, b) = (*interesting.iter().min()?, *interesting.iter().max()?);
    let pad = ((b - a) / 10).max(5_000);
    Some((a.saturating_sub(pad), b + pad))
}

/// The picture being drawn: time runs from `lo` to `hi` (us) across `WIDTH`.
struct Canvas {
    s: String,
    lo: u64,
    hi: u64,
    lanes: usize,
    io_lanes: usize,
}

impl Canvas {
    fn x(&self, t: u64) -> f64 {
        let (lo, hi) = (self.lo, self.hi);
        LEFT + (t.clamp(lo, hi) - lo) as f64 / (hi - lo).max(1) as f64 * WIDTH
    }

    fn lane_y(i: usize) -> f64 {
        TOP + i as f64 * LANE
    }

    /// Every lane, the I/O lanes included.
    fn lanes_height(&self) -> f64 {
        self.lanes as f64 * LANE + self.io_lanes as f64 * IO_LANE
    }

    /// The legend's rows: phases, markers, ports and, where there are I/O lanes, I/O.
    fn legend_rows(&self) -> usize {
        3 + usize::from(self.io_lanes > 0)
    }

    fn height(&self) -> f64 {
        TOP + self.lanes_height() + 54.0 + 18.0 * self.legend_rows() as f64
    }

    fn header(&mut self, host: &Node, adapter: Option<&str>) {
        let coord = host.coordinator();
        let height = self.height();
        let _ = writeln!(
            self.s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" font-family="sans-serif" font-size="12">"#,
            w = LEFT + WIDTH + 30.0
        );
        let _ = writeln!(self.s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            self.s,
            r#"<text x="10" y="22" font-size="15" font-weight="bold">{}{} (seed {}): final state {}, epoch {}</text>"#,
            adapter.map_or(String::new(), |a| format!("{}: ", escape(a))),
            escape(host.name()),
            host.seed(),
            coord.state(),
            coord.epoch()
        );
    }

    fn lanes(&mut self, host: &Node) {
        let mut names = vec!["bus".to_string()];
        names.extend(host.agents().iter().map(|a| a.name().to_string()));
        for (i, name) in names.iter().enumerate() {
            let y = Self::lane_y(i);
            let fill = if i % 2 == 0 { "#f8f9fa" } else { "#ffffff" };
            let _ = writeln!(
                self.s,
                r#"<rect x="{LEFT}" y="{y}" width="{WIDTH}" height="{LANE}" fill="{fill}"/><text x="10" y="{}">{}</text>"#,
                y + LANE / 2.0 + 4.0,
                escape(name)
            );
        }
    }

    /// Phase bands on the bus lane, and faint across every lane.
    fn phase_bands(&mut self, records: &[&Record]) {
        let mut phase: Option<(State, u64)> = None;
        let mut bands = Vec::new();
        for r in records {
            if let RecordKind::Transition { to, .. } = r.kind {
                if let Some((st, from)) = phase.take() {
                    bands.push((st, from, r.at.as_us()));
                }
                if phase_colour(to).is_some() {
                    phase = Some((to, r.at.as_us()));
                }
            }
        }
        if let Some((st, from)) = phase {
            bands.push((st, from, self.hi));
        }
        for (st, from, to) in bands {
            let Some((colour, label)) = phase_colour(st) else {
                continue;
            };
            // A phase of no virtual time still shows as a sliver.
            let (x0, w) = (self.x(from), (self.x(to) - self.x(from)).max(2.0));
            let _ = writeln!(
                self.s,
                r#"<rect x="{x0:.1}" y="{TOP}" width="{w:.1}" height="{h}" fill="{colour}" opacity="0.12"/><rect class="phase" x="{x0:.1}" y="{y}" width="{w:.1}" height="{bh}" fill="{colour}"><title>{label} {d}, from {at}</title></rect>"#,
                h = self.lanes_height(),
                y = TOP + 6.0,
                bh = LANE - 12.0,
                d = span(to - from),
                at = span(from)
            );
        }
    }

    /// What each reset was and how it ended (a removal, a veto and a failure included), one
    /// caption at its start on the bus lane; a reset still running at the end says so.
    fn captions(&mut self, host: &Node, records: &[&Record]) {
        let mut captions: Vec<(u64, String)> = host
            .resets()
            .iter()
            .map(|r| {
                let outcome = r.outcome();
                let (epoch, why) = (r.epoch, r.reason_name());
                (
                    r.started_at.as_us(),
                    format!("{epoch} {why} \u{2192} {outcome}"),
                )
            })
            .collect();
        let last_start = records.iter().rev().find_map(|r| match r.kind {
            RecordKind::ResetStarted { epoch, reason, .. } => Some((r.at.as_us(), epoch, reason)),
            _ => None,
        });
        if let Some((at, epoch, reason)) = last_start {
            if !captions.iter().any(|(t, _)| *t == at) {
                captions.push((at, format!("{epoch} {reason} \u{2192} still running")));
            }
        }
        captions.sort_by_key(|c| c.0);
        // Where each of the two caption rows (under the band, above the lane) is free from.
        let mut free = [f64::MIN; 2];
        for (at, text) in captions {
            let w = text_width(&text, 11.0);
            // Near the right edge the caption ends there instead of running off the picture.
            let (cx, anchor, x0) = if self.x(at) + 4.0 + w > LEFT + WIDTH {
                (LEFT + WIDTH - 4.0, "end", LEFT + WIDTH - 4.0 - w)
            } else {
                (self.x(at) + 4.0, "start", self.x(at) + 4.0)
            };
            // A caption that would run into the one before goes to the other row.
            let row = usize::from(x0 < free[0] && x0 >= free[1]);
            free[row] = x0 + w + 6.0;
            let y = [TOP + LANE - 2.0, TOP - 4.0][row];
            let _ = writeln!(
                self.s,
                r##"<text class="caption" x="{cx:.1}" y="{y:.1}" fill="#212529" font-size="11" text-anchor="{anchor}">{}</text>"##,
                escape(&text)
            );
        }
    }

    /// Each reset asserted in the hardware phase, retries and the function-level reset
    /// apart: a white tick across the band, labelled, red when the step failed.
    fn attempts(&mut self, records: &[&Record]) {
        let mut soft = 0;
        for r in records {
            let (step, outcome) = match r.kind {
                RecordKind::ResetStarted { .. } => {
                    soft = 0;
                    continue;
                }
                RecordKind::Hw { step, outcome, .. } if is_attempt(step) => (step, outcome),
                _ => continue,
            };
            let (label, what) = if step == HwStep::FunctionLevelReset {
                ("FLR".to_string(), "function-level reset".to_string())
            } else {
                soft += 1;
                (format!("soft {soft}"), format!("soft reset {soft}"))
            };
            let colour = if outcome.is_ok() {
                "#ffffff"
            } else {
                "#d00000"
            };
            let x = self.x(r.at.as_us());
            let title = escape(&format!(
                "{what} at {}: {}",
                span(r.at.as_us()),
                outcome.as_str()
            ));
            let _ = writeln!(
                self.s,
                r##"<g class="attempt"><line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="{colour}" stroke-width="2"/><text x="{tx:.1}" y="{ty}" fill="{colour}" font-size="9">{label}</text><title>{title}</title></g>"##,
                y0 = TOP + 6.0,
                y1 = TOP + LANE - 6.0,
                tx = x + 2.0,
                ty = TOP + 15.0,
            );
        }
    }

    fn faults(&mut self, host: &Node) {
        for (at, fault) in host.faults_applied() {
            let fx = self.x(at.as_us());
            let label = format!("{fault:?}");
            // Near the right edge the label ends at the line instead of running off.
            let (tx, anchor) = if fx + 3.0 + text_width(&label, 12.0) > LEFT + WIDTH + 28.0 {
                (fx - 3.0, "end")
            } else {
                (fx + 3.0, "start")
            };
            let _ = writeln!(
                self.s,
                r##"<g class="fault"><line x1="{fx:.1}" y1="{}" x2="{fx:.1}" y2="{}" stroke="#d00000" stroke-width="2" stroke-dasharray="4 3"/><text x="{tx:.1}" y="{}" fill="#d00000" text-anchor="{anchor}">{}</text><title>{} at {}</title></g>"##,
                TOP - 14.0,
                TOP + self.lanes_height(),
                TOP - 4.0,
                escape(&label),
                escape(&label),
                span(at.as_us())
            );
        }
    }

    /// Events and calls on client lanes.
    fn markers(&mut self, host: &Node, records: &[&Record]) {
        for r in records {
            let vetoed;
            let (client, colour, label, round) = match r.kind {
                RecordKind::Event { client, event, .. } => {
                    let (c, l) = marker(event);
                    (client, c, l, false)
                }
                RecordKind::Call {
                    client: Some(client),
                    call: Call::ResetExecute,
                } => (client, "#264653", "execute", true),
                RecordKind::Call {
                    client: Some(client),
                    call: Call::ResetConsent,
                } => (client, "#264653", "consent", true),
                RecordKind::Unresponsive { client, aborts } => {
                    let label = if aborts { "UNRESPONSIVE" } else { "FORCED" };
                    (client, "#9b2226", label, true)
                }
                RecordKind::Throttled { client, .. } => (client, "#9b2226", "THROTTLED", true),
                RecordKind::Vetoed { client, reason } => {
                    vetoed = format!("VETO ({reason})");
                    (client, "#9b2226", vetoed.as_str(), true)
                }
                _ => continue,
            };
            let Some(lane) = host.agent_of(client) else {
                continue;
            };
            let (cx, cy) = (self.x(r.at.as_us()), Self::lane_y(lane + 1) + LANE / 2.0);
            // A veto's reason is the client's own text.
            let title = escape(&format!("{label}: {} at {}", r.name, span(r.at.as_us())));
            if round {
                let _ = writeln!(
                    self.s,
                    r#"<circle class="marker" cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{colour}"><title>{title}</title></circle>"#
                );
            } else {
                let _ = writeln!(
                    self.s,
                    r#"<rect class="marker" x="{:.1}" y="{:.1}" width="8" height="16" fill="{colour}"><title>{title}</title></rect>"#,
                    cx - 4.0,
                    cy - 8.0
                );
            }
        }
    }

    /// The time axis, its ticks on round values; returns where it is drawn.
    fn axis(&mut self) -> f64 {
        let axis_y = TOP + self.lanes_height() + 16.0;
        let (lo, hi) = (self.lo, self.hi);
        let step = tick_step(hi - lo);
        let mut t = lo.div_ceil(step) * step;
        while t <= hi {
            let tx = self.x(t);
            let _ = writeln!(
                self.s,
                r##"<g class="tick"><line x1="{tx:.1}" y1="{}" x2="{tx:.1}" y2="{}" stroke="#adb5bd"/><text x="{tx:.1}" y="{}" text-anchor="middle">{}</text></g>"##,
                axis_y - 8.0,
                axis_y - 2.0,
                axis_y + 12.0,
                tick_label(t, step)
            );
            t += step;
        }
        axis_y
    }

    /// Two rows: the phases (bands) and the markers, each entry as wide as its text.
    fn legend(&mut self, axis_y: f64) {
        let phases: [(&str, &str); 5] = [
            ("#e9c46a", "query"),
            ("#f4a261", "quiesce"),
            ("#e76f51", "hardware reset (ticks: soft n, FLR)"),
            ("#2a9d8f", "restore"),
            ("#6c757d", "failed"),
        ];
        let markers: [(&str, &str); 9] = [
            ("#e9c46a", "RESET_QUERY"),
            (RESET_COLOUR, "RESET"),
            ("#264653", "execute / consent"),
            ("#2a9d8f", "RESET_END"),
            ("#6c757d", "RESET_FAILED"),
            ("#000000", "DEVICE_FATAL"),
            ("#52b788", "PORT_ACTIVE"),
            ("#9d0208", "PORT_DOWN"),
            ("#9b2226", "veto / forced / throttled"),
        ];
        let rows: [(&str, &[(&str, &str)]); 4] = [
            ("phases", &phases),
            ("markers", &markers),
            ("ports", &ports::LEGEND),
            ("I/O", &io::LEGEND),
        ];
        for (row, (title, entries)) in rows.iter().take(self.legend_rows()).enumerate() {
            let ly = axis_y + 34.0 + row as f64 * 18.0;
            let _ = writeln!(
                self.s,
                r##"<text x="10" y="{ly}" fill="#6c757d">{title}</text>"##
            );
            let mut lx = 80.0;
            for (colour, label) in entries.iter() {
                let _ = writeln!(
                    self.s,
                    r#"<g class="legend"><rect x="{lx}" y="{}" width="12" height="12" fill="{colour}"/><text x="{}" y="{ly}">{label}</text></g>"#,
                    ly - 10.0,
                    lx + 16.0
                );
                lx += 16.0 + text_width(label, 12.0) + 14.0;
            }
        }
        let fault_x = LEFT + WIDTH - 60.0;
        let _ = writeln!(
            self.s,
            r##"<g class="legend"><line x1="{fault_x}" y1="{y0}" x2="{fault_x}" y2="{y1}" stroke="#d00000" stroke-width="2" stroke-dasharray="4 3"/><text x="{}" y="{y1}" fill="#d00000">fault</text></g>"##,
            fault_x + 6.0,
            y0 = axis_y + 22.0,
            y1 = axis_y + 34.0
        );
    }
}
