//! The reset timeline as an SVG picture: one lane per client under a bus lane that shows
//! each reset's phases as coloured bands, faults as red lines, and every event and call as
//! a marker on its client's lane. Built from the flight recorder, like the text timeline.

use std::fmt::Write as _;

use hcabus::recorder::RecordKind;
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
    }
}

/// The picture of `host`'s run, focused on its resets.
pub fn render(host: &SimHost) -> String {
    let coord = host.coordinator();
    let records: Vec<_> = coord.recorder().iter().collect();
    let agents = host.agents();
    // The window: from a little before the first fault or reset to a little after the
    // last reset ended; the whole run if nothing happened.
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
    let (lo, hi) = match (interesting.iter().min(), interesting.iter().max()) {
        (Some(&a), Some(&b)) => {
            let pad = ((b - a) / 10).max(5_000);
            (a.saturating_sub(pad), b + pad)
        }
        _ => (0, host.end().as_us().max(1)),
    };
    let x = |t: u64| LEFT + (t.clamp(lo, hi) - lo) as f64 / (hi - lo).max(1) as f64 * WIDTH;
    let lanes = agents.len() + 1;
    let height = TOP + lanes as f64 * LANE + 70.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{height}" viewBox="0 0 {w} {height}" font-family="sans-serif" font-size="12">"#,
        w = LEFT + WIDTH + 30.0
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">{} (seed {}): final state {}, epoch {}</text>"#,
        escape(host.name()),
        host.seed(),
        coord.state(),
        coord.epoch()
    );
    // Lanes.
    let lane_y = |i: usize| TOP + i as f64 * LANE;
    let mut names = vec!["bus".to_string()];
    names.extend(agents.iter().map(|a| a.name().to_string()));
    for (i, name) in names.iter().enumerate() {
        let y = lane_y(i);
        let fill = if i % 2 == 0 { "#f8f9fa" } else { "#ffffff" };
        let _ = writeln!(
            s,
            r#"<rect x="{LEFT}" y="{y}" width="{WIDTH}" height="{LANE}" fill="{fill}"/><text x="10" y="{}">{}</text>"#,
            y + LANE / 2.0 + 4.0,
            escape(name)
        );
    }
    // Phase bands on the bus lane, and faint across every lane.
    let mut phase: Option<(State, u64)> = None;
    let mut bands = Vec::new();
    for r in &records {
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
        bands.push((st, from, hi));
    }
    for (st, from, to) in &bands {
        let Some((colour, label)) = phase_colour(*st) else {
            continue;
        };
        // A phase of no virtual time still shows as a sliver.
        let (x0, w) = (x(*from), (x(*to) - x(*from)).max(2.0));
        let _ = writeln!(
            s,
            r#"<rect x="{x0:.1}" y="{TOP}" width="{w:.1}" height="{h}" fill="{colour}" opacity="0.12"/><rect x="{x0:.1}" y="{y}" width="{w:.1}" height="{bh}" fill="{colour}"><title>{label}: {d} us</title></rect>"#,
            h = lanes as f64 * LANE,
            y = TOP + 6.0,
            bh = LANE - 12.0,
            d = to - from
        );
    }
    // What each reset was and how it ended, one caption at its start on the bus lane.
    let mut captions: Vec<(u64, String)> = Vec::new();
    let mut open: Option<(u64, String)> = None;
    for r in &records {
        match r.kind {
            RecordKind::ResetStarted { epoch, reason, .. } => {
                captions.extend(open.take());
                open = Some((r.at.as_us(), format!("{epoch} {reason}")));
            }
            RecordKind::ResetFinished { outcome, .. } => {
                if let Some((at, text)) = open.take() {
                    captions.push((at, format!("{text} \u{2192} {}", outcome.as_str())));
                }
            }
            RecordKind::ResetFailed { error, .. } => {
                if let Some((at, text)) = open.take() {
                    captions.push((at, format!("{text} \u{2192} {}", error.as_str())));
                }
            }
            _ => {}
        }
    }
    captions.extend(open);
    for (at, text) in captions {
        // Near the right edge the caption ends there instead of running off the picture.
        let (cx, anchor) = if x(at) > LEFT + WIDTH * 0.8 {
            (LEFT + WIDTH - 4.0, "end")
        } else {
            (x(at) + 4.0, "start")
        };
        let _ = writeln!(
            s,
            r##"<text x="{cx:.1}" y="{:.1}" fill="#212529" font-size="11" text-anchor="{anchor}">{}</text>"##,
            TOP + LANE - 2.0,
            escape(&text)
        );
    }
    // Faults.
    for (at, fault) in host.faults_applied() {
        let fx = x(at.as_us());
        let _ = writeln!(
            s,
            r##"<line x1="{fx:.1}" y1="{}" x2="{fx:.1}" y2="{}" stroke="#d00000" stroke-width="2" stroke-dasharray="4 3"/><text x="{:.1}" y="{}" fill="#d00000">{}</text>"##,
            TOP - 14.0,
            TOP + lanes as f64 * LANE,
            fx + 3.0,
            TOP - 4.0,
            escape(&format!("{fault:?}"))
        );
    }
    // Events and calls on client lanes.
    for r in &records {
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
                call: Call::ResetVeto,
            } => (client, "#9b2226", "VETO", true),
            RecordKind::Unresponsive { client, .. } => (client, "#9b2226", "FORCED", true),
            _ => continue,
        };
        let Some(lane) = host.agent_of(client) else {
            continue;
        };
        let (cx, cy) = (x(r.at.as_us()), lane_y(lane + 1) + LANE / 2.0);
        let title = format!("{label} at {} us", r.at.as_us());
        if round {
            let _ = writeln!(
                s,
                r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{colour}"><title>{title}</title></circle>"#
            );
        } else {
            let _ = writeln!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="8" height="16" fill="{colour}"><title>{title}</title></rect>"#,
                cx - 4.0,
                cy - 8.0
            );
        }
    }
    // Time axis.
    let axis_y = TOP + lanes as f64 * LANE + 16.0;
    for i in 0..=5 {
        let t = lo + (hi - lo) * i / 5;
        let tx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{}" x2="{tx:.1}" y2="{}" stroke="#adb5bd"/><text x="{tx:.1}" y="{}" text-anchor="middle">{:.1} ms</text>"##,
            axis_y - 8.0,
            axis_y - 2.0,
            axis_y + 12.0,
            t as f64 / 1000.0
        );
    }
    // Legend.
    let ly = axis_y + 34.0;
    let mut lx = LEFT;
    for (colour, label) in [
        ("#f4a261", "quiesce"),
        ("#e76f51", "hardware reset / RESET"),
        ("#2a9d8f", "restore / RESET_END"),
        ("#264653", "execute"),
        ("#9b2226", "veto / forced"),
        ("#d00000", "fault"),
    ] {
        let _ = writeln!(
            s,
            r#"<rect x="{lx}" y="{}" width="12" height="12" fill="{colour}"/><text x="{}" y="{ly}">{label}</text>"#,
            ly - 10.0,
            lx + 16.0
        );
        lx += 175.0;
    }
    s.push_str("</svg>\n");
    s
}
