//! A TraceLogging event read back as a trace decoder reads it (TDH, WPA, `tracerpt`): the
//! provider's name from its metadata block, the event's name and each field's name and type
//! from the event's, the values from the data, in the order the metadata gives. Written
//! apart from the encoder (src/etw.rs): it walks the bytes as the format says, and refuses
//! what it cannot read. For the layer's tests and the KMDF model's: not in the image.
//!
//! [`expected`] says what the event of a record must carry, from the record itself: what
//! the tests compare a decoded event with.

use std::string::{String, ToString};
use std::vec::Vec;

use core::fmt;

use hcabus::host::ResetSpan;
use hcabus::recorder::{Describe, Record};
use hcabus::types::{Actor, ClientId};

/// TraceLogging's in-types this reader knows (TlgIn_t), its flags and out-types.
pub const IN_CSTR8: u8 = 2;
pub const IN_U8: u8 = 4;
pub const IN_U32: u8 = 8;
pub const IN_U64: u8 = 10;
pub const IN_HEX32: u8 = 20;
pub const IN_TYPE_MASK: u8 = 0x1F;
pub const IN_FLAG_MASK: u8 = 0x60;
pub const CHAIN_FLAG: u8 = 0x80;
pub const OUT_BOOLEAN: u8 = 3;
pub const OUT_UTF8: u8 = 35;

/// A field's value as a decoder shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    U64(u64),
    U32(u32),
    Bool(bool),
    Hex32(u32),
    Str(String),
}

/// An event read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub provider: String,
    pub name: String,
    pub fields: Vec<(String, Value)>,
}

impl Decoded {
    /// The value of the field `name`, if the event has it.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// Why an event could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("the {block} block's size field says {said}, the block has {has} bytes")]
    Size {
        block: &'static str,
        said: usize,
        has: usize,
    },
    #[error("the {0} block ends inside a name")]
    Unterminated(&'static str),
    #[error("a name in the {0} block is not UTF-8")]
    NotUtf8(&'static str),
    #[error("field {field:?}: in-type {in_type:#04x} (out-type {out_type:?}) is not one this reader knows")]
    Type {
        field: String,
        in_type: u8,
        out_type: Option<u8>,
    },
    #[error("field {0:?}: the data ends inside its value")]
    Short(String),
    #[error("{0} bytes of data follow the last field")]
    Trailing(usize),
}

/// Reads one event from its three blocks.
pub fn decode(provider: &[u8], event: &[u8], data: &[u8]) -> Result<Decoded, DecodeError> {
    let provider_name = {
        let body = sized("provider metadata", provider)?;
        let (name, _traits) = cstr("provider metadata", body)?;
        name
    };
    let mut meta = sized("event metadata", event)?;
    // Event tags: bytes while the high bit is set, then one more.
    while let [tag, rest @ ..] = meta {
        meta = rest;
        if tag & CHAIN_FLAG == 0 {
            break;
        }
    }
    let (name, mut meta) = cstr("event metadata", meta)?;
    let mut data = data;
    let mut fields = Vec::new();
    while !meta.is_empty() {
        let (field, rest) = cstr("event metadata", meta)?;
        let (in_type, out_type, rest) = types(rest, &field)?;
        meta = rest;
        let (value, rest) = value(&field, in_type, out_type, data)?;
        data = rest;
        fields.push((field, value));
    }
    if !data.is_empty() {
        return Err(DecodeError::Trailing(data.len()));
    }
    Ok(Decoded {
        provider: provider_name,
        name,
        fields,
    })
}

/// A block whose first two bytes are its size, itself included: the rest of it.
fn sized<'a>(block: &'static str, bytes: &'a [u8]) -> Result<&'a [u8], DecodeError> {
    let said = match bytes {
        [lo, hi, ..] => usize::from(u16::from_le_bytes([*lo, *hi])),
        _ => 0,
    };
    if said != bytes.len() || said < 2 {
        return Err(DecodeError::Size {
            block,
            said,
            has: bytes.len(),
        });
    }
    Ok(&bytes[2..])
}

/// A NUL-terminated UTF-8 name, and what follows it.
fn cstr<'a>(block: &'static str, bytes: &'a [u8]) -> Result<(String, &'a [u8]), DecodeError> {
    let end = bytes
        .iter()
        .position(|&b| b == 0)
        .ok_or(DecodeError::Unterminated(block))?;
    let text = core::str::from_utf8(&bytes[..end]).map_err(|_| DecodeError::NotUtf8(block))?;
    Ok((text.to_string(), &bytes[end + 1..]))
}

/// A field's in-type, its out-type if chained, and what follows (field tags skipped).
fn types<'a>(bytes: &'a [u8], field: &str) -> Result<(u8, Option<u8>, &'a [u8]), DecodeError> {
    let short = || DecodeError::Unterminated("event metadata");
    let (&in_byte, mut rest) = bytes.split_first().ok_or_else(short)?;
    let mut out_type = None;
    if in_byte & CHAIN_FLAG != 0 {
        let (&out_byte, after) = rest.split_first().ok_or_else(short)?;
        rest = after;
        out_type = Some(out_byte & !CHAIN_FLAG);
        if out_byte & CHAIN_FLAG != 0 {
            // Field tags: up to four bytes, each but the last with its high bit set.
            loop {
                let (&tag, after) = rest.split_first().ok_or_else(short)?;
                rest = after;
                if tag & CHAIN_FLAG == 0 {
                    break;
                }
            }
        }
    }
    if in_byte & IN_FLAG_MASK != 0 {
        // Arrays (a constant or a variable count): none of the driver's fields is one.
        return Err(DecodeError::Type {
            field: field.to_string(),
            in_type: in_byte,
            out_type,
        });
    }
    Ok((in_byte & IN_TYPE_MASK, out_type, rest))
}

/// A field's value of its types, and the data after it.
fn value<'a>(
    field: &str,
    in_type: u8,
    out_type: Option<u8>,
    data: &'a [u8],
) -> Result<(Value, &'a [u8]), DecodeError> {
    let short = || DecodeError::Short(field.to_string());
    let take = |n: usize| data.get(..n).map(|v| (v, &data[n..])).ok_or_else(short);
    Ok(match (in_type, out_type) {
        (IN_U64, None) => {
            let (v, rest) = take(8)?;
            (
                Value::U64(u64::from_le_bytes(v.try_into().map_err(|_| short())?)),
                rest,
            )
        }
        (IN_U32, None) => {
            let (v, rest) = take(4)?;
            (
                Value::U32(u32::from_le_bytes(v.try_into().map_err(|_| short())?)),
                rest,
            )
        }
        (IN_HEX32, None) => {
            let (v, rest) = take(4)?;
            (
                Value::Hex32(u32::from_le_bytes(v.try_into().map_err(|_| short())?)),
                rest,
            )
        }
        (IN_U8, Some(OUT_BOOLEAN)) => {
            let (v, rest) = take(1)?;
            (Value::Bool(v[0] != 0), rest)
        }
        (IN_CSTR8, None | Some(OUT_UTF8)) => {
            let end = data.iter().position(|&b| b == 0).ok_or_else(short)?;
            let text = String::from_utf8_lossy(&data[..end]).into_owned();
            (Value::Str(text), &data[end + 1..])
        }
        _ => {
            return Err(DecodeError::Type {
                field: field.to_string(),
                in_type,
                out_type,
            })
        }
    })
}

/// What the event of `record`, which falls in `reset`, must say: its name is the record's
/// kind; its fields the record's number, time and count, the reset it falls in, who asked,
/// and the fields the record describes, as JSON names them (a client as its id and name),
/// those it has not this time left out.
pub fn expected(record: &Record, reset: Option<ResetSpan>) -> (String, Vec<(String, Value)>) {
    let mut fields = vec![
        ("seq".to_string(), Value::U64(record.seq)),
        ("at_us".to_string(), Value::U64(record.at.as_us())),
        ("count".to_string(), Value::U32(record.count)),
    ];
    if let Some(span) = reset {
        fields.push(("reset_epoch".into(), Value::U64(span.epoch.0)));
        fields.push((
            "reset_reason".into(),
            Value::Str(span.reason.as_str().into()),
        ));
        let elapsed = record.at.as_us().saturating_sub(span.started.as_us());
        fields.push(("reset_elapsed_us".into(), Value::U64(elapsed)));
    }
    if record.by != Actor::Nobody {
        fields.push(("by".into(), Value::Str(record.by.to_string())));
    }
    let mut own = Fields {
        record,
        out: &mut fields,
    };
    let _ = record.describe(&mut own);
    (record.kind.tag().as_str().to_string(), fields)
}

struct Fields<'a> {
    record: &'a Record,
    out: &'a mut Vec<(String, Value)>,
}

impl Describe for Fields<'_> {
    fn phrase(&mut self, _: fmt::Arguments<'_>) -> fmt::Result {
        Ok(())
    }
    fn word(&mut self, name: &'static str, value: &'static str) {
        self.out.push((name.into(), Value::Str(value.into())));
    }
    fn state(&mut self, name: &'static str, value: &'static str) {
        self.word(name, value);
    }
    fn number(&mut self, name: &'static str, value: Option<u64>) {
        if let Some(v) = value {
            self.out.push((name.into(), Value::U64(v)));
        }
    }
    fn flag(&mut self, name: &'static str, value: bool) {
        self.out.push((name.into(), Value::Bool(value)));
    }
    fn client(&mut self, name: &'static str, value: Option<ClientId>) {
        if let Some(id) = value {
            self.out.push((name.into(), Value::Str(id.to_string())));
            if !self.record.name.as_str().is_empty() {
                let own = self.record.name.as_str().to_string();
                self.out.push(("client_name".into(), Value::Str(own)));
            }
        }
    }
    fn text(&mut self, name: &'static str, value: Option<&str>) {
        if let Some(v) = value {
            self.out.push((name.into(), Value::Str(v.into())));
        }
    }
    fn hex(&mut self, name: &'static str, value: u32) {
        self.out.push((name.into(), Value::Hex32(value)));
    }
}
