//! Every entry the driver logs, read as Event Viewer reads it.

use hcabus::host::EventLogEntry;
use hcabus::types::{FailReason, ResetReason};

use super::*;

const DEVICE: &str = "\\Device\\hcabus0";

/// The entry's strings as the packet carries them (NUL-separated UTF-16).
fn strings_of(e: EventLogEntry) -> Vec<String> {
    let mut out = [0u16; 96];
    let (count, used) = e.insertion_strings(&mut out);
    let strings: Vec<String> = out[..used]
        .split(|&c| c == 0)
        .take(usize::from(count))
        .map(String::from_utf16_lossy)
        .collect();
    assert_eq!(strings.len(), usize::from(count), "{e:?}");
    strings
}

/// Every entry the driver can write, each reason and failure with its own name.
fn every_entry() -> Vec<EventLogEntry> {
    let mut all = std::vec![
        EventLogEntry::ResetRestored { epoch: 7 },
        EventLogEntry::DeviceReplaced { epoch: u64::MAX },
    ];
    for v in 0..=u8::MAX {
        if ResetReason::from_u8(v).is_some() {
            all.push(EventLogEntry::ResetStarted {
                epoch: 7,
                reason: v,
            });
        }
        if FailReason::from_u8(v).is_some() {
            all.push(EventLogEntry::ResetFailed { epoch: 7, error: v });
        }
    }
    all
}

#[test]
fn every_entry_the_driver_logs_reads_as_its_message_with_each_string_in_place() {
    let table = driver_messages();
    assert_eq!(table.len(), 4, "{table:?}");
    let entries = every_entry();
    assert!(entries.len() > 6, "{entries:?}");
    for e in entries {
        let strings = strings_of(e);
        let shown = table
            .render(e.message_id(), DEVICE, &strings)
            .unwrap_or_else(|err| panic!("{e:?}: {err}"));
        assert!(shown.starts_with(DEVICE), "{e:?}: {shown}");
        for s in &strings {
            assert!(
                !s.is_empty() && shown.contains(s.as_str()),
                "{e:?}: {s:?} in {shown}"
            );
        }
        assert!(!shown.contains('%'), "{e:?}: {shown}");
    }
    let failed = table
        .render(
            EventLogEntry::ResetFailed { epoch: 4, error: 0 }.message_id(),
            DEVICE,
            &strings_of(EventLogEntry::ResetFailed { epoch: 4, error: 0 }),
        )
        .expect("renders");
    assert!(failed.contains("(epoch e4, error "), "{failed}");
}

#[test]
fn a_code_without_a_message_or_a_string_short_or_left_over_is_refused() {
    let table = driver_messages();
    let started = EventLogEntry::ResetStarted {
        epoch: 2,
        reason: 0,
    }
    .message_id();
    assert_eq!(
        table.render(started | 0xFFF, DEVICE, &[]),
        Err(RenderError::NoSuchMessage {
            code: started | 0xFFF
        })
    );
    // Compiled without the customer bit (mc.exe without -c), no entry would find its text.
    let plain = MessageTable::parse(include_str!("../../messages.mc"), false).expect("parses");
    assert_eq!(
        plain.render(started, DEVICE, &["e2".into(), "admin".into()]),
        Err(RenderError::NoSuchMessage { code: started })
    );
    assert_eq!(
        table.render(started, DEVICE, &["e2".into()]),
        Err(RenderError::MissingString {
            code: started,
            n: 3
        })
    );
    let restored = EventLogEntry::ResetRestored { epoch: 2 }.message_id();
    assert_eq!(
        table.render(restored, DEVICE, &["e2".into(), "stray".into()]),
        Err(RenderError::UnusedString {
            code: restored,
            n: 3
        })
    );
}

#[test]
fn build_rs_compiles_the_table_with_the_customer_bit_the_ids_carry() {
    let build = include_str!("../../build.rs");
    let mc = build
        .find("Command::new(\"mc.exe\")")
        .expect("build.rs runs mc.exe");
    let rc = build[mc..].find("rc.exe").expect("then rc.exe") + mc;
    assert!(build[mc..rc].contains(".arg(\"-c\")"), "mc.exe without -c");
    for e in every_entry() {
        assert_ne!(e.message_id() & CUSTOMER_BIT, 0, "{e:?}");
    }
}

#[test]
fn a_message_file_mc_exe_would_refuse_is_refused_with_its_line() {
    for (text, line) in [
        ("MessageId=0x1\nSeverity=Nope\n", 2),
        ("Language=English\n", 1),
        ("SeverityNames=(A=0x1:X\n", 1),
        ("MessageId=0x1\nLanguage=English\nno end\n", 2),
        ("MessageId=0x10000\nLanguage=English\nx\n.\n", 2),
        ("MessageId=+1\nLanguage=English\nx\n.\n", 2),
        (
            "FacilityNames=(Big=0x1000:X)\nMessageId=1\nFacility=Big\nLanguage=English\nx\n.\n",
            4,
        ),
        ("Bogus=1\n", 1),
    ] {
        let err = MessageTable::parse(text, true).expect_err(text);
        assert_eq!(err.line, line, "{text:?}: {err}");
    }
}

/// docs/operations.md quotes, in its `text` blocks, what Event Viewer shows for each entry the
/// driver can write (`%1` as `hcabus`, epoch 4): every line there is one of them, and every
/// one of them is there.
#[test]
fn the_operators_page_quotes_every_entry_as_event_viewer_shows_it() {
    let table = driver_messages();
    let mut shown: Vec<String> = every_entry()
        .into_iter()
        .map(|e| {
            let e = match e {
                EventLogEntry::ResetStarted { reason, .. } => {
                    EventLogEntry::ResetStarted { epoch: 4, reason }
                }
                EventLogEntry::ResetFailed { error, .. } => {
                    EventLogEntry::ResetFailed { epoch: 4, error }
                }
                EventLogEntry::ResetRestored { .. } => EventLogEntry::ResetRestored { epoch: 4 },
                EventLogEntry::DeviceReplaced { .. } => EventLogEntry::DeviceReplaced { epoch: 4 },
            };
            table
                .render(e.message_id(), "hcabus", &strings_of(e))
                .expect("renders")
        })
        .collect();
    shown.sort();
    let page = include_str!("../../../../docs/operations.md");
    let mut quoted: Vec<String> = Vec::new();
    let mut inside = false;
    for line in page.lines() {
        match line.trim() {
            "```text" => inside = true,
            "```" => inside = false,
            l if inside => quoted.push(l.to_string()),
            _ => {}
        }
    }
    quoted.sort();
    assert_eq!(
        quoted, shown,
        "docs/operations.md against Event Viewer's text"
    );
    // Each entry's Event ID, as Event Viewer gives it (the low 16 bits), is in its table.
    for e in every_entry() {
        let row = format!("| {} |", e.message_id() & 0xFFFF);
        assert!(page.contains(&row), "{row} for {e:?}");
    }
}

/// mc.exe's defaults: a message without Severity or Facility keeps the previous one's
/// (Success and Application before any), a blank MessageId is one past the previous of its
/// facility and `+N` N past it.
#[test]
fn severity_and_facility_carry_over_and_ids_count_per_facility() {
    let mc = "FacilityNames=(A=0x1:FA B=0x2:FB)\n\
        MessageId=1\nLanguage=English\nfirst\n.\n\
        MessageId=0x10\nSeverity=Error\nFacility=A\nLanguage=English\nten\n.\n\
        MessageId=\nLanguage=English\neleven\n.\n\
        MessageId=0x20\nFacility=B\nLanguage=English\ntwenty\n.\n\
        MessageId=+3\nLanguage=English\ntwenty-three\n.\n\
        MessageId=\nFacility=A\nLanguage=English\ntwelve\n.\n";
    let table = MessageTable::parse(mc, false).expect("parses");
    let text = |id: u32| table.get(id).map(|m| m.text.as_str());
    // Facility names replace mc.exe's own (Application is gone, but the first message
    // takes the facility in force: Application's 0xFFF, severity Success).
    assert_eq!(text(0x0FFF_0001), Some("first"));
    assert_eq!(text(0xC001_0010), Some("ten"));
    assert_eq!(text(0xC001_0011), Some("eleven"));
    assert_eq!(text(0xC002_0020), Some("twenty"));
    assert_eq!(text(0xC002_0023), Some("twenty-three"));
    assert_eq!(text(0xC001_0012), Some("twelve"));
    assert_eq!(table.len(), 6);
}

/// FormatMessage's escapes and insertion forms as Event Viewer shows them.
#[test]
fn escapes_formats_and_the_end_mark_render_as_format_message_does() {
    let mc = "MessageId=1\nLanguage=English\n%1 saw%b%2!s!%n100%% sure%t%3!ws!%0 never shown\n.\n";
    let table = MessageTable::parse(mc, false).expect("parses");
    let code = 0x0FFF_0001;
    assert_eq!(
        table.render(code, "dev", &["it".into(), "x".into()]),
        Ok("dev saw it\r\n100% sure\tx".to_string())
    );
    // %12 is one insertion, %123 is %12 then a "3".
    let mc = "MessageId=1\nLanguage=English\n%123\n.\n";
    let table = MessageTable::parse(mc, false).expect("parses");
    let strings: Vec<String> = (2..=12).map(|n| format!("s{n}")).collect();
    assert_eq!(
        table.render(code, "dev", &strings),
        Err(RenderError::UnusedString { code, n: 2 })
    );
}
