//! ETW as a provider meets it: EtwRegister, EtwEventEnabled, EtwWriteTransfer and
//! EtwUnregister, with one session listening (by default every level and keyword, as
//! `wpr -start` with the provider at verbose), and every write captured whole: the descriptor
//! and each data block's type and bytes, copied at the call as ETW copies them into its
//! buffers. A write on a handle not registered, and a provider still registered at unload,
//! break the rule the EtwRegister page states.

use std::vec::Vec;

use hcabus::host::ResetSpan;
use hcabus::recorder::{Record, RecordKind};
use hcabus::types::State;
use hcabus_kmdf::etw;
use hcabus_kmdf::etw_reader::{self, Decoded, Value};
use wdk_sys::*;

use super::{violation, with, Rule, HIGH, PASSIVE};

fn expect(ok: bool, what: &str) {
    if !ok {
        violation(Rule::Expectation, "ETW", what);
    }
}

/// STATUS_INVALID_PARAMETER, what EtwWriteTransfer answers more than 128 blocks.
const STATUS_INVALID_PARAMETER: NTSTATUS = 0xC000_000D_u32 as NTSTATUS;
const STATUS_NOT_SUPPORTED: NTSTATUS = 0xC000_00BB_u32 as NTSTATUS;
const STATUS_INSUFFICIENT_RESOURCES: NTSTATUS = 0xC000_009A_u32 as NTSTATUS;
/// EtwWriteTransfer's limit on the blocks of one event.
const MAX_BLOCKS: u32 = 128;

/// The session listening: what it enables.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Session {
    pub(crate) level: u8,
    pub(crate) any_keyword: u64,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            level: 5,
            any_keyword: u64::MAX,
        }
    }
}

/// One EtwWriteTransfer, as ETW took it.
#[derive(Debug, Clone)]
pub(crate) struct Written {
    pub(crate) guid: (u32, u16, u16, [u8; 8]),
    pub(crate) channel: u8,
    pub(crate) level: u8,
    pub(crate) keyword: u64,
    /// Each block's EVENT_DATA_DESCRIPTOR type and bytes.
    pub(crate) blocks: Vec<(u8, Vec<u8>)>,
}

impl Written {
    /// The event as a trace decoder reads it: the three TraceLogging blocks in their order.
    pub(crate) fn decode(&self) -> Result<Decoded, String> {
        match self.blocks.as_slice() {
            [(2, provider), (1, event), (0, data)] => {
                etw_reader::decode(provider, event, data).map_err(|e| e.to_string())
            }
            other => Err(format!(
                "blocks of types {:?}, not TraceLogging's provider, event, data",
                other.iter().map(|b| b.0).collect::<Vec<_>>()
            )),
        }
    }
}

/// A provider registered: its handle (never reused), its GUID, and whether it set its
/// traits (EventProviderSetTraits), without which ETW takes every data block for payload.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Provider {
    handle: u64,
    guid: (u32, u16, u16, [u8; 8]),
    traits: bool,
}

/// ETW's state as the driver's providers see it.
#[derive(Debug, Default)]
pub(crate) struct Etw {
    pub(crate) registered: Vec<Provider>,
    next_handle: u64,
    /// `None`: no session enables anything.
    pub(crate) session: Option<Session>,
    pub(crate) written: Vec<Written>,
    /// The session started with the kernel (a test turns it off or narrows it).
    pub(crate) configured: bool,
}

impl Etw {
    fn session(&mut self) -> Option<Session> {
        if !self.configured {
            self.configured = true;
            self.session = Some(Session::default());
        }
        self.session
    }
}

fn guid_of(g: &GUID) -> (u32, u16, u16, [u8; 8]) {
    (g.Data1, g.Data2, g.Data3, g.Data4)
}

/// EtwRegister refuses every provider (set before DriverEntry: the scenario's, one per process).
pub(crate) static REFUSE_REGISTER: core::sync::atomic::AtomicBool =
    core::sync::atomic::AtomicBool::new(false);

#[unsafe(no_mangle)]
extern "C" fn EtwRegister(
    provider: LPCGUID,
    _callback: PETWENABLECALLBACK,
    _context: PVOID,
    handle: PREGHANDLE,
) -> NTSTATUS {
    let _kernel = super::enter("EtwRegister", PASSIVE);
    if provider.is_null() || handle.is_null() {
        violation(Rule::NullParameter, "EtwRegister", "a NULL GUID or handle");
    }
    // SAFETY: the caller's GUID, read for the call.
    let guid = guid_of(unsafe { &*provider });
    if REFUSE_REGISTER.load(core::sync::atomic::Ordering::Relaxed)
        || with(|k| k.fails("EtwRegister"))
    {
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    let h = with(|k| {
        k.etw.next_handle += 1;
        let handle = 0x4554_5700_0000_0000 | k.etw.next_handle;
        k.etw.registered.push(Provider {
            handle,
            guid,
            traits: false,
        });
        handle
    });
    // SAFETY: the caller's handle, written once.
    unsafe { handle.write(h) };
    STATUS_SUCCESS
}

#[unsafe(no_mangle)]
extern "C" fn EtwUnregister(handle: REGHANDLE) -> NTSTATUS {
    let _kernel = super::enter("EtwUnregister", PASSIVE);
    let found = with(|k| {
        let at = k.etw.registered.iter().position(|p| p.handle == handle);
        at.map(|i| k.etw.registered.remove(i)).is_some()
    });
    if !found {
        violation(
            Rule::EtwRegistration,
            "EtwUnregister",
            &format!("handle {handle:#x} is not registered"),
        );
    }
    STATUS_SUCCESS
}

/// The provider of `handle`, or the rule broken.
fn provider(ddi: &str, handle: REGHANDLE) -> Provider {
    let found = with(|k| {
        k.etw
            .registered
            .iter()
            .find(|p| p.handle == handle)
            .copied()
    });
    found.unwrap_or_else(|| {
        violation(
            Rule::EtwRegistration,
            ddi,
            &format!("handle {handle:#x} is not registered"),
        )
    })
}

#[unsafe(no_mangle)]
extern "C" fn EtwEventEnabled(handle: REGHANDLE, descriptor: PCEVENT_DESCRIPTOR) -> BOOLEAN {
    let _kernel = super::enter("EtwEventEnabled", HIGH);
    let _ = provider("EtwEventEnabled", handle);
    if descriptor.is_null() {
        violation(Rule::NullParameter, "EtwEventEnabled", "a NULL descriptor");
    }
    // SAFETY: the caller's descriptor, read for the call.
    let d = unsafe { &*descriptor };
    let on = with(|k| k.etw.session()).is_some_and(|s| {
        (d.Level == 0 || d.Level <= s.level) && (d.Keyword == 0 || d.Keyword & s.any_keyword != 0)
    });
    BOOLEAN::from(on)
}

#[unsafe(no_mangle)]
extern "C" fn EtwWriteTransfer(
    handle: REGHANDLE,
    descriptor: PCEVENT_DESCRIPTOR,
    _activity: LPCGUID,
    _related: LPCGUID,
    count: ULONG,
    data: PEVENT_DATA_DESCRIPTOR,
) -> NTSTATUS {
    let _kernel = super::enter("EtwWriteTransfer", HIGH);
    let Provider { guid, traits, .. } = provider("EtwWriteTransfer", handle);
    if descriptor.is_null() || (count != 0 && data.is_null()) {
        violation(
            Rule::NullParameter,
            "EtwWriteTransfer",
            "a NULL descriptor or data",
        );
    }
    if count > MAX_BLOCKS {
        return STATUS_INVALID_PARAMETER;
    }
    // SAFETY: the caller's descriptor, read for the call.
    let d = unsafe { &*descriptor };
    let mut blocks = Vec::new();
    for i in 0..count as usize {
        // SAFETY: `count` descriptors at `data`, as the caller says.
        let at = unsafe { data.add(i) };
        // SAFETY: as above: one of them, read for the call.
        let block = unsafe { &*at };
        // The type is the first byte after the size (evntprov.h's union); ETW reads it only
        // for a provider that set its traits, and takes every block for payload otherwise.
        let kind = if traits {
            (block.Reserved & 0xFF) as u8
        } else {
            0
        };
        let bytes = match block.Size {
            0 => Vec::new(),
            n => {
                // SAFETY: the caller's block of `Size` bytes at `Ptr`, live for the call.
                let b = unsafe { core::slice::from_raw_parts(block.Ptr as *const u8, n as usize) };
                b.to_vec()
            }
        };
        blocks.push((kind, bytes));
    }
    let written = Written {
        guid,
        channel: d.Channel,
        level: d.Level,
        keyword: d.Keyword,
        blocks,
    };
    with(|k| {
        if k.etw.session().is_some() {
            k.etw.written.push(written);
        }
    });
    STATUS_SUCCESS
}

#[unsafe(no_mangle)]
extern "C" fn EtwSetInformation(
    handle: REGHANDLE,
    class: u32,
    information: PVOID,
    length: ULONG,
) -> NTSTATUS {
    let _kernel = super::enter("EtwSetInformation", PASSIVE);
    let _ = provider("EtwSetInformation", handle);
    if class != EVENT_PROVIDER_SET_TRAITS {
        return STATUS_NOT_SUPPORTED;
    }
    // SAFETY: the caller's `length` bytes at `information`, read for the call.
    let traits = unsafe { core::slice::from_raw_parts(information.cast::<u8>(), length as usize) };
    // The traits block: its size (itself included), the provider's name, NUL-terminated.
    let size = traits
        .get(..2)
        .map_or(0, |b| usize::from(u16::from_le_bytes([b[0], b[1]])));
    if size != traits.len() || !traits.ends_with(&[0]) {
        return STATUS_INVALID_PARAMETER;
    }
    with(|k| {
        if let Some(p) = k.etw.registered.iter_mut().find(|p| p.handle == handle) {
            p.traits = true;
        }
    });
    STATUS_SUCCESS
}

/// EVENT_INFO_CLASS's EventProviderSetTraits.
const EVENT_PROVIDER_SET_TRAITS: u32 = 2;

/// MmGetSystemRoutineAddress's answer for the routines a driver finds at run time: the
/// model's EtwSetInformation (through a stub for the image), NULL for any other name.
pub(crate) fn routine(name: &str) -> PVOID {
    match name {
        "EtwSetInformation" => {
            let f: extern "C" fn(REGHANDLE, u32, PVOID, ULONG) -> NTSTATUS = EtwSetInformation;
            super::driver::callable(f) as PVOID
        }
        _ => core::ptr::null_mut(),
    }
}

#[unsafe(no_mangle)]
extern "C" fn MmGetSystemRoutineAddress(name: PUNICODE_STRING) -> PVOID {
    let _kernel = super::enter("MmGetSystemRoutineAddress", PASSIVE);
    if name.is_null() {
        violation(
            Rule::NullParameter,
            "MmGetSystemRoutineAddress",
            "a NULL name",
        );
    }
    // SAFETY: the caller's counted UTF-16 string, read for the call.
    let n = unsafe { &*name };
    // SAFETY: its `Length` bytes at `Buffer`, as the caller counted them.
    let text = unsafe { core::slice::from_raw_parts(n.Buffer, usize::from(n.Length / 2)) };
    routine(&String::from_utf16_lossy(text))
}

/// At unload: no provider left registered.
pub(crate) fn at_unload() {
    let left = with(|k| k.etw.registered.clone());
    if let Some(Provider { handle, guid, .. }) = left.first() {
        violation(
            Rule::EtwRegistration,
            "DriverUnload",
            &format!("ETW provider {guid:x?} (handle {handle:#x}) is still registered"),
        );
    }
}

/// The exports above, by name, as the image's loader binds them.
pub(crate) fn exports() -> [(&'static str, usize); 6] {
    [
        ("EtwSetInformation", EtwSetInformation as *const () as usize),
        (
            "MmGetSystemRoutineAddress",
            MmGetSystemRoutineAddress as *const () as usize,
        ),
        ("EtwRegister", EtwRegister as *const () as usize),
        ("EtwUnregister", EtwUnregister as *const () as usize),
        ("EtwEventEnabled", EtwEventEnabled as *const () as usize),
        ("EtwWriteTransfer", EtwWriteTransfer as *const () as usize),
    ]
}

/// The events written read back, each against the flight record of the same run (`records`,
/// read from its first, every drain run): one event per record, in order, none twice and
/// none missing, the reset fields on the records from a reset's start to its end only; each from the provider `hcabus` on the
/// TraceLogging channel, at its record's level and keywords, named after its kind, with the
/// record's fields and the reset it falls in. A record that repeated after its event was
/// written counts more than the event says, never fewer. The kinds of event, in order.
pub(crate) fn matches_flight_record(records: &[Record]) -> Vec<String> {
    let written = with(|k| k.etw.written.clone());
    expect(!written.is_empty(), "no ETW event was written");
    let mut open: Option<ResetSpan> = None;
    let mut kinds = Vec::new();
    let mut events = written.iter();
    // Apart from ResetSpan: the state the records say the bus is in.
    let mut settled = true;
    for r in records {
        let reset = ResetSpan::follow(&mut open, r);
        let Some(w) = events.next() else { break };
        let what = format!("the event of record {} ({})", r.seq, r.kind.tag().as_str());
        let inside = match r.kind {
            RecordKind::ResetStarted { .. } => {
                settled = false;
                true
            }
            RecordKind::ResetFinished { .. } | RecordKind::ResetFailed { .. } => {
                !core::mem::replace(&mut settled, true)
            }
            // A reset that ends with neither (a veto, a removal) ends at the state change
            // that leaves it, its last record.
            RecordKind::Transition {
                to: State::Operational | State::Failed | State::Removed,
                ..
            } => !core::mem::replace(&mut settled, true),
            _ => !settled,
        };
        expect(
            reset.is_some() == inside,
            &format!("{what}: in a reset {inside}, its event says {reset:?}"),
        );
        expect(
            w.guid == etw::PROVIDER_GUID,
            &format!("{what}: provider {:x?}", w.guid),
        );
        expect(
            (w.channel, w.level, w.keyword)
                == (
                    etw::CHANNEL_TRACELOGGING,
                    etw::level(r),
                    etw::keywords(r).bits(),
                ),
            &format!(
                "{what}: channel {}, level {}, keywords {:#x}",
                w.channel, w.level, w.keyword
            ),
        );
        let got = w
            .decode()
            .unwrap_or_else(|e| violation(Rule::Expectation, "ETW", &format!("{what}: {e}")));
        let (name, mut fields) = etw_reader::expected(r, reset);
        // The record's count as the event was written: at most what it is now.
        let count = got.get("count").cloned();
        expect(
            matches!(count, Some(Value::U32(c)) if c >= 1 && c <= r.count),
            &format!("{what}: count {count:?}, the record {}", r.count),
        );
        if let Some(slot) = fields.iter_mut().find(|(n, _)| n == "count") {
            slot.1 = count.unwrap_or(Value::U32(0));
        }
        expect(
            got.provider == etw::PROVIDER_NAME && got.name == name && got.fields == fields,
            &format!("{what}: read back {got:?}, the record says {name} {fields:?}"),
        );
        kinds.push(name);
    }
    let extra = events.count();
    expect(extra == 0, &format!("{extra} events with no record"));
    // READ_LOG writes no record, and the scenario's time ran its drains: every record is.
    let untraced = records.len() - kinds.len();
    expect(untraced == 0, &format!("{untraced} records never traced"));
    kinds
}

/// Narrows the session to `session` (`None`: no session) for what follows; what was
/// written before is forgotten.
pub(crate) fn set_session(session: Option<Session>) {
    with(|k| {
        k.etw.configured = true;
        k.etw.session = session;
        k.etw.written.clear();
    });
}

/// How many events were written so far.
pub(crate) fn written() -> usize {
    with(|k| k.etw.written.len())
}
