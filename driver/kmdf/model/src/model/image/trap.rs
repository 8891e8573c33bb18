//! The faults the image makes that are not its bugs: a load or store to the register window
//! (the model maps BAR0 with no access, so each of the image's volatile accesses faults here
//! and is done by the model's device, as the hardware would answer it), a call through the
//! function table to a DDI the model does not give, and the guard page of a kernel stack.
//! The handler runs on its own stack (`fault.rs`, sigaltstack), so an overflow is reported.

use core::ffi::c_void;

use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind, Register};

use super::super::{violation, Rule};

/// Takes the fault at `address` if it is one of the image's that the model answers; returns
/// whether it did (the context then resumes after the instruction). Reports and ends the
/// process for an unmodelled DDI or a stack overflow.
pub(crate) fn handle(address: usize, context: *mut c_void) -> bool {
    if let Some(entry) = super::stacks::overflowed(address) {
        violation(
            Rule::StackOverflow,
            &entry,
            &format!(
                "the image ran past its {}-byte kernel stack into the guard page",
                super::stacks::STACK_BYTES
            ),
        );
    }
    for image in super::loaded() {
        if image.unmodelled.contains(address) {
            violation(
                Rule::Unmodelled,
                "(function table)",
                &format!(
                    "the image in slot {} called KMDF 1.33's function number {} (WDFFUNCENUM), \
                     which the model does not give",
                    image.slot,
                    address - image.unmodelled.base()
                ),
            );
        }
    }
    // SAFETY: the handler's context (SA_SIGINFO), live and ours to change for the handler.
    let uc = unsafe { &mut *context.cast::<libc::ucontext_t>() };
    let rip = uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize;
    if !super::is_driver_code(rip) || !super::super::wdm::is_register(address) {
        return false;
    }
    // SAFETY: up to 15 bytes of the image's code at the faulting instruction (in .text).
    let code = unsafe { core::slice::from_raw_parts(rip as *const u8, 15) };
    let mut decoder = Decoder::with_ip(64, code, rip as u64, DecoderOptions::NONE);
    let ins = decoder.decode();
    let dword = ins.memory_size() == iced_x86::MemorySize::UInt32;
    match (ins.mnemonic(), ins.op0_kind(), ins.op1_kind(), dword) {
        (Mnemonic::Mov, OpKind::Memory, OpKind::Register, true) => {
            let value = read(uc, ins.op1_register()) as u32;
            // SAFETY: the model's register write for the address the image stored to.
            unsafe { super::super::wdm::register_write(address as *mut u32, value) };
        }
        (Mnemonic::Mov, OpKind::Memory, OpKind::Immediate32, true) => {
            // SAFETY: as above.
            unsafe { super::super::wdm::register_write(address as *mut u32, ins.immediate32()) };
        }
        (Mnemonic::Mov, OpKind::Register, OpKind::Memory, true) => {
            // SAFETY: the model's register read for the address the image loaded from.
            let value = unsafe { super::super::wdm::register_read(address as *const u32) };
            // A 32-bit destination is zero-extended to its 64-bit register.
            write(uc, ins.op0_register(), u64::from(value));
        }
        _ => violation(
            Rule::Unmodelled,
            "(register window)",
            &format!(
                "an access at {address:#x} the model's device does not take: {:?} of {:?}",
                ins.mnemonic(),
                ins.memory_size()
            ),
        ),
    }
    uc.uc_mcontext.gregs[libc::REG_RIP as usize] = (rip + ins.len()) as i64;
    true
}

/// The saved context's slot for a general-purpose register (any width).
fn slot(r: Register) -> usize {
    let index = match r.full_register() {
        Register::RAX => libc::REG_RAX,
        Register::RBX => libc::REG_RBX,
        Register::RCX => libc::REG_RCX,
        Register::RDX => libc::REG_RDX,
        Register::RSI => libc::REG_RSI,
        Register::RDI => libc::REG_RDI,
        Register::RBP => libc::REG_RBP,
        Register::RSP => libc::REG_RSP,
        Register::R8 => libc::REG_R8,
        Register::R9 => libc::REG_R9,
        Register::R10 => libc::REG_R10,
        Register::R11 => libc::REG_R11,
        Register::R12 => libc::REG_R12,
        Register::R13 => libc::REG_R13,
        Register::R14 => libc::REG_R14,
        Register::R15 => libc::REG_R15,
        other => violation(
            Rule::Unmodelled,
            "(register window)",
            &format!("a register access through {other:?}"),
        ),
    };
    index as usize
}

fn read(uc: &libc::ucontext_t, r: Register) -> u64 {
    uc.uc_mcontext.gregs[slot(r)] as u64
}

fn write(uc: &mut libc::ucontext_t, r: Register, value: u64) {
    uc.uc_mcontext.gregs[slot(r)] = value as i64;
}
