//! What the socket suites share: a live `hcasim serve` and reading hcactl's output.
#![allow(dead_code)]

pub mod quotes;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The hcactl binary. It is a crate of its own (hcactl/, which links no simulator), so it is
/// not one of this package's `CARGO_BIN_EXE_*`: the same cargo that built these tests builds
/// the workspace's test targets again, once per run, into the directory `hcasim` is in. Under
/// `cargo test --workspace` that build is the one just done and changes nothing; run alone,
/// `cargo test -p hcabus-tools` gets an hcactl as current as its sources, never a stale one.
pub fn hcactl() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let hcasim = Path::new(env!("CARGO_BIN_EXE_hcasim"));
        let profile_dir = hcasim.parent().expect("hcasim is in a profile's directory");
        let target_dir = profile_dir
            .parent()
            .expect("the profile's directory is in target");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build
            .args(["test", "--workspace", "--no-run", "--quiet", "--target-dir"])
            .arg(target_dir)
            .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        if profile_dir.ends_with("release") {
            build.arg("--release");
        }
        let out = build.output().expect("cargo runs");
        assert!(
            out.status.success(),
            "building hcactl for the tools' suites failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bin = profile_dir.join(format!("hcactl{}", std::env::consts::EXE_SUFFIX));
        assert!(bin.is_file(), "no {} after the build", bin.display());
        bin.to_string_lossy().into_owned()
    })
}

/// A running `hcasim serve`, stopped with SIGTERM when dropped.
pub struct Server {
    pub child: Child,
    pub socket: PathBuf,
    pub dir: PathBuf,
}

impl Server {
    pub fn start(tag: &str) -> Server {
        Self::start_with(tag, &[])
    }

    pub fn start_with(tag: &str, extra: &[&str]) -> Server {
        Self::start_args(tag, &[], extra)
    }

    /// `hcasim BEFORE.. serve --socket PATH EXTRA..`.
    pub fn start_args(tag: &str, before: &[&str], extra: &[&str]) -> Server {
        let dir = std::env::temp_dir().join(format!("hcasim-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let socket = dir.join("hcabus.sock");
        let child = Command::new(env!("CARGO_BIN_EXE_hcasim"))
            .args(before)
            .args(["serve", "--socket"])
            .arg(&socket)
            .args(extra)
            .stderr(Stdio::from(
                std::fs::File::create(dir.join("serve.err")).expect("stderr file"),
            ))
            .spawn()
            .expect("hcasim serve starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut child = child;
        while !socket.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("hcasim serve exited before serving: {status}");
            }
            assert!(Instant::now() < deadline, "the socket never appeared");
            std::thread::sleep(Duration::from_millis(20));
        }
        Server { child, socket, dir }
    }

    pub fn ctl(&self, args: &[&str]) -> Output {
        Command::new(hcactl())
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("hcactl runs")
    }

    /// Stops the server; its exit status and what it wrote to stderr (its report at the end).
    pub fn stop_report(self) -> (std::process::ExitStatus, String) {
        let err = self.dir.join("serve.err");
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
        let mut me = self;
        let status = me.child.wait().expect("exits");
        let said = std::fs::read_to_string(&err).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&me.dir);
        std::mem::forget(me);
        (status, said)
    }

    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("signal");
        let status = self.child.wait().expect("exits");
        let _ = std::fs::remove_dir_all(&self.dir);
        std::mem::forget(self);
        status
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

pub fn json(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", text(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(o)))
}
