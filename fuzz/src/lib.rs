//! What each fuzz target checks. `fuzz/libfuzzer` (cargo-fuzz, nightly) drives these functions
//! with libFuzzer; `tests/corpus.rs` replays the committed corpus (`fuzz/corpus/<target>`)
//! through the very same functions under a normal `cargo test`, so CI covers every input a
//! fuzzing session found interesting without nightly.
//!
//! Each function panics when a property breaks; a panic is the finding.

pub mod cabi;
pub mod ioctl;
mod reader;
pub mod seeds;

use hcabus::recorder::{Record, RECORD_BYTES};

pub use reader::Reader;

/// A target's check of one input.
pub type Check = fn(&[u8]);

/// The targets, by the name of their corpus directory, with the function that checks one input.
pub const TARGETS: [(&str, Check); 5] = [
    ("ioctl", ioctl::check),
    ("frame", frame),
    ("scenario", scenario),
    ("record", record),
    ("cabi", cabi::check),
];

/// `Record::decode` on any 128 bytes: never panics; what it accepts encodes back to bytes
/// that decode to the same record, prints, and encodes for a version-4 caller.
pub fn record(data: &[u8]) {
    let mut raw = [0u8; RECORD_BYTES];
    let n = data.len().min(RECORD_BYTES);
    raw[..n].copy_from_slice(&data[..n]);
    let Some(r) = Record::decode(&raw) else {
        return;
    };
    let again = Record::decode(&r.encode());
    assert_eq!(
        again,
        Some(r),
        "a decoded record survives its own round trip"
    );
    assert!(!r.to_string().is_empty());
    let old = r.encode_v4();
    assert_eq!(&old[0..16], &r.encode()[0..16], "the same seq and time");
}

/// The socket frame decoder of `hcasim serve` on any byte stream: never panics, never reads a
/// frame larger than its limit, and every frame it accepts is written back byte for byte.
pub fn frame(data: &[u8]) {
    use hcactl::transport::{read_request, write_request, MAX_INPUT};
    let mut stream = data;
    let mut consumed = 0usize;
    loop {
        let before = stream.len();
        match read_request(&mut stream) {
            Ok(Some(f)) => {
                assert!(f.input.len() <= MAX_INPUT as usize);
                let mut again = Vec::new();
                write_request(&mut again, f.code, &f.input, f.output_capacity)
                    .expect("a Vec takes every write");
                let used = before - stream.len();
                assert_eq!(
                    again,
                    data[consumed..consumed + used],
                    "a frame re-encodes to the bytes it came from"
                );
                consumed += used;
            }
            // The server closes the connection on a refused frame: nothing follows it.
            Ok(None) | Err(_) => return,
        }
    }
}

/// The scenario parser on any text: never panics; a refusal names what is wrong; a scenario it
/// accepts builds (resources are checked at parse time), and a short one runs with every
/// guarantee kept and the I/O accounting closed.
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let setup = match hcabus_tools::scenario::parse_any(text) {
        Ok(s) => s,
        Err(e) => {
            assert!(!e.message.is_empty(), "a refusal says why");
            return;
        }
    };
    let setup = match setup {
        hcabus_tools::scenario::Scenario::One(s) => s,
        hcabus_tools::scenario::Scenario::Many(m) => return several_adapters(&m),
    };
    let built = hcabus_lab::stack::build(&setup);
    let mut host = built.unwrap_or_else(|e| panic!("an accepted scenario does not build: {e}"));
    // Long runs would make the fuzzer crawl; the parse and the build are what is fuzzed.
    if setup.sim.duration > hcabus::Duration::from_ms(2_000) {
        return;
    }
    host.run();
    assert_eq!(host.checker().violations, Vec::<String>::new());
    let io = hcabus_lab::stack::io_stats(&host);
    check_io(&io);
}

/// An accepted scenario of several adapters builds, and a short one runs as one does.
fn several_adapters(setup: &hcabus_lab::stack::MultiSetup) {
    let built = hcabus_lab::stack::build_multi(setup);
    let mut world = built.unwrap_or_else(|e| panic!("an accepted scenario does not build: {e}"));
    if world.end() > hcabus::Instant::from_ms(2_000) {
        return;
    }
    world.run();
    assert_eq!(world.invariants().1, Vec::<String>::new());
    check_io(&hcabus_lab::stack::io_stats_all(&world));
}

/// The I/O accounting closes, and nothing is lost, duplicated or corrupted.
fn check_io(io: &ibal::io::IoStats) {
    assert_eq!(io.unaccounted(), 0, "I/O accounting: {io:?}");
    assert_eq!(
        (io.lost, io.duplicated, io.read_mismatches),
        (0, 0, 0),
        "{io:?}"
    );
}
