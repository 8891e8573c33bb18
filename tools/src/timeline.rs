//! A readable timeline of a simulated run: one lane per client, rebuilt from the flight
//! recorder, and a summary of each reset.

use std::fmt::Write as _;

use hcabus::hca::HwStep;
use hcabus::recorder::{HwOutcome, Record, RecordKind};
use hcabus::types::Call;
use hcabus::types::{ClientId, PortState};
use hcabus_lab::stack::Node;
use hcabus_sim::Fault;

const TIME_W: usize = 10;
const BUS_W: usize = 34;

/// A duration in microseconds as the timeline prints it ("1.250ms", "80us", "-").
pub fn us(v: Option<u64>) -> String {
    match v {
        Some(v) if v >= 1000 => format!("{}.{:03}ms", v / 1000, v % 1000),
        Some(v) => format!("{v}us"),
        None => "-".into(),
    }
}

/// Where a record goes: the bus column (`None`) or a client lane, and its text.
fn cell(host: &Node, rec: &Record) -> Option<(Option<usize>, String)> {
    let lane = |id: ClientId| host.agent_of(id);
    Some(match &rec.kind {
        RecordKind::Transition { from, to } => (None, format!("{from} -> {to}")),
        RecordKind::ResetStarted {
            epoch,
            reason,
            planned,
        } => (
            None,
            format!(
                "reset of {epoch}: {reason}{}",
                if *planned { " (planned)" } else { "" }
            ),
        ),
        RecordKind::ResetJoined { reason } => (None, format!("{reason} joins")),
        RecordKind::FollowUpScheduled { reason } => (None, format!("{reason}: follow-up")),
        RecordKind::ResetFinished { epoch, outcome } => {
            (None, format!("{} in {epoch}", outcome.as_str()))
        }
        RecordKind::ResetFailed { error, .. } => (None, format!("FAILED: {}", error.as_str())),
        RecordKind::Event { client, event, .. } => (lane(*client), event.as_str().to_string()),
        RecordKind::Call {
            client: Some(c),
            call,
        } => match call {
            Call::ResetExecute => (lane(*c), "execute".into()),
            Call::Unregister => (lane(*c), "unregister".into()),
            Call::Register => (lane(*c), "register".into()),
            Call::ResetRequest => (lane(*c), "request".into()),
            // Its Vetoed record, with the reason, follows at the same instant.
            Call::ResetVeto => return None,
            Call::ResetConsent => (lane(*c), "consent".into()),
            // An administrator's, the hardware's or PnP's: the coordinator records these
            // with no client (the arm below), so none reaches a client's lane.
            Call::AdminReset
            | Call::AdminRestart
            | Call::SetPolicy
            | Call::SurpriseRemoval
            | Call::CommandTimeout
            | Call::Catastrophic
            | Call::HoldResets
            | Call::ReleaseResets => return None,
        },
        RecordKind::Call { client: None, call } => (None, call.as_str().to_string()),
        RecordKind::Refused { client, call, code } => (
            client.and_then(lane),
            format!("{} refused: {}", call.as_str(), code.as_str()),
        ),
        RecordKind::Unresponsive { client, aborts } => (
            lane(*client),
            if *aborts { "UNRESPONSIVE" } else { "FORCED" }.into(),
        ),
        RecordKind::Throttled { client, .. } => (lane(*client), "THROTTLED".into()),
        RecordKind::Vetoed { client, .. } => (lane(*client), "VETO".into()),
        RecordKind::Hw { step, outcome, .. } => match (step, outcome) {
            // Routine polling: a healthy read, a probe either way.
            (HwStep::ReadHealth, HwOutcome::Healthy | HwOutcome::CounterUnchanged)
            | (HwStep::ProbeReady, HwOutcome::Ready | HwOutcome::NotReady) => return None,
            (_, HwOutcome::Done | HwOutcome::Asserted) => (None, format!("hw {}", step.as_str())),
            (HwStep::ReadHealth, HwOutcome::Catastrophic) => {
                (None, "health poll: catastrophic error".into())
            }
            (_, HwOutcome::Catastrophic) => (None, format!("hw {} CATASTROPHIC", step.as_str())),
            _ => (None, format!("hw {} FAILED", step.as_str())),
        },
        RecordKind::Pnp { op } => (None, format!("PnP {}", op.as_str())),
        RecordKind::Port { port, state, lid } => match state {
            PortState::Active => (None, format!("port {port} active, lid {lid}")),
            PortState::Init => (None, format!("port {port} link up, waiting for the SM")),
            _ => (None, format!("port {port} {}", state.as_str())),
        },
        // An administrator's acts: the record's own line says them.
        RecordKind::PolicyChanged { .. } | RecordKind::FaultInjected { .. } => {
            (None, rec.what().to_string())
        }
    })
}

/// One thing the timeline shows: a row of its own for a fault, or a cell.
enum Put {
    Fresh(u64),
    Cell(u64, usize, String),
}

/// The timeline's rows: records at the same instant share a row while their cells are free.
/// Every column is as wide as its widest cell, so no word is ever cut.
struct Grid<'a> {
    out: String,
    /// Width of each column, the bus first.
    widths: &'a [usize],
    row: Option<(u64, Vec<String>)>,
}

impl Grid<'_> {
    /// Writes `text` into column `col` (0 is the bus) of the row at `t_us`.
    fn put(&mut self, t_us: u64, col: usize, text: String) {
        let fits = matches!(&self.row, Some((rt, cells)) if *rt == t_us && cells[col].is_empty());
        if !fits {
            self.fresh_row(t_us);
        }
        if let Some((_, cells)) = self.row.as_mut() {
            cells[col] = text;
        }
    }

    fn fresh_row(&mut self, t_us: u64) {
        self.flush();
        self.row = Some((t_us, vec![String::new(); self.widths.len()]));
    }

    fn flush(&mut self) {
        let Some((t, cells)) = self.row.take() else {
            return;
        };
        let mut line = format!("{:>TIME_W$}", format!("{}.{:03}", t / 1000, t % 1000));
        for (c, w) in cells.iter().zip(self.widths) {
            let _ = write!(line, " | {c:<w$}");
        }
        let _ = writeln!(self.out, "{}", line.trim_end());
    }
}

/// Renders the run: header, timeline and summary.
pub fn render(host: &Node) -> String {
    let mut out = format!(
        "hcasim: scenario '{}', seed {}, {} ms of virtual time, {} clients\n\n",
        host.name(),
        host.seed(),
        host.end().as_ms(),
        host.agents().len()
    );
    out.push_str(&lanes(host));
    out
}

/// What the timeline shows, in order: faults at their instants, and every record that
/// says something (registrations at start are noise).
fn puts(host: &Node) -> Vec<Put> {
    let faults = host.faults_applied();
    let mut next_fault = 0;
    let mut puts = Vec::new();
    let mut faults_upto = |puts: &mut Vec<Put>, upto: u64| {
        while let Some((at, fault)) = faults.get(next_fault).filter(|(at, _)| at.as_us() <= upto) {
            let text = match fault {
                Fault::PortDown { port, duration } => {
                    format!("FAULT: port {port} cable out {duration}")
                }
                other => format!("FAULT: {other:?}"),
            };
            puts.push(Put::Fresh(at.as_us()));
            puts.push(Put::Cell(at.as_us(), 0, text));
            next_fault += 1;
        }
    };
    for rec in host.coordinator().recorder().iter() {
        faults_upto(&mut puts, rec.at.as_us());
        let register = matches!(
            rec.kind,
            RecordKind::Call {
                call: Call::Register,
                ..
            }
        );
        if register && rec.at.as_us() == 0 {
            continue;
        }
        if let Some((lane, text)) = cell(host, rec) {
            puts.push(Put::Cell(rec.at.as_us(), lane.map_or(0, |l| l + 1), text));
        }
    }
    faults_upto(&mut puts, u64::MAX);
    training(host, &mut puts);
    puts
}

/// The instant each port started training, a row of its own: the link comes up
/// `link_up` after it started, so `link_up` before each port's Init record (the simulated
/// adapter's timings; a real one's events say the same).
fn training(host: &Node, puts: &mut Vec<Put>) {
    let (link_up, _) = host.hca().ports().timings();
    if link_up.as_us() == 0 {
        return;
    }
    for rec in host.coordinator().recorder().iter() {
        if let RecordKind::Port {
            port,
            state: PortState::Init,
            ..
        } = rec.kind
        {
            let at = rec.at.as_us().saturating_sub(link_up.as_us());
            puts.push(Put::Cell(
                at,
                0,
                format!("port {port} training ({link_up})"),
            ));
        }
    }
    // Rows in time order, each instant's cells in the order they were made.
    puts.sort_by_key(|p| match p {
        Put::Fresh(t) | Put::Cell(t, _, _) => *t,
    });
}

/// The timeline of one adapter, one lane per client, and its summary.
pub fn lanes(host: &Node) -> String {
    let mut out = String::new();
    let coord = host.coordinator();
    let agents = host.agents();
    let puts = puts(host);
    let mut widths: Vec<usize> = std::iter::once(BUS_W)
        .chain(agents.iter().map(|a| a.name().chars().count().max(13)))
        .collect();
    for p in &puts {
        if let Put::Cell(_, col, text) = p {
            widths[*col] = widths[*col].max(text.chars().count());
        }
    }

    // Header.
    let mut line = format!("{:>TIME_W$} | {:<w$}", "time ms", "bus", w = widths[0]);
    for (a, w) in agents.iter().zip(&widths[1..]) {
        let _ = write!(line, " | {:<w$}", a.name());
    }
    let _ = writeln!(out, "{}", line.trim_end());
    let _ = writeln!(out, "{}", "-".repeat(line.trim_end().len()));

    let mut grid = Grid {
        out,
        widths: &widths,
        row: None,
    };
    for p in puts {
        match p {
            Put::Fresh(t) => grid.fresh_row(t),
            Put::Cell(t, col, text) => grid.put(t, col, text),
        }
    }
    grid.flush();
    let mut out = grid.out;
    if coord.recorder().dropped() > 0 {
        let _ = writeln!(
            out,
            "({} older records were overwritten in the flight recorder)",
            coord.recorder().dropped()
        );
    }
    let _ = writeln!(out);
    out.push_str(&summary(host));
    out
}

/// The reset table, clients, invariants and final state.
pub fn summary(host: &Node) -> String {
    let mut out = String::new();
    let coord = host.coordinator();
    let _ = writeln!(out, "resets:");
    let _ = writeln!(
        out,
        "  {:<5} {:<15} {:<19} {:>11} {:>11} {:>11} {:>11} {:>6} {:>4}  forced / vetoed by",
        "epoch", "reason", "outcome", "quiesce", "hw reset", "restore", "total", "allocs", "pnp"
    );
    for r in host.resets() {
        let forced = if !r.forced_clients.is_empty() {
            r.forced_clients.join(",")
        } else if !r.unresponsive_clients.is_empty() {
            // An abort is not a veto: it names who did not answer, as such.
            format!("unresponsive: {}", r.unresponsive_clients.join(","))
        } else {
            match (&r.vetoed_by, &r.veto_reason) {
                (Some(by), Some(why)) => format!("{by} ({why})"),
                (Some(by), None) => by.clone(),
                _ => "-".into(),
            }
        };
        let _ = writeln!(
            out,
            "  {:<5} {:<15} {:<19} {:>11} {:>11} {:>11} {:>11} {:>6} {:>4}  {}",
            r.epoch.to_string(),
            r.reason_name(),
            r.outcome(),
            us(r.quiesce_us()),
            us(r.hw_reset_us()),
            us(r.restore_us()),
            us(r.total_us()),
            r.allocations.map_or("-".into(), |a| a.to_string()),
            r.pnp_operations,
            forced
        );
    }
    if host.resets().is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    let _ = writeln!(out, "clients:");
    for a in host.agents() {
        let state = a
            .id()
            .and_then(|id| coord.client(id).ok())
            .map_or("unregistered", |c| c.state.as_str());
        let events: Vec<&str> = a.events().iter().map(|e| e.as_str()).collect();
        let line = format!("  {:<14} {:<13} {}", a.name(), state, events.join(" "));
        let _ = writeln!(out, "{}", line.trim_end());
        if let Some(e) = a.error() {
            let _ = writeln!(out, "  {:<14} ERROR: {e}", "");
        }
    }
    let checker = host.checker();
    let _ = writeln!(
        out,
        "invariants: {} checked, {} violated",
        checker.checked,
        checker.violations.len()
    );
    for v in &checker.violations {
        let _ = writeln!(out, "  VIOLATED: {v}");
    }
    let _ = writeln!(
        out,
        "final state: {}, epoch {}, pnp operations {}",
        coord.state(),
        coord.epoch(),
        host.stats().pnp_operations
    );
    out
}

/// Every flight-recorder record (each names its client).
pub fn flight_record(host: &Node) -> String {
    let mut out = String::new();
    for rec in host.coordinator().recorder().iter() {
        let _ = writeln!(out, "{rec}");
    }
    out
}

/// The disks' lines of the workload: the I/O totals, the loud ones, then one per disk.
fn disks(host: &Node, out: &mut String) {
    use ibal::disk::SrpClient;
    let disks: Vec<&SrpClient> = hcabus_lab::stack::disks(host).collect();
    if !disks.is_empty() {
        io_lines(&hcabus_lab::stack::io_stats(host), out);
        for d in disks {
            disk_line(hcabus::bus::ClientReport::name(d), d, out);
        }
    }
}

/// The I/O totals of a run, and the loud lines: paging I/O failed, I/O lost.
pub fn io_lines(io: &ibal::io::IoStats, out: &mut String) {
    let _ = writeln!(
        out,
        "io: {} submitted, {} completed, {} failed ({} retryable), {} in flight, {} lost, {} \
         duplicated, max latency {}",
        io.submitted,
        io.completed,
        io.failed,
        io.retryable,
        io.in_flight,
        io.lost,
        io.duplicated,
        us(Some(io.max_latency_us))
    );
    if io.failed > 0 {
        let _ = writeln!(
            out,
            "    {} failed I/O waited up to {} before failing (counted in max latency)",
            io.failed,
            us(Some(io.max_failed_latency_us))
        );
    }
    let _ = writeln!(
        out,
        "    {} reads verified against the data last written, {} mismatched",
        io.reads_verified, io.read_mismatches
    );
    if io.paging_failed > 0 {
        let _ = writeln!(
            out,
            "    PAGING I/O FAILED: {} (on Windows, bugcheck 0x7A)",
            io.paging_failed
        );
    }
    if io.lost > 0 {
        let _ = writeln!(
            out,
            "    LOST: {} I/Os nobody will complete (a disk that never came up, or \
             gave up)",
            io.lost
        );
    }
    if io.overdue > 0 {
        let _ = writeln!(
            out,
            "    OVERDUE: {} commands out past their bound and the abort after it (every \
             command should have ended)",
            io.overdue
        );
    }
}

/// One disk's line: what it completed and how it rode through resets.
pub fn disk_line(label: &str, d: &ibal::disk::SrpClient, out: &mut String) {
    let s = d.disk().stats();
    let w = d.io_stats();
    let _ = writeln!(
        out,
        "    {:<10} {:>6} done, max latency {:>10}, {:>3} in flight at RESET, {:>3} taken \
         back, {:>3} held at most, {} logins{}",
        label,
        w.completed,
        us(Some(w.max_latency_us)),
        s.max_in_flight_at_reset,
        s.taken_back,
        s.max_held,
        s.logins,
        refused_logins(s)
    );
}

/// ", N refused (M busy)" when logins were refused, else nothing.
fn refused_logins(s: &ibal::disk::DiskStats) -> String {
    match (s.login_retries, s.logins_refused_busy) {
        (0, _) => String::new(),
        (n, 0) => format!(", {n} refused"),
        (n, busy) => format!(", {n} refused ({busy} busy)"),
    }
}

/// The I/O and network summary of a run with the access layer's clients.
pub fn workload(host: &Node) -> String {
    let mut out = String::new();
    disks(host, &mut out);
    if hcabus_lab::stack::nets(host).next().is_some() {
        net_line(&hcabus_lab::stack::net_stats(host), &mut out);
    }
    uverbs_line(host, &mut out);
    out
}

/// The network totals.
pub fn net_line(n: &ibal::ipoib::NetStats, out: &mut String) {
    let _ = writeln!(
        out,
        "net: {} sent, {} completed back (resubmitted), {} dropped; {} unicast and {} \
         multicast received; links down {} / up {}",
        n.sent,
        n.completed_back,
        n.dropped,
        n.received_unicast,
        n.received_multicast,
        n.link_downs,
        n.link_ups
    );
}

/// The user-verbs process's line, when the host has one.
pub fn uverbs_line(host: &Node, out: &mut String) {
    if let Some(u) = hcabus_lab::stack::processes(host).next() {
        let p = u.stats();
        let _ = writeln!(
            out,
            "uverbs: {} opens, {} EIO, {} calls ok, last context on {}",
            p.opens,
            p.eio,
            p.ops_ok,
            p.last_epoch.map_or("-".into(), |e| e.to_string())
        );
    }
}
