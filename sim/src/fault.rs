//! The fault vocabulary: every fault or act a run can apply, once, with its name (in scenario
//! files, `hcactl inject` and reports), its INJECT_FAULT code when the device can be given it,
//! what it takes besides its name, and (in `SimHost::apply`, an exhaustive match) what it
//! does to the simulated device, the fabric or the bus.

pub use hcabus::fault::FaultArgs;
use hcabus::fault::{FaultCode, FaultRequest};
use hcabus::time::Duration;

/// The catastrophic-error word a `Fault::Catastrophic` writes, on every device model.
pub const CATASTROPHIC_WORD: u32 = 0x0bad_0001;

/// A fault or administrator action applied at a point in virtual time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Catastrophic,
    CommandTimeout,
    HealthStall,
    /// Firmware stops: the health counter stalls and commands time out.
    Hang,
    AdminReset,
    PlannedReset,
    FwActivate,
    SurpriseRemoval,
    /// The next `n` reset assertions fail.
    ResetFails(u32),
    DeviceReplaced,
    NeverReturns,
    AdminRestart,
    /// The client of agent `agent` (index in the host's agents) asks for a reset.
    ClientRequest {
        agent: u16,
    },
    /// A cable pulled from `port` and plugged back after `duration` (no reset).
    PortDown {
        port: u8,
        duration: Duration,
    },
    /// The remote targets refuse the next `count` logins as busy.
    TargetBusy(u32),
}

/// What a fault is, in one exhaustive table ([`Fault::what`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    /// A fault of the device or its fabric: INJECT_FAULT gives it with this code, and it is
    /// named as the code is.
    Device(FaultCode),
    /// An act of the administrator or a client, which has its own IOCTL or call: its name.
    Act(&'static str),
}

impl Fault {
    /// Every kind of fault, once, each with a representative argument: the one list the
    /// scenario parser, INJECT_FAULT's decoding and the tests draw on. A new fault is a
    /// variant, an entry here and in [`Fault::what`] (the compiler asks for that one), and an
    /// arm of the host's `apply` (likewise).
    pub const ALL: [Fault; 15] = [
        Fault::Catastrophic,
        Fault::CommandTimeout,
        Fault::HealthStall,
        Fault::Hang,
        Fault::AdminReset,
        Fault::PlannedReset,
        Fault::FwActivate,
        Fault::ResetFails(1),
        Fault::DeviceReplaced,
        Fault::NeverReturns,
        Fault::AdminRestart,
        Fault::SurpriseRemoval,
        Fault::ClientRequest { agent: 0 },
        Fault::PortDown {
            port: 1,
            duration: Duration::from_ms(1_000),
        },
        Fault::TargetBusy(1),
    ];

    /// The faults that start a reset on their own.
    pub const TRIGGERS: [Fault; 6] = [
        Fault::Catastrophic,
        Fault::Hang,
        Fault::CommandTimeout,
        Fault::AdminReset,
        Fault::PlannedReset,
        Fault::FwActivate,
    ];

    /// What the random generators draw from as "a fault at a random time": the faults of
    /// [`Fault::ALL`] that take no port or client (those are drawn with their own arguments),
    /// with `ResetFails` twice, once failing one assertion (a retry recovers) and once five
    /// (past every retry). Its order is part of what a seed means.
    pub const DRAWN: [Fault; 13] = {
        let mut out = [Fault::Catastrophic; 13];
        let (mut i, mut j) = (0, 0);
        while i < Fault::ALL.len() {
            let f = Fault::ALL[i];
            i += 1;
            if !matches!(f.args(), FaultArgs::None | FaultArgs::Count)
                || matches!(f, Fault::TargetBusy(_))
            {
                continue;
            }
            out[j] = f;
            j += 1;
            if let Fault::ResetFails(_) = f {
                out[j] = Fault::ResetFails(5);
                j += 1;
            }
        }
        assert!(j == out.len(), "DRAWN is every drawn fault");
        out
    };

    const fn what(self) -> What {
        match self {
            Fault::Catastrophic => What::Device(FaultCode::Catastrophic),
            Fault::CommandTimeout => What::Device(FaultCode::CommandTimeout),
            Fault::HealthStall => What::Device(FaultCode::HealthStall),
            Fault::Hang => What::Device(FaultCode::Hang),
            Fault::ResetFails(_) => What::Device(FaultCode::ResetFails),
            Fault::DeviceReplaced => What::Device(FaultCode::DeviceReplaced),
            Fault::NeverReturns => What::Device(FaultCode::NeverReturns),
            Fault::SurpriseRemoval => What::Device(FaultCode::SurpriseRemoval),
            Fault::PortDown { .. } => What::Device(FaultCode::PortDown),
            Fault::TargetBusy(_) => What::Device(FaultCode::TargetBusy),
            Fault::AdminReset => What::Act("admin_reset"),
            Fault::PlannedReset => What::Act("planned_reset"),
            Fault::FwActivate => What::Act("fw_activate"),
            Fault::AdminRestart => What::Act("admin_restart"),
            Fault::ClientRequest { .. } => What::Act("client_request"),
        }
    }

    /// The INJECT_FAULT code of a fault the device itself can be given (docs/ioctl.md);
    /// `None` for administrator actions, which have IOCTLs of their own.
    pub const fn code(self) -> Option<FaultCode> {
        match self.what() {
            What::Device(code) => Some(code),
            What::Act(_) => None,
        }
    }

    /// Its name in scenario files (docs/hcasim.md), in `hcactl inject` and in reports.
    pub const fn name(self) -> &'static str {
        match self.what() {
            What::Device(code) => code.as_str(),
            What::Act(name) => name,
        }
    }

    /// What it takes besides its name.
    pub const fn args(self) -> FaultArgs {
        match (self, self.what()) {
            (_, What::Device(code)) => code.args(),
            (Fault::ClientRequest { .. }, _) => FaultArgs::Client,
            (_, What::Act(_)) => FaultArgs::None,
        }
    }

    /// Whether a scenario file may name it: an administrator restart is not in the format,
    /// and a client's request is an `admin_reset` with a `client` key.
    pub const fn in_scenarios(self) -> bool {
        !matches!(self, Fault::AdminRestart | Fault::ClientRequest { .. })
    }

    /// Whether it takes a count (`reset_fails`, `target_busy`).
    pub const fn takes_count(self) -> bool {
        matches!(self.args(), FaultArgs::Count)
    }

    /// The kind called `name`, with its representative arguments.
    pub fn named(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// The fault called `name` in a scenario file, with `count` where it takes one.
    pub fn parse(name: &str, count: u32) -> Option<Fault> {
        Fault::named(name)
            .filter(|f| f.in_scenarios())
            .map(|f| f.with_count(count))
    }

    /// The same kind with `count` where it takes one.
    pub fn with_count(self, count: u32) -> Fault {
        match self {
            Fault::ResetFails(_) => Fault::ResetFails(count),
            Fault::TargetBusy(_) => Fault::TargetBusy(count),
            f => f,
        }
    }

    /// The INJECT_FAULT request this fault is (`None` for administrator actions), to be
    /// checked by the same rule as a request that came by IOCTL.
    pub fn request(self) -> Option<FaultRequest> {
        let code = self.code()?;
        Some(match self {
            Fault::PortDown { port, duration } => {
                FaultRequest::port_down(port, u32::try_from(duration.as_ms()).unwrap_or(u32::MAX))
            }
            Fault::ResetFails(n) | Fault::TargetBusy(n) => FaultRequest::new(code, n),
            _ => FaultRequest::new(code, 0),
        })
    }

    /// The fault INJECT_FAULT asks for: every code is one of [`Fault::ALL`] (a test holds
    /// that), so `None` only for a code this table has not caught up with.
    pub fn from_request(r: FaultRequest) -> Option<Fault> {
        let kind = Fault::ALL.into_iter().find(|f| f.code() == Some(r.code))?;
        Some(match kind {
            Fault::PortDown { .. } => Fault::PortDown {
                port: r.port,
                duration: Duration::from_ms(u64::from(r.duration_ms)),
            },
            f => f.with_count(r.count),
        })
    }
}
