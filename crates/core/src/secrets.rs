//! Which environment variables a model row may name for its key. A model's
//! key goes to the model's base URL, which whoever registers the model
//! chooses, so a row naming one of the platform's own variables would send
//! that secret there: registration refuses such a name and the executor never
//! reads one, whoever wrote the row.

/// Prefixes of the variables that hold the platform's own secrets: dialectic's
/// settings (`DIALECTIC_INTERNAL__TOKEN_SECRET`, `DIALECTIC_S3__SECRET_KEY`,
/// the database URL) and the AWS credential chain the S3 client falls back to.
pub const PLATFORM_ENV_PREFIXES: [&str; 2] = ["DIALECTIC_", "AWS_"];

/// The platform prefix `name` starts with (in any case), if it has one.
pub fn platform_prefix(name: &str) -> Option<&'static str> {
    let upper = name.to_ascii_uppercase();
    PLATFORM_ENV_PREFIXES
        .into_iter()
        .find(|p| upper.starts_with(p))
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
    }
}
