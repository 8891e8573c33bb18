//! C programs that play child drivers against the C ABI of `hcabus-capi` (docs/design.md §3), and the
//! proof that `driver/include/hcabus.h` and the Rust layout agree.
//!
//! build.rs compiles `c/*.c` with the `cc` crate against the header; the tests below call each
//! C test and report its message when it fails. The library itself is empty.

// The exports the C code calls live in hcabus-capi: linking it is the point.
#[allow(unused_extern_crates)]
extern crate hcabus_capi;

#[cfg(test)]
mod tests;
