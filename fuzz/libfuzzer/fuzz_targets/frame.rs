#![no_main]
//! See hcabus_fuzz::frame for what this target checks.

libfuzzer_sys::fuzz_target!(|data: &[u8]| hcabus_fuzz::frame(data));
