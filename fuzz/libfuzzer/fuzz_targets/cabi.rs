#![no_main]
//! See hcabus_fuzz::cabi::check for what this target checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hcabus_fuzz::cabi::check(data));
