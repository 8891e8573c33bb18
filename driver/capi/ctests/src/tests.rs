use std::collections::BTreeMap;
use std::ffi::{c_char, c_int, c_longlong, CStr};

use hcabus::bus_abi::{status, HCABUS_BUS_INTERFACE_VERSION, LAYOUT_TABLE};
use hcabus::errors::RefusalCode;
use hcabus::types::*;

#[repr(C)]
struct LayoutEntry {
    name: *const c_char,
    value: c_longlong,
}

extern "C" {
    fn hcabus_c_layout(count: *mut usize) -> *const LayoutEntry;
    fn ctest_ipoib_and_bootdisk(msg: *mut c_char, len: usize) -> c_int;
    fn ctest_unregister_in_callback(msg: *mut c_char, len: usize) -> c_int;
    fn ctest_query_consent_and_veto(msg: *mut c_char, len: usize) -> c_int;
    fn ctest_bad_input(msg: *mut c_char, len: usize) -> c_int;
    fn ctest_callback_that_never_answers(msg: *mut c_char, len: usize) -> c_int;
    fn ctest_churn(resets: c_int, rounds: c_int, msg: *mut c_char, len: usize) -> c_int;
}

/// Runs one C test; its message is the failure.
fn run(test: unsafe extern "C" fn(*mut c_char, usize) -> c_int) {
    let mut msg = [0 as c_char; 512];
    // SAFETY: the C test writes at most `len` bytes, NUL-terminated, into `msg`.
    let failed = unsafe { test(msg.as_mut_ptr(), msg.len()) };
    // SAFETY: zero-initialised and written only by snprintf, so NUL-terminated.
    let text = unsafe { CStr::from_ptr(msg.as_ptr()) }.to_string_lossy();
    assert_eq!(failed, 0, "C child driver: {text}");
}

#[test]
fn an_ipoib_child_executes_in_its_callback_and_a_boot_disk_from_its_thread() {
    run(ctest_ipoib_and_bootdisk);
}

#[test]
fn a_child_may_unregister_from_inside_its_callback() {
    run(ctest_unregister_in_callback);
}

#[test]
fn a_can_veto_child_consents_then_vetoes_and_nobody_else_hears_the_veto() {
    run(ctest_query_consent_and_veto);
}

#[test]
fn bad_input_through_the_c_abi_gets_its_status_and_harms_nobody() {
    run(ctest_bad_input);
}

#[test]
fn a_child_that_never_answers_is_forced_at_its_deadline() {
    run(ctest_callback_that_never_answers);
}

/// Runs of the 16-child churn: `HCABUS_CHURN_RUNS` (the measure is 1,000), or 20.
fn churn_runs() -> u32 {
    std::env::var("HCABUS_CHURN_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20)
}

/// 16 children, each holding its own spin lock at DISPATCH_LEVEL across Register and taking it
/// in its callback, register and unregister during 25 resets: no run deadlocks (a call at
/// DISPATCH_LEVEL never runs a callback on its own thread), and no callback starts or runs on
/// after its Unregister returned (the rundown). Every run must pass.
#[test]
fn sixteen_children_with_their_own_spin_locks_churn_through_resets_without_deadlock_or_late_callbacks(
) {
    let runs = churn_runs();
    for i in 0..runs {
        let mut msg = [0 as c_char; 512];
        // SAFETY: the C test writes at most `len` bytes, NUL-terminated, into `msg`.
        let failed = unsafe { ctest_churn(25, 200, msg.as_mut_ptr(), msg.len()) };
        // SAFETY: zero-initialised and written only by snprintf, so NUL-terminated.
        let text = unsafe { CStr::from_ptr(msg.as_ptr()) }.to_string_lossy();
        assert_eq!(failed, 0, "run {} of {runs}: {text}", i + 1);
    }
}

/// `CamelCase` to `CAMEL_CASE`: how the header names what Rust's enums name.
fn upper_snake(name: &str) -> String {
    let mut out = String::new();
    for (i, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_uppercase());
    }
    out
}

/// Every constant the header must define, with the value the Rust side gives it.
fn rust_constants() -> Vec<(String, i64)> {
    fn each<T: Copy + core::fmt::Debug>(
        out: &mut Vec<(String, i64)>,
        prefix: &str,
        all: &[T],
        value: impl Fn(T) -> i64,
    ) {
        for v in all {
            out.push((
                format!("HCABUS_{prefix}_{}", upper_snake(&format!("{v:?}"))),
                value(*v),
            ));
        }
    }
    let mut out = vec![(
        "HCABUS_BUS_INTERFACE_VERSION".to_string(),
        HCABUS_BUS_INTERFACE_VERSION.into(),
    )];
    each(&mut out, "KIND", &ClientKind::ALL, |v| v as i64);
    each(&mut out, "STATE", &State::ALL, |v| v as i64);
    each(&mut out, "EVENT", &EventKind::ALL, |v| v as i64);
    each(&mut out, "REASON", &ResetReason::ALL, |v| v as i64);
    each(&mut out, "OUTCOME", &ResetOutcome::ALL, |v| v as i64);
    each(&mut out, "FAIL", &FailReason::ALL, |v| v as i64);
    each(&mut out, "ABORT", &AbortCause::ALL, |v| v as i64);
    each(&mut out, "FATAL", &FatalReason::ALL, |v| v as i64);
    each(&mut out, "STATUS", &RefusalCode::ALL, |v| {
        status::of_refusal(v).into()
    });
    for (name, flag) in ClientFlags::all().iter_names() {
        out.push((format!("HCABUS_FLAG_{name}"), flag.bits().into()));
    }
    for (name, s) in [
        ("SUCCESS", status::SUCCESS),
        ("ALREADY_READY", status::ALREADY_READY),
        ("PAST_DEADLINE", status::PAST_DEADLINE),
        ("TIMEOUT", status::TIMEOUT),
        ("INVALID_PARAMETER", status::INVALID_PARAMETER),
        ("INFO_LENGTH_MISMATCH", status::INFO_LENGTH_MISMATCH),
        ("BUFFER_TOO_SMALL", status::BUFFER_TOO_SMALL),
        ("REVISION_MISMATCH", status::REVISION_MISMATCH),
        ("NOT_SUPPORTED", status::NOT_SUPPORTED),
        ("INTERNAL_ERROR", status::INTERNAL_ERROR),
        ("DEVICE_BUSY", status::DEVICE_BUSY),
    ] {
        out.push((format!("HCABUS_STATUS_{name}"), s.into()));
    }
    out
}

fn c_layout() -> BTreeMap<String, i64> {
    let mut count = 0usize;
    // SAFETY: writes the count and returns a pointer to a static table of that many entries.
    let table = unsafe { hcabus_c_layout(&mut count) };
    // SAFETY: `table` points to `count` initialised entries that live for the whole program.
    let entries = unsafe { std::slice::from_raw_parts(table, count) };
    entries
        .iter()
        .map(|e| {
            // SAFETY: every name is a string literal in layout.c.
            let name = unsafe { CStr::from_ptr(e.name) }
                .to_string_lossy()
                .into_owned();
            (name, e.value)
        })
        .collect()
}

/// The header and the Rust definitions agree on every size, offset and constant, and neither
/// has one the other lacks.
#[test]
fn the_c_header_and_the_rust_layout_agree() {
    let c = c_layout();
    let mut rust: BTreeMap<String, i64> = LAYOUT_TABLE
        .iter()
        .map(|&(k, v)| (k.to_string(), v as i64))
        .collect();
    let constants = rust_constants();
    let constant_count = constants.len();
    rust.extend(constants);
    assert_eq!(
        rust.len(),
        LAYOUT_TABLE.len() + constant_count,
        "no name twice"
    );
    let mut differences = Vec::new();
    for (name, value) in &rust {
        match c.get(name) {
            Some(v) if v == value => {}
            Some(v) => differences.push(format!("{name}: Rust {value}, C {v}")),
            None => differences.push(format!("{name}: not in the C table")),
        }
    }
    for name in c.keys().filter(|k| !rust.contains_key(*k)) {
        differences.push(format!("{name}: in the C table only"));
    }
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}
