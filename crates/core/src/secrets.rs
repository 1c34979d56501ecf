//! Which environment variables a model row may name for its key. A model's
//! key goes to the model's base URL, which whoever registers the model
//! chooses, so a row naming one of the platform's own variables would send
//! that secret there: registration refuses such a name and the executor never
//! reads one, whoever wrote the row. An operator may narrow the names further
//! to prefixes of their own (`executor.model_key_prefixes`), so a row can name
//! nothing else the executor's environment holds either.

/// Prefixes of the variables that hold the platform's own secrets: dialectic's
/// settings (`DIALECTIC_INTERNAL__TOKEN_SECRET`, `DIALECTIC_S3__SECRET_KEY`,
/// the database URL) and the AWS credential chain the S3 client falls back to.
pub const PLATFORM_ENV_PREFIXES: [&str; 2] = ["DIALECTIC_", "AWS_"];

/// Model keys' own corner of the platform's prefix. The settings loader
/// never reads a variable in it (`dialectic_config`), so no setting, and so
/// no platform secret, can be there: a model row may name one, and the
/// hardened setup (`executor.model_key_prefixes = ["DIALECTIC_MODEL_KEY_"]`)
/// keeps every model key here.
pub const MODEL_KEY_PREFIX: &str = "DIALECTIC_MODEL_KEY_";

/// Whether `name` is in [`MODEL_KEY_PREFIX`], in any case, as the settings
/// loader matches its own prefix.
pub fn is_model_key_name(name: &str) -> bool {
    name.as_bytes()
        .get(..MODEL_KEY_PREFIX.len())
        .is_some_and(|head| head.eq_ignore_ascii_case(MODEL_KEY_PREFIX.as_bytes()))
}

/// The platform prefix `name` starts with (in any case), if it has one;
/// none for a name in [`MODEL_KEY_PREFIX`].
pub fn platform_prefix(name: &str) -> Option<&'static str> {
    if is_model_key_name(name) {
        return None;
    }
    let upper = name.to_ascii_uppercase();
    PLATFORM_ENV_PREFIXES
        .into_iter()
        .find(|p| upper.starts_with(p))
}

/// Why a model's key may not be read from the variable its row names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyNameRefused {
    #[error(
        "the model's key variable {name} is one of the platform's own ({prefix}*), whose secrets a model must never send to its server; put the provider's key in a variable of its own, e.g. {MODEL_KEY_PREFIX}OPENAI or OPENAI_API_KEY"
    )]
    Platform { name: String, prefix: &'static str },
    #[error(
        "the model's key variable {name} does not start with one of the prefixes executor.model_key_prefixes allows ({}); put the key in a variable that does", .allowed.join(", ")
    )]
    NotAllowed { name: String, allowed: Vec<String> },
}

/// The rule for the variable a model's key is read from: never one of the
/// platform's ([`platform_prefix`]); and when `allowed` lists prefixes
/// (`executor.model_key_prefixes`), only a name that starts with one of
/// them, case and all, as the environment tells names apart by case. An
/// empty list allows any other name, as before the setting existed.
pub fn check_key_name(name: &str, allowed: &[String]) -> Result<(), KeyNameRefused> {
    if let Some(prefix) = platform_prefix(name) {
        return Err(KeyNameRefused::Platform {
            name: name.to_string(),
            prefix,
        });
    }
    if !allowed.is_empty() && !allowed.iter().any(|p| name.starts_with(p.as_str())) {
        return Err(KeyNameRefused::NotAllowed {
            name: name.to_string(),
            allowed: allowed.to_vec(),
        });
    }
    Ok(())
}

/// What a `Debug` impl shows for a secret: whether there is one, never it.
pub fn redacted(secret: Option<&str>) -> &'static str {
    match secret {
        Some(s) if !s.is_empty() => "<redacted>",
        _ => "<none>",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platform_variables_are_named_by_prefix_in_any_case() {
        assert_eq!(
            platform_prefix("DIALECTIC_INTERNAL__TOKEN_SECRET"),
            Some("DIALECTIC_")
        );
        assert_eq!(platform_prefix("aws_secret_access_key"), Some("AWS_"));
        assert_eq!(platform_prefix("OPENAI_API_KEY"), None);
        assert_eq!(platform_prefix("MY_DIALECTIC_KEY"), None);
        assert_eq!(platform_prefix("DIALECTIC_MODEL_KEY_OPENAI"), None);
        assert_eq!(platform_prefix("dialectic_model_key_openai"), None);
        assert_eq!(platform_prefix("DIALECTIC_MODEL_KEYS"), Some("DIALECTIC_"));
        assert_eq!(platform_prefix("DIALECTIC_MODEL"), Some("DIALECTIC_"));
    }

    #[test]
    fn model_key_names_are_the_model_key_prefix_in_any_case() {
        assert!(is_model_key_name("DIALECTIC_MODEL_KEY_OPENAI"));
        assert!(is_model_key_name("Dialectic_Model_Key_x"));
        assert!(is_model_key_name("DIALECTIC_MODEL_KEY_"));
        assert!(!is_model_key_name("DIALECTIC_MODEL_KEY"));
        assert!(!is_model_key_name("X_DIALECTIC_MODEL_KEY_OPENAI"));
        // A multi-byte character where the prefix would end is no panic.
        assert!(!is_model_key_name("DIALECTIC_MODEL_KE\u{e9}"));
    }
}
