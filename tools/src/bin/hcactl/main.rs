//! hcactl: the administrator's tool for the hcabus IOCTL interface.
//!
//! Exit status: 0 success (also when whoever reads stdout closed it early: `| head`); 1 a
//! request the bus refused (its NTSTATUS printed by name and value), a reset that `--wait`
//! saw end badly (failed, vetoed, aborted) or did not see end, or whose ports did not all come
//! back, within `--timeout`; 2 a usage
//! or connection error, a short or malformed answer from the server included.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration as WallDuration;

use clap::{CommandFactory, Parser, Subcommand};
use hcabus::ioctl::*;
use hcabus::sim::{Fault, FaultArgs};
use hcabus::types::{ClientFlags, ClientId, ClientKind};
use hcabus_tools::answer::Answer;
use serde_json::json;

mod bus;

use bus::{Bus, Failure, Outcome};

/// Query and control the hcabus soft-reset coordinator.
#[derive(Debug, Parser)]
#[command(name = "hcactl", version, about)]
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
    /// Print JSON for scripts instead of tables.
    #[arg(long, global = true)]
    json: bool,
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
        /// With --watch: milliseconds between looks.
        #[arg(long, value_name = "MS", default_value_t = 1000, requires = "watch",
              value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
        interval_ms: u64,
        /// With --watch: stop after this many looks.
        #[arg(long, value_name = "N", requires = "watch",
              value_parser = clap::value_parser!(u64).range(1..))]
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
        /// First sequence number.
        #[arg(long, default_value_t = 0)]
        since: u64,
        /// Only records of this kind (repeatable): transition, reset_started, reset_joined,
        /// follow_up, reset_finished, reset_failed, event, call, refused, unresponsive,
        /// throttled, vetoed, hw, pnp, port.
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
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
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
        /// quiesce deadline plus auto-restart window, plus a minute).
        #[arg(long, value_name = "SECONDS", requires = "wait")]
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
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
    },
    /// Restart a Failed device.
    Restart {
        /// Wait as `reset --wait` does: the outcome, then the ports (`--wait=restored`: the
        /// outcome only).
        #[arg(long, value_enum, num_args = 0..=1, require_equals = true,
              default_missing_value = "service", value_name = "UNTIL")]
        wait: Option<WaitFor>,
        /// With --wait: give up after this many seconds (default as for `reset`).
        #[arg(long, value_name = "SECONDS", requires = "wait")]
        timeout: Option<u64>,
    },
    /// Inject a fault (simulator only): catastrophic, command_timeout, health_stall, hang,
    /// reset_fails, device_replaced, never_returns, surprise_removal, port_down,
    /// target_busy.
    Inject {
        fault: String,
        /// For reset_fails: how many reset assertions fail (default 1); for target_busy:
        /// how many logins the targets refuse (default 1).
        #[arg(long)]
        count: Option<u32>,
        /// For port_down: the port whose cable is pulled.
        #[arg(long)]
        port: Option<u8>,
        /// For port_down: how long the cable stays out, in milliseconds.
        #[arg(long, value_name = "MS")]
        duration_ms: Option<u32>,
    },
    /// Print the completion script for SHELL (bash, zsh, fish, powershell, elvish), e.g.
    /// `hcactl completions bash > /etc/bash_completion.d/hcactl`.
    Completions {
        shell: hcabus_tools::generate::Shell,
    },
    /// Print the manual page (roff), e.g. `hcactl man > hcactl.1; man ./hcactl.1`.
    Man,
}

#[derive(Debug, Subcommand)]
enum PolicyAction {
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
mod devices;
mod log;
mod maintain;
mod policy;
mod resets;
mod state;
mod wait;

use state::us;
use wait::{wait_for, WaitFor};

/// Every registered client, page by page.
fn fetch_clients(bus: &mut Bus) -> Result<Vec<ClientEntry>, Failure> {
    const PAGE: usize = 64;
    let mut all = Vec::new();
    loop {
        let mut input = [0u8; 16];
        encode_list_clients(all.len() as u32, &mut input);
        let out = bus.call(IOCTL_HCABUS_LIST_CLIENTS, &input, 8 + PAGE * 64)?;
        let a = Answer::new("LIST_CLIENTS", &out);
        let total = a.u32(0)? as usize;
        let count = a.u32(4)? as usize;
        if count > PAGE {
            return Err(a
                .malformed(&format!("{count} entries in a page of {PAGE}"))
                .into());
        }
        for i in 0..count {
            let e = ClientEntry::decode(a.slice(8 + i * 64, 64)?)
                .ok_or_else(|| a.malformed("an entry that does not decode"))?;
            all.push(e);
        }
        if count == 0 || all.len() >= total {
            return Ok(all);
        }
        if all.len() > usize::from(u16::MAX) {
            return Err(a.malformed("more clients than any bus holds").into());
        }
    }
}

fn kind_name(k: u32) -> &'static str {
    u8::try_from(k)
        .ok()
        .and_then(ClientKind::from_u8)
        .map_or("?", ClientKind::as_str)
}

fn flag_names(bits: u32) -> String {
    let f = ClientFlags::from_bits_retain(bits);
    let mut v: Vec<String> = f.iter_names().map(|(name, _)| name.to_string()).collect();
    if f.bits() & !ClientFlags::all().bits() != 0 {
        v.push(format!("{:#x}", f.bits() & !ClientFlags::all().bits()));
    }
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join("|")
    }
}

fn clients_json(all: &[ClientEntry]) -> serde_json::Value {
    let id = |raw: u64| ClientId::from_raw(raw).to_string();
    all.iter()
        .map(|e| {
            json!({
                "id": id(e.id), "name": e.name(), "kind": kind_name(e.kind),
                "flags": flag_names(e.flags), "state": client_state_name(e.state),
                "in_barrier": e.in_barrier == 1,
                "last_ack_latency_us": (e.last_ack_latency_us != NONE_U64).then_some(e.last_ack_latency_us),
            })
        })
        .collect()
}

fn clients(bus: &mut Bus, as_json: bool) -> Outcome {
    let all = fetch_clients(bus)?;
    let id = |raw: u64| ClientId::from_raw(raw).to_string();
    if as_json {
        say!("{:#}", clients_json(&all));
        return Ok(());
    }
    say!(
        "{:<8} {:<16} {:<9} {:<34} {:<13} {:<8} last ack",
        "id",
        "name",
        "kind",
        "flags",
        "state",
        "barrier"
    );
    for e in &all {
        say!(
            "{:<8} {:<16} {:<9} {:<34} {:<13} {:<8} {}",
            id(e.id),
            e.name(),
            kind_name(e.kind),
            flag_names(e.flags),
            client_state_name(e.state),
            if e.in_barrier == 1 { "yes" } else { "no" },
            us(e.last_ack_latency_us)
        );
    }
    Ok(())
}

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
            return generated(|out| {
                hcabus_tools::generate::completions(Cli::command(), *shell, out)
            })
        }
        Command::Man => return generated(|out| hcabus_tools::generate::man(Cli::command(), out)),
        Command::Inject {
            fault,
            count,
            port,
            duration_ms,
        } => Some(fault_request(fault, *count, *port, *duration_ms)?),
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
            let filter = hcabus_tools::records::Filter {
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
        _ => hcabus_tools::records::Filter::default(),
    };
    let mut bus = Bus::open(cli.socket.as_ref(), cli.device.as_deref())?;
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
        Command::Clients => clients(&mut bus, js),
        Command::Log { follow, .. } => log::log(&mut bus, &filter, follow, js),
        Command::Dump { output } => log::dump(&mut bus, cli.device.as_deref(), output.as_deref()),
        Command::Policy {
            action: PolicyAction::Get,
        } => {
            let p = bus.policy()?;
            policy::print(&p, js)
        }
        Command::Policy {
            action: PolicyAction::Set { pairs },
        } => policy::set(&mut bus, &pairs),
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
            Some(request) => inject(&mut bus, &request),
            None => Ok(()),
        },
    }
}

/// `hcactl reset`: a planned reset unless `--forced` (`--firmware`: planned, with the
/// firmware's activation); with `--wait` until it concluded.
fn reset(
    bus: &mut Bus,
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
    if let Some(until) = wait {
        wait_for(bus, epoch, until, timeout, js)
    } else if js {
        say!("{}", json!({ "epoch": epoch }));
        Ok(())
    } else {
        say!("reset of e{epoch} requested");
        Ok(())
    }
}

/// `hcactl restart`: RESTART of a Failed device; with `--wait` until it concluded.
fn restart(bus: &mut Bus, wait: Option<WaitFor>, timeout: Option<u64>, js: bool) -> Outcome {
    let mut input = [0u8; 8];
    encode_empty(&mut input);
    let out = bus.call(IOCTL_HCABUS_RESTART, &input, 8)?;
    let epoch = Answer::new("RESTART", &out).u64(0)?;
    if let Some(until) = wait {
        wait_for(bus, epoch, until, timeout, js)
    } else {
        say!("restart of e{epoch} requested");
        Ok(())
    }
}

/// REQUEST_RESET; returns the epoch the reset tears down.
fn request_reset(bus: &mut Bus, mode: ResetMode, reason: &str) -> Result<u64, Failure> {
    if reason.len() > 64 {
        return Err(Failure::Usage("--reason: at most 64 bytes".into()));
    }
    let mut input = [0u8; 80];
    RequestResetIn::new(mode, reason).encode(&mut input);
    let out = bus.call(IOCTL_HCABUS_REQUEST_RESET, &input, 8)?;
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
    let kind = Fault::named(fault).filter(|f| f.code().is_some());
    let (Some(kind), Some(code)) = (kind, kind.and_then(Fault::code)) else {
        let names: Vec<&str> = FaultCode::ALL.iter().map(|f| f.as_str()).collect();
        return Err(Failure::Usage(format!(
            "unknown fault {fault:?}; one of {}",
            names.join(", ")
        )));
    };
    let usage = |m: &str| Err(Failure::Usage(m.into()));
    let request = match kind.args() {
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

fn inject(bus: &mut Bus, request: &FaultRequest) -> Outcome {
    let mut input = [0u8; size_of::<InjectFaultIn>()];
    encode_inject_fault(request, &mut input);
    bus.call(IOCTL_HCABUS_INJECT_FAULT, &input, 0)?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("hcactl: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Refused(s)) => {
            eprintln!("hcactl: refused: {s}");
            ExitCode::from(1)
        }
        Err(Failure::Outcome(m)) => {
            eprintln!("hcactl: {m}");
            ExitCode::from(1)
        }
        Err(Failure::Closed) => ExitCode::SUCCESS,
    }
}
