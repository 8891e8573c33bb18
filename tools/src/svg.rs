//! The reset timeline as an SVG picture: one lane per client under a bus lane that shows
//! each reset's phases as coloured bands, faults as red lines, and every event and call as
//! a marker on its client's lane. Built from the flight recorder, like the text timeline.

use std::fmt::Write as _;

use hcabus::recorder::{Record, RecordKind};
use hcabus::sim::SimHost;
use hcabus::types::EventKind;
use hcabus::types::{Call, State};

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

fn phase_colour(state: State) -> Option<(&'static str, &'static str)> {
    match state {
        State::Preparing => Some(("#e9c46a", "query")),
        State::Quiescing => Some(("#f4a261", "quiesce")),
        State::Resetting => Some(("#e76f51", "hardware reset")),
        State::Restoring => Some(("#2a9d8f", "restore")),
        State::Failed => Some(("#6c757d", "failed")),
        _ => None,
    }
}

fn marker(kind: EventKind) -> (&'static str, &'static str) {
    match kind {
        EventKind::Reset => ("#e76f51", "RESET"),
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
pub fn render(host: &SimHost) -> String {
    let records: Vec<&Record> = host.coordinator().recorder().iter().collect();
    render_in(host, window(host, &records), None).0
}

/// The picture of a run of several adapters: one lane group per adapter, one above the
/// other on one time axis (the window spans every adapter's resets).
pub fn render_many(hosts: &[(String, SimHost)]) -> String {
    let windows: Vec<(u64, u64)> = hosts
        .iter()
        .map(|(_, h)| {
            let records: Vec<&Record> = h.coordinator().recorder().iter().collect();
            window(h, &records)
        })
        .collect();
    let lo = windows.iter().map(|w| w.0).min().unwrap_or(0);
    let hi = windows.iter().map(|w| w.1).max().unwrap_or(1);
    let w = LEFT + WIDTH + 30.0;
    let mut body = String::new();
    let mut y = 0.0;
    for (name, host) in hosts {
        let (svg, height) = render_in(host, (lo, hi), Some(name));
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
/// several; with its height.
fn render_in(host: &SimHost, (lo, hi): (u64, u64), adapter: Option<&str>) -> (String, f64) {
    let records: Vec<&Record> = host.coordinator().recorder().iter().collect();
    let mut c = Canvas {
        s: String::new(),
        lo,
        hi,
        lanes: host.agents().len() + 1,
    };
    let height = TOP + c.lanes_height() + 70.0;
    c.header(host, adapter);
    c.lanes(host);
    c.phase_bands(&records);
    c.captions(&records);
    c.faults(host);
    c.markers(host, &records);
    let axis_y = c.axis();
    c.legend(axis_y);
    c.s.push_str("</svg>\n");
    (c.s, height)
}

/// The window: from a little before the first fault or reset to a little after the last
/// reset ended; the whole run if nothing happened.
fn window(host: &SimHost, records: &[&Record]) -> (u64, u64) {
    let interesting: Vec<u64> = records
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                RecordKind::Transition { .. } | RecordKind::Event { .. }
            )
        })
        .map(|r| r.at.as_us())
        .chain(host.faults_applied().iter().map(|(t, _)| t.as_us()))
        .collect();
    match (interesting.iter().min(), interesting.iter().max()) {
        (Some(&a), Some(&b)) => {
            let pad = ((b - a) / 10).max(5_000);
            (a.saturating_sub(pad), b + pad)
        }
        _ => (0, host.end().as_us().max(1)),
    }
}

/// The picture being drawn: time runs from `lo` to `hi` (us) across `WIDTH`.
struct Canvas {
    s: String,
    lo: u64,
    hi: u64,
    lanes: usize,
}

impl Canvas {
    fn x(&self, t: u64) -> f64 {
        let (lo, hi) = (self.lo, self.hi);
        LEFT + (t.clamp(lo, hi) - lo) as f64 / (hi - lo).max(1) as f64 * WIDTH
    }

    fn lane_y(i: usize) -> f64 {
        TOP + i as f64 * LANE
    }

    fn lanes_height(&self) -> f64 {
        self.lanes as f64 * LANE
    }

    fn header(&mut self, host: &SimHost, adapter: Option<&str>) {
        let coord = host.coordinator();
        let height = TOP + self.lanes_height() + 70.0;
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

    fn lanes(&mut self, host: &SimHost) {
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
                r#"<rect x="{x0:.1}" y="{TOP}" width="{w:.1}" height="{h}" fill="{colour}" opacity="0.12"/><rect x="{x0:.1}" y="{y}" width="{w:.1}" height="{bh}" fill="{colour}"><title>{label}: {d} us</title></rect>"#,
                h = self.lanes_height(),
                y = TOP + 6.0,
                bh = LANE - 12.0,
                d = to - from
            );
        }
    }

    /// What each reset was and how it ended, one caption at its start on the bus lane.
    fn captions(&mut self, records: &[&Record]) {
        let mut captions: Vec<(u64, String)> = Vec::new();
        let mut open: Option<(u64, String)> = None;
        for r in records {
            let end = match r.kind {
                RecordKind::ResetStarted { epoch, reason, .. } => {
                    captions.extend(open.take());
                    open = Some((r.at.as_us(), format!("{epoch} {reason}")));
                    continue;
                }
                RecordKind::ResetFinished { outcome, .. } => outcome.as_str(),
                RecordKind::ResetFailed { error, .. } => error.as_str(),
                _ => continue,
            };
            if let Some((at, text)) = open.take() {
                captions.push((at, format!("{text} \u{2192} {end}")));
            }
        }
        captions.extend(open);
        for (at, text) in captions {
            // Near the right edge the caption ends there instead of running off the picture.
            let (cx, anchor) = if self.x(at) > LEFT + WIDTH * 0.8 {
                (LEFT + WIDTH - 4.0, "end")
            } else {
                (self.x(at) + 4.0, "start")
            };
            let _ = writeln!(
                self.s,
                r##"<text x="{cx:.1}" y="{:.1}" fill="#212529" font-size="11" text-anchor="{anchor}">{}</text>"##,
                TOP + LANE - 2.0,
                escape(&text)
            );
        }
    }

    fn faults(&mut self, host: &SimHost) {
        for (at, fault) in host.faults_applied() {
            let fx = self.x(at.as_us());
            let _ = writeln!(
                self.s,
                r##"<line x1="{fx:.1}" y1="{}" x2="{fx:.1}" y2="{}" stroke="#d00000" stroke-width="2" stroke-dasharray="4 3"/><text x="{:.1}" y="{}" fill="#d00000">{}</text>"##,
                TOP - 14.0,
                TOP + self.lanes_height(),
                fx + 3.0,
                TOP - 4.0,
                escape(&format!("{fault:?}"))
            );
        }
    }

    /// Events and calls on client lanes.
    fn markers(&mut self, host: &SimHost, records: &[&Record]) {
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
                RecordKind::Unresponsive { client, .. } => (client, "#9b2226", "FORCED", true),
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
            let title = escape(&format!("{label} at {} us", r.at.as_us()));
            if round {
                let _ = writeln!(
                    self.s,
                    r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{colour}"><title>{title}</title></circle>"#
                );
            } else {
                let _ = writeln!(
                    self.s,
                    r#"<rect x="{:.1}" y="{:.1}" width="8" height="16" fill="{colour}"><title>{title}</title></rect>"#,
                    cx - 4.0,
                    cy - 8.0
                );
            }
        }
    }

    /// The time axis; returns where it is drawn.
    fn axis(&mut self) -> f64 {
        let axis_y = TOP + self.lanes_height() + 16.0;
        let (lo, hi) = (self.lo, self.hi);
        for i in 0..=5 {
            let t = lo + (hi - lo) * i / 5;
            let tx = self.x(t);
            let _ = writeln!(
                self.s,
                r##"<line x1="{tx:.1}" y1="{}" x2="{tx:.1}" y2="{}" stroke="#adb5bd"/><text x="{tx:.1}" y="{}" text-anchor="middle">{:.1} ms</text>"##,
                axis_y - 8.0,
                axis_y - 2.0,
                axis_y + 12.0,
                t as f64 / 1000.0
            );
        }
        axis_y
    }

    fn legend(&mut self, axis_y: f64) {
        let ly = axis_y + 34.0;
        let mut lx = LEFT;
        for (colour, label) in [
            ("#e9c46a", "query / RESET_QUERY"),
            ("#f4a261", "quiesce"),
            ("#e76f51", "hardware reset / RESET"),
            ("#2a9d8f", "restore / RESET_END"),
            ("#264653", "execute"),
            ("#9b2226", "veto / forced"),
            ("#d00000", "fault"),
        ] {
            let _ = writeln!(
                self.s,
                r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{colour}"/><text x="{}" y="{ly}">{label}</text>"#,
                ly - 10.0,
                lx + 16.0
            );
            lx += 155.0;
        }
    }
}
