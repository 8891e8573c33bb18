//! The administrator's side of the life: every IOCTL code on the control device, each with
//! the buffers hcactl sends (a header-only input where the code takes no argument, an output
//! of the size hcactl gives), through a handle granted what the code requires.

use hcabus::ioctl::*;
use wdk_sys::*;

use super::machine::{Machine, FILE_READ_DATA, FILE_WRITE_DATA};
use super::{violation, Rule};

pub(crate) const LINK: &str = "\\DosDevices\\HcaBus0";
pub(crate) const ADMIN: u32 = FILE_READ_DATA | FILE_WRITE_DATA;

/// What hcactl asks for a list or a log: room for many entries.
const ROOM: usize = 8192;

fn expect(ok: bool, what: &str) {
    if !ok {
        violation(Rule::Expectation, "administrator", what);
    }
}

/// `code` with `input`, through an administrator's handle: the status and the answer.
fn call(m: &mut Machine, code: u32, input: &[u8], output: usize) -> (NTSTATUS, Vec<u8>) {
    m.ioctl(LINK, ADMIN, code, input, output)
}

/// A code that takes no argument: the input header only.
fn empty(m: &mut Machine, code: u32, output: usize) -> (NTSTATUS, Vec<u8>) {
    let mut input = [0u8; core::mem::size_of::<EmptyIn>()];
    encode_empty(&mut input);
    call(m, code, &input, output)
}

fn ok(name: &str, (status, out): (NTSTATUS, Vec<u8>)) -> Vec<u8> {
    expect(status == STATUS_SUCCESS, &format!("{name}: {status:#x}"));
    out
}

/// QUERY_STATE with a header-only input and room for the whole answer.
pub(crate) fn query_state(m: &mut Machine, granted: u32) -> (NTSTATUS, Option<StateOut>) {
    let mut input = [0u8; core::mem::size_of::<EmptyIn>()];
    encode_empty(&mut input);
    let (status, out) = m.ioctl(LINK, granted, IOCTL_HCABUS_QUERY_STATE, &input, 512);
    (status, StateOut::decode(&out))
}

/// The bus's state as QUERY_STATE gives it; the scenario stops if it cannot be read.
pub(crate) fn state(m: &mut Machine) -> StateOut {
    let (status, out) = query_state(m, FILE_READ_DATA);
    match out {
        Some(s) if status == STATUS_SUCCESS => s,
        _ => violation(
            Rule::Expectation,
            "QUERY_STATE",
            &format!("no answer: {status:#x}"),
        ),
    }
}

/// The whole flight record, read with READ_LOG 64 records at a time from the first, as
/// `hcactl log` pages it; the scenario stops if a record is overwritten or cannot be read.
pub(crate) fn flight_record(m: &mut Machine) -> Vec<hcabus::recorder::Record> {
    use hcabus::recorder::{Record, RECORD_BYTES};
    let header = core::mem::size_of::<ReadLogOut>();
    let mut records = Vec::new();
    let mut from = 0;
    // Bounded: a ring holds at most its reserved records, 64 a page.
    for _ in 0..1_000 {
        let mut input = [0u8; core::mem::size_of::<ReadLogIn>()];
        encode_read_log(from, 64, &mut input);
        let out = ok("READ_LOG", call(m, IOCTL_HCABUS_READ_LOG, &input, ROOM));
        let word = |at: usize| {
            out.get(at..at + 8)
                .and_then(|b| b.try_into().ok())
                .map_or(u64::MAX, u64::from_le_bytes)
        };
        let count = word(0) & 0xFFFF_FFFF;
        expect(
            word(16) == 0,
            &format!("READ_LOG: {} records overwritten", word(16)),
        );
        for raw in out[header..]
            .chunks_exact(RECORD_BYTES)
            .take(count as usize)
        {
            let record = raw.try_into().ok().and_then(Record::decode);
            let Some(record) = record else {
                violation(
                    Rule::Expectation,
                    "READ_LOG",
                    "a record that does not decode",
                )
            };
            records.push(record);
        }
        if count == 0 {
            return records;
        }
        from = word(8);
    }
    violation(Rule::Expectation, "READ_LOG", "the log never ended")
}

/// REQUEST_RESET as `hcactl reset` sends it.
pub(crate) fn request_reset(m: &mut Machine, granted: u32, mode: ResetMode) -> NTSTATUS {
    let mut input = [0u8; core::mem::size_of::<RequestResetIn>()];
    RequestResetIn::new(mode, "model").encode(&mut input);
    let out = core::mem::size_of::<EpochOut>();
    m.ioctl(LINK, granted, IOCTL_HCABUS_REQUEST_RESET, &input, out)
        .0
}

/// Every code but REQUEST_RESET (which the life sends at its own moments), after the life's
/// two resets and the planned one `vetoer` refused: each answers what the bus has seen.
pub(crate) fn every_other_code(m: &mut Machine, vetoer: &str) {
    let s = state(m);
    expect(
        s.epoch == 3 && s.last_result == RESULT_VETOED && s.clients == 1,
        &format!("QUERY_STATE after the veto: {s:?}"),
    );
    let mut input = [0u8; core::mem::size_of::<ListClientsIn>()];
    encode_list_clients(0, &mut input);
    let out = ok(
        "LIST_CLIENTS",
        call(m, IOCTL_HCABUS_LIST_CLIENTS, &input, ROOM),
    );
    let header = core::mem::size_of::<ListClientsOut>();
    let entry = out.get(header..).and_then(ClientEntry::decode);
    expect(
        out.get(4..8) == Some(&1u32.to_le_bytes()[..])
            && entry.as_ref().map(ClientEntry::name) == Some(vetoer),
        &format!("LIST_CLIENTS: {entry:?}"),
    );
    let mut input = [0u8; core::mem::size_of::<ReadLogIn>()];
    encode_read_log(0, 64, &mut input);
    let out = ok("READ_LOG", call(m, IOCTL_HCABUS_READ_LOG, &input, ROOM));
    expect(
        out.len() > core::mem::size_of::<ReadLogOut>() && out[..4] != [0; 4],
        &format!("READ_LOG gave {} bytes", out.len()),
    );
    policy(m);
    let out = ok("QUERY_HEALTH", empty(m, IOCTL_HCABUS_QUERY_HEALTH, ROOM));
    let health = HealthOut::decode(&out);
    expect(
        health.is_some_and(|h| h.error_count == 1 && h.recover_count == 1),
        &format!("QUERY_HEALTH: {health:?}"),
    );
    resets(m, vetoer);
    // The device is not Failed: nothing to restart.
    let (status, _) = empty(m, IOCTL_HCABUS_RESTART, 8);
    expect(
        status == STATUS_INVALID_DEVICE_REQUEST,
        &format!("RESTART of a working device: {status:#x}"),
    );
    // Real hardware takes no injected fault.
    let mut input = [0u8; core::mem::size_of::<InjectFaultIn>()];
    encode_inject_fault(&FaultRequest::new(FaultCode::Catastrophic, 0), &mut input);
    let (status, _) = call(m, IOCTL_HCABUS_INJECT_FAULT, &input, 0);
    expect(
        status == STATUS_NOT_SUPPORTED,
        &format!("INJECT_FAULT on hardware: {status:#x}"),
    );
    // No failure yet: no bundle kept; one taken now reads back.
    let (status, _) = read_bundle(m, BUNDLE_KEPT);
    expect(
        status == NtStatus::NOT_FOUND.0 as NTSTATUS,
        &format!("READ_BUNDLE of a device that never failed: {status:#x}"),
    );
    let (status, now) = read_bundle(m, BUNDLE_NOW);
    let view = hcabus::coordinator::bundle::read_bundle(&now);
    expect(
        status == STATUS_SUCCESS && view.as_ref().is_ok_and(|b| b.header.epoch == 3),
        &format!("READ_BUNDLE now: {status:#x}, {view:?}"),
    );
    // The config space the last reset saved reached the bundle through the layer: the PCI
    // header, its vendor id the adapter's.
    let config_ok = view.as_ref().is_ok_and(|b| {
        let c = &b.header.config;
        b.header.config_bytes == 256 && u16::from_le_bytes([c[0], c[1]]) == b.header.vendor_id
    });
    expect(config_ok, "READ_BUNDLE now: the saved config space");
}

/// READ_BUNDLE as `hcactl dump --bundle` sends it, with the room it gives.
pub(crate) fn read_bundle(m: &mut Machine, which: u32) -> (NTSTATUS, Vec<u8>) {
    let mut input = [0u8; core::mem::size_of::<ReadBundleIn>()];
    encode_read_bundle(which, &mut input);
    let room = hcabus::coordinator::bundle::BUNDLE_MAX_BYTES;
    call(m, IOCTL_HCABUS_READ_BUNDLE, &input, room)
}

/// GET_POLICY, then SET_POLICY of what it gave with one deadline changed: applied, and
/// read back.
fn policy(m: &mut Machine) {
    let out = ok(
        "GET_POLICY",
        empty(
            m,
            IOCTL_HCABUS_GET_POLICY,
            min_output(IOCTL_HCABUS_GET_POLICY),
        ),
    );
    let Some(mut policy) = PolicyAbi::decode(&out) else {
        violation(
            Rule::Expectation,
            "GET_POLICY",
            "an answer that does not decode",
        )
    };
    policy.quiesce_deadline_ms += 500;
    let mut input = [0u8; core::mem::size_of::<SetPolicyIn>()];
    encode_set_policy(&policy, &mut input);
    let out = ok(
        "SET_POLICY",
        call(
            m,
            IOCTL_HCABUS_SET_POLICY,
            &input,
            core::mem::size_of::<SetPolicyOut>(),
        ),
    );
    let answer = SetPolicyOut::decode(&out);
    expect(
        answer.is_some_and(|a| a.refusal().is_none()),
        &format!("SET_POLICY refused: {answer:?}"),
    );
    let out = ok(
        "GET_POLICY",
        empty(
            m,
            IOCTL_HCABUS_GET_POLICY,
            min_output(IOCTL_HCABUS_GET_POLICY),
        ),
    );
    expect(
        PolicyAbi::decode(&out) == Some(policy),
        "GET_POLICY does not read back what SET_POLICY applied",
    );
}

/// READ_RESETS: three concluded, the newest called off by `vetoer` with its reason.
fn resets(m: &mut Machine, vetoer: &str) {
    let out = ok("READ_RESETS", empty(m, IOCTL_HCABUS_READ_RESETS, ROOM));
    let head = core::mem::size_of::<ReadResetsOut>();
    let size = core::mem::size_of::<ResetSummaryOut>();
    let summaries: Vec<ResetSummaryOut> = out
        .get(head..)
        .unwrap_or_default()
        .chunks_exact(size)
        .filter_map(ResetSummaryOut::decode)
        .collect();
    let newest = summaries.iter().max_by_key(|s| s.ordinal);
    expect(
        summaries.len() == 3
            && newest.is_some_and(|s| {
                text_of(&s.vetoer_name) == Some(vetoer)
                    && text_of(&s.veto_reason).is_some_and(|r| r.contains("last path"))
            }),
        &format!(
            "READ_RESETS: {} summaries, newest {newest:?}",
            summaries.len()
        ),
    );
}
