//! A model per step (docs/models.md, "Model roles"): a pipeline names roles
//! (`[roles.analyst]`) and gives steps one (`model_role = "analyst"`); a
//! session maps roles to models when it starts. A step whose role is mapped
//! runs on that model only; any other step runs on each of the session's
//! models. A role also carries the call parameters its steps share (seed
//! 004's per-agent temperature, output limit and timeout), under each step's
//! own `config`.

use crate::recipe::StepConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One role a pipeline declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleDef {
    /// What the role does, for whoever maps it to a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
}

impl RoleDef {
    /// The call parameters the role gives its steps.
    pub fn config(&self) -> StepConfig {
        StepConfig {
            temperature: self.temperature,
            max_tokens: self.max_tokens,
            timeout_seconds: self.timeout_seconds,
        }
    }
}

/// A role name: like a slug (a-z, 0-9, _), at most 64 characters.
pub fn is_role_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// A session's role map against the roles its pipeline declares: the
/// reason the first role it names that the pipeline does not know is
/// refused.
pub fn check_role_map<'a>(
    declared: &BTreeMap<String, RoleDef>,
    requested: impl IntoIterator<Item = &'a str>,
) -> Result<(), String> {
    for role in requested {
        if !declared.contains_key(role) {
            let known: Vec<&str> = declared.keys().map(String::as_str).collect();
            return Err(if known.is_empty() {
                format!("unknown model role {role:?}: the project's pipeline declares no roles")
            } else {
                format!(
                    "unknown model role {role:?}: the project's pipeline declares {}",
                    known.join(", ")
                )
            });
        }
    }
    Ok(())
}

/// Reads `ROLE=MODEL` (the CLI's `--model-role`).
pub fn parse_role_flag(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((role, model)) if !role.trim().is_empty() && !model.trim().is_empty() => {
            Ok((role.trim().to_string(), model.trim().to_string()))
        }
        _ => Err(format!("{text:?} is not ROLE=MODEL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared() -> BTreeMap<String, RoleDef> {
        ["analyst", "writer"]
            .into_iter()
            .map(|r| (r.to_string(), RoleDef::default()))
            .collect()
    }

    #[test]
    fn a_role_map_names_only_declared_roles() {
        assert_eq!(check_role_map(&declared(), ["analyst", "writer"]), Ok(()));
        assert_eq!(check_role_map(&declared(), []), Ok(()));
        let refused = check_role_map(&declared(), ["analyst", "anlyst"]).unwrap_err();
        assert!(
            refused.contains("\"anlyst\"") && refused.contains("analyst, writer"),
            "{refused}"
        );
        let none = check_role_map(&BTreeMap::new(), ["analyst"]).unwrap_err();
        assert!(none.contains("declares no roles"), "{none}");
    }

    #[test]
    fn a_role_flag_is_role_equals_model() {
        assert_eq!(
            parse_role_flag("analyst=gpt-5.1"),
            Ok(("analyst".into(), "gpt-5.1".into()))
        );
        for bad in ["analyst", "=m", "analyst=", ""] {
            assert!(parse_role_flag(bad).is_err(), "{bad:?}");
        }
        assert!(is_role_name("complex_reasoning"));
        assert!(!is_role_name("Complex"));
    }
}
