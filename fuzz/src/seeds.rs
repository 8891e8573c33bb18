//! The corpus a fuzzing session starts from: well-formed inputs for every target, so that
//! libFuzzer mutates requests that reach deep instead of rediscovering the header.
//! `cargo run -p hcabus-fuzz --bin fuzz-seeds` writes them under fuzz/corpus/<target>/.

use hcabus::ioctl::CODES;
use hcabus_sim::SimHost;

/// (target, file name, bytes).
pub type Seed = (&'static str, String, Vec<u8>);

/// An ioctl program: each request well formed (shape 0), full capacity, full rights, `ms` of
/// virtual time after it.
fn ioctl_program(codes: &[usize], ms: u8) -> Vec<u8> {
    let mut p = Vec::new();
    for &i in codes {
        p.extend_from_slice(&[i as u8, 0]);
        p.extend_from_slice(&4096u16.to_le_bytes());
        p.extend_from_slice(&[2, ms]);
    }
    p
}

fn index_of(code: u32) -> usize {
    CODES.iter().position(|c| c.0 == code).unwrap_or(0)
}

fn ioctl_seeds(out: &mut Vec<Seed>) {
    use hcabus::ioctl::*;
    for (i, (_, name)) in CODES.iter().enumerate() {
        out.push(("ioctl", format!("seed-{name}"), ioctl_program(&[i], 10)));
    }
    let reset = index_of(IOCTL_HCABUS_REQUEST_RESET);
    let state = index_of(IOCTL_HCABUS_QUERY_STATE);
    let log = index_of(IOCTL_HCABUS_READ_LOG);
    let fault = index_of(IOCTL_HCABUS_INJECT_FAULT);
    let restart = index_of(IOCTL_HCABUS_RESTART);
    out.push((
        "ioctl",
        "seed-reset-during-reset".into(),
        ioctl_program(&[reset, state, reset, state, log], 3),
    ));
    out.push((
        "ioctl",
        "seed-fault-restart".into(),
        ioctl_program(&[fault, state, restart, fault, reset, log], 200),
    ));
}

fn frame_seeds(out: &mut Vec<Seed>) {
    use hcactl::transport::write_request;
    let mut all = Vec::new();
    for (code, name) in CODES {
        let input = vec![0u8; hcabus::ioctl::input_size(code).unwrap_or(0)];
        let mut one = Vec::new();
        write_request(&mut one, code, &input, 4096).expect("a Vec takes every write");
        all.extend_from_slice(&one);
        out.push(("frame", format!("seed-{name}"), one));
    }
    out.push(("frame", "seed-all-codes".into(), all));
}

fn scenario_seeds(out: &mut Vec<Seed>) -> std::io::Result<()> {
    // The scenario files and the fail-slow trace set (their route phases).
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/scenarios");
    for (dir, prefix) in [
        (root.to_string(), ""),
        (format!("{root}/failslow"), "failslow-"),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        files.retain(|f| f.path().extension().is_some_and(|x| x == "toml"));
        files.sort_by_key(|f| f.file_name());
        for f in files {
            let name = f.file_name().to_string_lossy().into_owned();
            out.push((
                "scenario",
                format!("seed-{prefix}{name}"),
                std::fs::read(f.path())?,
            ));
        }
    }
    let short = "name = \"short\"\nduration_ms = 1500\n\n[[clients]]\nname = \"ipoib0\"\nkind = \"ipoib\"\n\n[[events]]\nat_ms = 200\nfault = \"catastrophic\"\n";
    out.push(("scenario", "seed-short-run".into(), short.into()));
    let multipath = "name = \"short-multipath\"\nduration_ms = 1500\n\n[[hcas]]\nname = \"a\"\n\n[[hcas]]\nname = \"b\"\n\n[[clients]]\nname = \"d\"\nkind = \"bootdisk\"\npaths = [\"a\", \"b\"]\n\n[[events]]\nat_ms = 200\nfault = \"catastrophic\"\nhca = \"a\"\n";
    out.push(("scenario", "seed-short-multipath".into(), multipath.into()));
    Ok(())
}

fn record_seeds(out: &mut Vec<Seed>) {
    let mut setup = hcabus_sim::random_setup(7);
    setup.recorder_capacity = 4096;
    let Ok(mut host) = SimHost::new(&setup) else {
        return;
    };
    host.run();
    let bytes = host.flight_record_bytes();
    let mut seen = std::collections::BTreeSet::new();
    for rec in bytes.chunks_exact(hcabus::recorder::RECORD_BYTES) {
        // One seed per record tag and first field: the decoder's branches, not its volume.
        if seen.insert((rec[16], rec[17])) {
            let name = format!("seed-tag-{}-{}", rec[16], rec[17]);
            out.push(("record", name, rec.to_vec()));
        }
    }
}

fn cabi_seeds(out: &mut Vec<Seed>) {
    // The config: shape 0, max_clients 4, quiesce 50 ms, query 20 ms, hardware 5 ms.
    let config = [0u8, 4, 50, 20, 5];
    // Register slot 0 executing inline, slot 1 executing never; a forced reset.
    let reset = [0u8, 0, 1, 0, 0, 1, 0, 0, 9, 1];
    // Register slot 0 with HCABUS_FLAG_CAN_VETO; a planned reset; slot 0 vetoes it.
    let planned = [
        0u8, 0, 8, 0, 8, 0, 0, 0, 9, 2, 7, 0, 0, 3, b'n', b'o', b'!', 0,
    ];
    // Register slot 0; it requests a reset, executes it, reads the bus state.
    let request = [0u8, 0, 0, 0, 3, 0, 1, 4, 0, 0, 8, 0];
    for (name, body) in [
        ("reset", &reset[..]),
        ("planned-veto", &planned[..]),
        ("request-execute", &request[..]),
    ] {
        let mut p = config.to_vec();
        p.extend_from_slice(body);
        out.push(("cabi", format!("seed-{name}"), p));
    }
}

/// Every seed of every target.
pub fn all() -> std::io::Result<Vec<Seed>> {
    let mut out = Vec::new();
    ioctl_seeds(&mut out);
    frame_seeds(&mut out);
    scenario_seeds(&mut out)?;
    record_seeds(&mut out);
    cabi_seeds(&mut out);
    Ok(out)
}
