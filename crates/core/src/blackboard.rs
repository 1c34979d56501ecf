//! The shared blackboard (seed 004 §1): typed findings a step publishes for
//! the steps after it. A step's output rule declares the entry types it may
//! publish (`publishes`); its reply lists them under `blackboard`. Postgres
//! keeps every entry; Redis holds a copy per session and type for fast reads
//! and announces each entry on a channel.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The key of a reply that lists the entries it publishes.
pub const BLACKBOARD: &str = "blackboard";

/// The input rule kind that reads entries (`document_key` names the type, `*` all).
pub const INPUT_KIND: &str = "blackboard";

/// One finding as a reply publishes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoardEntry {
    #[serde(rename = "type")]
    pub entry_type: String,
    pub data: Value,
}

/// An entry as the blackboard keeps it: what a reply published, numbered
/// within its session and type, with who published it. Its JSON is the Redis
/// copy's list item and pub/sub message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEntry {
    pub id: String,
    #[serde(rename = "type")]
    pub entry_type: String,
    /// 1 for the session's first entry of this type.
    pub seq: i32,
    pub iteration: i32,
    pub stage_slug: String,
    /// The step and model that published it (the seed's "agent").
    pub step_key: String,
    pub model: String,
    pub job_id: String,
    pub data: Value,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
}

/// The entries a reply publishes: none when it has no `blackboard` key; else
/// an array of `{"type", "data"}` objects whose type is one the step declares,
/// or an error naming what is wrong (a retry can mend it).
pub fn entries(reply: &Value, declared: &[String]) -> Result<Vec<BoardEntry>, String> {
    let Some(listed) = reply.get(BLACKBOARD) else {
        return Ok(Vec::new());
    };
    let entries: Vec<BoardEntry> = serde_json::from_value(listed.clone()).map_err(|e| {
        format!("{BLACKBOARD} must be an array of {{\"type\", \"data\"}} objects: {e}")
    })?;
    match entries
        .iter()
        .position(|e| !declared.contains(&e.entry_type))
    {
        Some(index) => Err(format!(
            "{BLACKBOARD}[{index}] has type {:?}; this step publishes only {declared:?}",
            entries[index].entry_type
        )),
        None => Ok(entries),
    }
}

/// Redis list of one session's entries of one type, oldest first.
pub fn list_key(session_id: &str, entry_type: &str) -> String {
    format!("blackboard:{session_id}:{entry_type}")
}

/// Redis set of every list key of a session, so clearing never scans.
pub fn tracking_key(session_id: &str) -> String {
    format!("blackboard_keys:{session_id}")
}

/// Redis pub/sub channel announcing a session's new entries.
pub fn channel(session_id: &str) -> String {
    format!("blackboard:{session_id}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reply_publishes_only_the_types_its_step_declares() {
        let declared = vec!["buried_change".to_string()];
        let reply = json!({"blackboard": [{"type": "buried_change", "data": {"section": "4.2"}}]});
        assert_eq!(
            entries(&reply, &declared),
            Ok(vec![BoardEntry {
                entry_type: "buried_change".into(),
                data: json!({"section": "4.2"}),
            }])
        );
        assert_eq!(entries(&json!({"content": "x"}), &declared), Ok(vec![]));
        for bad in [
            json!({"blackboard": "buried_change"}),
            json!({"blackboard": [{"data": {}}]}),
            json!({"blackboard": [{"type": "stale_reference", "data": {}}]}),
        ] {
            assert!(entries(&bad, &declared).is_err(), "{bad}");
        }
    }
}
