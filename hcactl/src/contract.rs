//! What every JSON document of hcactl and hcasim shares (docs/json.md): a `schema` naming the
//! document and its layout's version, and one spelling of states.

/// The version of every JSON document's layout: a key removed or changed in meaning raises
/// it; a key added does not.
pub const SCHEMA_VERSION: u32 = 1;

/// `TOOL.NAME/1`: what a JSON document is and which layout it has.
pub fn schema(tool: &str, name: &str) -> String {
    format!("{tool}.{name}/{SCHEMA_VERSION}")
}

/// A state as every JSON document spells it: its words capitalized and joined (`active` ->
/// `Active`, `link_up` -> `LinkUp`), as the bus's own states are (`Operational`).
pub fn state_word(name: &str) -> String {
    name.split(['_', ' '])
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_spelled_one_way() {
        assert_eq!(state_word("active"), "Active");
        assert_eq!(state_word("link_up"), "LinkUp");
        assert_eq!(state_word("Operational"), "Operational");
        assert_eq!(state_word("unregistered"), "Unregistered");
    }

    #[test]
    fn a_schema_names_the_tool_the_document_and_the_version() {
        assert_eq!(schema("hcactl", "status"), "hcactl.status/1");
    }
}
