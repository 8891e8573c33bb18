//! The crossing itself, shown to refuse what Windows refuses, with machine code the tests
//! write (no image needed): a call that runs past the kernel stack stops in the guard page;
//! the driver's loads and stores on the register window reach the model's device, and an
//! access the device does not take (a byte) is refused, not guessed at.

use super::super::harness::started;
use super::super::harness::{assert_caught_bare, assert_passes, expect};
use super::super::machine::at;
use super::super::{with, PASSIVE};

/// `sub rsp, 0x800; call <itself>`: 2 KiB more stack per call, for ever.
const RECURSE: &[u8] = &[
    0x48, 0x81, 0xEC, 0x00, 0x08, 0x00, 0x00, // sub rsp, 0x800
    0xE8, 0xF4, 0xFF, 0xFF, 0xFF, // call -12 (the sub)
];
/// `mov eax, dword ptr [rcx + 0x10]; ret`: a register read at offset 0x10 of the window.
const LOAD: &[u8] = &[0x8B, 0x41, 0x10, 0xC3];
/// `mov byte ptr [rcx], 1; ret`: a byte store, which no ConnectX register takes.
const BYTE_STORE: &[u8] = &[0xC6, 0x01, 0x01, 0xC3];

/// The scenarios of this file (in the child process); `false` for another name.
pub(crate) fn scenario(name: &str) -> bool {
    match name {
        "image_overflow" => {
            let _m = started();
            let code = super::test_code(RECURSE);
            // SAFETY: code that takes no argument (and never returns: the guard page ends it).
            at("Recursion", PASSIVE, || unsafe { super::call(code, &[]) });
        }
        "image_load" | "image_byte_store" => {
            let _m = started();
            let base = with(|k| k.mappings.keys().next().copied()).unwrap_or_default();
            expect(base != 0, "BAR0 mapped by the start");
            let code = super::test_code(if name == "image_load" {
                LOAD
            } else {
                BYTE_STORE
            });
            // SAFETY: the code reads or writes at its one argument, the window's base.
            let got = at("Register", PASSIVE, || unsafe {
                super::call(code, &[base as u64])
            }) as u32;
            // SAFETY: the model's own read of the same register, as the Linux build does.
            let want = unsafe { super::super::wdm::register_read((base + 0x10) as *const u32) };
            expect(
                got == want,
                &format!("the load read {got:#x}, the device says {want:#x}"),
            );
            let used = super::stacks::report();
            expect(
                used.iter()
                    .any(|(n, bytes, _)| n == "Register" && *bytes > 0),
                &format!("the call's stack was not measured: {used:?}"),
            );
        }
        _ => return false,
    }
    true
}

#[test]
fn a_call_past_the_kernel_stack_stops_in_its_guard_page() {
    assert_caught_bare(
        "image_overflow",
        &["StackOverflow in Recursion", "24576-byte kernel stack"],
    );
}

#[test]
fn the_drivers_register_load_reaches_the_device_and_a_byte_store_is_refused() {
    assert_passes("image_load");
    assert_caught_bare(
        "image_byte_store",
        &["Unmodelled", "the model's device does not take"],
    );
}
