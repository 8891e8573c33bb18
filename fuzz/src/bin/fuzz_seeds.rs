//! Writes the seed corpus of every fuzz target under fuzz/corpus/<target>/ (seed-* files only;
//! what libFuzzer added beside them is left alone).

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus"));
    let seeds = match hcabus_fuzz::seeds::all() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fuzz-seeds: cannot read the scenarios: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (target, name, bytes) in &seeds {
        let dir = root.join(target);
        let written =
            std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join(name), bytes));
        if let Err(e) = written {
            eprintln!("fuzz-seeds: {}: {e}", dir.join(name).display());
            return ExitCode::FAILURE;
        }
    }
    println!("fuzz-seeds: {} seeds under {}", seeds.len(), root.display());
    ExitCode::SUCCESS
}
