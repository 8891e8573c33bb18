//! The C ABI (docs/design.md §3, driver/include/hcabus.h) as a careless C child driver would call it:
//! a bus created from a fuzzed configuration, then a program of calls through
//! `HCABUS_BUS_INTERFACE_V1` with fuzzed sizes, kinds, flags, names, client ids, epochs and
//! reasons, clients that execute inside their callback or later, and administrator's resets.
//!
//! Pointers stay valid (a fuzzed pointer is undefined behaviour in C as well); everything else
//! is arbitrary. Properties: no call panics (a panic caught at the boundary answers
//! `STATUS_INTERNAL_ERROR`); every status is one the header documents; every client hears a
//! RESET at most once before its end event, and an end event only after a RESET or
//! RESET_QUERY; the bus goes idle once the program ends, and is destroyed cleanly.

use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::{Arc, Mutex, PoisonError};

use hcabus::bus_abi::*;
use hcabus::types::EventKind;
use hcabus_capi::{
    hcabus_sim_admin_reset, hcabus_sim_create, hcabus_sim_destroy, hcabus_sim_query_interface,
    hcabus_sim_wait_idle, HcabusSim, HcabusSimConfig,
};

use crate::Reader;

const MAX_CALLS: usize = 40;
/// Clients a program can name by index; more registrations reuse the slots.
const SLOTS: usize = 4;

/// `reset_execute` as the interface points to it.
type ExecuteFn = unsafe extern "C" fn(*mut c_void, u64, u64) -> i32;

/// What one client's callback saw, and what it does on RESET.
#[derive(Debug, Default)]
struct Client {
    /// (kind, epoch) of every event, in order.
    events: Mutex<Vec<(u16, u64)>>,
    /// Executes from inside the callback (with the epoch the RESET gave).
    inline: bool,
    /// Registered during a reset: its first event may be that reset's end (docs/design.md §3).
    late: std::sync::atomic::AtomicBool,
    /// `reset_execute` and the bus context, for the inline client.
    execute: Mutex<Option<(ExecuteFn, usize)>>,
}

/// The event callback every fuzzed client registers.
///
/// # Safety
/// `context` is a `Client` kept alive by the program; `event` an event from the bus.
unsafe extern "C" fn on_event(context: *mut c_void, event: *const HcabusEvent) {
    // SAFETY: the program keeps every Client it registered alive until the bus is destroyed.
    let client = unsafe { &*context.cast::<Client>() };
    // SAFETY: the bus passes a valid event for the duration of the call.
    let ev = unsafe { event.read() };
    // SAFETY: every event kind carries its epoch in the first word of its data.
    let epoch = unsafe { ev.data.raw[0] };
    client
        .events
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((ev.kind, epoch));
    if client.inline && ev.kind == EventKind::Reset as u16 {
        let call = *client
            .execute
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((execute, bus)) = call {
            // SAFETY: the bus context from the interface, live while the bus delivers.
            let status = unsafe { execute(bus as *mut c_void, ev.client_id, epoch) };
            assert_documented(status);
        }
    }
}

/// Statuses the header lists for the calls a program makes.
fn assert_documented(s: HcabusStatus) {
    let refusal = (s as u32) & 0xFFFF_0000 == status::REFUSAL_BASE;
    assert!(
        refusal || status::ALL.contains(&s),
        "undocumented status {:#010x}",
        s as u32
    );
    assert_ne!(s, status::INTERNAL_ERROR, "a call panicked inside the bus");
}

fn config(r: &mut Reader<'_>) -> HcabusSimConfig {
    let shape = r.u8();
    // Deadlines are kept short (never 0, which means the multi-second default) so that every
    // program's resets end within moments: a client that never executes waits them out in
    // real time.
    let mut c = HcabusSimConfig {
        size: size_of::<HcabusSimConfig>() as u32,
        max_clients: u32::from(r.u8() % 8),
        quiesce_deadline_ms: 1 + u32::from(r.u8() % 32),
        query_deadline_ms: 1 + u32::from(r.u8() % 16),
        hw_reset_ms: u32::from(r.u8() % 8),
        reserved: 0,
    };
    if shape & 1 != 0 {
        c.size = r.u32();
    }
    if shape & 2 != 0 {
        c.max_clients = r.u32();
    }
    c
}

/// Text of up to 40 bytes from the program, NUL-terminated.
fn text(r: &mut Reader<'_>) -> Vec<u8> {
    let n = usize::from(r.u8() % 41);
    let mut t: Vec<u8> = r.bytes(n).to_vec();
    t.push(0);
    t
}

struct Program {
    iface: HcabusBusInterfaceV1,
    sim: *mut HcabusSim,
    clients: Vec<Arc<Client>>,
    /// (client id, the client's log) per slot.
    slots: [Option<(u64, Arc<Client>)>; SLOTS],
}

impl Program {
    fn ctx(&self) -> *mut c_void {
        self.iface.context
    }

    /// A client id: a live one, a stale one, or any number.
    fn id(&self, r: &mut Reader<'_>) -> u64 {
        let pick = r.u8();
        match self.slots[usize::from(pick) % SLOTS].as_ref() {
            Some((id, _)) if pick < 0xE0 => *id,
            _ if pick >= 0xF0 => r.u64(),
            _ => u64::from(pick),
        }
    }

    /// An epoch: the last RESET or RESET_QUERY a client heard, or any number.
    fn epoch(&self, r: &mut Reader<'_>) -> u64 {
        let pick = r.u8();
        let heard = self.slots[usize::from(pick) % SLOTS]
            .as_ref()
            .and_then(|(_, c)| {
                let events = c.events.lock().unwrap_or_else(PoisonError::into_inner);
                events.last().map(|e| e.1)
            });
        match heard {
            Some(e) if pick < 0xE0 => e,
            _ => r.u64() % 8,
        }
    }

    fn register(&mut self, r: &mut Reader<'_>) -> HcabusStatus {
        let slot = usize::from(r.u8()) % SLOTS;
        let shape = r.u8();
        let client = Arc::new(Client {
            inline: shape & 1 != 0,
            ..Client::default()
        });
        *client
            .execute
            .lock()
            .unwrap_or_else(PoisonError::into_inner) =
            self.iface.reset_execute.map(|f| (f, self.ctx() as usize));
        let name = if shape & 2 != 0 {
            text(r)
        } else {
            b"child\0".to_vec()
        };
        let desc = HcabusClientDesc {
            size: if shape & 4 != 0 {
                r.u16()
            } else {
                size_of::<HcabusClientDesc>() as u16
            },
            kind: u16::from(r.u8() % 8),
            flags: if shape & 8 != 0 { r.u32() } else { 0 },
            name: if shape & 16 != 0 {
                ptr::null()
            } else {
                name.as_ptr().cast::<c_char>()
            },
            event_callback: if shape & 32 != 0 {
                None
            } else {
                Some(on_event)
            },
            client_context: Arc::as_ptr(&client).cast_mut().cast(),
        };
        let mut reg = HcabusRegistration::default();
        let register = self.iface.register.expect("the interface has register");
        // SAFETY: the context is the bus's; desc, its name and reg live across the call; the
        // client's context is kept in `self.clients` until the bus is destroyed.
        let s = unsafe { register(self.ctx(), &desc, &mut reg) };
        self.clients.push(Arc::clone(&client));
        if s == status::SUCCESS {
            client
                .late
                .store(reg.late != 0, std::sync::atomic::Ordering::Relaxed);
            self.slots[slot] = Some((reg.client_id, client));
        }
        s
    }

    /// One call of the program.
    fn step(&mut self, r: &mut Reader<'_>) -> HcabusStatus {
        let ctx = self.ctx();
        let i = self.iface;
        match r.u8() % 10 {
            0 | 1 => self.register(r),
            2 => {
                let id = self.id(r);
                // SAFETY: the bus context; the id is only a number.
                unsafe { i.unregister.expect("unregister")(ctx, id) }
            }
            3 => {
                let id = self.id(r);
                let mut epoch = 0u64;
                let out: *mut u64 = if r.u8() & 1 != 0 {
                    &mut epoch
                } else {
                    ptr::null_mut()
                };
                // SAFETY: the bus context; `out` is null or a live u64.
                unsafe { i.reset_request.expect("reset_request")(ctx, id, out) }
            }
            4 | 5 => {
                let (id, epoch) = (self.id(r), self.epoch(r));
                // SAFETY: the bus context; id and epoch are numbers.
                unsafe { i.reset_execute.expect("reset_execute")(ctx, id, epoch) }
            }
            6 => {
                let (id, epoch) = (self.id(r), self.epoch(r));
                // SAFETY: the bus context; id and epoch are numbers.
                unsafe { i.reset_consent.expect("reset_consent")(ctx, id, epoch) }
            }
            7 => {
                let (id, epoch) = (self.id(r), self.epoch(r));
                let reason = text(r);
                let p = if r.u8() & 1 != 0 {
                    ptr::null()
                } else {
                    reason.as_ptr().cast()
                };
                // SAFETY: the bus context; the reason is null or NUL-terminated and live.
                unsafe { i.reset_veto.expect("reset_veto")(ctx, id, epoch, p) }
            }
            8 => {
                let mut st = HcabusBusState {
                    size: if r.u8() & 1 != 0 {
                        r.u32()
                    } else {
                        size_of::<HcabusBusState>() as u32
                    },
                    ..HcabusBusState::default()
                };
                // SAFETY: the bus context; `st` is a live HCABUS_BUS_STATE.
                unsafe { i.query_state.expect("query_state")(ctx, &mut st) }
            }
            _ => {
                let mode = u32::from(r.u8() % 5);
                // SAFETY: a live handle; the epoch pointer is null.
                unsafe { hcabus_sim_admin_reset(self.sim, mode, ptr::null_mut()) }
            }
        }
    }
}

/// Every client's events make sense on their own: an end event only after a RESET (RESET_END
/// carries the new epoch, so one at least the RESET's) or, for a late registrant, as its
/// first reset event; RESET_ABORTED only after the RESET_QUERY or RESET of its epoch; never
/// two RESETs without an end between them.
fn check_events(client: &Client) {
    let events = client.events.lock().unwrap_or_else(PoisonError::into_inner);
    let mut open: Option<(u16, u64)> = None;
    let mut late = client.late.load(std::sync::atomic::Ordering::Relaxed);
    for &(kind, epoch) in events.iter() {
        let is = |k: EventKind| kind == k as u16;
        if is(EventKind::PortActive) || is(EventKind::PortDown) {
            // A client asked about a planned reset still runs: it may hear of its ports.
            let inside = open.is_some_and(|(k, _)| k != EventKind::ResetQuery as u16);
            assert!(!inside, "a port event inside a reset: {events:?}");
            continue;
        }
        if is(EventKind::Reset) {
            if let Some((k, e)) = open {
                assert!(
                    k == EventKind::ResetQuery as u16 && e == epoch,
                    "RESET of {epoch} while {e} is open: {events:?}"
                );
            }
            open = Some((kind, epoch));
        } else if is(EventKind::ResetQuery) {
            assert_eq!(open, None, "RESET_QUERY inside a reset: {events:?}");
            open = Some((kind, epoch));
        } else if is(EventKind::ResetEnd) || is(EventKind::ResetFailed) {
            let after_reset =
                matches!(open, Some((k, e)) if k == EventKind::Reset as u16 && e <= epoch);
            assert!(
                after_reset || (late && open.is_none()),
                "an end of {epoch} without its RESET: {events:?}"
            );
            open = None;
        } else if is(EventKind::ResetAborted) {
            assert!(
                matches!(open, Some((_, e)) if e == epoch),
                "RESET_ABORTED of {epoch} without its RESET or RESET_QUERY: {events:?}"
            );
            open = None;
        }
        if !is(EventKind::DeviceFatal) {
            late = false;
        }
    }
}

/// Runs one program against a new bus.
pub fn check(data: &[u8]) {
    let mut r = Reader::new(data);
    let cfg = config(&mut r);
    let mut sim: *mut HcabusSim = ptr::null_mut();
    // SAFETY: `cfg` and `sim` are live locals.
    let s = unsafe { hcabus_sim_create(&cfg, &mut sim) };
    assert_documented(s);
    if s != status::SUCCESS {
        assert!(sim.is_null(), "a refused create wrote a handle");
        return;
    }
    let mut iface = HcabusBusInterfaceV1::EMPTY;
    let size = size_of::<HcabusBusInterfaceV1>() as u16;
    // SAFETY: a live handle, the GUID and a writable interface.
    let s =
        unsafe { hcabus_sim_query_interface(sim, &GUID_HCABUS_BUS_INTERFACE, size, 1, &mut iface) };
    assert_eq!(s, status::SUCCESS);
    let mut p = Program {
        iface,
        sim,
        clients: Vec::new(),
        slots: Default::default(),
    };
    for _ in 0..MAX_CALLS {
        if r.is_empty() {
            break;
        }
        assert_documented(p.step(&mut r));
    }
    // Clients that did not execute inline never will: the deadline forces them.
    // SAFETY: a live handle.
    let idle = unsafe { hcabus_sim_wait_idle(sim, 60_000) };
    assert_eq!(idle, status::SUCCESS, "the bus went idle after the program");
    let deref = iface.interface_dereference.expect("dereference");
    // SAFETY: the context of the interface referenced once above.
    unsafe { deref(iface.context) };
    // SAFETY: a live handle whose only interface was dereferenced.
    let s = unsafe { hcabus_sim_destroy(sim) };
    assert_eq!(s, status::SUCCESS);
    for c in &p.clients {
        check_events(c);
    }
}
