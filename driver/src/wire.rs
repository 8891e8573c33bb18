//! Enums whose numbers leave the process (flight-recorder records, IOCTL replies, the C ABI)
//! are declared once through [`wire_enum!`]: the number, the name and the variant sit on one
//! line, and the conversions both ways are generated from that line, so the recorder's
//! decoder, the IOCTL dispatcher and the tools can never disagree on a table.

/// A number that names no variant of a wire enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{value} is not a {enum_name}")]
pub struct UnknownValue {
    pub enum_name: &'static str,
    pub value: u32,
}

/// A value that travels in one byte of a wire structure (a record's `a`, `b` or `c`): every
/// [`wire_enum!`] type, a flag, a small number.
pub trait WireByte: Sized {
    fn to_byte(self) -> u8;
    /// `None` for a byte no value of the type encodes to.
    fn from_byte(b: u8) -> Option<Self>;
}

impl WireByte for u8 {
    fn to_byte(self) -> u8 {
        self
    }
    fn from_byte(b: u8) -> Option<Self> {
        Some(b)
    }
}

impl WireByte for bool {
    fn to_byte(self) -> u8 {
        u8::from(self)
    }
    fn from_byte(b: u8) -> Option<Self> {
        match b {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
}

/// Declares a `#[repr(u8)]` enum with its wire number and its name per variant, and
/// generates `ALL`, `COUNT`, `as_str`, `parse`, `from_u8`, `TryFrom<u32>`, [`WireByte`] and
/// `Display`.
macro_rules! wire_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $num:literal => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[repr(u8)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant = $num ),+
        }

        impl $name {
            pub const COUNT: usize = [$($text),+].len();
            /// Every variant, in declaration order.
            pub const ALL: [$name; $name::COUNT] = [$($name::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text ),+
                }
            }

            /// The variant whose name is `text`.
            pub fn parse(text: &str) -> Option<Self> {
                $name::ALL.into_iter().find(|v| v.as_str() == text)
            }

            pub const fn from_u8(v: u8) -> Option<Self> {
                match v {
                    $( $num => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl TryFrom<u32> for $name {
            type Error = $crate::wire::UnknownValue;

            fn try_from(v: u32) -> Result<Self, Self::Error> {
                u8::try_from(v)
                    .ok()
                    .and_then($name::from_u8)
                    .ok_or($crate::wire::UnknownValue {
                        enum_name: stringify!($name),
                        value: v,
                    })
            }
        }

        impl $crate::wire::WireByte for $name {
            fn to_byte(self) -> u8 {
                self as u8
            }
            fn from_byte(b: u8) -> Option<Self> {
                $name::from_u8(b)
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[cfg(test)]
mod tests {
    wire_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        enum Sample {
            One = 1 => "one",
            Three = 3 => "three",
        }
    }

    #[test]
    fn numbers_and_names_round_trip_and_strangers_are_refused() {
        for v in Sample::ALL {
            assert_eq!(Sample::try_from(v as u32), Ok(v));
            assert_eq!(Sample::parse(v.as_str()), Some(v));
        }
        assert_eq!(Sample::COUNT, 2);
        let e = Sample::try_from(2).expect_err("2 names no variant");
        assert_eq!((e.enum_name, e.value), ("Sample", 2));
        assert!(Sample::try_from(0x103).is_err(), "no truncation to u8");
        assert_eq!(Sample::parse("two"), None);
        assert_eq!(alloc::format!("{}", Sample::Three), "three");
    }
}
