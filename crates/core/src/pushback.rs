//! How hard a pipeline's critique steps argue with the user (seed 003's
//! `pushback_level`). It is a session setting, and step prompts read it as
//! the template variable `{{ pushback }}`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pushback {
    /// Every weakness raised, counterarguments at their strongest.
    #[default]
    Full,
    /// The main weaknesses only.
    Light,
    /// Only what would make the work wrong.
    Minimal,
}

impl Pushback {
    pub const ALL: [Pushback; 3] = [Pushback::Full, Pushback::Light, Pushback::Minimal];

    pub const fn as_str(self) -> &'static str {
        match self {
            Pushback::Full => "full",
            Pushback::Light => "light",
            Pushback::Minimal => "minimal",
        }
    }
}

impl fmt::Display for Pushback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a pushback level (full, light, minimal)")]
pub struct UnknownPushback(pub String);

impl FromStr for Pushback {
    type Err = UnknownPushback;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Pushback::ALL
            .into_iter()
            .find(|p| p.as_str() == text)
            .ok_or_else(|| UnknownPushback(text.to_string()))
    }
}

impl TryFrom<String> for Pushback {
    type Error = UnknownPushback;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_reads_back_from_its_name() {
        for level in Pushback::ALL {
            assert_eq!(level.as_str().parse::<Pushback>(), Ok(level));
        }
        assert!("hard".parse::<Pushback>().is_err());
        assert_eq!(Pushback::default(), Pushback::Full);
    }
}
