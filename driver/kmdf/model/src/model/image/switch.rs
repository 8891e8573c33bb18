//! Crossing between the model (Rust, the host's System V convention, the host's stacks) and
//! the image (Windows x64 convention, a kernel stack of 24 KiB with a guard page below).
//!
//! Into the image, [`enter`]: the arguments in RCX, RDX, R8, R9 and above the 32-byte home
//! area, the call made on the processor's guest stack. A top-level call starts at the
//! stack's top; a callback the model makes while the image is inside a DDI (a cleanup from
//! WdfObjectDelete, a DPC run at once) continues below the image's frames, as it would on
//! the one kernel stack.
//!
//! Out of the image, each function the image may call is a stub: `mov r11, target; mov rax,
//! common; jmp rax`. The common part ([`win64_to_host`]) saves what Windows' convention has
//! the callee keep and System V's does not (RSI, RDI, XMM6-15), moves the eight argument
//! slots to System V's places, and calls the target on the host stack the last [`enter`]
//! left; the guest's stack pointer is kept for a nested [`enter`].
//!
//! The two stack pointers are one pair per processor: the model's processors are shuttle
//! continuations on one thread, so `schedule` saves the pair when a processor yields and
//! restores it when it runs again ([`save`], [`restore`]).

use core::arch::{asm, global_asm};
use core::sync::atomic::{AtomicUsize, Ordering};

/// Where the host's stack continues while the image runs: the stack pointer of the latest
/// [`enter`], below which nothing of the host's is live.
static HOST_SP: AtomicUsize = AtomicUsize::new(0);
/// Where the image's stack continues while the host runs inside a call from the image; 0
/// when no image frame is on the processor's stack.
static GUEST_SP: AtomicUsize = AtomicUsize::new(0);

global_asm!(
    ".text",
    ".p2align 4",
    ".globl hcabus_model_win64_to_host",
    "hcabus_model_win64_to_host:",
    "push rbp",
    "mov rbp, rsp",
    "push rsi",
    "push rdi",
    "push r12",
    "push qword ptr [rip + {guest}]",
    "sub rsp, 160",
    "movdqu xmmword ptr [rsp], xmm6",
    "movdqu xmmword ptr [rsp + 16], xmm7",
    "movdqu xmmword ptr [rsp + 32], xmm8",
    "movdqu xmmword ptr [rsp + 48], xmm9",
    "movdqu xmmword ptr [rsp + 64], xmm10",
    "movdqu xmmword ptr [rsp + 80], xmm11",
    "movdqu xmmword ptr [rsp + 96], xmm12",
    "movdqu xmmword ptr [rsp + 112], xmm13",
    "movdqu xmmword ptr [rsp + 128], xmm14",
    "movdqu xmmword ptr [rsp + 144], xmm15",
    "mov qword ptr [rip + {guest}], rsp",
    // Windows: RCX RDX R8 R9, then [entry RSP + 0x28 + 8k] = [RBP + 0x30 + 8k].
    "mov rdi, rcx",
    "mov rsi, rdx",
    "mov rdx, r8",
    "mov rcx, r9",
    "mov r8, qword ptr [rbp + 0x30]",
    "mov r9, qword ptr [rbp + 0x38]",
    "mov rax, qword ptr [rbp + 0x40]",
    "mov r10, qword ptr [rbp + 0x48]",
    "mov r12, rsp",
    "mov rsp, qword ptr [rip + {host}]",
    "and rsp, -16",
    "sub rsp, 256",
    "push r10",
    "push rax",
    "xor eax, eax",
    "call r11",
    "mov rsp, r12",
    "movdqu xmm6, xmmword ptr [rsp]",
    "movdqu xmm7, xmmword ptr [rsp + 16]",
    "movdqu xmm8, xmmword ptr [rsp + 32]",
    "movdqu xmm9, xmmword ptr [rsp + 48]",
    "movdqu xmm10, xmmword ptr [rsp + 64]",
    "movdqu xmm11, xmmword ptr [rsp + 80]",
    "movdqu xmm12, xmmword ptr [rsp + 96]",
    "movdqu xmm13, xmmword ptr [rsp + 112]",
    "movdqu xmm14, xmmword ptr [rsp + 128]",
    "movdqu xmm15, xmmword ptr [rsp + 144]",
    "add rsp, 160",
    "pop qword ptr [rip + {guest}]",
    "pop r12",
    "pop rdi",
    "pop rsi",
    "pop rbp",
    "ret",
    host = sym HOST_SP,
    guest = sym GUEST_SP,
);

unsafe extern "C" {
    /// The common part of every stub (never called from Rust: its address is in the stubs).
    fn hcabus_model_win64_to_host();
}

/// The common part's address, for the stubs.
pub(crate) fn common() -> usize {
    hcabus_model_win64_to_host as *const () as usize
}

/// The stub's bytes: `mov r11, target; mov rax, common; jmp rax` (22 bytes).
pub(crate) fn stub_code(target: usize) -> [u8; 22] {
    let mut code = [0u8; 22];
    code[..2].copy_from_slice(&[0x49, 0xBB]);
    code[2..10].copy_from_slice(&(target as u64).to_le_bytes());
    code[10..12].copy_from_slice(&[0x48, 0xB8]);
    code[12..20].copy_from_slice(&(common() as u64).to_le_bytes());
    code[20..].copy_from_slice(&[0xFF, 0xE0]);
    code
}

/// Whether the image has a frame on the processor's stack (the host is inside a call of
/// the image's): a call into the image then continues below it.
pub(crate) fn guest_sp() -> usize {
    GUEST_SP.load(Ordering::Relaxed)
}

/// The processor's pair, for a switch to another processor.
pub(crate) fn save() -> (usize, usize) {
    (
        HOST_SP.load(Ordering::Relaxed),
        GUEST_SP.load(Ordering::Relaxed),
    )
}

/// Back on the processor that [`save`]d the pair.
pub(crate) fn restore((host, guest): (usize, usize)) {
    HOST_SP.store(host, Ordering::Relaxed);
    GUEST_SP.store(guest, Ordering::Relaxed);
}

/// Calls the image's `target` with `args` (at most 8) on the guest stack below `top`.
///
/// # Safety
/// `target` is the image's function taking `args` in Windows' convention; `top` is the top
/// of free, writable guest stack memory with room for the frame and the callee's needs.
pub(crate) unsafe fn enter(target: usize, top: usize, args: &[u64]) -> u64 {
    assert!(args.len() <= 8, "at most 8 arguments");
    let stacked = args.len().saturating_sub(4);
    // The home area for four registers, the stacked arguments; 16-aligned at the call.
    let frame = (top - 0x20 - 8 * stacked) & !0xF;
    for (i, a) in args.iter().enumerate().skip(4) {
        // SAFETY: within the frame just carved out of the caller's free stack.
        unsafe { ((frame + 0x20 + 8 * (i - 4)) as *mut u64).write(*a) };
    }
    let reg = |i: usize| args.get(i).copied().unwrap_or(0);
    let saved = save();
    GUEST_SP.store(0, Ordering::Relaxed);
    let result: u64;
    // SAFETY: the caller's contract. R12 keeps the host's stack pointer across the call
    // (the callee keeps R12: both conventions); HOST_SP tells the image's calls back into
    // the model where the host stack continues; the callee keeps what clobber_abi("win64")
    // does not list (RBX, RBP, RDI, RSI, R12-R15, XMM6-15), the stubs included.
    unsafe {
        asm!(
            "mov r12, rsp",
            "mov qword ptr [{host}], rsp",
            "mov rsp, {frame}",
            "call {target}",
            "mov rsp, r12",
            host = in(reg) HOST_SP.as_ptr(),
            frame = in(reg) frame,
            target = in(reg) target,
            inout("rcx") reg(0) => _,
            inout("rdx") reg(1) => _,
            inout("r8") reg(2) => _,
            inout("r9") reg(3) => _,
            lateout("rax") result,
            out("r12") _,
            clobber_abi("win64"),
        );
    }
    restore(saved);
    result
}
