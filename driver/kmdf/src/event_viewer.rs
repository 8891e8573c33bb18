//! What Event Viewer shows for an entry the driver writes with IoWriteErrorLogEntry: the
//! message of the entry's `ErrorCode` in the driver's message table (messages.mc, compiled by
//! mc.exe into the image's resources), its `%1` the device's name as the I/O manager gives it
//! and `%2`, `%3`, ... the packet's insertion strings. A code with no message is Event
//! Viewer's "The description for Event ID ... cannot be found"; a placeholder with no string
//! is shown as written. Both are refused here, so a test of the layer (and the KMDF model's,
//! on the image) fails where an administrator would read nonsense.
//!
//! Only for tests: the driver image has none of it.

use std::collections::BTreeMap;
use std::fmt;

/// mc.exe runs with `-c` (build.rs): every id carries the customer bit, as the driver's
/// `EventLogEntry::message_id` values do.
pub const CUSTOMER_BIT: u32 = 1 << 29;

/// One message of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub symbol: String,
    /// Its English text, lines joined by "\n", the closing "." line left out.
    pub text: String,
}

/// A message file that mc.exe would refuse, or that this reader does not follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "messages.mc line {}: {}", self.line, self.what)
    }
}

impl core::error::Error for ParseError {}

/// Why an entry would not show as its message says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// No message has the entry's code: "The description for Event ID ... cannot be found".
    NoSuchMessage { code: u32 },
    /// The text names `%n` and the entry has no such string.
    MissingString { code: u32, n: usize },
    /// The entry carries string `%n` and the text never shows it.
    UnusedString { code: u32, n: usize },
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::NoSuchMessage { code } => write!(
                f,
                "the description for Event ID {} (code {code:#010x}) cannot be found",
                code & 0xFFFF
            ),
            RenderError::MissingString { code, n } => {
                write!(
                    f,
                    "message {code:#010x} shows %{n}, which the entry does not carry"
                )
            }
            RenderError::UnusedString { code, n } => {
                write!(
                    f,
                    "message {code:#010x} never shows the entry's string %{n}"
                )
            }
        }
    }
}

impl core::error::Error for RenderError {}

/// The messages of a message file by their 32-bit id.
#[derive(Debug, Clone, Default)]
pub struct MessageTable {
    messages: BTreeMap<u32, Message>,
}

/// How a message gives its id: mc.exe's `MessageId=N`, `MessageId=+N` (after the previous
/// message of the same facility) or `MessageId=` (the next after it).
#[derive(Clone, Copy)]
enum IdGiven {
    Absolute(u32),
    After(u32),
}

/// The message being read: its header keys so far.
struct Pending {
    id: IdGiven,
    symbol: String,
}

/// What carries from one message to the next: mc.exe keeps the last Severity and Facility
/// given (Success and Application at first) and counts ids per facility.
struct Carried {
    severity: u32,
    facility: u32,
    last_id: BTreeMap<u32, u32>,
}

impl MessageTable {
    /// Reads a message text file as mc.exe does (`customer`: run with `-c`).
    pub fn parse(mc: &str, customer: bool) -> Result<Self, ParseError> {
        // mc.exe's own names, which a file's lists replace.
        let mut severities: BTreeMap<String, u32> = [
            ("Success", 0),
            ("Informational", 1),
            ("Warning", 2),
            ("Error", 3),
        ]
        .map(|(n, v)| (n.to_string(), v))
        .into();
        let mut facilities: BTreeMap<String, u32> = [("System", 0x0FF), ("Application", 0xFFF)]
            .map(|(n, v)| (n.to_string(), v))
            .into();
        let mut table = MessageTable::default();
        let mut pending: Option<Pending> = None;
        let mut carried = Carried {
            severity: 0,
            facility: 0xFFF,
            last_id: BTreeMap::new(),
        };
        let mut lines = mc.lines().enumerate().map(|(n, l)| (n + 1, l));
        while let Some((line, raw)) = lines.next() {
            let err = |what: String| ParseError { line, what };
            let l = raw.trim();
            if l.is_empty() || l.starts_with(';') {
                continue;
            }
            let Some((key, value)) = l.split_once('=') else {
                return Err(err(format!("{l:?} is no key=value")));
            };
            let (key, value) = (key.trim(), value.trim());
            match key {
                "MessageIdTypedef" | "OutputBase" | "LanguageNames" => {}
                "SeverityNames" | "FacilityNames" => {
                    let mut list = value.to_string();
                    while !list.contains(')') {
                        let Some((_, more)) = lines.next() else {
                            return Err(err(format!("{key} has no closing ')'")));
                        };
                        list.push(' ');
                        list.push_str(more.trim());
                    }
                    let names = names(&list).map_err(err)?;
                    if key == "SeverityNames" {
                        severities = names;
                    } else {
                        facilities = names;
                    }
                }
                "MessageId" => {
                    let bad = || err(format!("MessageId {value:?}"));
                    let id = match value.strip_prefix('+') {
                        _ if value.is_empty() => IdGiven::After(1),
                        Some(n) => IdGiven::After(number(n).ok_or_else(bad)?),
                        None => IdGiven::Absolute(number(value).ok_or_else(bad)?),
                    };
                    pending = Some(Pending {
                        id,
                        symbol: String::new(),
                    });
                }
                "Severity" | "Facility" | "SymbolicName" => {
                    let p = pending
                        .as_mut()
                        .ok_or_else(|| err(format!("{key} before a MessageId")))?;
                    let of = |names: &BTreeMap<String, u32>| {
                        names
                            .get(value)
                            .copied()
                            .ok_or_else(|| err(format!("{key} {value:?} is not declared")))
                    };
                    match key {
                        "Severity" => carried.severity = of(&severities)?,
                        "Facility" => carried.facility = of(&facilities)?,
                        _ => p.symbol = value.to_string(),
                    }
                }
                "Language" => {
                    let p = pending
                        .take()
                        .ok_or_else(|| err("Language before a MessageId".to_string()))?;
                    let (severity, facility) = (carried.severity, carried.facility);
                    if severity > 3 || facility > 0xFFF {
                        return Err(err(format!(
                            "severity {severity:#x} or facility {facility:#x} out of its bits"
                        )));
                    }
                    let id = match p.id {
                        IdGiven::Absolute(id) => id,
                        IdGiven::After(n) => match carried.last_id.get(&facility) {
                            Some(last) => last.saturating_add(n),
                            // Where mc.exe starts counting is not modelled: refused.
                            None => {
                                return Err(err(format!(
                                    "MessageId counts from no earlier message of facility {facility:#x}"
                                )))
                            }
                        },
                    };
                    if id > 0xFFFF {
                        return Err(err(format!("MessageId {id:#x} past 16 bits")));
                    }
                    let mut text = Vec::new();
                    loop {
                        let Some((_, t)) = lines.next() else {
                            return Err(err(format!("message {id:#x} has no closing '.'")));
                        };
                        if t.trim_end() == "." {
                            break;
                        }
                        text.push(t.trim_end());
                    }
                    let full = (severity << 30)
                        | if customer { CUSTOMER_BIT } else { 0 }
                        | (facility << 16)
                        | id;
                    let message = Message {
                        symbol: p.symbol,
                        text: text.join("\n"),
                    };
                    if table.messages.insert(full, message).is_some() {
                        return Err(err(format!("message {full:#010x} twice")));
                    }
                    carried.last_id.insert(facility, id);
                }
                _ => return Err(err(format!("unknown key {key:?}"))),
            }
        }
        Ok(table)
    }

    /// The message with this id.
    pub fn get(&self, code: u32) -> Option<&Message> {
        self.messages.get(&code)
    }

    /// How many messages the table holds.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the table holds none.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The text Event Viewer shows for an entry of `code` from `device` carrying `strings`
    /// (the packet's, `%2` on).
    pub fn render(
        &self,
        code: u32,
        device: &str,
        strings: &[String],
    ) -> Result<String, RenderError> {
        let message = self.get(code).ok_or(RenderError::NoSuchMessage { code })?;
        let mut shown = std::vec![false; strings.len()];
        let mut out = String::new();
        let mut chars = message.text.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                out.push(c);
                continue;
            }
            // FormatMessage's insertions: one or two digits, then an optional !printf!.
            let mut digits = String::new();
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                if digits.len() == 2 {
                    break;
                }
                digits.push(d);
                chars.next();
            }
            let Ok(n) = digits.parse::<usize>() else {
                // Its escapes: %n a line break, %r, %t, %b, and %%, %. and the like.
                match chars.next() {
                    Some('n') => out.push_str("\r\n"),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    Some('b') => out.push(' '),
                    Some(other) => out.push(other),
                    None => {}
                }
                continue;
            };
            if n > 0 && chars.peek() == Some(&'!') {
                chars.next();
                for f in chars.by_ref() {
                    if f == '!' {
                        break;
                    }
                }
            }
            match n {
                // The message ends here, with no line break after it.
                0 => break,
                1 => out.push_str(device),
                _ => {
                    let s = strings
                        .get(n - 2)
                        .ok_or(RenderError::MissingString { code, n })?;
                    shown[n - 2] = true;
                    out.push_str(s);
                }
            }
        }
        if let Some(unused) = shown.iter().position(|s| !s) {
            return Err(RenderError::UnusedString {
                code,
                n: unused + 2,
            });
        }
        Ok(out)
    }
}

/// `(Name=0x1:SYMBOL Other=0x2:SYMBOL)`.
fn names(list: &str) -> Result<BTreeMap<String, u32>, String> {
    let inner = list
        .trim()
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| format!("{list:?} is no (name=value ...) list"))?;
    inner
        .split_whitespace()
        .map(|item| {
            let (name, rest) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?} is no name=value"))?;
            let value = rest.split(':').next().unwrap_or(rest);
            let value = number(value).ok_or_else(|| format!("{item:?}: value {value:?}"))?;
            Ok((name.to_string(), value))
        })
        .collect()
}

fn number(text: &str) -> Option<u32> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// The driver's own message table (driver/kmdf/messages.mc), as build.rs compiles it.
pub fn driver_messages() -> MessageTable {
    MessageTable::parse(include_str!("../messages.mc"), true)
        .unwrap_or_else(|e| panic!("messages.mc: {e}"))
}

#[cfg(test)]
mod tests;
