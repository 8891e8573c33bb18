//! hcactl: the administrator's tool for the hcabus IOCTL interface.
//!
//! Exit status: [`EXIT_STATUS`], which `--help` and the manual page print.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration as WallDuration;

use clap::{CommandFactory, Parser, Subcommand};
use hcabus::ioctl::*;
use hcabus::types::MAX_PORTS;
use hcactl::answer::Answer;
use serde_json::json;

mod control;

use control::{ControlDevice, Failure, Outcome};

/// What hcactl's exit status says (`--help`, the manual page's EXIT STATUS).
pub(crate) const EXIT_STATUS: &str = "\
Exit status:
  0  success; also when whoever reads stdout closed it early (`| head`)
  1  the bus refused the request (its NTSTATUS is printed by name and value, and why in
     words where hcactl can tell), or a reset that --wait or maintain waited for ended badly
     (failed, vetoed, aborted), did not end, or did not get its ports back within --timeout;
     `devices` found none, or one did not answer
  2  a usage or connection error, a short or malformed answer from the server included
With --json an error is one JSON object on stderr (docs/json.md, hcactl.error/1).";

/// Query and control the hcabus soft-reset coordinator.
#[derive(Debug, Parser)]
#[command(name = "hcactl", version, about, after_help = EXIT_STATUS)]
struct Cli {
    /// The simulator's socket (`hcasim serve --socket PATH`). On Windows hcactl talks to
    /// the bus device through DeviceIoControl instead.
    #[arg(long, global = true, env = "HCABUS_SOCKET")]
    socket: Option<PathBuf>,
    /// The HCA to talk to, by name (`hcactl devices` lists them): the simulator's adapter
    /// NAME at `--socket PATH.NAME`, on Windows the control device `\\.\NAME`. Without
    /// it: the first adapter (`PATH`, `\\.\HcaBus0`).
    #[arg(long, global = true, value_name = "NAME", env = "HCABUS_DEVICE")]
    device: Option<String>,
    /// Print JSON for scripts instead of tables: one document with its `schema`
    /// (docs/json.md); errors as JSON on stderr.
    #[arg(long, global = true)]
    json: bool,
    /// Say wall-clock times in UTC instead of the local time zone.
    #[arg(long, global = true)]
    utc: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Every HCA bus reachable, with its name, state and epoch. Exit 1 if none is, or one
    /// does not answer.
    Devices,
    /// State, epoch, identity, counters and the last reset: its phases, hardware attempts,
    /// forced clients, vetoer and reason.
    Status {
        /// Look again every --interval-ms until interrupted (on a terminal each look
        /// replaces the last; with --json one object per line).
        #[arg(long)]
        watch: bool,
        /// With --watch: milliseconds between looks. Range: 10 to 3600000 (an hour).
        #[arg(long, value_name = "MS", default_value_t = 1000, requires = "watch",
              value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
        interval_ms: u64,
        /// With --watch: stop after this many looks. Range: 1 to 1000000.
        #[arg(long, value_name = "N", requires = "watch",
              value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        count: Option<u64>,
    },
    /// The last resets (the bus keeps 16, apart from the flight recorder, so polling never
    /// pushes them out): reason, outcome, phases, attempts, forced clients, vetoer.
    Resets,
    /// The health reporter, as `devlink health show`: its state, error and recover counts,
    /// the last error and its syndrome, the health counter, auto-recovery and its grace
    /// period, the ports.
    Health,
    /// Every registered client.
    Clients,
    /// Flight-recorder records (repeats counted in one record, `(xN, last T)`), then how
    /// many the ring dropped. With --json: one structured record per line (seq, time, kind,
    /// fields).
    Log {
        /// First sequence number (past the newest: none, and the next one is said). Range: 0
        /// to 18446744073709551615 (any).
        #[arg(long, value_name = "SEQ", default_value_t = 0,
              value_parser = clap::value_parser!(u64))]
        since: u64,
        /// Only records of this kind (repeatable): transition, reset_started, reset_joined,
        /// follow_up, reset_finished, reset_failed, event, call, refused, unresponsive,
        /// throttled, vetoed, hw, pnp, port, policy_changed, fault_injected.
        #[arg(long, value_name = "KIND")]
        kind: Vec<String>,
        /// Only records about this client, by name or id (#3.0).
        #[arg(long, value_name = "NAME|ID")]
        client: Option<String>,
        /// Keep printing new records until interrupted.
        #[arg(long, conflicts_with = "input")]
        follow: bool,
        /// Read the records of a dump file (`hcactl dump -o FILE`) instead of the bus.
        #[arg(long, value_name = "FILE")]
        input: Option<PathBuf>,
    },
    /// Everything in one JSON file for a post-mortem (as `devlink health dump`): state,
    /// the last resets, policy, health, clients and the whole flight recorder, with a
    /// format version. `hcactl log --input FILE` reads it back.
    Dump {
        /// Write to this new file (an existing file is not replaced) instead of stdout.
        #[arg(short = 'o', long, value_name = "FILE", conflicts_with = "bundle")]
        output: Option<PathBuf>,
        /// Write instead the diagnostic bundle the driver kept when the device last ended
        /// Failed (its last records, identity, health, policy; docs/ioctl.md, READ_BUNDLE) to
        /// this new file, as the driver gave it: what support asks for.
        #[arg(long, value_name = "FILE")]
        bundle: Option<PathBuf>,
        /// With --bundle: a bundle of the device as it is now (the kept one stays).
        #[arg(long, requires = "bundle")]
        now: bool,
    },
    /// Show or change the policy.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// Ask for a reset: planned unless --forced. A planned reset asks each CAN_VETO client
    /// first (RESET_QUERY), and any of them may refuse it: the boot disk's last-path guard
    /// does when this adapter carries its last path. A forced reset asks nobody.
    Reset {
        /// A planned reset (the default): CAN_VETO clients are asked first and may refuse it.
        #[arg(long, conflicts_with_all = ["forced", "firmware"])]
        planned: bool,
        /// A forced reset: nobody is asked and nobody can refuse it; a disk whose last path
        /// runs through this adapter waits for it (what recovery does, not maintenance).
        #[arg(long)]
        forced: bool,
        /// A planned reset that also activates staged firmware: CAN_VETO clients may refuse
        /// it, as any planned reset.
        #[arg(long, conflicts_with = "forced")]
        firmware: bool,
        /// Why, for the log.
        #[arg(long, default_value = "")]
        reason: String,
        /// Wait for the reset's outcome, then (`--wait`, `--wait=service`) until every port
        /// that was Active before it is Active again; `--wait=restored`: the outcome only.
        #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
              default_missing_value = "service", value_name = "UNTIL")]
        wait: Option<WaitFor>,
        /// With --wait: give up after this many seconds (default: the policy's worst case,
        /// quiesce deadline plus auto-restart window, plus a minute). Range: 1 to 86400 (a
        /// day).
        #[arg(long, value_name = "SECONDS", requires = "wait", value_parser = timeout_s())]
        timeout: Option<u64>,
    },
    /// Rolling maintenance: each adapter in turn by a planned reset, the next only once the
    /// last one's ports are Active again. A last-path veto (a disk's other path not back yet)
    /// is waited out and asked again within --timeout; any other veto or failure stops with
    /// exit 1, naming the device and the reason.
    Maintain {
        /// Activate staged firmware on each (a planned reset too: it may be vetoed).
        #[arg(long)]
        firmware: bool,
        /// These devices, in this order (default: every one `hcactl devices` lists).
        #[arg(long, value_name = "A,B", value_delimiter = ',')]
        devices: Option<Vec<String>>,
        /// Per device: give up after this many seconds (default as for `reset --wait`).
        /// Range: 1 to 86400 (a day).
        #[arg(long, value_name = "SECONDS", value_parser = timeout_s())]
        timeout: Option<u64>,
    },
    /// Restart a Failed device.
    Restart {
        /// Wait as `reset --wait` does: the outcome, then the ports (`--wait=restored`: the
        /// outcome only).
        #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
              default_missing_value = "service", value_name = "UNTIL")]
        wait: Option<WaitFor>,
        /// With --wait: give up after this many seconds (default as for `reset`). Range: 1 to
        /// 86400 (a day).
        #[arg(long, value_name = "SECONDS", requires = "wait", value_parser = timeout_s())]
        timeout: Option<u64>,
    },
    /// Inject a fault (simulator only): catastrophic, command_timeout, health_stall, hang,
    /// reset_fails, device_replaced, never_returns, surprise_removal, port_down,
    /// target_busy.
    Inject {
        fault: String,
        /// For reset_fails: how many reset assertions fail (default 1, at most 64); for
        /// target_busy: how many logins the targets refuse (default 1). Range: 1 to 10000.
        #[arg(long, value_name = "N",
              value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_BUSY_LOGINS)))]
        count: Option<u32>,
        /// For port_down: the port whose cable is pulled. Range: 1 to 2.
        #[arg(long, value_name = "N",
              value_parser = clap::value_parser!(u8).range(1..=i64::from(MAX_PORTS)))]
        port: Option<u8>,
        /// For port_down: how long the cable stays out, in milliseconds. Range: 1 to 3600000
        /// (an hour).
        #[arg(long, value_name = "MS",
              value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_FAULT_DURATION_MS)))]
        duration_ms: Option<u32>,
    },
    /// Print the completion script for SHELL (bash, zsh, fish, powershell, elvish), e.g.
    /// `hcactl completions bash > /etc/bash_completion.d/hcactl`.
    Completions { shell: hcactl::generate::Shell },
    /// Print the manual page (roff), e.g. `hcactl man > hcactl.1; man ./hcactl.1`.
    Man,
}

/// The range of every `--timeout`: seconds, from one to a day. Longer is a typo, and the
/// bound keeps every deadline hcactl computes from it far inside what the clock can hold.
fn timeout_s() -> clap::builder::RangedU64ValueParser {
    clap::value_parser!(u64).range(1..=86_400)
}

#[derive(Debug, Subcommand)]
enum PolicyAction {
    /// Print every key and its value.
    Get,
    /// Change keys, e.g. `quiesce_deadline_ms=2000 abort_on_unresponsive=true`.
    Set {
        #[arg(required = true, value_name = "KEY=VALUE")]
        pairs: Vec<String>,
    },
}

/// Writes one line to stdout; a closed pipe ends hcactl quietly instead of a panic.
fn emit(args: std::fmt::Arguments<'_>) -> Outcome {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_fmt(args).and_then(|()| out.write_all(b"\n")) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::Closed),
        Err(e) => Err(Failure::Usage(format!("cannot write to stdout: {e}"))),
    }
}

/// Writes what `write` generates to stdout, as `emit` does a line.
fn generated(write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>) -> Outcome {
    let mut out = std::io::stdout().lock();
    match write(&mut out) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::Closed),
        Err(e) => Err(Failure::Usage(format!("cannot write to stdout: {e}"))),
    }
}

/// `println!` that stops on a closed stdout (inside functions returning `Result<_, Failure>`).
macro_rules! say {
    ($($arg:tt)*) => { emit(format_args!($($arg)*))? };
}

// After `say!`, which they use.
mod bundle;
mod clients;
mod devices;
mod log;
mod maintain;
#[cfg(test)]
mod options;
mod policy;
mod resets;
mod state;
mod view;
mod wait;

use view::document;
use wait::{wait_for, WaitFor};

fn run(cli: Cli) -> Outcome {
    let js = cli.json;
    // What needs no connection is checked before one is made.
    let fault = match &cli.command {
        Command::Devices => return devices::devices(cli.socket.as_ref(), js),
        Command::Maintain {
            firmware,
            devices,
            timeout,
        } => {
            if cli.device.is_some() {
                return Err(Failure::Usage(
                    "maintain: --devices A,B names the devices, not --device".into(),
                ));
            }
            return maintain::maintain(&maintain::Plan {
                socket: cli.socket.as_ref(),
                devices: devices.as_deref(),
                firmware: *firmware,
                timeout: *timeout,
                as_json: js,
            });
        }
        Command::Completions { shell } => {
            return generated(|out| hcactl::generate::completions(Cli::command(), *shell, out))
        }
        Command::Man => {
            return generated(|out| hcactl::generate::man(Cli::command(), EXIT_STATUS, out))
        }
        Command::Inject {
            fault,
            count,
            port,
            duration_ms,
        } => Some(fault_request(fault, *count, *port, *duration_ms)?),
        Command::Policy {
            action: PolicyAction::Set { pairs },
        } => {
            policy::pairs(pairs)?;
            None
        }
        _ => None,
    };
    let filter = match &cli.command {
        Command::Log {
            since,
            kind,
            client,
            input,
            ..
        } => {
            let filter = hcactl::log_json::Filter {
                since: *since,
                kinds: kind.clone(),
                client: client.clone(),
            };
            log::check_filter(&filter)?;
            if let Some(path) = input {
                return log::log_offline(path, &filter, js);
            }
            filter
        }
        _ => hcactl::log_json::Filter::default(),
    };
    let mut bus = ControlDevice::open(cli.socket.as_ref(), cli.device.as_deref())?;
    match cli.command {
        // Served before a connection is made, above.
        Command::Devices
        | Command::Completions { .. }
        | Command::Man
        | Command::Maintain { .. } => Ok(()),
        Command::Status {
            watch: true,
            interval_ms,
            count,
        } => state::watch(&mut bus, js, WallDuration::from_millis(interval_ms), count),
        Command::Status { .. } => state::status(&mut bus, js, false),
        Command::Resets => resets::resets(&mut bus, js),
        Command::Health => state::health(&mut bus, js),
        Command::Clients => clients::clients(&mut bus, js),
        Command::Log { follow, .. } => log::log(&mut bus, &filter, follow, js),
        Command::Dump {
            bundle: Some(path),
            now,
            ..
        } => bundle::dump_bundle(&mut bus, &path, now),
        Command::Dump { output, .. } => {
            log::dump(&mut bus, cli.device.as_deref(), output.as_deref())
        }
        Command::Policy {
            action: PolicyAction::Get,
        } => {
            let p = bus.policy()?;
            policy::print(&p, js)
        }
        Command::Policy {
            action: PolicyAction::Set { pairs },
        } => policy::set(&mut bus, &pairs, js),
        Command::Reset {
            forced,
            firmware,
            reason,
            wait,
            timeout,
            ..
        } => reset(&mut bus, forced, firmware, &reason, wait, timeout, js),
        Command::Restart { wait, timeout } => restart(&mut bus, wait, timeout, js),
        Command::Inject { .. } => match fault {
            Some(request) => inject(&mut bus, &request, js),
            None => Ok(()),
        },
    }
}

/// `hcactl reset`: a planned reset unless `--forced` (`--firmware`: planned, with the
/// firmware's activation); with `--wait` until it concluded.
fn reset(
    bus: &mut ControlDevice,
    forced: bool,
    firmware: bool,
    reason: &str,
    wait: Option<WaitFor>,
    timeout: Option<u64>,
    js: bool,
) -> Outcome {
    let mode = if forced {
        ResetMode::Forced
    } else if firmware {
        ResetMode::FirmwareActivate
    } else {
        ResetMode::Planned
    };
    let epoch = request_reset(bus, mode, reason)?;
    requested(bus, ("reset", epoch), wait, timeout, js)
}

/// A reset or restart of `epoch` asked for: waited for with `--wait`, else said.
fn requested(
    bus: &mut ControlDevice,
    (what, epoch): (&str, u64),
    wait: Option<WaitFor>,
    timeout: Option<u64>,
    js: bool,
) -> Outcome {
    if let Some(until) = wait {
        wait_for(bus, epoch, until, timeout, js)
    } else if js {
        say!("{}", document("requested", json!({ "epoch": epoch })));
        Ok(())
    } else {
        say!("{what} of e{epoch} requested");
        Ok(())
    }
}

/// `hcactl restart`: RESTART of a Failed device; with `--wait` until it concluded. A
/// refusal says why in words: the device is not Failed, or a reset is under way.
fn restart(
    bus: &mut ControlDevice,
    wait: Option<WaitFor>,
    timeout: Option<u64>,
    js: bool,
) -> Outcome {
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let out = match bus.call(IOCTL_HCABUS_RESTART, &input, 8) {
        Ok(out) => out,
        Err(Failure::Refused(status)) => return Err(restart_refused(bus, status)),
        Err(e) => return Err(e),
    };
    let epoch = Answer::new("RESTART", &out).u64(0)?;
    requested(bus, ("restart", epoch), wait, timeout, js)
}

/// Why RESTART was refused, in words: what state the device is in, and what to do (a
/// Removed device is said by [`ControlDevice::call`] for every order alike).
fn restart_refused(bus: &mut ControlDevice, status: NtStatus) -> Failure {
    let state = bus.state().map(|s| state_name(s.state));
    let d = bus.device_flag();
    let why = match (status, state) {
        (NtStatus::DEVICE_BUSY, _) if stop_pending(bus) => STOP_PENDING_WHY.to_string(),
        (NtStatus::DEVICE_BUSY, _) => format!(
            "a reset is under way; restart applies to a Failed device once it has concluded \
             (`hcactl {d}reset --wait` or `hcactl {d}status --watch` shows it)"
        ),
        (NtStatus::INVALID_DEVICE_REQUEST, Ok(state)) => format!(
            "the device is {state}, not Failed: restart brings back a Failed device only \
             (`hcactl {d}reset` resets a working one)"
        ),
        _ => String::new(),
    };
    Failure::RefusedBecause(status, why)
}

/// Why a reset or restart is refused busy while PnP may stop the adapter.
const STOP_PENDING_WHY: &str = "a PnP stop of the adapter is pending (Windows is rebalancing \
     its resources): no reset starts until the adapter is started again or the stop is \
     cancelled; ask again then";

/// Whether the device says a PnP stop is pending (QUERY_STATE's flag; `false` when it
/// cannot be read).
fn stop_pending(bus: &mut ControlDevice) -> bool {
    bus.state().is_ok_and(|s| s.flags & STATE_STOP_PENDING != 0)
}

/// REQUEST_RESET; returns the epoch the reset tears down.
fn request_reset(bus: &mut ControlDevice, mode: ResetMode, reason: &str) -> Result<u64, Failure> {
    if reason.len() > 64 {
        return Err(Failure::Usage("--reason: at most 64 bytes".into()));
    }
    let mut input = [0u8; 80];
    RequestResetIn::new(mode, reason).encode(&mut input);
    let out = match bus.call(IOCTL_HCABUS_REQUEST_RESET, &input, 8) {
        Ok(out) => out,
        Err(Failure::Refused(NtStatus::DEVICE_BUSY)) if stop_pending(bus) => {
            return Err(Failure::RefusedBecause(
                NtStatus::DEVICE_BUSY,
                STOP_PENDING_WHY.into(),
            ))
        }
        Err(e) => return Err(e),
    };
    Ok(Answer::new("REQUEST_RESET", &out).u64(0)?)
}

/// The request `hcactl inject` sends, or a usage error naming the option at fault.
fn fault_request(
    fault: &str,
    count: Option<u32>,
    port: Option<u8>,
    duration_ms: Option<u32>,
) -> Result<FaultRequest, Failure> {
    // The faults a device can be given: those with an INJECT_FAULT code.
    let Some(code) = FaultCode::parse(fault) else {
        let names: Vec<&str> = FaultCode::ALL.iter().map(|f| f.as_str()).collect();
        return Err(Failure::Usage(format!(
            "unknown fault {fault:?}; one of {}",
            names.join(", ")
        )));
    };
    let usage = |m: &str| Err(Failure::Usage(m.into()));
    let request = match code.args() {
        FaultArgs::PortAndDuration => {
            if count.is_some() {
                return usage("--count: port_down takes --port and --duration-ms");
            }
            let (Some(port), Some(ms)) = (port, duration_ms) else {
                return usage("port_down needs --port N and --duration-ms MS");
            };
            FaultRequest::port_down(port, ms)
        }
        _ if port.is_some() || duration_ms.is_some() => {
            return usage("--port and --duration-ms apply to port_down only")
        }
        FaultArgs::Count => FaultRequest::new(code, count.unwrap_or(1)),
        _ if count.is_some() => return usage("--count applies to reset_fails and target_busy"),
        FaultArgs::None | FaultArgs::Client => FaultRequest::new(code, 0),
    };
    if let Err(e) = request.check() {
        // The field's name as the option spells it.
        let option = format!("--{}", e.field.replace('_', "-"));
        return Err(Failure::Usage(format!("{fault}: {option} {e}")));
    }
    Ok(request)
}

fn inject(bus: &mut ControlDevice, request: &FaultRequest, js: bool) -> Outcome {
    let mut input = [0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(request, &mut input);
    bus.call(IOCTL_HCABUS_INJECT_FAULT, &input, 0)?;
    if js {
        let port = (request.port != 0).then_some(request.port);
        say!(
            "{}",
            document(
                "injected",
                json!({
                    "fault": request.code.as_str(),
                    "count": (request.count != 0).then_some(request.count),
                    "port": port,
                    "duration_ms": port.map(|_| request.duration_ms),
                })
            )
        );
    }
    Ok(())
}

/// Says why hcactl stops (text, or under `--json` a JSON object on stderr) and returns the
/// exit status [`EXIT_STATUS`] gives it.
fn fail(e: &Failure, js: bool) -> ExitCode {
    let code = match e {
        Failure::Closed => return ExitCode::SUCCESS,
        Failure::Usage(_) => 2,
        Failure::Refused(_) | Failure::RefusedBecause(..) | Failure::Outcome(_) => 1,
    };
    if js {
        let status = match e {
            Failure::Refused(s) | Failure::RefusedBecause(s, _) => {
                Some(json!({ "name": s.name(), "value": format!("0x{:08X}", s.0) }))
            }
            _ => None,
        };
        let kind = match e {
            Failure::Usage(_) => "usage",
            Failure::Refused(_) | Failure::RefusedBecause(..) => "refused",
            _ => "outcome",
        };
        let v = document(
            "error",
            json!({ "error": { "kind": kind, "message": e.text(), "status": status },
                    "exit_code": code }),
        );
        eprintln!("{v}");
    } else {
        eprintln!("hcactl: {}", e.text());
    }
    ExitCode::from(code)
}

fn main() -> ExitCode {
    // Under --json even a usage error clap finds is JSON: the flag is looked for first.
    let js = std::env::args_os().any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if js && e.use_stderr() => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("usage error");
            let message = first.strip_prefix("error: ").unwrap_or(first).to_string();
            return fail(&Failure::Usage(message), true);
        }
        Err(e) => e.exit(),
    };
    view::set_utc(cli.utc);
    let js = cli.json;
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, js),
    }
}
