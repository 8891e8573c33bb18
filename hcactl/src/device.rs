//! Device names: how an adapter of a host of several is named to the administrator, and
//! where `hcactl --device NAME` finds it.
//!
//! On Windows every HCA's bus has a control device of its own (`\\.\HcaBus<n>`). The
//! simulator's counterpart is a socket per adapter beside the one `hcasim serve --socket
//! PATH` was given: `PATH.NAME` for the adapter called NAME, and `PATH` itself for the
//! first adapter, as `\\.\HcaBus0` is the first HCA. The files are the directory of
//! devices: `hcactl devices` lists the sockets at `PATH.*` that answer.

use std::path::{Path, PathBuf};

/// What a device (adapter) name must be: it becomes part of a file name.
pub const NAME_RULE: &str =
    "must be 1 to 32 ASCII letters, digits, '-', '_' or '.', not starting with '.'";

/// Whether `name` can name a device ([`NAME_RULE`]).
pub fn valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The socket of the device `name` beside `base` (`PATH.NAME`).
pub fn socket_of(base: &Path, name: &str) -> PathBuf {
    let mut file = base.file_name().unwrap_or_default().to_os_string();
    file.push(".");
    file.push(name);
    base.with_file_name(file)
}

/// The device names that have a file at `PATH.NAME` beside `base`, sorted; whether each is
/// served is for the caller to find out (a socket left by a server that died is a file too).
pub fn names_beside(base: &Path) -> std::io::Result<Vec<String>> {
    let prefix = match base.file_name().and_then(|n| n.to_str()) {
        Some(n) => format!("{n}."),
        None => return Ok(Vec::new()),
    };
    let dir = match base.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        if valid_name(name) && is_socket(&entry.path()) {
            names.push(name.to_string());
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(unix)]
fn is_socket(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(not(unix))]
fn is_socket(_: &Path) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_name_is_a_plain_file_name_part() {
        for good in ["hca0", "mlx4_1", "a", "HcaBus-2.b", &"x".repeat(32)] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            ".hidden",
            "..",
            "a/b",
            "a b",
            "é",
            "x\n",
            &"x".repeat(33),
        ] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_device_socket_sits_beside_the_base_socket() {
        assert_eq!(
            socket_of(Path::new("/tmp/h.sock"), "hca1"),
            Path::new("/tmp/h.sock.hca1")
        );
        assert_eq!(socket_of(Path::new("h"), "hca0"), Path::new("h.hca0"));
    }

    #[cfg(unix)]
    #[test]
    fn only_sockets_with_a_valid_name_count_as_devices() {
        let dir = std::env::temp_dir().join(format!("hcabus-devices-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let base = dir.join("h.sock");
        let bind = |f: &str| std::os::unix::net::UnixListener::bind(dir.join(f)).expect("bind");
        let _sockets = ["h.sock.hca1", "h.sock.hca0", "h.sock..x", "other.hca2"].map(bind);
        std::fs::write(dir.join("h.sock.file"), b"not a socket").expect("write");
        assert_eq!(names_beside(&base).expect("listed"), ["hca0", "hca1"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
