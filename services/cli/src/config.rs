//! The CLI's config file: flags and environment win over it.

use anyhow::{Context, Result, anyhow};
use std::path::PathBuf;

#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub gateway_url: Option<String>,
    pub api_key: Option<String>,
}

impl FileConfig {
    /// The named file (which must exist), else the default path if it exists.
    pub fn load(path: Option<&PathBuf>) -> Result<Self> {
        let (path, required) = match path {
            Some(p) => (p.clone(), true),
            None => match std::env::var_os("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
            {
                Some(dir) => (dir.join("dialectic").join("cli.toml"), false),
                None => return Ok(Self::default()),
            },
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .with_context(|| format!("config file {} is not valid", path.display())),
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(anyhow!(e).context(format!("cannot read {}", path.display()))),
        }
    }
}
