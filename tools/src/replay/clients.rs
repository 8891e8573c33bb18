//! The clients a bundle shows, as a scenario declares them: their kinds and flags from the
//! bundle's table, in the order they registered (which makes their ids), and what a custom
//! client did from its records (its delay, silence, veto, leaving at a reset, asking again at
//! a reset's end).

use hcabus::coordinator::bundle::BundleView;
use hcabus::recorder::{Record, RecordKind};
use hcabus::types::{Call, ClientFlags, ClientKind, EventKind};

/// A client as the scenario declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ClientDraft {
    pub name: String,
    pub kind: ClientKind,
    pub flags: ClientFlags,
    pub vetoes: bool,
    pub never_ack: bool,
    pub ack_delay_ms: u64,
    /// It asked for a reset as soon as it was told one ended.
    pub request_on_reset_end: bool,
    /// Told of a reset, it unregistered (and registered again).
    pub unregister_on_reset: bool,
    pub reregister_on_reset: bool,
}

/// The clients: the bundle's table (format 2), or the names the records registered
/// (format 1: custom clients, said in a note).
pub(super) fn clients(b: &BundleView, notes: &mut Vec<String>) -> Vec<ClientDraft> {
    let draft = |name: &str, kind, flags| ClientDraft {
        name: name.to_string(),
        kind,
        flags,
        vetoes: false,
        never_ack: false,
        ack_delay_ms: 0,
        request_on_reset_end: false,
        unregister_on_reset: false,
        reregister_on_reset: false,
    };
    let table: Vec<ClientDraft> = b
        .clients
        .iter()
        .filter_map(|e| e.desc())
        .map(|d| draft(d.name.as_str(), d.kind, d.flags))
        .collect();
    if table.len() < b.clients.len() {
        notes.push(format!(
            "{} of the bundle's client entries name a kind or a name this build does not \
             know: left out of the table (a record that registers one makes it a custom client)",
            b.clients.len() - table.len()
        ));
    }
    let registered: Vec<&str> = b
        .records
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                RecordKind::Call {
                    client: Some(_),
                    call: Call::Register
                }
            )
        })
        .map(|r| r.name.as_str())
        .collect();
    // Registration order makes the client ids: those registered before the first record
    // first (the table's order), then as the records registered them.
    let mut out: Vec<ClientDraft> = table
        .iter()
        .filter(|c| !registered.contains(&c.name.as_str()))
        .cloned()
        .collect();
    let mut gone = 0;
    for name in registered {
        if out.iter().any(|c| c.name == name) {
            continue;
        }
        match table.iter().find(|c| c.name == name) {
            Some(c) => out.push(c.clone()),
            None => {
                gone += 1;
                out.push(draft(name, ClientKind::Custom, ClientFlags::empty()));
            }
        }
    }
    if b.clients.is_empty() && !out.is_empty() {
        notes.push(format!(
            "the bundle has no client table (format {}): its {} registered client(s) are \
             replayed as custom clients",
            b.header.format,
            out.len()
        ));
    } else if gone > 0 {
        notes.push(format!(
            "{gone} client(s) registered and were gone before the bundle was taken: their kinds \
             are not in its table, and they are replayed as custom clients"
        ));
    }
    out
}

/// How each client that a scenario scripts answered: a veto, silence, a delay before its
/// execute (the least seen: the simulator's clients take up to half again), a request at
/// each reset's end, unregistering (and registering again) when told of a reset.
pub(super) fn behaviours(records: &[Record], clients: &mut [ClientDraft]) {
    let mut told_at: Vec<Option<u64>> = vec![None; clients.len()];
    let mut delay: Vec<Option<u64>> = vec![None; clients.len()];
    let mut last: Vec<Option<(u64, RecordKind)>> = vec![None; clients.len()];
    let find = |clients: &[ClientDraft], r: &Record| {
        clients.iter().position(|c| {
            matches!(
                c.kind,
                ClientKind::Custom | ClientKind::Ipoib | ClientKind::Srp
            ) && c.name == r.name.as_str()
        })
    };
    for r in records {
        let Some(i) = find(clients, r) else { continue };
        let at_us = r.at.as_us();
        let told_now = matches!(
            last[i],
            Some((t, RecordKind::Event { event: EventKind::Reset, .. })) if t == at_us
        );
        match r.kind {
            RecordKind::Event {
                event: EventKind::Reset,
                ..
            } => told_at[i] = Some(at_us),
            RecordKind::Call {
                call: Call::ResetExecute,
                ..
            } => {
                if let Some(t) = told_at[i].take() {
                    let ms = at_us.saturating_sub(t) / 1000;
                    delay[i] = Some(delay[i].map_or(ms, |d| d.min(ms)));
                }
            }
            RecordKind::Call {
                call: Call::Unregister,
                ..
            } if told_now => clients[i].unregister_on_reset = true,
            RecordKind::Call {
                call: Call::Register,
                ..
            } if clients[i].unregister_on_reset
                && matches!(last[i], Some((t, RecordKind::Call { call: Call::Unregister, .. })) if t == at_us) =>
            {
                clients[i].reregister_on_reset = true;
            }
            RecordKind::Call {
                call: Call::ResetRequest,
                ..
            } if is_reset_end(last[i], at_us) => clients[i].request_on_reset_end = true,
            RecordKind::Vetoed { .. } => clients[i].vetoes = true,
            RecordKind::Unresponsive { .. } => clients[i].never_ack = true,
            _ => {}
        }
        last[i] = Some((at_us, r.kind));
    }
    for (c, d) in clients.iter_mut().zip(delay) {
        c.ack_delay_ms = d.unwrap_or(0);
    }
}

/// A storage client that consented to a planned reset had a path through another adapter,
/// which a bundle (one adapter's) does not hold: the replay gives it this adapter's alone.
pub(super) fn other_paths(records: &[Record], clients: &[ClientDraft], notes: &mut Vec<String>) {
    for c in clients {
        if !matches!(c.kind, ClientKind::BootDisk | ClientKind::Srp) {
            continue;
        }
        let consented = records.iter().any(|r| {
            r.name.as_str() == c.name
                && matches!(
                    r.kind,
                    RecordKind::Call {
                        call: Call::ResetConsent,
                        ..
                    }
                )
        });
        if consented {
            notes.push(format!(
                "{} consented to a planned reset: it had a path through another adapter, which \
                 this adapter's bundle does not hold; the replay gives it this adapter's path \
                 alone, and it may veto where it consented",
                c.name
            ));
        }
    }
}

/// Whether a client's last record was RESET_END at `at_us`: a request made in answer to it.
pub(super) fn is_reset_end(last: Option<(u64, RecordKind)>, at_us: u64) -> bool {
    matches!(
        last,
        Some((t, RecordKind::Event { event: EventKind::ResetEnd, .. })) if t == at_us
    )
}

pub(super) fn is_custom(clients: &[ClientDraft], r: &Record) -> bool {
    clients
        .iter()
        .any(|c| c.kind == ClientKind::Custom && c.name == r.name.as_str())
}

pub(super) fn answers_reset_end(clients: &[ClientDraft], r: &Record) -> bool {
    clients
        .iter()
        .any(|c| c.request_on_reset_end && c.name == r.name.as_str())
}

/// The last record before these about the client `r` is about.
pub(super) fn last_of(before: &[Record], r: &Record) -> Option<(u64, RecordKind)> {
    before
        .iter()
        .rev()
        .find(|b| b.name == r.name && !b.name.as_str().is_empty())
        .map(|b| (b.at.as_us(), b.kind))
}
