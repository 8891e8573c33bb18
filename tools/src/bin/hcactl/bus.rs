//! How hcactl reaches the bus: the simulator's Unix socket or, on Windows, the bus device
//! through DeviceIoControl; and how a call can fail.

use std::path::PathBuf;

use hcabus::ioctl::*;

impl From<hcabus_tools::answer::BadAnswer> for Failure {
    fn from(e: hcabus_tools::answer::BadAnswer) -> Self {
        Failure::Usage(format!("connection: {e}"))
    }
}

/// Why hcactl stops early.
pub(crate) enum Failure {
    /// Usage or connection: exit 2.
    Usage(String),
    /// The bus refused: exit 1.
    Refused(NtStatus),
    /// A waited-for reset ended badly, or not in time: exit 1.
    Outcome(String),
    /// Whoever reads stdout closed it: stop quietly, exit 0.
    Closed,
}

pub(crate) type Outcome = Result<(), Failure>;

pub(crate) struct Bus {
    #[cfg(unix)]
    client: hcabus_tools::transport::Client,
    #[cfg(windows)]
    device: hcabus_tools::windows::Device,
}

impl Bus {
    pub(crate) fn open(socket: Option<&PathBuf>) -> Result<Self, Failure> {
        #[cfg(unix)]
        {
            let path = socket.ok_or_else(|| {
                Failure::Usage("no --socket given (or HCABUS_SOCKET): which simulator?".into())
            })?;
            let client = hcabus_tools::transport::Client::connect(path).map_err(|e| {
                Failure::Usage(format!("cannot connect to {}: {e}", path.display()))
            })?;
            Ok(Bus { client })
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
            let path = hcabus_tools::windows::DEFAULT_DEVICE;
            let device = hcabus_tools::windows::Device::open(path)
                .map_err(|e| Failure::Usage(format!("cannot open {path}: {e}")))?;
            Ok(Bus { device })
        }
        #[cfg(not(any(unix, windows)))]
        {
            let _ = socket;
            Err(Failure::Usage("no transport on this platform".into()))
        }
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
        let answer: std::io::Result<(NtStatus, Vec<u8>)> = {
            let _ = (code, input, capacity);
            Err(std::io::Error::other("no transport"))
        };
        let (status, out) = answer.map_err(|e| Failure::Usage(format!("connection: {e}")))?;
        if status.is_success() {
            Ok(out)
        } else {
            Err(Failure::Refused(status))
        }
    }

    pub(crate) fn state(&mut self) -> Result<StateOut, Failure> {
        let mut input = [0u8; 8];
        encode_empty(&mut input);
        let out = self.call(IOCTL_HCABUS_QUERY_STATE, &input, size_of::<StateOut>())?;
        StateOut::decode(&out).ok_or_else(|| Failure::Usage("short QUERY_STATE answer".into()))
    }

    pub(crate) fn policy(&mut self) -> Result<PolicyAbi, Failure> {
        let mut input = [0u8; 8];
        encode_empty(&mut input);
        let out = self.call(IOCTL_HCABUS_GET_POLICY, &input, size_of::<PolicyAbi>())?;
        PolicyAbi::decode(&out).ok_or_else(|| Failure::Usage("short GET_POLICY answer".into()))
    }
}
