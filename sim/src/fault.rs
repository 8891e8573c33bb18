//! The fault vocabulary: every fault or act a run can apply, once, with its name (in scenario
//! files, `hcactl inject` and reports), its INJECT_FAULT code when the device can be given it,
//! what it takes besides its name, and (in `SimHost::apply`, an exhaustive match) what it
//! does to the simulated device, the fabric or the bus.

pub use hcabus::fault::FaultArgs;
use hcabus::fault::{FaultCode, FaultRequest};
use hcabus::time::Duration;

/// The catastrophic-error word a `Fault::Catastrophic` writes, on every device model.
pub const CATASTROPHIC_WORD: u32 = 0x0bad_0001;

/// Declares the faults and acts a run can apply: each variant, a representative of it
/// where it carries data, and what it is. From the one table come [`Fault`],
/// [`Fault::ALL`] (in the table's order: the random scenarios draw from it) and `what`, from
/// which a fault's name, INJECT_FAULT code and arguments follow.
macro_rules! faults {
    (@example $variant:ident) => { Fault::$variant };
    (@example $variant:ident $example:expr) => { $example };
    // A variant of one unnamed field takes a count: that field.
    (@count $fault:expr, $variant:ident $count:ty) => {
        match $fault {
            Fault::$variant(n) => Some(n),
            _ => None,
        }
    };
    (@count $fault:expr, $variant:ident $($other:ty),*) => { None };
    (@with_count $fault:expr, $n:expr, $variant:ident $count:ty) => { Fault::$variant($n) };
    (@with_count $fault:expr, $n:expr, $variant:ident $($other:ty),*) => { $fault };
    ($(
        $(#[$m:meta])*
        $variant:ident $(( $($tuple:ty),* ))? $({ $($field:ident: $fty:ty),* })?
        $(= $example:expr)? => $what:expr
    ),+ $(,)?) => {
        /// A fault or administrator action applied at a point in virtual time.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Fault {
            $( $(#[$m])* $variant $(( $($tuple),* ))? $({ $($field: $fty),* })?, )+
        }

        impl Fault {
            const COUNT: usize = [$(stringify!($variant)),+].len();

            /// Every kind of fault, once, each with a representative argument: the one list
            /// the scenario parser, INJECT_FAULT's decoding and the tests draw on. A new
            /// fault is a line of this table and an arm of the host's `apply` and the
            /// register file's `inject` (the compiler asks for both).
            pub const ALL: [Fault; Fault::COUNT] = [$(faults!(@example $variant $($example)?)),+];

            const fn what(self) -> What {
                use What::{Act, Device};
                match self {
                    $( Fault::$variant { .. } => $what, )+
                }
            }

            /// The count it carries: the one field of a fault declared with one unnamed
            /// field (`reset_fails`, `target_busy`), `None` for every other shape.
            pub const fn count(self) -> Option<u32> {
                match self {
                    $( Fault::$variant { .. } => faults!(@count self, $variant $($($tuple),*)?), )+
                }
            }

            /// The same kind with `count` where it takes one (as [`Fault::count`] reads it).
            pub const fn with_count(self, count: u32) -> Fault {
                match self {
                    $( Fault::$variant { .. } =>
                        faults!(@with_count self, count, $variant $($($tuple),*)?), )+
                }
            }
        }
    };
}

faults! {
    Catastrophic => Device(FaultCode::Catastrophic),
    CommandTimeout => Device(FaultCode::CommandTimeout),
    HealthStall => Device(FaultCode::HealthStall),
    /// Firmware stops: the health counter stalls and commands time out.
    Hang => Device(FaultCode::Hang),
    AdminReset => Act("admin_reset"),
    PlannedReset => Act("planned_reset"),
    FwActivate => Act("fw_activate"),
    /// The next `n` reset assertions fail.
    ResetFails(u32) = Fault::ResetFails(1) => Device(FaultCode::ResetFails),
    DeviceReplaced => Device(FaultCode::DeviceReplaced),
    NeverReturns => Device(FaultCode::NeverReturns),
    AdminRestart => Act("admin_restart"),
    SurpriseRemoval => Device(FaultCode::SurpriseRemoval),
    /// The client of agent `agent` (index in the host's agents) asks for a reset.
    ClientRequest { agent: u16 } = Fault::ClientRequest { agent: 0 } => Act("client_request"),
    /// A cable pulled from `port` and plugged back after `duration` (no reset).
    PortDown { port: u8, duration: Duration } = Fault::PortDown {
        port: 1,
        duration: Duration::from_ms(1_000),
    } => Device(FaultCode::PortDown),
    /// The remote targets refuse the next `count` logins as busy.
    TargetBusy(u32) = Fault::TargetBusy(1) => Device(FaultCode::TargetBusy),
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
    pub const DRAWN: [Fault; Fault::drawn(None)] = {
        let mut out = [Fault::Catastrophic; Fault::drawn(None)];
        Fault::drawn(Some(&mut out));
        out
    };

    /// Fills `out` (when given) with the drawn faults, in order; returns how many there are.
    const fn drawn(mut out: Option<&mut [Fault]>) -> usize {
        let (mut i, mut j) = (0, 0);
        while i < Fault::ALL.len() {
            let f = Fault::ALL[i];
            i += 1;
            if !matches!(f.args(), FaultArgs::None | FaultArgs::Count)
                || matches!(f, Fault::TargetBusy(_))
            {
                continue;
            }
            let twice = matches!(f, Fault::ResetFails(_));
            if let Some(out) = &mut out {
                out[j] = f;
                if twice {
                    out[j + 1] = Fault::ResetFails(5);
                }
            }
            j += if twice { 2 } else { 1 };
        }
        j
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

    /// Whether a scenario file may name it: a client's request is an `admin_reset` with a
    /// `client` key.
    pub const fn in_scenarios(self) -> bool {
        !matches!(self, Fault::ClientRequest { .. })
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

    /// The INJECT_FAULT request this fault is (`None` for administrator actions), to be
    /// checked by the same rule as a request that came by IOCTL.
    pub fn request(self) -> Option<FaultRequest> {
        let code = self.code()?;
        Some(match self {
            Fault::PortDown { port, duration } => {
                FaultRequest::port_down(port, u32::try_from(duration.as_ms()).unwrap_or(u32::MAX))
            }
            f => FaultRequest::new(code, f.count().unwrap_or(0)),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A fault takes a count exactly when its INJECT_FAULT code's ranges give it one, and
    /// the count is its one unnamed field: set, read back and carried to the request.
    #[test]
    fn a_fault_takes_a_count_by_its_shape_and_its_code_agrees() {
        let mut counted = 0;
        for f in Fault::ALL {
            assert_eq!(f.count().is_some(), f.takes_count(), "{f:?}");
            let seven = f.with_count(7);
            if f.takes_count() {
                counted += 1;
                assert_eq!(seven.count(), Some(7), "{f:?}");
                let request = seven.request().expect("a device fault");
                assert_eq!(request.check(), Ok(()), "{f:?}");
                assert_eq!(request, FaultRequest::new(f.code().expect("a code"), 7));
            } else {
                assert_eq!(seven, f, "a fault without a count is left as it is");
            }
        }
        assert_eq!(counted, 2, "reset_fails and target_busy");
    }
}
