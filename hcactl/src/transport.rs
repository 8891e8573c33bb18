//! The simulator's IOCTL transport (docs/design.md §8): frames over a Unix socket.
//!
//! Request: `u32 magic 0x42414348 ("HCAB"), u32 ioctl code, u32 input length, u32 output
//! capacity`, then the input bytes. Response: `u32 magic, u32 NTSTATUS, u32 bytes
//! returned`, then the output bytes. All little-endian.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use hcabus::ioctl::NtStatus;

use crate::IoctlAnswer;

pub const MAGIC: u32 = 0x4241_4348;
/// Largest input a request may carry.
pub const MAX_INPUT: u32 = 64 * 1024;
/// Output capacities above this are served as this: no request makes the server reserve
/// more.
pub const MAX_OUTPUT: u32 = 1 << 20;

/// A request as read off the socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFrame {
    pub code: u32,
    pub input: Vec<u8>,
    pub output_capacity: u32,
}

/// Why a request frame was refused; the server closes the connection on any of these.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("wrong magic 0x{0:08X}")]
    BadMagic(u32),
    #[error("input of {0} bytes exceeds 64 KiB")]
    InputTooLarge(u32),
    #[error("truncated frame")]
    Truncated,
    #[error("{0}")]
    Io(io::Error),
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut v = [0u8; 4];
    v.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(v)
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` on a clean end of stream before the first.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> Result<bool, FrameError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(FrameError::Truncated),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(true)
}

/// The next request, or `None` when the peer closed the connection between frames.
pub fn read_request(r: &mut impl Read) -> Result<Option<RequestFrame>, FrameError> {
    let mut head = [0u8; 16];
    if !read_full(r, &mut head)? {
        return Ok(None);
    }
    let magic = u32_at(&head, 0);
    if magic != MAGIC {
        return Err(FrameError::BadMagic(magic));
    }
    let len = u32_at(&head, 8);
    if len > MAX_INPUT {
        return Err(FrameError::InputTooLarge(len));
    }
    let mut input = vec![0u8; len as usize];
    if !read_full(r, &mut input)? && len > 0 {
        return Err(FrameError::Truncated);
    }
    Ok(Some(RequestFrame {
        code: u32_at(&head, 4),
        input,
        output_capacity: u32_at(&head, 12),
    }))
}

pub fn write_request(
    w: &mut impl Write,
    code: u32,
    input: &[u8],
    output_capacity: u32,
) -> io::Result<()> {
    let mut frame = Vec::with_capacity(16 + input.len());
    frame.extend_from_slice(&MAGIC.to_le_bytes());
    frame.extend_from_slice(&code.to_le_bytes());
    frame.extend_from_slice(&(input.len() as u32).to_le_bytes());
    frame.extend_from_slice(&output_capacity.to_le_bytes());
    frame.extend_from_slice(input);
    w.write_all(&frame)
}

pub fn write_response(w: &mut impl Write, status: NtStatus, output: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(12 + output.len());
    frame.extend_from_slice(&MAGIC.to_le_bytes());
    frame.extend_from_slice(&status.0.to_le_bytes());
    frame.extend_from_slice(&(output.len() as u32).to_le_bytes());
    frame.extend_from_slice(output);
    w.write_all(&frame)
}

/// Reads a response: its status and output bytes.
pub fn read_response(r: &mut impl Read) -> IoctlAnswer {
    let mut head = [0u8; 12];
    r.read_exact(&mut head)?;
    if u32_at(&head, 0) != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "response with a wrong magic",
        ));
    }
    let len = u32_at(&head, 8);
    if len > MAX_OUTPUT {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "response larger than any output capacity",
        ));
    }
    let mut out = vec![0u8; len as usize];
    r.read_exact(&mut out)?;
    Ok((NtStatus(u32_at(&head, 4)), out))
}

/// A connection to `hcasim serve`.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
}

impl Client {
    pub fn connect(path: &Path) -> io::Result<Self> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(30)))?;
        stream.set_write_timeout(Some(Duration::from_secs(30)))?;
        Ok(Client { stream })
    }

    /// One IOCTL: its status and output.
    pub fn call(&mut self, code: u32, input: &[u8], output_capacity: u32) -> IoctlAnswer {
        write_request(&mut self.stream, code, input, output_capacity)?;
        read_response(&mut self.stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_named() {
        let mut buf = Vec::new();
        write_request(&mut buf, 0x3B6400, &[1, 2, 3], 160).expect("write");
        let got = read_request(&mut &buf[..]).expect("ok").expect("a frame");
        assert_eq!(
            got,
            RequestFrame {
                code: 0x3B6400,
                input: vec![1, 2, 3],
                output_capacity: 160
            }
        );
        assert!(read_request(&mut &[][..]).expect("clean end").is_none());
        assert!(matches!(
            read_request(&mut &buf[..buf.len() - 1]),
            Err(FrameError::Truncated)
        ));
        let mut bad = buf.clone();
        bad[0] = b'X';
        assert!(matches!(
            read_request(&mut &bad[..]),
            Err(FrameError::BadMagic(_))
        ));
        let mut big = buf.clone();
        big[8..12].copy_from_slice(&(MAX_INPUT + 1).to_le_bytes());
        assert!(matches!(
            read_request(&mut &big[..]),
            Err(FrameError::InputTooLarge(_))
        ));
        let mut resp = Vec::new();
        write_response(&mut resp, NtStatus::BUFFER_TOO_SMALL, &[9; 4]).expect("write");
        let (s, out) = read_response(&mut &resp[..]).expect("read");
        assert_eq!((s, out), (NtStatus::BUFFER_TOO_SMALL, vec![9; 4]));
    }
}
