//! Proto enums and the lower-case names the domain stores cross the API by
//! name: with the prefix `PUSHBACK`, `PUSHBACK_LIGHT` is `light`.

/// The value of the enum whose names start `{prefix}_` that stands for the
/// domain's `name`; 0 (UNSPECIFIED) for a name the proto does not know (yet).
pub fn to_api<E: Into<i32>>(prefix: &str, name: &str, lookup: fn(&str) -> Option<E>) -> i32 {
    lookup(&format!("{prefix}_{}", name.to_ascii_uppercase())).map_or(0, Into::into)
}

/// The domain's name for an enum value's `as_str_name()`.
pub fn from_api(prefix: &str, api_name: &str) -> String {
    let name = api_name
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .unwrap_or(api_name);
    name.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{DocumentRole, Pushback};

    #[test]
    fn names_cross_both_ways() {
        let light = to_api("PUSHBACK", "light", Pushback::from_str_name);
        assert_eq!(light, i32::from(Pushback::Light));
        assert_eq!(from_api("PUSHBACK", Pushback::Light.as_str_name()), "light");
        let sample = to_api(
            "DOCUMENT_ROLE",
            "writing_sample",
            DocumentRole::from_str_name,
        );
        assert_eq!(sample, i32::from(DocumentRole::WritingSample));
        assert_eq!(
            from_api("DOCUMENT_ROLE", DocumentRole::WritingSample.as_str_name()),
            "writing_sample"
        );
        assert_eq!(to_api("PUSHBACK", "shouting", Pushback::from_str_name), 0);
    }
}
