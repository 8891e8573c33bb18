//! hcactl's transport on Windows: DeviceIoControl on the bus device's control object.
//!
//! Written against windows-sys 0.59, type-checked by CI (`cargo clippy --target
//! x86_64-pc-windows-msvc`) and **never linked or run**: the project builds and tests on
//! Linux, where this module is compiled out. It is the one place in the tools that
//! needs `unsafe` (FFI); every block says why it is sound.
#![allow(unsafe_code)]

use std::io;

use hcabus::ioctl::NtStatus;

use crate::IoctlAnswer;
use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, FILE_ATTRIBUTE_NORMAL, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
};
use windows_sys::Win32::System::IO::DeviceIoControl;

/// The name of the first HCA's control device (`\\.\HcaBus0`): the KMDF glue creates
/// `\DosDevices\HcaBus<n>` for the n-th.
pub const DEFAULT_NAME: &str = "HcaBus0";
/// How many control devices `hcactl devices` looks for (`HcaBus0` to `HcaBus63`).
pub const MAX_DEVICES: u32 = 64;

/// The I/O manager turns the driver's NTSTATUS into a Win32 error; this turns the ones
/// the dispatcher uses back, so hcactl prints the same names on both transports.
fn ntstatus_of(win32: u32) -> NtStatus {
    match win32 {
        1 => NtStatus::INVALID_DEVICE_REQUEST, // ERROR_INVALID_FUNCTION
        5 => NtStatus::ACCESS_DENIED,          // ERROR_ACCESS_DENIED
        50 => NtStatus::NOT_SUPPORTED,         // ERROR_NOT_SUPPORTED
        87 => NtStatus::INVALID_PARAMETER,     // ERROR_INVALID_PARAMETER
        122 => NtStatus::BUFFER_TOO_SMALL,     // ERROR_INSUFFICIENT_BUFFER
        170 => NtStatus::DEVICE_BUSY,          // ERROR_BUSY
        1306 => NtStatus::REVISION_MISMATCH,   // ERROR_REVISION_MISMATCH
        1784 => NtStatus::INVALID_BUFFER_SIZE, // ERROR_INVALID_USER_BUFFER
        other => NtStatus(0xC000_0000 | other),
    }
}

/// An open handle on the bus device.
#[derive(Debug)]
pub struct Device {
    handle: HANDLE,
}

impl Device {
    pub fn open(path: &str) -> io::Result<Self> {
        let wide: Vec<u16> = path.encode_utf16().chain(std::iter::once(0)).collect();
        // SAFETY: `wide` is NUL-terminated and lives across the call; a null security
        // descriptor and a null template handle are what CreateFileW documents for "none".
        let handle = unsafe {
            CreateFileW(
                wide.as_ptr(),
                GENERIC_READ | GENERIC_WRITE,
                FILE_SHARE_READ | FILE_SHARE_WRITE,
                std::ptr::null(),
                OPEN_EXISTING,
                FILE_ATTRIBUTE_NORMAL,
                std::ptr::null_mut(),
            )
        };
        if handle == INVALID_HANDLE_VALUE {
            return Err(io::Error::last_os_error());
        }
        Ok(Device { handle })
    }

    /// One synchronous IOCTL: its status and output.
    pub fn call(&mut self, code: u32, input: &[u8], output_capacity: u32) -> IoctlAnswer {
        let mut out = vec![0u8; output_capacity as usize];
        let mut returned: u32 = 0;
        let in_len = u32::try_from(input.len())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "input too large"))?;
        // SAFETY: the handle is open (owned by `self`); `input` and `out` are valid for
        // the lengths passed for the whole call, which is synchronous (no OVERLAPPED), so
        // nothing touches them after it returns; `returned` is a valid u32.
        let ok = unsafe {
            DeviceIoControl(
                self.handle,
                code,
                input.as_ptr().cast(),
                in_len,
                out.as_mut_ptr().cast(),
                output_capacity,
                &mut returned,
                std::ptr::null_mut(),
            )
        };
        if ok == 0 {
            // SAFETY: GetLastError only reads this thread's last-error value.
            let err = unsafe { GetLastError() };
            return Ok((ntstatus_of(err), Vec::new()));
        }
        out.truncate(returned as usize);
        Ok((NtStatus::SUCCESS, out))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the handle came from CreateFileW, is owned by this value alone, and is
        // closed exactly once, here.
        unsafe {
            CloseHandle(self.handle);
        }
    }
}
