//! `hcasim replay FILE`: a diagnostic bundle (`hcactl dump --bundle FILE`) made into the
//! scenario its records show, run, and its records held against the bundle's.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use hcabus::coordinator::bundle::{read_bundle, BundleView};
use hcabus_tools::replay::{self, Replay, Verdict};

use super::{emit, say_error};

/// Replays `file`; `scenario_out`, when given, is a new file the scenario is written to
/// (an existing one is not replaced). Exit 0 when the records are the same, 1 when they
/// differ, 2 for a file that is not a bundle or a scenario that cannot be written.
pub(crate) fn run(file: &Path, scenario_out: Option<&Path>) -> ExitCode {
    let bytes = match read_small(file) {
        Ok(b) => b,
        Err(e) => {
            complain!("cannot read {}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let bundle = match read_bundle(&bytes) {
        Ok(b) => b,
        Err(e) => {
            complain!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let name = file
        .file_stem()
        .map_or("replay".into(), |s| s.to_string_lossy().into_owned());
    let made = match replay::infer(&bundle, &format!("replay of {name}")) {
        Ok(r) => r,
        Err(e) => {
            complain!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    if let Some(out) = scenario_out {
        if let Err(e) = write_new(out, &made.toml) {
            complain!("--scenario {}: {e}", out.display());
            return ExitCode::from(2);
        }
    }
    let verdict = match replay::run(&bundle, &made) {
        Ok(v) => v,
        Err(e) => {
            complain!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let code = if verdict.same() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    emit(&text(&bundle, &made, &verdict, scenario_out)).unwrap_or(code)
}

/// The most a file given as a bundle may hold: a bundle is at most tens of KiB, and a file
/// far larger is not one (it is refused before it is read whole).
const MAX_FILE_BYTES: u64 = 1 << 20;

fn read_small(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("more than {MAX_FILE_BYTES} bytes: not a bundle"),
        ));
    }
    Ok(bytes)
}

fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// What the replay found, for a person.
fn text(b: &BundleView, made: &Replay, v: &Verdict, out: Option<&Path>) -> String {
    let mut t = format!(
        "bundle: {} at {}: {} on e{}; {} record(s) from #{}, {} client(s)\n",
        b.why(),
        b.taken_at(),
        b.outcome(),
        b.header.epoch,
        b.records.len(),
        b.header.first_seq,
        b.clients.len()
    );
    t.push_str(&format!(
        "scenario: {} event(s){}{}\n",
        made.events.len(),
        if made.events.is_empty() { "" } else { ": " },
        made.events.join(", ")
    ));
    if let Some(out) = out {
        t.push_str(&format!("  written to {}\n", out.display()));
    }
    for note in &made.notes {
        t.push_str(&format!("  note: {note}\n"));
    }
    if b.header.first_seq > 0 {
        t.push_str(
            "  note: the bundle starts mid-record (its ring had gone round): the health polls \
             that found the device healthy are not compared, as their phase was set by resets \
             before its first record\n",
        );
    }
    if v.skipped > 0 {
        t.push_str(&format!(
            "  note: the bundle's first {} record(s) end a reset whose start its ring had \
             overwritten: they are not compared\n",
            v.skipped
        ));
    }
    match v.first_difference {
        None => t.push_str(&format!(
            "replay: the same {} record(s) of the bundle's {} compared, kind by kind and in \
             order (times within {} us); it ends {}\n",
            v.original.len(),
            b.records.len(),
            v.drift_us,
            v.state.as_str()
        )),
        Some(i) => {
            let show = |r: Option<&hcabus::recorder::Record>| {
                r.map_or("(none: it ends first)".to_string(), |r| r.to_string())
            };
            let seq = v
                .original
                .get(i)
                .map_or("its end".to_string(), |r| format!("#{}", r.seq));
            t.push_str(&format!(
                "replay: DIFFERS at compared record {} of {} (the bundle's {seq}):\n  bundle: {}\n  \
                 replay: {}\n",
                i + 1,
                v.original.len(),
                show(v.original.get(i)),
                show(v.replayed.get(i))
            ));
        }
    }
    t
}
