//! The bus lane's own story below the phases: each port's state over time (down, training,
//! waiting for the subnet manager, active), and the health poll that found an error.

use std::fmt::Write as _;

use hcabus::hca::HwStep;
use hcabus::recorder::{HwOutcome, Record, RecordKind};
use hcabus::types::PortState;
use hcabus_lab::stack::Node;

use super::{escape, span, Canvas};

const DOWN: &str = "#9d0208";
const TRAINING: &str = "#fb8500";
const WAITING_SM: &str = "#ffd166";
const ACTIVE: &str = "#52b788";
const HEALTH: &str = "#d00000";
/// The strip along the top of the bus lane the port bars share (the phase band starts
/// below it).
const STRIP: f64 = 6.0;

/// The ports row of the legend.
pub(super) const LEGEND: [(&str, &str); 5] = [
    (DOWN, "down"),
    (TRAINING, "training"),
    (WAITING_SM, "waiting for the SM"),
    (ACTIVE, "active"),
    (HEALTH, "health poll found an error"),
];

/// A port in one state from `from` to `to`.
struct Segment {
    port: u8,
    from: u64,
    to: u64,
    colour: &'static str,
    what: &'static str,
}

/// Each port's states in time, from its records, up to `end`.
fn segments(records: &[&Record], end: u64) -> Vec<Segment> {
    let mut open: Vec<(u8, u64, PortState)> = Vec::new();
    let mut out = Vec::new();
    for r in records {
        let RecordKind::Port { port, state, .. } = r.kind else {
            continue;
        };
        let at = r.at.as_us();
        if let Some(i) = open.iter().position(|(p, _, _)| *p == port) {
            let (_, from, was) = open.remove(i);
            push(&mut out, port, (from, at), was);
        }
        open.push((port, at, state));
    }
    for (port, from, was) in open {
        push(&mut out, port, (from, end.max(from)), was);
    }
    out
}

fn push(out: &mut Vec<Segment>, port: u8, (from, to): (u64, u64), state: PortState) {
    let (colour, what) = match state {
        PortState::Active => (ACTIVE, "active"),
        PortState::Init | PortState::Armed => (WAITING_SM, "waiting for the SM"),
        PortState::Down => (DOWN, "down"),
    };
    if to > from {
        out.push(Segment {
            port,
            from,
            to,
            colour,
            what,
        });
    }
}

impl Canvas {
    /// One thin bar per port along the top of the bus lane, and a diamond where a health
    /// poll found an error.
    pub(super) fn ports(&mut self, host: &Node, records: &[&Record]) {
        let (link_up, _) = host.hca().ports().timings();
        let link_up = link_up.as_us();
        let mut segs = segments(records, host.end().as_us());
        // The link trained for `link_up` before each Init: carve that out of the Down spell.
        let inits: Vec<(u8, u64)> = segs
            .iter()
            .filter(|s| s.what == "waiting for the SM")
            .map(|s| (s.port, s.from))
            .collect();
        for (port, at) in inits {
            let start = at.saturating_sub(link_up);
            for s in segs
                .iter_mut()
                .filter(|s| s.port == port && s.what == "down")
            {
                if s.to == at && start > s.from {
                    s.to = start;
                }
            }
            if link_up > 0 {
                segs.push(Segment {
                    port,
                    from: start,
                    to: at,
                    colour: TRAINING,
                    what: "training",
                });
            }
        }
        let ports = segs.iter().map(|s| s.port).max().unwrap_or(1).max(1);
        let bar = STRIP / f64::from(ports);
        for s in &segs {
            let (x0, x1) = (self.x(s.from), self.x(s.to));
            let y = Self::lane_y(0) + f64::from(s.port - 1) * bar;
            let _ = writeln!(
                self.s,
                r#"<rect class="port" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>port {} {}: {} to {}</title></rect>"#,
                (x1 - x0).max(0.5),
                bar * 0.8,
                s.colour,
                s.port,
                s.what,
                span(s.from),
                span(s.to)
            );
        }
        self.health_found(records);
    }

    fn health_found(&mut self, records: &[&Record]) {
        for r in records {
            let RecordKind::Hw {
                step: HwStep::ReadHealth,
                outcome: HwOutcome::Catastrophic,
                ..
            } = r.kind
            else {
                continue;
            };
            let (cx, cy) = (self.x(r.at.as_us()), Self::lane_y(0) + 8.0);
            let title = escape(&format!(
                "health poll found a catastrophic error at {}",
                span(r.at.as_us())
            ));
            let _ = writeln!(
                self.s,
                r#"<path class="health" d="M{cx:.1},{:.1} L{:.1},{cy:.1} L{cx:.1},{:.1} L{:.1},{cy:.1} Z" fill="{HEALTH}"><title>{title}</title></path>"#,
                cy - 5.0,
                cx + 5.0,
                cy + 5.0,
                cx - 5.0
            );
        }
    }
}
