//! `hcactl dump --bundle FILE [--now]`: the diagnostic bundle the driver kept when the device
//! last ended Failed (or one taken now), written as the driver gave it, to send to support.

use std::io::Write as _;
use std::path::Path;

use hcabus::coordinator::bundle::{read_bundle, BUNDLE_MAX_BYTES};
use hcabus::ioctl::*;

use crate::control::{ControlDevice, Failure, Outcome};

/// Reads the bundle, checks it is one whole, and writes it to the new file `path` (an
/// existing file is not replaced); a line on stderr says what it holds.
pub(crate) fn dump_bundle(bus: &mut ControlDevice, path: &Path, now: bool) -> Outcome {
    let mut input = [0u8; core::mem::size_of::<ReadBundleIn>()];
    encode_read_bundle(if now { BUNDLE_NOW } else { BUNDLE_KEPT }, &mut input);
    let bytes = match bus.call(IOCTL_HCABUS_READ_BUNDLE, &input, BUNDLE_MAX_BYTES) {
        Err(Failure::Refused(s)) if s == NtStatus::NOT_FOUND => {
            return Err(Failure::RefusedBecause(
                s,
                format!(
                    "{} has not ended Failed since it started: no bundle is kept; `hcactl {}dump \
                     --bundle FILE --now` takes one of it as it is",
                    bus.label(),
                    bus.device_flag()
                ),
            ))
        }
        other => other?,
    };
    let view = read_bundle(&bytes)
        .map_err(|e| Failure::Usage(format!("the driver's bundle does not read back: {e}")))?;
    let refuse = |e: std::io::Error| Failure::Usage(format!("--bundle {}: {e}", path.display()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(refuse)?;
    file.write_all(&bytes)
        .and_then(|()| file.sync_all())
        .map_err(refuse)?;
    eprintln!(
        "hcactl: wrote {} ({} bytes: a bundle {} at {}, {} on e{}, {} record(s))",
        path.display(),
        bytes.len(),
        view.why(),
        view.taken_at(),
        view.outcome(),
        view.header.epoch,
        view.records.len()
    );
    Ok(())
}
