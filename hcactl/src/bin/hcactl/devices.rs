//! `hcactl devices`: every HCA bus the administrator can reach, with its state.
//!
//! On Unix the devices are the simulator's sockets (`hcactl::device`): `PATH` and
//! each `PATH.NAME` beside it. On Windows they are the control devices `\\.\HcaBus0` to
//! `\\.\HcaBus63` that exist.

use std::path::PathBuf;

use comfy_table::{presets, Table};
use hcabus::ioctl::StateOut;
use serde_json::json;

use crate::control::{ControlDevice, Failure, Outcome};
use crate::view::{document, port_json, ports, ports_json};
use crate::{emit, state_name};

/// One device found.
pub(crate) struct Found {
    /// What `--device` takes; `None` for a host of one adapter, served only at `PATH`.
    pub(crate) name: Option<String>,
    /// Where it is: the socket, or the Win32 path.
    pub(crate) path: String,
    /// Whether hcactl without `--device` reaches it.
    pub(crate) default: bool,
    /// Its QUERY_STATE answer, or why there is none.
    pub(crate) state: Result<StateOut, String>,
}

fn query(socket: Option<&PathBuf>, device: Option<&str>) -> Result<StateOut, String> {
    let mut bus = ControlDevice::open(socket, device).map_err(|e| e.text())?;
    bus.state().map_err(|e| e.text())
}

#[cfg(unix)]
pub(crate) fn find(socket: Option<&PathBuf>) -> Result<Vec<Found>, Failure> {
    use std::os::unix::fs::MetadataExt;
    let base = crate::control::device_socket(socket, None)?;
    let names = hcactl::device::names_beside(&base).map_err(|e| {
        Failure::Usage(format!(
            "cannot list the devices beside {}: {e}",
            base.display()
        ))
    })?;
    let inode = |p: &std::path::Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let base_inode = inode(&base);
    let mut found: Vec<Found> = names
        .into_iter()
        .map(|name| {
            let path = hcactl::device::socket_of(&base, &name);
            Found {
                default: base_inode.is_some() && inode(&path) == base_inode,
                path: path.display().to_string(),
                state: query(socket, Some(&name)),
                name: Some(name),
            }
        })
        .collect();
    if base_inode.is_some() && !found.iter().any(|f| f.default) {
        found.insert(
            0,
            Found {
                name: None,
                path: base.display().to_string(),
                default: true,
                state: query(socket, None),
            },
        );
    }
    Ok(found)
}

#[cfg(windows)]
pub(crate) fn find(socket: Option<&PathBuf>) -> Result<Vec<Found>, Failure> {
    if socket.is_some() {
        return Err(Failure::Usage(
            "--socket: the simulator's socket is a Unix transport; on Windows hcactl talks to \
             the bus devices"
                .into(),
        ));
    }
    let mut found = Vec::new();
    for n in 0..hcactl::windows::MAX_DEVICES {
        let name = format!("HcaBus{n}");
        let path = crate::control::windows_path(&name);
        match hcactl::windows::Device::open(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => found.push(Found {
                name: Some(name.clone()),
                path,
                default: name == hcactl::windows::DEFAULT_NAME,
                state: Err(format!("cannot open: {e}")),
            }),
            Ok(_) => found.push(Found {
                default: name == hcactl::windows::DEFAULT_NAME,
                state: query(None, Some(&name)),
                name: Some(name),
                path,
            }),
        }
    }
    Ok(found)
}

#[cfg(not(any(unix, windows)))]
pub(crate) fn find(_: Option<&PathBuf>) -> Result<Vec<Found>, Failure> {
    Err(Failure::Usage("no transport on this platform".into()))
}

/// Lists the devices; exit 1 when none is there, or one of them does not answer.
pub(crate) fn devices(socket: Option<&PathBuf>, as_json: bool) -> Outcome {
    let found = find(socket)?;
    if found.is_empty() {
        return Err(Failure::Outcome("no hcabus device found".into()));
    }
    if as_json {
        let v: Vec<_> = found
            .iter()
            .map(|f| {
                let mut o = json!({ "device": f.name, "path": f.path, "default": f.default });
                match &f.state {
                    Ok(s) => {
                        o["state"] = json!(state_name(s.state));
                        o["epoch"] = json!(s.epoch);
                        o["node_guid"] = json!(format!("0x{:016x}", s.node_guid));
                        o["ports"] = json!(ports_json(s));
                    }
                    Err(e) => o["error"] = json!(e),
                }
                o
            })
            .collect();
        say!("{:#}", document("devices", json!({ "devices": v })));
    } else {
        let mut table = Table::new();
        table.load_style(presets::NOTHING).set_header([
            "device",
            "default",
            "state",
            "epoch",
            "node guid",
            "ports",
            "path",
        ]);
        for f in &found {
            let name = f.name.as_deref().unwrap_or("-").to_string();
            let default = if f.default { "yes" } else { "" }.to_string();
            match &f.state {
                Ok(s) => {
                    let listed: Vec<String> = ports(s)
                        .map(|(n, p)| {
                            format!("{n}:{}", port_json(n, p)["state"].as_str().unwrap_or("?"))
                        })
                        .collect();
                    table.add_row([
                        name,
                        default,
                        state_name(s.state).to_string(),
                        format!("e{}", s.epoch),
                        format!("0x{:016x}", s.node_guid),
                        listed.join(" "),
                        f.path.clone(),
                    ]);
                }
                Err(e) => {
                    table.add_row([
                        name,
                        default,
                        format!("no answer: {e}"),
                        String::new(),
                        String::new(),
                        String::new(),
                        f.path.clone(),
                    ]);
                }
            }
        }
        for column in table.column_iter_mut() {
            column.set_padding((0, 2));
        }
        for line in table.lines() {
            say!("{}", line.trim_end());
        }
    }
    match found.iter().find(|f| f.state.is_err()) {
        Some(f) => Err(Failure::Outcome(format!(
            "{} does not answer",
            f.name.as_deref().unwrap_or(&f.path)
        ))),
        None => Ok(()),
    }
}
