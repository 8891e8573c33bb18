//! A page fault in driver code is a bugcheck (PAGE_FAULT_IN_NONPAGED_AREA, 0x50): in the
//! scenario's process a SIGSEGV or SIGBUS is reported as the model's other broken rules are,
//! on one line the parent test reads (SDV's NullCheck: a NULL a DDI may return, dereferenced).
//! Rust's own handler for a stack overflow is replaced: an overflow is reported the same way,
//! at an address near the stack. A debug build checks a raw pointer for NULL before it is
//! dereferenced and panics; that panic is the same fault found one instruction earlier, and is
//! reported so too (any other panic keeps Rust's report).

use core::ffi::{c_int, c_void};
use std::sync::OnceLock;

use super::{Rule, BUGCHECK_EXIT};

/// The report's text before and after the address, made before the handler can run (it may
/// only write and exit).
static REPORT: OnceLock<(String, String)> = OnceLock::new();

/// The handler's stack (the model's register file runs on it for the image's accesses).
const ALTERNATE_BYTES: usize = 1 << 20;

/// Installs the handler for the scenario's process.
pub(crate) fn install() {
    let rule = Rule::NullDereference;
    REPORT.get_or_init(|| {
        (
            format!(
                "KMDF MODEL BUGCHECK {:#x} {rule:?} in (driver code): a page fault at ",
                rule.code()
            ),
            format!(" [rule: {}; from: {}]\n", rule.says(), rule.source()),
        )
    });
    let rust = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        if text.contains("null pointer dereference") {
            let at = info.location().map(ToString::to_string).unwrap_or_default();
            super::violation(
                rule,
                "(driver code)",
                &format!("a page fault at 0x0 ({at})"),
            );
        }
        rust(info);
    }));
    // The handler's own stack: a fault on a kernel stack's guard page has no stack left,
    // and the register accesses the handler does for the image need more than a signal's.
    static ALTERNATE: OnceLock<usize> = OnceLock::new();
    let alternate = *ALTERNATE.get_or_init(|| {
        let stack = vec![0u8; ALTERNATE_BYTES].leak();
        stack.as_mut_ptr() as usize
    });
    let ss = libc::stack_t {
        ss_sp: alternate as *mut c_void,
        ss_flags: 0,
        ss_size: ALTERNATE_BYTES,
    };
    // SAFETY: a leaked buffer of that size, never freed: the handler's for the process.
    unsafe { libc::sigaltstack(&ss, core::ptr::null_mut()) };
    for signal in [libc::SIGSEGV, libc::SIGBUS] {
        // SAFETY: an all-zero sigaction is valid (no flags, an empty mask, filled below).
        let mut action: libc::sigaction = unsafe { core::mem::zeroed() };
        action.sa_sigaction = on_fault as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        // SAFETY: the action's own mask, a valid sigset_t.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: a handler that only writes to stderr and exits (async-signal-safe).
        unsafe { libc::sigaction(signal, &action, core::ptr::null_mut()) };
    }
}

/// Writes `bytes` to stderr, as much as it takes.
fn write_all(bytes: &[u8]) {
    let mut rest = bytes;
    while !rest.is_empty() {
        // SAFETY: a live buffer of its length; write(2) is async-signal-safe.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return;
        }
        rest = &rest[n as usize..];
    }
}

extern "C" fn on_fault(_signal: c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes the fault's siginfo (SA_SIGINFO), live for the handler.
    let info = unsafe { &*info };
    // SAFETY: a SIGSEGV's or SIGBUS's siginfo carries the faulting address.
    let address = unsafe { info.si_addr() } as usize;
    // The image's register accesses, its calls to what the model lacks, its stack's guard
    // page: taken (or reported) there. Everything else is the driver's page fault.
    if super::image::trap::handle(address, context) {
        return;
    }
    let mut hex = [0u8; 18];
    hex[0] = b'0';
    hex[1] = b'x';
    let digits = (usize::BITS as usize / 4) - (address.leading_zeros() as usize / 4);
    let digits = digits.max(1);
    for i in 0..digits {
        let nibble = (address >> (4 * (digits - 1 - i))) & 0xF;
        hex[2 + i] = b"0123456789abcdef"[nibble];
    }
    if let Some((head, tail)) = REPORT.get() {
        write_all(head.as_bytes());
        write_all(&hex[..2 + digits]);
        write_all(tail.as_bytes());
    }
    // SAFETY: ends the process at once, as a bugcheck ends the machine; async-signal-safe.
    unsafe { libc::_exit(BUGCHECK_EXIT) };
}
