//! How hcactl reaches the bus: the simulator's Unix socket or, on Windows, the bus device
//! through DeviceIoControl; and how a call can fail.

use std::path::PathBuf;

use hcabus::ioctl::*;
use hcabus::Policy;

impl From<hcactl::answer::BadAnswer> for Failure {
    fn from(e: hcactl::answer::BadAnswer) -> Self {
        Failure::Usage(format!("connection: {e}"))
    }
}

/// Why hcactl stops early.
pub(crate) enum Failure {
    /// Usage or connection: exit 2.
    Usage(String),
    /// The bus refused: exit 1.
    Refused(NtStatus),
    /// The bus refused, and hcactl can say why in words: exit 1.
    RefusedBecause(NtStatus, String),
    /// A waited-for reset ended badly, or not in time: exit 1.
    Outcome(String),
    /// Whoever reads stdout closed it: stop quietly, exit 0.
    Closed,
}

impl Failure {
    /// What hcactl would print for it.
    pub(crate) fn text(&self) -> String {
        match self {
            Failure::Usage(m) | Failure::Outcome(m) => m.clone(),
            Failure::Refused(s) => format!("refused: {s}"),
            Failure::RefusedBecause(s, why) if why.is_empty() => format!("refused: {s}"),
            Failure::RefusedBecause(s, why) => format!("refused: {s}: {why}"),
            Failure::Closed => "stdout closed".into(),
        }
    }
}

pub(crate) type Outcome = Result<(), Failure>;

/// Why a Failed device refuses a planned reset: there is no serving device to plan around.
/// `device` is the `--device NAME ` the commands it names need (empty for the default).
fn failed_planned(device: &str) -> String {
    format!(
        "the device is Failed: a planned reset cannot run on it; `hcactl {device}restart` \
         (or `hcactl {device}reset --forced`) brings it back"
    )
}

/// Why a removed device refused an order; `label` names it.
pub(crate) fn removed(label: &str) -> String {
    format!(
        "{label} is Removed (surprise removal): it takes no more orders (reset, restart, \
         policy set, inject); `hcactl devices` lists what is there"
    )
}

pub(crate) struct ControlDevice {
    /// The device's name when one was given (`--device`): what a hint must name, for a
    /// command without it goes to the default device.
    name: Option<String>,
    #[cfg(unix)]
    client: hcactl::transport::Client,
    #[cfg(windows)]
    device: hcactl::windows::Device,
}

impl ControlDevice {
    /// Opens `device` (the default device without one): on Unix the simulator's socket
    /// `socket`, or `socket.NAME` for a device NAME; on Windows `\\.\NAME` (`HcaBus0` by
    /// default).
    pub(crate) fn open(socket: Option<&PathBuf>, device: Option<&str>) -> Result<Self, Failure> {
        if let Some(name) = device.filter(|n| !hcactl::device::valid_name(n)) {
            return Err(Failure::Usage(format!(
                "--device {name:?}: {}",
                hcactl::device::NAME_RULE
            )));
        }
        #[cfg(unix)]
        {
            let path = device_socket(socket, device)?;
            let client = hcactl::transport::Client::connect(&path).map_err(|e| {
                Failure::Usage(format!("cannot connect to {}: {e}", path.display()))
            })?;
            Ok(ControlDevice {
                name: device.map(str::to_owned),
                client,
            })
        }
        #[cfg(windows)]
        {
            if socket.is_some() {
                return Err(Failure::Usage(
                    "--socket: the simulator's socket is a Unix transport; on Windows hcactl \
                     talks to the bus device"
                        .into(),
                ));
            }
            let name = device.map(str::to_owned);
            let path = windows_path(device.unwrap_or(hcactl::windows::DEFAULT_NAME));
            let device = hcactl::windows::Device::open(&path)
                .map_err(|e| Failure::Usage(format!("cannot open {path}: {e}")))?;
            Ok(ControlDevice { name, device })
        }
        #[cfg(not(any(unix, windows)))]
        {
            let _ = (socket, device);
            Err(Failure::Usage("no transport on this platform".into()))
        }
    }

    /// `--device NAME ` when this device was opened by name, else nothing: what a hint's
    /// command needs to reach this device rather than the default one.
    pub(crate) fn device_flag(&self) -> String {
        self.name
            .as_deref()
            .map_or(String::new(), |n| format!("--device {n} "))
    }

    /// How a message names this device.
    pub(crate) fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| "the device".into())
    }

    pub(crate) fn call(
        &mut self,
        code: u32,
        input: &[u8],
        capacity: usize,
    ) -> Result<Vec<u8>, Failure> {
        #[cfg(unix)]
        let answer = self.client.call(code, input, capacity as u32);
        #[cfg(windows)]
        let answer = self.device.call(code, input, capacity as u32);
        #[cfg(not(any(unix, windows)))]
        let answer: hcactl::IoctlAnswer = {
            let _ = (code, input, capacity);
            Err(std::io::Error::other("no transport"))
        };
        let (status, out) = answer.map_err(|e| Failure::Usage(format!("connection: {e}")))?;
        if status.is_success() {
            Ok(out)
        } else if status == NtStatus::INVALID_DEVICE_REQUEST && needs_write(code) {
            Err(self.refused_order(status, code))
        } else {
            Err(Failure::Refused(status))
        }
    }

    /// A write request refused with INVALID_DEVICE_REQUEST. A removed device refuses every
    /// one with it, and a Failed one a planned reset (docs/ioctl.md); the bare status does
    /// not say so: hcactl says which is why.
    fn refused_order(&mut self, status: NtStatus, code: u32) -> Failure {
        match self.state().map(|s| state_name(s.state)) {
            Ok("Removed") => Failure::RefusedBecause(status, removed(&self.label())),
            Ok("Failed") if code == IOCTL_HCABUS_REQUEST_RESET => {
                Failure::RefusedBecause(status, failed_planned(&self.device_flag()))
            }
            _ => Failure::Refused(status),
        }
    }

    pub(crate) fn state(&mut self) -> Result<StateOut, Failure> {
        let mut input = [0u8; 8];
        encode_empty(&mut input);
        let out = self.call(IOCTL_HCABUS_QUERY_STATE, &input, size_of::<StateOut>())?;
        StateOut::decode(&out).ok_or_else(|| Failure::Usage("short QUERY_STATE answer".into()))
    }

    /// The bus's policy. A key this hcactl knows and the bus does not carry (a bus older
    /// than its hcactl) is an error that names the key.
    pub(crate) fn policy(&mut self) -> Result<Policy, Failure> {
        let mut input = [0u8; 8];
        encode_empty(&mut input);
        let out = self.call(IOCTL_HCABUS_GET_POLICY, &input, size_of::<PolicyAbi>())?;
        let abi = PolicyAbi::decode(&out)
            .ok_or_else(|| Failure::Usage("short GET_POLICY answer".into()))?;
        abi.parse_policy().map_err(|e| {
            Failure::Outcome(format!("the bus answered a policy hcactl cannot read: {e}"))
        })
    }
}

/// The simulator's socket `socket` names; `socket.NAME` for the device NAME, which must be
/// there.
#[cfg(unix)]
pub(crate) fn device_socket(
    socket: Option<&PathBuf>,
    device: Option<&str>,
) -> Result<PathBuf, Failure> {
    let base = socket.ok_or_else(|| {
        Failure::Usage("no --socket given (or HCABUS_SOCKET): which simulator?".into())
    })?;
    let Some(name) = device else {
        return Ok(base.clone());
    };
    let path = hcactl::device::socket_of(base, name);
    if std::fs::symlink_metadata(&path).is_err() {
        return Err(Failure::Usage(format!(
            "no device {name} at {}: nothing at {} (`hcactl devices` lists them)",
            base.display(),
            path.display()
        )));
    }
    Ok(path)
}

/// The Win32 path of the control device `name`.
#[cfg(windows)]
pub(crate) fn windows_path(name: &str) -> String {
    format!(r"\\.\{name}")
}
