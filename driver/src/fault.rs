//! The faults an administrator may ask a device to inject (a simulator takes them; real
//! hardware refuses), and the one check of their fields that INJECT_FAULT, scenario files and
//! `hcactl inject` all apply. Here, below both the IOCTL layer and the flight recorder, so
//! that the recorder can name a fault without reaching into the IOCTL ABI.

/// Declares the faults: each one's INJECT_FAULT code, its name, and the range of each field
/// it takes (a field not named is not taken: 0..=0). From the one table come [`FaultCode`]
/// and `ranges`, which both [`FaultCode::args`] and [`FaultRequest::check`] read.
macro_rules! fault_codes {
    ($( $(#[$m:meta])* $code:ident = $n:literal => $name:literal { $($field:ident: $range:expr),* } ),+ $(,)?) => {
        wire_enum! {
            /// Faults the simulator can inject.
            #[derive(Debug, Clone, Copy, PartialEq, Eq)]
            pub enum FaultCode {
                $( $(#[$m])* $code = $n => $name, )+
            }
        }

        /// The one table of what each fault takes.
        const fn ranges(code: FaultCode) -> FieldRanges {
            match code {
                $( FaultCode::$code => FieldRanges { $($field: $range,)* ..FieldRanges::NONE }, )+
            }
        }
    };
}

fault_codes! {
    Catastrophic = 1 => "catastrophic" {},
    CommandTimeout = 2 => "command_timeout" {},
    HealthStall = 3 => "health_stall" {},
    Hang = 4 => "hang" {},
    /// The next `count` reset assertions fail.
    ResetFails = 5 => "reset_fails" { count: (1, MAX_RESET_FAILS) },
    DeviceReplaced = 6 => "device_replaced" {},
    NeverReturns = 7 => "never_returns" {},
    SurpriseRemoval = 8 => "surprise_removal" {},
    /// A cable pulled from `port` for `duration_ms`, without a reset (version 4).
    PortDown = 9 => "port_down" {
        port: (1, crate::types::MAX_PORTS as u32),
        duration_ms: (1, MAX_FAULT_DURATION_MS)
    },
    /// The remote targets refuse the next `count` logins as busy.
    TargetBusy = 10 => "target_busy" { count: (1, MAX_BUSY_LOGINS) },
}

/// What a fault (or a scenario's act) takes besides its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultArgs {
    None,
    /// How many (`count` in a scenario, `--count` for hcactl).
    Count,
    /// A port and how long (`port` and `duration_ms`).
    PortAndDuration,
    /// The client that asks: only a scenario's acts take one (an `admin_reset` with a
    /// `client` key); no [`FaultCode`] does.
    Client,
}

impl FaultCode {
    /// What it takes besides its name: read from the ranges [`FaultRequest::check`] applies,
    /// so the two cannot disagree.
    pub const fn args(self) -> FaultArgs {
        match ranges(self) {
            FieldRanges {
                count: (_, 1..), ..
            } => FaultArgs::Count,
            FieldRanges { port: (_, 1..), .. } => FaultArgs::PortAndDuration,
            _ => FaultArgs::None,
        }
    }
}

/// Longest cable pull INJECT_FAULT takes: an hour.
pub const MAX_FAULT_DURATION_MS: u32 = 3_600_000;
/// Most busy logins one INJECT_FAULT asks the targets to refuse.
pub const MAX_BUSY_LOGINS: u32 = 10_000;
/// Most hardware resets one INJECT_FAULT makes fail.
pub const MAX_RESET_FAILS: u32 = 64;

/// A fault's field out of the range the fault takes it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.range())]
pub struct FaultFieldError {
    pub field: &'static str,
    pub min: u32,
    pub max: u32,
}

impl FaultFieldError {
    /// The range only: a caller names the field its own way (a scenario key, an option).
    fn range(&self) -> RangeText {
        RangeText(self.min, self.max)
    }
}

/// "must be between MIN and MAX", or "not taken by this fault" for 0..=0.
#[derive(Debug)]
struct RangeText(u32, u32);

impl core::fmt::Display for RangeText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.1 {
            0 => f.write_str("not taken by this fault"),
            max => write!(f, "must be between {} and {max}", self.0),
        }
    }
}

/// A fault as INJECT_FAULT asks for it, checked against every rule that needs no device:
/// each field the fault does not take is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRequest {
    pub code: FaultCode,
    pub count: u32,
    pub port: u8,
    pub duration_ms: u32,
}

impl FaultRequest {
    /// A fault that takes no argument, or `ResetFails` / `TargetBusy` with its count.
    pub const fn new(code: FaultCode, count: u32) -> Self {
        FaultRequest {
            code,
            count,
            port: 0,
            duration_ms: 0,
        }
    }

    /// A cable pulled from `port` for `duration_ms`.
    pub const fn port_down(port: u8, duration_ms: u32) -> Self {
        FaultRequest {
            code: FaultCode::PortDown,
            count: 0,
            port,
            duration_ms,
        }
    }

    /// Whether every field is one the fault takes, within its range. The device checks
    /// what only it knows (whether it has the port).
    pub fn is_valid(&self) -> bool {
        self.check().is_ok()
    }

    /// The first field out of the range the fault takes it in (0..=0: not taken). The one
    /// rule for INJECT_FAULT and for scenario files, so both refuse alike.
    pub fn check(&self) -> Result<(), FaultFieldError> {
        let FieldRanges {
            count,
            port,
            duration_ms: duration,
        } = ranges(self.code);
        for (field, value, (min, max)) in [
            ("count", self.count, count),
            ("port", u32::from(self.port), port),
            ("duration_ms", self.duration_ms, duration),
        ] {
            if !(min..=max).contains(&value) {
                return Err(FaultFieldError { field, min, max });
            }
        }
        Ok(())
    }
}

/// The range each field of a fault takes, inclusive; (0, 0) where the fault takes none.
#[derive(Debug, Clone, Copy)]
struct FieldRanges {
    count: (u32, u32),
    port: (u32, u32),
    duration_ms: (u32, u32),
}

impl FieldRanges {
    /// A fault that takes no field.
    const NONE: FieldRanges = FieldRanges {
        count: (0, 0),
        port: (0, 0),
        duration_ms: (0, 0),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_fault_takes_is_what_its_check_accepts() {
        for code in FaultCode::ALL {
            let args = code.args();
            let expected = match code {
                FaultCode::ResetFails | FaultCode::TargetBusy => FaultArgs::Count,
                FaultCode::PortDown => FaultArgs::PortAndDuration,
                _ => FaultArgs::None,
            };
            assert_eq!(args, expected, "{code}");
            // The request built the way its arguments say passes the check; one with a
            // field the fault does not take is refused, naming that field.
            let good = match args {
                FaultArgs::Count => FaultRequest::new(code, 1),
                FaultArgs::PortAndDuration => FaultRequest::port_down(1, 1),
                FaultArgs::None | FaultArgs::Client => FaultRequest::new(code, 0),
            };
            assert_eq!(good.check(), Ok(()), "{code}");
            if args != FaultArgs::Count {
                let e = FaultRequest::new(code, 1)
                    .check()
                    .expect_err("count not taken");
                assert_eq!((e.field, e.min, e.max), ("count", 0, 0), "{code}");
            }
        }
    }
}
