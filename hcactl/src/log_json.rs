//! Flight-recorder records as structured JSON (`hcactl log --json`, `hcactl dump`), and the
//! filters `hcactl log` applies alike to a live bus and to a dump read back from a file.

use hcabus::recorder::{Describe, Record, RecordTag};
use hcabus::types::{Actor, ClientId};
use serde_json::{json, Map, Value};

use crate::contract::state_word;

/// The kinds a record can be, as `kind` names them (and `hcactl log --kind` takes them):
/// the core's [`RecordTag`] names, in its order.
pub const KINDS: [&str; RecordTag::COUNT] = {
    let mut names = [""; RecordTag::COUNT];
    let mut i = 0;
    while i < RecordTag::COUNT {
        names[i] = RecordTag::ALL[i].as_str();
        i += 1;
    }
    names
};

/// One record: `seq`, `at_us`, `last_at_us`, `count`, `kind`, the kind's own fields, `by`
/// (who asked: null, or the administrator) and `text`, the line `hcactl log` prints.
pub fn record_json(r: &Record) -> Value {
    let kind = r.kind.tag().as_str();
    let mut v = Map::new();
    v.insert("seq".into(), r.seq.into());
    v.insert("at_us".into(), r.at.as_us().into());
    v.insert("last_at_us".into(), r.last_at.as_us().into());
    v.insert("count".into(), r.count.into());
    v.insert("kind".into(), kind.into());
    // The kind's own fields, as the record describes itself.
    let _ = r.describe(&mut Fields {
        record: r,
        out: &mut v,
    });
    v.insert("by".into(), actor_json(r.by));
    v.insert("text".into(), r.to_string().into());
    Value::Object(v)
}

/// Who asked, as JSON: null for nobody; else `{ "via", "uid", "access" }`.
pub fn actor_json(a: Actor) -> Value {
    match a {
        Actor::Nobody => Value::Null,
        Actor::Local { uid, rights } => {
            json!({ "via": "socket", "uid": uid, "access": Actor::access(rights) })
        }
        Actor::Handle { rights } => {
            json!({ "via": "handle", "uid": null, "access": Actor::access(rights) })
        }
    }
}

fn client(id: ClientId, r: &Record) -> Value {
    json!({ "id": id.to_string(), "name": (!r.name.as_str().is_empty()).then(|| r.name.as_str()) })
}

/// A record's fields into a JSON object, in the order the record names them.
struct Fields<'a> {
    record: &'a Record,
    out: &'a mut Map<String, Value>,
}

impl Describe for Fields<'_> {
    fn phrase(&mut self, _: std::fmt::Arguments<'_>) -> std::fmt::Result {
        Ok(())
    }
    fn word(&mut self, name: &'static str, value: &'static str) {
        self.out.insert(name.into(), value.into());
    }
    fn state(&mut self, name: &'static str, value: &'static str) {
        self.out.insert(name.into(), state_word(value).into());
    }
    fn number(&mut self, name: &'static str, value: Option<u64>) {
        self.out.insert(name.into(), value.into());
    }
    fn flag(&mut self, name: &'static str, value: bool) {
        self.out.insert(name.into(), value.into());
    }
    fn client(&mut self, name: &'static str, value: Option<ClientId>) {
        let v = value.map_or(Value::Null, |id| client(id, self.record));
        self.out.insert(name.into(), v);
    }
    fn text(&mut self, name: &'static str, value: Option<&str>) {
        self.out.insert(name.into(), value.into());
    }
    fn hex(&mut self, name: &'static str, value: u32) {
        self.out
            .insert(name.into(), format!("0x{value:08x}").into());
    }
}

/// What `hcactl log` shows of the records it is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Records numbered at least this.
    pub since: u64,
    /// Only these kinds (any, when empty).
    pub kinds: Vec<String>,
    /// Only records about the client of this name or id (`#3.0`).
    pub client: Option<String>,
}

impl Filter {
    /// A kind no record has, named for the usage error.
    pub fn unknown_kind(&self) -> Option<&str> {
        self.kinds
            .iter()
            .find(|k| !KINDS.contains(&k.as_str()))
            .map(String::as_str)
    }

    /// Whether the record `v` (as [`record_json`] made it) passes.
    pub fn passes(&self, v: &Value) -> bool {
        if v["seq"].as_u64().is_none_or(|s| s < self.since) {
            return false;
        }
        if !self.kinds.is_empty() && !self.kinds.iter().any(|k| v["kind"] == k.as_str()) {
            return false;
        }
        match &self.client {
            None => true,
            Some(who) => {
                let c = &v["client"];
                c["name"] == who.as_str() || c["id"] == who.as_str()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcabus::hca::HwStep;
    use hcabus::recorder::{HwOutcome, RecordKind};
    use hcabus::time::Instant;
    use hcabus::types::Call;
    use hcabus::types::{Epoch, EventKind, ShortText};

    fn event(name: &str) -> Record {
        Record::once(
            4,
            Instant::from_ms(3),
            ShortText::cut(name),
            RecordKind::Event {
                client: ClientId {
                    index: 2,
                    generation: 0,
                },
                event: EventKind::Reset,
                epoch: Epoch(1),
            },
        )
    }

    #[test]
    fn a_record_is_fields_not_only_text() {
        let v = record_json(&event("srp-boot"));
        assert_eq!(v["kind"], "event");
        assert_eq!(v["client"]["name"], "srp-boot");
        assert_eq!(v["client"]["id"], "#2.0");
        assert_eq!(v["event"], "RESET");
        assert_eq!((v["seq"].as_u64(), v["count"].as_u64()), (Some(4), Some(1)));
        assert!(v["text"].as_str().is_some_and(|t| t.contains("'srp-boot'")));
        let mut hw = Record::once(
            5,
            Instant::ZERO,
            ShortText::EMPTY,
            RecordKind::Hw {
                step: HwStep::ReadHealth,
                outcome: HwOutcome::Catastrophic,
                detail: 0xbad,
            },
        );
        hw.count = 3;
        let v = record_json(&hw);
        assert_eq!(
            (&v["outcome"], &v["ok"], &v["syndrome"], &v["count"]),
            (
                &json!("catastrophic error"),
                &json!(true),
                &json!("0x00000bad"),
                &json!(3)
            )
        );
    }

    #[test]
    fn a_refused_policy_names_its_key_and_another_refusal_none() {
        let refused = |name: &str| {
            let kind = RecordKind::Refused {
                client: None,
                call: Call::SetPolicy,
                code: hcabus::errors::RefusalCode::InvalidPolicy,
            };
            record_json(&Record::once(1, Instant::ZERO, ShortText::cut(name), kind))
        };
        let v = refused("hw_ready_timeout_ms");
        assert_eq!(v["key"], "hw_ready_timeout_ms");
        assert!(v["text"]
            .as_str()
            .is_some_and(|t| t.ends_with("invalid policy (hw_ready_timeout_ms)")));
        assert_eq!(refused("").get("key"), None, "no key: none said");
    }

    #[test]
    fn filters_select_by_sequence_kind_and_client() {
        let v = record_json(&event("srp-boot"));
        assert!(Filter::default().passes(&v));
        let by = |f: Filter| f.passes(&v);
        assert!(!by(Filter {
            since: 5,
            ..Filter::default()
        }));
        assert!(by(Filter {
            kinds: vec!["hw".into(), "event".into()],
            ..Filter::default()
        }));
        assert!(!by(Filter {
            kinds: vec!["hw".into()],
            ..Filter::default()
        }));
        assert!(by(Filter {
            client: Some("#2.0".into()),
            ..Filter::default()
        }));
        assert!(!by(Filter {
            client: Some("ipoib".into()),
            ..Filter::default()
        }));
        let f = Filter {
            kinds: vec!["hw".into(), "nonsense".into()],
            ..Filter::default()
        };
        assert_eq!(f.unknown_kind(), Some("nonsense"));
    }
}
