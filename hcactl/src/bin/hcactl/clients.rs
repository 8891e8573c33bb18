//! `hcactl clients`: every registered client, as a table or JSON.

use comfy_table::{presets, Table};
use hcabus::ioctl::*;
use hcabus::types::{ClientFlags, ClientId, ClientKind};
use hcactl::answer::Answer;
use serde_json::{json, Value};

use crate::control::{ControlDevice, Failure, Outcome};
use crate::emit;
use crate::view::{document, duration_us, state_word};

/// Every registered client, page by page.
pub(crate) fn fetch(bus: &mut ControlDevice) -> Result<Vec<ClientEntry>, Failure> {
    const PAGE: usize = 64;
    let mut all = Vec::new();
    loop {
        let mut input = [0u8; 16];
        encode_list_clients(all.len() as u32, &mut input);
        let out = bus.call(IOCTL_HCABUS_LIST_CLIENTS, &input, 8 + PAGE * 64)?;
        let a = Answer::new("LIST_CLIENTS", &out);
        let total = a.u32(0)? as usize;
        let count = a.u32(4)? as usize;
        if count > PAGE {
            return Err(a
                .malformed(&format!("{count} entries in a page of {PAGE}"))
                .into());
        }
        for i in 0..count {
            let e = ClientEntry::decode(a.slice(8 + i * 64, 64)?)
                .ok_or_else(|| a.malformed("an entry that does not decode"))?;
            all.push(e);
        }
        if count == 0 || all.len() >= total {
            return Ok(all);
        }
        if all.len() > usize::from(u16::MAX) {
            return Err(a.malformed("more clients than any bus holds").into());
        }
    }
}

fn kind_name(k: u32) -> &'static str {
    u8::try_from(k)
        .ok()
        .and_then(ClientKind::from_u8)
        .map_or("?", ClientKind::as_str)
}

/// The flags by name; bits this hcactl does not know as their hex value.
fn flag_names(bits: u32) -> Vec<String> {
    let f = ClientFlags::from_bits_retain(bits);
    let mut v: Vec<String> = f.iter_names().map(|(name, _)| name.to_string()).collect();
    let unknown = f.bits() & !ClientFlags::all().bits();
    if unknown != 0 {
        v.push(format!("{unknown:#x}"));
    }
    v
}

fn state(e: &ClientEntry) -> String {
    state_word(client_state_name(e.state))
}

pub(crate) fn clients_json(all: &[ClientEntry]) -> Value {
    all.iter()
        .map(|e| {
            json!({
                "id": ClientId::from_raw(e.id).to_string(), "name": e.name(),
                "kind": kind_name(e.kind), "flags": flag_names(e.flags), "state": state(e),
                "in_barrier": e.in_barrier == 1,
                "last_ack_latency_us": (e.last_ack_latency_us != NONE_U64).then_some(e.last_ack_latency_us),
            })
        })
        .collect()
}

pub(crate) fn clients(bus: &mut ControlDevice, as_json: bool) -> Outcome {
    let all = fetch(bus)?;
    if as_json {
        say!(
            "{:#}",
            document("clients", json!({ "clients": clients_json(&all) }))
        );
        return Ok(());
    }
    let mut table = Table::new();
    table.load_style(presets::NOTHING).set_header([
        "id", "name", "kind", "flags", "state", "barrier", "last ack",
    ]);
    for e in &all {
        let flags = flag_names(e.flags);
        table.add_row([
            ClientId::from_raw(e.id).to_string(),
            e.name().to_string(),
            kind_name(e.kind).to_string(),
            if flags.is_empty() {
                "-".into()
            } else {
                flags.join(" ")
            },
            state(e),
            (if e.in_barrier == 1 { "yes" } else { "no" }).to_string(),
            duration_us(e.last_ack_latency_us),
        ]);
    }
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    for line in table.lines() {
        say!("{}", line.trim_end());
    }
    Ok(())
}
