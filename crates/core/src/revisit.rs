//! Revisiting an earlier stage (seed 003 "Artifact Versioning Convention" and
//! "Change Impact Assessment"): what each impact level does to the stages
//! after the revised one, and how archived documents are named.

use crate::job::UnknownValue;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impact {
    /// The substance downstream still holds: flag later stages for review.
    Minor,
    /// Later documents are archived; the user decides when to re-run them.
    Moderate,
    /// Later documents are archived and the stages re-run from the revised one at once.
    Major,
}

impl Impact {
    pub fn parse(value: &str) -> Result<Self, UnknownValue> {
        match value.trim().to_ascii_lowercase().as_str() {
            "minor" => Ok(Impact::Minor),
            "moderate" => Ok(Impact::Moderate),
            "major" => Ok(Impact::Major),
            other => Err(UnknownValue::new(
                "impact (minor, moderate or major)",
                other,
            )),
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Impact::Minor => "minor",
            Impact::Moderate => "moderate",
            Impact::Major => "major",
        }
    }

    /// Later stages' documents become archived versions.
    pub const fn archives(self) -> bool {
        !matches!(self, Impact::Minor)
    }

    /// The session goes back to the stage after the revised one.
    pub const fn rewinds(self) -> bool {
        !matches!(self, Impact::Minor)
    }

    /// That stage starts without waiting for the user.
    pub const fn restarts_at_once(self) -> bool {
        matches!(self, Impact::Major)
    }
}

/// `name.md` → `name.v{N}.md` (seed 003: `{filename}.v{N}.md`); a name
/// without an extension just gets `.v{N}`.
pub fn archived_name(file_name: &str, version: u32) -> String {
    match file_name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.contains('/') => {
            format!("{stem}.v{version}.{ext}")
        }
        _ => format!("{file_name}.v{version}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impact_levels_parse_and_act_as_seed_003_says() {
        assert_eq!(Impact::parse(" Major "), Ok(Impact::Major));
        assert!(Impact::parse("huge").is_err());
        let table = [
            (Impact::Minor, false, false, false),
            (Impact::Moderate, true, true, false),
            (Impact::Major, true, true, true),
        ];
        for (impact, archives, rewinds, at_once) in table {
            assert_eq!(
                (
                    impact.archives(),
                    impact.rewinds(),
                    impact.restarts_at_once()
                ),
                (archives, rewinds, at_once),
                "{}",
                impact.as_str()
            );
            assert_eq!(Impact::parse(impact.as_str()), Ok(impact));
        }
    }

    #[test]
    fn archived_versions_keep_the_extension() {
        assert_eq!(
            archived_name("simulated_0_business_case_critique.md", 1),
            "simulated_0_business_case_critique.v1.md"
        );
        assert_eq!(archived_name("notes", 3), "notes.v3");
        assert_eq!(archived_name(".hidden", 2), ".hidden.v2");
    }
}
