//! `hcasim serve`: a live host in real time, serving the IOCTL interface over a Unix socket.
//!
//! One thread owns the host (it is single-threaded by design) and advances its virtual
//! clock with the wall clock, so the workload keeps running. Between steps it answers every
//! request waiting in its channel, and no step simulates more than [`MAX_STEP`] of virtual
//! time, so a scenario heavier than the machine falls behind real time (said on stderr)
//! without ever making an IOCTL wait on a long catch-up, and shutdown is prompt. Each
//! connection has its own thread that reads frames, asks the host thread, and writes
//! answers: a slow or broken client blocks only its own thread, and there are at most
//! [`MAX_CONNECTIONS`] of them. A host of several adapters has a socket per adapter (the
//! bus driver's control device per HCA), all answered by the one host thread.

use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant as WallInstant};

use hcabus::ioctl::{Caller, NtStatus, Rights};
use hcabus::Instant;
use hcabus_lab::stack::MultiNode;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use crate::scenario::Scenario;
use hcactl::device;
use hcactl::transport::{read_request, write_response, FrameError, MAX_OUTPUT};

/// One request for the host thread, with where to send the answer.
struct Job {
    /// The adapter whose socket it came in on.
    device: usize,
    code: u32,
    input: Vec<u8>,
    output_capacity: u32,
    caller: Caller,
    reply: mpsc::SyncSender<(NtStatus, Vec<u8>)>,
}

/// A frame, once its first byte is in, must be complete within this; and an answer must be
/// taken by the client within it.
pub const FRAME_DEADLINE: Duration = Duration::from_secs(10);
/// A connection silent between frames this long is closed.
pub const IDLE: Duration = Duration::from_secs(60);
/// Connections served at once, over every adapter's socket; more are accepted and closed
/// at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The most virtual time one step of the host simulates before it answers requests again.
pub const MAX_STEP: hcabus::Duration = hcabus::Duration::from_ms(10);

/// Builds the host of `setup`: a host of one adapter is a [`MultiNode`] of one, whose
/// adapter has no name. Returns it with the adapters' device names (none for one).
fn build(setup: &Scenario) -> Result<(MultiNode, Vec<String>), String> {
    match setup {
        Scenario::One(s) => {
            let host = hcabus_lab::stack::build(s).map_err(|e| e.to_string())?;
            let world =
                hcabus_sim::MultiHost::new(&s.sim.name, s.sim.seed, vec![(String::new(), host)])
                    .map_err(|e| e.to_string())?;
            Ok((world, Vec::new()))
        }
        Scenario::Many(m) => {
            if let Some(a) = m.adapters.iter().find(|a| !device::valid_name(&a.name)) {
                return Err(format!("adapter {:?}: {}", a.name, device::NAME_RULE));
            }
            let world = hcabus_lab::stack::build_multi(m).map_err(|e| e.to_string())?;
            let names = m.adapters.iter().map(|a| a.name.clone()).collect();
            Ok((world, names))
        }
    }
}

/// Serves `setup` until `stop` is set (by SIGINT or SIGTERM in `hcasim`): a host of one
/// adapter on `socket`; a host of several on `socket.NAME` for each adapter NAME, and on
/// `socket` for the first (see [`hcactl::device`]).
pub fn serve(setup: Scenario, socket: &Path, stop: Arc<AtomicBool>) -> io::Result<()> {
    let (jobs, inbox) = mpsc::channel::<Job>();
    let host_stop = stop.clone();
    // The host is not Send: its thread builds it and says whether it could, before anything
    // is bound.
    let (built, ready) = mpsc::sync_channel::<Result<Vec<String>, String>>(1);
    let host = thread::Builder::new()
        .name("host".into())
        .spawn(move || match build(&setup) {
            Ok((mut world, names)) => {
                // A live host: its virtual clock follows the wall clock.
                let mut i = 0;
                while let Some(adapter) = world.host_mut(i) {
                    adapter.use_wall_clock();
                    i += 1;
                }
                let _ = built.send(Ok(names));
                run_host(world, inbox, host_stop, &mut io::stderr());
            }
            Err(e) => {
                let _ = built.send(Err(e));
            }
        })?;
    let names = match ready.recv() {
        Ok(Ok(names)) => names,
        Ok(Err(e)) => {
            let _ = host.join();
            return Err(io::Error::other(e));
        }
        Err(_) => return Err(io::Error::other("the host thread died while building")),
    };
    let bound = match bind_devices(socket, &names) {
        Ok(b) => b,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            drop(jobs);
            let _ = host.join();
            return Err(e);
        }
    };
    let server_uid = nix::unistd::getuid().as_raw();
    let mut said = format!("hcasim: serving on {}", socket.display());
    for (name, (path, _)) in names.iter().zip(&bound.made) {
        said.push_str(&format!("; {name} on {}", path.display()));
    }
    eprintln!("{said} (pid {})", std::process::id());
    accept_loop(&bound.listeners, &jobs, server_uid, &stop);
    // Remove each socket only if it is still the one we made.
    bound.remove();
    drop(jobs);
    match host.join() {
        Ok(()) => Ok(()),
        Err(_) => Err(io::Error::other("the host thread panicked")),
    }
}

/// The listeners (each with its adapter's index) and every path made for them, with the
/// (device, inode) each had when made.
struct Bound {
    listeners: Vec<(UnixListener, usize)>,
    made: Vec<(PathBuf, (u64, u64))>,
}

impl Bound {
    fn remove(&self) {
        for (path, ours) in &self.made {
            if std::fs::symlink_metadata(path).is_ok_and(|m| (m.dev(), m.ino()) == *ours) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// One socket for a host of one adapter (`names` empty); for several, one per adapter at
/// `socket.NAME` and then `socket` itself, a second name of the first adapter's, made last
/// so that a client that sees `socket` finds every adapter served. On any failure nothing
/// made is left behind.
fn bind_devices(socket: &Path, names: &[String]) -> io::Result<Bound> {
    let mut bound = Bound {
        listeners: Vec::with_capacity(names.len().max(1)),
        made: Vec::with_capacity(names.len() + 1),
    };
    if names.is_empty() {
        let (listener, ours) = bind_private(socket)?;
        bound.listeners.push((listener, 0));
        bound.made.push((socket.to_path_buf(), ours));
    }
    for (i, name) in names.iter().enumerate() {
        let path = device::socket_of(socket, name);
        match bind_private(&path) {
            Ok((listener, ours)) => {
                bound.listeners.push((listener, i));
                bound.made.push((path, ours));
            }
            Err(e) => {
                bound.remove();
                return Err(io::Error::new(e.kind(), format!("adapter {name}: {e}")));
            }
        }
    }
    if let Some((first, ours)) = bound.made.first().cloned().filter(|_| !names.is_empty()) {
        // A hard link fails if anything appeared at `socket` meanwhile: nothing is replaced.
        if let Err(e) = clear_stale(socket).and_then(|()| std::fs::hard_link(&first, socket)) {
            bound.remove();
            return Err(e);
        }
        bound.made.push((socket.to_path_buf(), ours));
    }
    for (l, _) in &bound.listeners {
        l.set_nonblocking(true)?;
    }
    Ok(bound)
}

/// Accepts on every listener until `stop`: at most [`MAX_CONNECTIONS`] at once; accept
/// errors (out of file descriptors, say) back off instead of spinning, and are logged once
/// per burst.
fn accept_loop(
    listeners: &[(UnixListener, usize)],
    jobs: &mpsc::Sender<Job>,
    uid: u32,
    stop: &AtomicBool,
) {
    let live = Arc::new(AtomicUsize::new(0));
    let mut backoff = Duration::ZERO;
    while !stop.load(Ordering::Relaxed) {
        let mut idle = true;
        for (listener, device) in listeners {
            match listener.accept() {
                Ok((stream, _)) => {
                    idle = false;
                    backoff = Duration::ZERO;
                    if live.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                        log::warn!("{MAX_CONNECTIONS} connections already: closing a new one");
                        continue;
                    }
                    live.fetch_add(1, Ordering::Relaxed);
                    let (jobs, live2, device) = (jobs.clone(), live.clone(), *device);
                    let spawned =
                        thread::Builder::new()
                            .name("connection".into())
                            .spawn(move || {
                                connection(stream, device, jobs, uid);
                                live2.fetch_sub(1, Ordering::Relaxed);
                            });
                    if let Err(e) = spawned {
                        live.fetch_sub(1, Ordering::Relaxed);
                        eprintln!("hcasim: cannot start a connection thread: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    idle = false;
                    if backoff.is_zero() {
                        eprintln!("hcasim: accept: {e}; backing off");
                    }
                    backoff =
                        (backoff * 2).clamp(Duration::from_millis(50), Duration::from_secs(1));
                    thread::sleep(backoff);
                }
            }
        }
        if idle {
            thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What is at `path` may be replaced only if it is a socket nobody answers on (left by a
/// server that died): that one is removed. A live one, a regular file, a symlink or
/// anything else is refused and left alone.
fn clear_stale(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => match UnixStream::connect(path) {
            Ok(_) => Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} is already being served", path.display()),
            )),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!("cannot tell whether {} is in use: {e}", path.display()),
            )),
        },
        Ok(m) => {
            let what = if m.file_type().is_symlink() {
                "a symbolic link"
            } else if m.is_dir() {
                "a directory"
            } else {
                "a file"
            };
            Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is {what}, not a socket: not replacing it",
                    path.display()
                ),
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Binds under a temporary name, makes it 0600, then links it into place, so the socket is
/// never reachable with looser rights; only a stale socket at `socket` is replaced
/// ([`clear_stale`]). Returns the listener and the socket's (device, inode), to remove only
/// it at the end.
fn bind_private(socket: &Path) -> io::Result<(UnixListener, (u64, u64))> {
    clear_stale(socket)?;
    let (listener, tmp) = bind_temporary(socket)?;
    let linked = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))
        // A hard link fails if anything appeared at `socket` meanwhile: nothing is replaced.
        .and_then(|()| std::fs::hard_link(&tmp, socket));
    let _ = std::fs::remove_file(&tmp);
    linked?;
    let m = std::fs::symlink_metadata(socket)?;
    Ok((listener, (m.dev(), m.ino())))
}

/// Binds a fresh name beside `socket`; a name already taken is never removed, another is
/// tried (a bounded number of times).
fn bind_temporary(socket: &Path) -> io::Result<(UnixListener, PathBuf)> {
    let base = socket
        .file_name()
        .map_or("hcasim".into(), |n| n.to_string_lossy().into_owned());
    let mut last = None;
    for attempt in 0..16 {
        let mut tmp = PathBuf::from(socket);
        tmp.set_file_name(format!(".{base}.{}.{attempt}.tmp", std::process::id()));
        match UnixListener::bind(&tmp) {
            Ok(l) => return Ok((l, tmp)),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no temporary name")))
}

fn run_host(
    mut host: MultiNode,
    inbox: mpsc::Receiver<Job>,
    stop: Arc<AtomicBool>,
    report: &mut dyn io::Write,
) {
    serve_host(&mut host, &inbox, &stop);
    // What the clients' I/O went through while served: the accounting, each disk's latency,
    // each multipath disk's time with no path. Said however serving ended: the stop flag, or
    // the accept loop gone first (it drops the queue as it ends, and this thread may see
    // that before it sees the flag).
    let said = write!(
        report,
        "hcasim: stopped after {} ms of virtual time\n{}",
        host.now().as_ms(),
        crate::world::workload(&host)
    );
    // Nowhere left to say it (stderr closed): the process ends anyway.
    drop(said);
}

/// Runs the host on the wall clock and answers its requests until told to stop or no
/// request can come any more.
fn serve_host(host: &mut MultiNode, inbox: &mpsc::Receiver<Job>, stop: &AtomicBool) {
    let start = WallInstant::now();
    let mut said_behind = WallInstant::now();
    loop {
        // Every request already waiting is answered before the next step.
        loop {
            match inbox.try_recv() {
                Ok(job) => answer(host, job),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let wall = Instant::from_us(start.elapsed().as_micros() as u64);
        if host.now() < wall {
            host.run_until(wall.min(host.now() + MAX_STEP));
            let behind = wall.saturating_since(host.now());
            if behind.as_ms() >= 1_000 && said_behind.elapsed() >= Duration::from_secs(5) {
                said_behind = WallInstant::now();
                eprintln!(
                    "hcasim: behind real time by {} ms (this scenario needs more than the \
                     machine gives); IOCTLs are still answered",
                    behind.as_ms()
                );
            }
            continue;
        }
        match inbox.recv_timeout(Duration::from_millis(2)) {
            Ok(job) => answer(host, job),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

fn answer(host: &mut MultiNode, job: Job) {
    let cap = job.output_capacity.min(MAX_OUTPUT) as usize;
    let mut out = vec![0u8; cap];
    // Every listener's index is an adapter's: the fallback is never taken.
    let reply = match host.host_mut(job.device) {
        Some(adapter) => adapter.ioctl(job.code, &job.input, &mut out, job.caller),
        None => hcabus::ioctl::Reply {
            status: NtStatus::INVALID_DEVICE_REQUEST,
            bytes: 0,
        },
    };
    out.truncate(reply.bytes);
    // The connection may be gone; that is its business.
    let _ = job.reply.try_send((reply.status, out));
}

/// Who the peer is and what it may do: everything if it is this server's user or root, else
/// read only.
fn caller_of(stream: &UnixStream, server_uid: u32) -> Caller {
    match getsockopt(stream, PeerCredentials) {
        Ok(cred) => Caller {
            rights: if cred.uid() == server_uid || cred.uid() == 0 {
                Rights::READ | Rights::WRITE
            } else {
                Rights::READ
            },
            uid: Some(cred.uid()),
        },
        // Unknown peer: the least.
        Err(_) => Caller::from(Rights::READ),
    }
}

/// Reads a stream with two limits: [`IDLE`] for the first byte of a frame, then one
/// deadline, [`FRAME_DEADLINE`], for the whole rest of it (not a timeout per byte).
struct FrameReader<'a> {
    stream: &'a UnixStream,
    frame_started: Option<WallInstant>,
}

impl Read for FrameReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let timeout = match self.frame_started {
            None => IDLE,
            Some(t) => FRAME_DEADLINE
                .checked_sub(t.elapsed())
                .filter(|d| !d.is_zero())
                .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "frame deadline"))?,
        };
        self.stream.set_read_timeout(Some(timeout))?;
        let n = (&mut &*self.stream).read(buf)?;
        if n > 0 {
            self.frame_started.get_or_insert_with(WallInstant::now);
        }
        Ok(n)
    }
}

fn connection(stream: UnixStream, device: usize, jobs: mpsc::Sender<Job>, server_uid: u32) {
    let caller = caller_of(&stream, server_uid);
    let _ = stream.set_write_timeout(Some(FRAME_DEADLINE));
    loop {
        let mut reader = FrameReader {
            stream: &stream,
            frame_started: None,
        };
        let frame = match read_request(&mut reader) {
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
            device,
            code: frame.code,
            input: frame.input,
            output_capacity: frame.output_capacity,
            caller,
            reply,
        };
        if jobs.send(job).is_err() {
            return;
        }
        // No clock here: the host answers every job before its next step, and a host that
        // stops drops the job, which ends this wait.
        let Ok((status, out)) = answer.recv() else {
            return;
        };
        if write_response(&mut &stream, status, &out).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closing report is said when the accept loop ended first and dropped the queue
    /// before this thread saw the stop flag (a race a loaded machine loses): it was lost.
    #[test]
    fn the_report_is_said_when_the_queue_closes_before_the_stop_flag_is_seen() {
        let mut s = hcabus_lab::stack::boot_from_san();
        s.sim.faults.clear();
        let (world, _) = build(&Scenario::One(s)).expect("builds");
        let (jobs, inbox) = mpsc::channel::<Job>();
        drop(jobs);
        let mut said = Vec::new();
        run_host(world, inbox, Arc::new(AtomicBool::new(false)), &mut said);
        let said = String::from_utf8(said).expect("text");
        assert!(said.starts_with("hcasim: stopped after"), "{said}");
        assert!(said.contains("bootdisk"), "{said}");
    }
}
