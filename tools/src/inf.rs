//! An INF parser: sections, entries, comments, quoting, line continuation and `%string%`
//! substitution, as Windows' SetupAPI reads them (Microsoft's "General Syntax Rules for INF
//! Files"), keeping the line of everything for the checker's findings.

pub mod rules;

use std::collections::BTreeMap;

/// One `key = value, value` line (or a line of bare values), continuations joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Line the entry starts on (1-based).
    pub line: usize,
    pub key: Option<String>,
    /// Values with quotes removed and `%string%` tokens substituted; DIRID tokens (`%13%`)
    /// are kept as written.
    pub values: Vec<String>,
}

impl Entry {
    pub fn value(&self, i: usize) -> &str {
        self.values.get(i).map_or("", String::as_str)
    }

    /// Whether the key is `name`, ignoring case as SetupAPI does.
    pub fn is(&self, name: &str) -> bool {
        self.key
            .as_deref()
            .is_some_and(|k| k.eq_ignore_ascii_case(name))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub name: String,
    pub line: usize,
    pub entries: Vec<Entry>,
}

impl Section {
    /// Every entry with this key.
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| e.is(key))
    }

    pub fn get(&self, key: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.is(key))
    }
}

/// A parsed INF.
#[derive(Debug, Clone, Default)]
pub struct Inf {
    pub sections: Vec<Section>,
    /// `%name%` tokens that name no string, with their line.
    pub undefined_strings: Vec<(usize, String)>,
}

impl Inf {
    /// The section of this name, ignoring case; sections of one name are merged by SetupAPI,
    /// so the first one found is where a finding points.
    pub fn section(&self, name: &str) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name))
    }

    /// Every entry of every section of this name.
    pub fn entries<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Entry> + 'a {
        self.sections
            .iter()
            .filter(move |s| s.name.eq_ignore_ascii_case(name))
            .flat_map(|s| s.entries.iter())
    }
}

/// Why a file is not an INF at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {problem}")]
pub struct ParseError {
    pub line: usize,
    pub problem: &'static str,
}

/// A logical line: its first physical line and its text, comments removed, continuations
/// joined.
fn logical_lines(text: &str) -> Result<Vec<(usize, String)>, ParseError> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let code = strip_comment(raw, line)?;
        let trimmed = code.trim_end();
        let (body, continues) = match trimmed.strip_suffix('\\') {
            Some(b) => (b, true),
            None => (trimmed, false),
        };
        let (start, mut joined) = pending.take().unwrap_or((line, String::new()));
        joined.push_str(body);
        if continues {
            pending = Some((start, joined));
        } else {
            out.push((start, joined));
        }
    }
    if let Some((start, joined)) = pending {
        out.push((start, joined));
    }
    Ok(out)
}

/// The line without its `;` comment (a `;` inside quotes is text).
fn strip_comment(raw: &str, line: usize) -> Result<&str, ParseError> {
    let mut quoted = false;
    for (i, ch) in raw.char_indices() {
        match ch {
            '"' => quoted = !quoted,
            ';' if !quoted => return Ok(&raw[..i]),
            _ => {}
        }
    }
    if quoted {
        return Err(ParseError {
            line,
            problem: "a quote is not closed",
        });
    }
    Ok(raw)
}

/// Splits at `sep` outside quotes.
fn split_outside_quotes(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut quoted = false;
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        if ch == '"' {
            quoted = !quoted;
        } else if ch == sep && !quoted {
            parts.push(&s[start..i]);
            start = i + ch.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

/// A value as written, trimmed, with its quotes removed (`""` inside quotes is one quote).
fn unquote(v: &str) -> String {
    let v = v.trim();
    let mut out = String::new();
    let mut chars = v.chars().peekable();
    let mut quoted = false;
    while let Some(ch) = chars.next() {
        if ch == '"' {
            if quoted && chars.peek() == Some(&'"') {
                out.push('"');
                chars.next();
            } else {
                quoted = !quoted;
            }
        } else {
            out.push(ch);
        }
    }
    out
}

/// Substitutes `%name%` from `strings`; `%%` is a percent sign; a numeric token is a DIRID
/// and stays. Unknown names stay too, and are reported.
fn substitute(v: &str, strings: &BTreeMap<String, String>, undefined: &mut Vec<String>) -> String {
    let mut out = String::new();
    let mut rest = v;
    while let Some(start) = rest.find('%') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let Some(end) = after.find('%') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let token = &after[..end];
        if token.is_empty() {
            out.push('%');
        } else if token.chars().all(|c| c.is_ascii_digit()) {
            out.push('%');
            out.push_str(token);
            out.push('%');
        } else if let Some(s) = strings.get(&token.to_ascii_lowercase()) {
            out.push_str(s);
        } else {
            undefined.push(token.to_string());
            out.push('%');
            out.push_str(token);
            out.push('%');
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A section's name, header line and logical lines, before values are split.
type RawSection = (String, usize, Vec<(usize, String)>);

/// Parses an INF; a file that is not one (an entry outside any section, a section header
/// without its `]`, an unclosed quote) is an error.
pub fn parse(text: &str) -> Result<Inf, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut raw_sections: Vec<RawSection> = Vec::new();
    for (line, l) in logical_lines(text)? {
        let t = l.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(header) = t.strip_prefix('[') {
            let name = header.strip_suffix(']').ok_or(ParseError {
                line,
                problem: "a section header without its closing ]",
            })?;
            raw_sections.push((name.trim().to_string(), line, Vec::new()));
            continue;
        }
        let Some(section) = raw_sections.last_mut() else {
            return Err(ParseError {
                line,
                problem: "an entry before any [section]",
            });
        };
        section.2.push((line, l));
    }
    // [Strings] first: every other value may use them.
    let mut strings = BTreeMap::new();
    for (name, _, lines) in &raw_sections {
        if name.eq_ignore_ascii_case("Strings") {
            for (_, l) in lines {
                if let Some((k, v)) = l.split_once('=') {
                    strings.insert(k.trim().to_ascii_lowercase(), unquote(v));
                }
            }
        }
    }
    let mut inf = Inf::default();
    for (name, line, lines) in raw_sections {
        let mut entries = Vec::new();
        for (at, l) in lines {
            let mut undefined = Vec::new();
            let eq = split_outside_quotes(&l, '=');
            let (key, rhs) = if eq.len() > 1 {
                let key = substitute(&unquote(eq[0]), &strings, &mut undefined);
                (Some(key), l[eq[0].len() + 1..].to_string())
            } else {
                (None, l.clone())
            };
            let values = split_outside_quotes(&rhs, ',')
                .into_iter()
                .map(|v| substitute(&unquote(v), &strings, &mut undefined))
                .collect();
            inf.undefined_strings
                .extend(undefined.into_iter().map(|u| (at, u)));
            entries.push(Entry {
                line: at,
                key,
                values,
            });
        }
        inf.sections.push(Section {
            name,
            line,
            entries,
        });
    }
    Ok(inf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_quotes_continuations_and_strings() {
        let inf = parse(
            "; a comment\n[Version]\nSignature = \"$WINDOWS NT$\" ; trailing\n\
             [A]\nKey = \"semi;colon\", %Name%, \"say \"\"hi\"\"\"\n\
             Long = one, \\\n  two\nbare.sys\nDir = %13%\\x.sys, 100%%\n\
             [Strings]\nName = \"The Name\"\n",
        )
        .expect("parses");
        let a = inf.section("a").expect("case-insensitive");
        let key = a.get("key").expect("key");
        assert_eq!(key.values, ["semi;colon", "The Name", "say \"hi\""]);
        let long = a.get("Long").expect("long");
        assert_eq!(long.values, ["one", "two"]);
        assert_eq!(long.line, 6, "a continued entry keeps its first line");
        let bare = &a.entries[2];
        assert_eq!((bare.key.as_deref(), bare.value(0)), (None, "bare.sys"));
        assert_eq!(bare.line, 8);
        assert_eq!(a.get("Dir").expect("dir").values, ["%13%\\x.sys", "100%"]);
        assert!(inf.undefined_strings.is_empty());
        assert_eq!(
            inf.section("Version")
                .and_then(|s| s.get("Signature"))
                .map(|e| e.value(0)),
            Some("$WINDOWS NT$")
        );
    }

    #[test]
    fn an_undefined_string_is_kept_and_reported() {
        let inf = parse("[A]\nX = %Missing%\n").expect("parses");
        assert_eq!(inf.undefined_strings, [(2, "Missing".to_string())]);
    }

    #[test]
    fn what_is_not_an_inf_is_refused_with_its_line() {
        assert_eq!(parse("X = 1\n").err().map(|e| e.line), Some(1));
        assert_eq!(parse("[A]\n[B\n").err().map(|e| e.line), Some(2));
        assert_eq!(parse("[A]\nX = \"open\n").err().map(|e| e.line), Some(2));
    }
}
