//! `hcactl log` and `hcactl dump`: the flight recorder read from the bus, or from a dump
//! file offline, through the same filters; and the whole bus in one JSON file.

use std::io::Write as _;
use std::path::Path;

use hcabus::ioctl::*;
use hcabus::recorder::{Record, RecordKind, RECORD_BYTES};
use hcactl::answer::Answer;
use hcactl::log_json::{record_json, Filter, KINDS};
use serde_json::{json, Value};

use crate::control::{ControlDevice, Failure, Outcome};
use crate::emit;
use crate::view::{document, Clock};

/// What a dump says it is, and the layout version of this one.
pub(crate) const DUMP_FORMAT: &str = "hcabus-dump";
/// Version 2: the `hcactl.dump/1` document (states, ports and flags in their one shape,
/// wall-clock times); `log --input` still reads version 1's records.
pub(crate) const DUMP_VERSION: u64 = 2;

/// Records per READ_LOG call.
const PAGE: usize = 256;

/// The ring's bookkeeping as the last READ_LOG gave it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ring {
    pub(crate) next_seq: u64,
    pub(crate) dropped: u64,
}

/// Hands every record from `since` to `each`, page by page (`None` for one this hcactl
/// cannot decode); returns the ring's next sequence number and dropped count.
pub(crate) fn each_record(
    bus: &mut ControlDevice,
    since: u64,
    mut each: impl FnMut(Option<Record>) -> Outcome,
) -> Result<Ring, Failure> {
    let mut next = since;
    loop {
        let mut input = [0u8; 24];
        encode_read_log(next, 0, &mut input);
        let head = size_of::<ReadLogOut>();
        let out = bus.call(IOCTL_HCABUS_READ_LOG, &input, head + PAGE * RECORD_BYTES)?;
        let a = Answer::new("READ_LOG", &out);
        let count = a.u32(0)? as usize;
        let size = a.u32(4)? as usize;
        let new_next = a.u64(8)?;
        let dropped = a.u64(16)?;
        if count > PAGE {
            return Err(a
                .malformed(&format!("{count} records in a page of {PAGE}"))
                .into());
        }
        if count > 0 && size != RECORD_BYTES {
            return Err(a
                .malformed(&format!("records of {size} bytes, not {RECORD_BYTES}"))
                .into());
        }
        if count > 0 && new_next <= next {
            return Err(a
                .malformed("records without progress in the sequence")
                .into());
        }
        for i in 0..count {
            let mut raw = [0u8; RECORD_BYTES];
            raw.copy_from_slice(a.slice(head + i * RECORD_BYTES, RECORD_BYTES)?);
            each(Record::decode(&raw))?;
        }
        if count == 0 || new_next == next {
            // The bus's own next sequence: asked from past its head, it answers with the
            // head, which is where a later `--since` must start (not the number asked).
            return Ok(Ring {
                next_seq: new_next,
                dropped,
            });
        }
        next = new_next;
    }
}

/// What the last veto in the flight recorder said, if the ring still holds it.
pub(crate) fn last_veto(bus: &mut ControlDevice) -> Result<Option<String>, Failure> {
    let mut last = None;
    each_record(bus, 0, |record| {
        if let Some(r) = record {
            if let RecordKind::Vetoed { reason, .. } = r.kind {
                last = Some(format!("client '{}' said: {reason}", r.name));
            }
        }
        Ok(())
    })?;
    Ok(last)
}

/// A record this hcactl cannot decode, said so rather than skipped.
fn undecodable() -> Value {
    json!({ "kind": "undecodable", "text": "(a record this hcactl cannot decode)" })
}

/// Every record from `since` as JSON, and the ring's bookkeeping.
pub(crate) fn fetch_records(
    bus: &mut ControlDevice,
    since: u64,
) -> Result<(Vec<Value>, Ring), Failure> {
    let mut all = Vec::new();
    let ring = each_record(bus, since, |r| {
        all.push(r.as_ref().map_or_else(undecodable, record_json));
        Ok(())
    })?;
    Ok((all, ring))
}

/// A record's JSON with its wall-clock times (`at`, `last_at`: RFC 3339, null without a
/// wall clock) beside the bus's own.
pub(crate) fn with_times(record: &Value, clock: &Clock) -> Value {
    let mut v = record.clone();
    if let Value::Object(o) = &mut v {
        for (us, wall) in [("at_us", "at"), ("last_at_us", "last_at")] {
            let t = o.get(us).and_then(Value::as_u64).and_then(|t| clock.at(t));
            o.insert(wall.into(), t.into());
        }
    }
    v
}

/// Prints the records that pass `filter`: a line of text each (its wall-clock time first
/// where the bus has one), or under `--json` one `hcactl.log/1` line of `"type": "record"`.
fn print(
    records: &[Value],
    filter: &Filter,
    clock: &Clock,
    as_json: bool,
) -> Result<usize, Failure> {
    let mut shown = 0;
    for v in records
        .iter()
        .filter(|v| v["kind"] == "undecodable" || filter.passes(v))
    {
        let v = with_times(v, clock);
        if as_json {
            let mut line = json!({ "type": "record" });
            if let (Value::Object(line), Value::Object(fields)) = (&mut line, v) {
                line.extend(fields);
            }
            say!("{}", document("log", line));
        } else {
            match v["at"].as_str() {
                Some(at) => say!("{at}  {}", v["text"].as_str().unwrap_or("?")),
                None => say!("{}", v["text"].as_str().unwrap_or("?")),
            }
        }
        shown += 1;
    }
    Ok(shown)
}

/// The closing line: how much was shown, and what the ring lost. Under `--json` a line of
/// `"type": "summary"` on stdout, after the records (docs/json.md).
fn trailer(shown: usize, held: usize, ring: Ring, as_json: bool) -> Outcome {
    if as_json {
        let v = json!({
            "type": "summary", "shown": shown, "held": held,
            "dropped": ring.dropped, "next_seq": ring.next_seq,
        });
        return emit(format_args!("{}", document("log", v)));
    }
    emit(format_args!(
        "-- {shown} of {held} record(s) shown; {} dropped (overwritten before they were read); next sequence {}",
        ring.dropped, ring.next_seq
    ))
}

pub(crate) fn check_filter(filter: &Filter) -> Outcome {
    match filter.unknown_kind() {
        Some(k) => Err(Failure::Usage(format!(
            "--kind {k:?}: not a kind of record (kinds: {})",
            KINDS.join(", ")
        ))),
        None => Ok(()),
    }
}

/// `hcactl log` against the bus.
pub(crate) fn log(
    bus: &mut ControlDevice,
    filter: &Filter,
    follow: bool,
    as_json: bool,
) -> Outcome {
    let clock = Clock::of(&bus.state()?);
    let (records, ring) = fetch_records(bus, filter.since)?;
    let shown = print(&records, filter, &clock, as_json)?;
    trailer(shown, records.len(), ring, as_json)?;
    if !follow {
        return Ok(());
    }
    let mut next = ring.next_seq;
    loop {
        // Until interrupted: Ctrl-C ends the process.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (records, ring) = fetch_records(bus, next)?;
        print(&records, filter, &clock, as_json)?;
        next = ring.next_seq;
    }
}

/// `hcactl log --input FILE`: the records of a dump, offline.
pub(crate) fn log_offline(path: &Path, filter: &Filter, as_json: bool) -> Outcome {
    let dump = read_dump(path)?;
    let log = &dump["log"];
    let records = log["records"].as_array().ok_or_else(|| {
        Failure::Usage(format!(
            "{}: the dump has no log.records array",
            path.display()
        ))
    })?;
    let ring = Ring {
        next_seq: log["next_seq"].as_u64().unwrap_or(0),
        dropped: log["dropped"].as_u64().unwrap_or(0),
    };
    // The dump's own wall clock of the bus's time zero, said as --utc asks.
    let zero = dump["state"]["time_zero_unix_ms"].as_u64();
    let clock = Clock::at_zero(zero, crate::view::utc());
    let shown = print(records, filter, &clock, as_json)?;
    trailer(shown, records.len(), ring, as_json)
}

/// A dump file, checked to be one this hcactl reads.
fn read_dump(path: &Path) -> Result<Value, Failure> {
    let bad = |why: String| Failure::Usage(format!("{}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(format!("not JSON: {e}")))?;
    if v["format"] != DUMP_FORMAT {
        return Err(bad(format!(
            "not an {DUMP_FORMAT} file (no \"format\": \"{DUMP_FORMAT}\")"
        )));
    }
    match v["version"].as_u64() {
        Some(1..=DUMP_VERSION) => Ok(v),
        other => Err(bad(format!(
            "dump version {other:?}; this hcactl reads versions 1 to {DUMP_VERSION}"
        ))),
    }
}

/// Everything the bus can say about itself, in one JSON value.
pub(crate) fn dump_value(bus: &mut ControlDevice, device: Option<&str>) -> Result<Value, Failure> {
    let state = bus.state()?;
    let counters = crate::state::fetch_counters(bus)?;
    let (total, resets) = crate::resets::fetch(bus)?;
    let policy = bus.policy()?;
    let health = crate::state::fetch_health(bus)?;
    let clients = crate::clients::fetch(bus)?;
    let (records, ring) = fetch_records(bus, 0)?;
    let taken = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let clock = Clock::of(&state);
    let summaries: Vec<Value> = resets
        .iter()
        .map(|s| crate::resets::summary_json(s, &clock))
        .collect();
    Ok(document(
        "dump",
        json!({
            "format": DUMP_FORMAT,
            "version": DUMP_VERSION,
            "abi_version": ABI_VERSION,
            "device": device,
            "taken_unix_ms": taken,
            "taken_at": clock.wall(taken),
            "state": crate::state::status_json(&state, resets.last(), counters.as_ref()),
            "policy": crate::policy::policy_json(&policy),
            "health": crate::state::health_json(&health, &state),
            "clients": crate::clients::clients_json(&clients),
            "resets": { "total": total, "summaries": summaries },
            "log": {
                "next_seq": ring.next_seq,
                "dropped": ring.dropped,
                "records": records.iter().map(|r| with_times(r, &clock)).collect::<Vec<_>>(),
            },
        }),
    ))
}

/// `hcactl dump [-o FILE]`: to stdout, or to a new FILE (an existing one is not replaced).
pub(crate) fn dump(
    bus: &mut ControlDevice,
    device: Option<&str>,
    output: Option<&Path>,
) -> Outcome {
    let v = dump_value(bus, device)?;
    let text = format!("{v:#}\n");
    let Some(path) = output else {
        return crate::generated(|out| out.write_all(text.as_bytes()));
    };
    let refuse = |e: std::io::Error| Failure::Usage(format!("-o {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(refuse)?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(refuse)?;
    let records = v["log"]["records"].as_array().map_or(0, Vec::len);
    let resets = v["resets"]["summaries"].as_array().map_or(0, Vec::len);
    eprintln!(
        "hcactl: wrote {} ({} bytes: {records} record(s), {resets} reset summary(ies))",
        path.display(),
        text.len()
    );
    Ok(())
}
