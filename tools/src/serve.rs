//! `hcasim serve`: a live host in real time, serving the IOCTL interface over a Unix socket.
//!
//! One thread owns the host (it is single-threaded by design) and advances its virtual
//! clock with the wall clock, so the workload keeps running; it serves requests from a
//! channel between steps. Each connection has its own thread that reads frames, asks the
//! host thread, and writes answers: a slow or broken client blocks only its own thread.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant as WallInstant};

use hcabus::ioctl::{NtStatus, Rights};
use hcabus::Instant;
use ibal::stack::StackSetup;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use crate::transport::{read_request, write_response, FrameError, MAX_OUTPUT};

/// One request for the host thread, with where to send the answer.
struct Job {
    code: u32,
    input: Vec<u8>,
    output_capacity: u32,
    rights: Rights,
    reply: mpsc::SyncSender<(NtStatus, Vec<u8>)>,
}

/// How long a connection may sit in the middle of a frame, or wait for its answer to be
/// taken, before the server drops it.
const STALL: Duration = Duration::from_secs(10);

/// Serves `setup` on `socket` until `stop` is set (by SIGINT or SIGTERM in `hcasim`).
pub fn serve(setup: StackSetup, socket: &Path, stop: Arc<AtomicBool>) -> io::Result<()> {
    let listener = bind_private(socket)?;
    listener.set_nonblocking(true)?;
    let (jobs, inbox) = mpsc::channel::<Job>();
    let host_stop = stop.clone();
    let host = thread::Builder::new()
        .name("host".into())
        .spawn(move || run_host(setup, inbox, host_stop))?;
    let server_uid = nix::unistd::getuid().as_raw();
    eprintln!(
        "hcasim: serving on {} (pid {})",
        socket.display(),
        std::process::id()
    );
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let jobs = jobs.clone();
                let _ = thread::Builder::new()
                    .name("connection".into())
                    .spawn(move || connection(stream, jobs, server_uid));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20))
            }
            Err(e) => log::warn!("accept: {e}"),
        }
    }
    let _ = std::fs::remove_file(socket);
    drop(jobs);
    match host.join() {
        Ok(r) => r,
        Err(_) => Err(io::Error::other("the host thread panicked")),
    }
}

/// Binds under a temporary name, makes it 0600, then renames it into place, so the socket
/// is never reachable with looser rights. A stale socket (nobody listening) is replaced; a
/// live one is an error.
fn bind_private(socket: &Path) -> io::Result<UnixListener> {
    if socket.exists() {
        if UnixStream::connect(socket).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is already being served", socket.display()),
            ));
        }
        std::fs::remove_file(socket)?;
    }
    let mut tmp = PathBuf::from(socket);
    tmp.set_file_name(format!(
        ".{}.{}.tmp",
        socket
            .file_name()
            .map_or("hcasim".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let listener = UnixListener::bind(&tmp)?;
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&tmp, socket)?;
    Ok(listener)
}

fn run_host(
    setup: StackSetup,
    inbox: mpsc::Receiver<Job>,
    stop: Arc<AtomicBool>,
) -> io::Result<()> {
    let mut host = ibal::stack::build(&setup).map_err(|e| io::Error::other(e.to_string()))?;
    let start = WallInstant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let now = Instant::from_us(start.elapsed().as_micros() as u64);
        host.run_until(now);
        match inbox.recv_timeout(Duration::from_millis(2)) {
            Ok(job) => {
                let cap = job.output_capacity.min(MAX_OUTPUT) as usize;
                let mut out = vec![0u8; cap];
                let reply = host.ioctl(job.code, &job.input, &mut out, job.rights);
                out.truncate(reply.bytes);
                // The connection may be gone; that is its business.
                let _ = job.reply.try_send((reply.status, out));
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

/// What the peer may do: everything if it is this server's user or root, else read only.
fn rights_of(stream: &UnixStream, server_uid: u32) -> Rights {
    match getsockopt(stream, PeerCredentials) {
        Ok(cred) if cred.uid() == server_uid || cred.uid() == 0 => Rights::READ | Rights::WRITE,
        Ok(_) => Rights::READ,
        // Unknown peer: the least.
        Err(_) => Rights::READ,
    }
}

fn connection(mut stream: UnixStream, jobs: mpsc::Sender<Job>, server_uid: u32) {
    let rights = rights_of(&stream, server_uid);
    // A slow or silent client holds only this thread; after ten minutes without a byte
    // it is dropped.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(600)));
    let _ = stream.set_write_timeout(Some(STALL));
    loop {
        let frame = match read_request(&mut stream) {
            Ok(Some(f)) => f,
            Ok(None) => return,
            Err(FrameError::Io(e)) => {
                log::info!("connection dropped: {e}");
                return;
            }
            Err(e) => {
                log::info!("refused a frame, closing: {e}");
                return;
            }
        };
        let (reply, answer) = mpsc::sync_channel(1);
        let job = Job {
            code: frame.code,
            input: frame.input,
            output_capacity: frame.output_capacity,
            rights,
            reply,
        };
        if jobs.send(job).is_err() {
            return;
        }
        let Ok((status, out)) = answer.recv_timeout(STALL) else {
            return;
        };
        if write_response(&mut stream, status, &out).is_err() {
            return;
        }
    }
}
