//! The CLI's config file: flags and environment win over it. It may hold an
//! API key, so it is written owner-only and refused when others can read it.

use crate::exit::{Failed, Kind};
use anyhow::{Context, Result, anyhow};
use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// Where the config file is: the named one (which must exist), else
/// `$XDG_CONFIG_HOME/dialectic/cli.toml` or `~/.config/dialectic/cli.toml`.
pub struct Location {
    pub path: PathBuf,
    pub required: bool,
}

impl Location {
    pub fn of(named: Option<&PathBuf>) -> Option<Self> {
        if let Some(path) = named {
            return Some(Self {
                path: path.clone(),
                required: true,
            });
        }
        let dir = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
        Some(Self {
            path: dir.join("dialectic").join("cli.toml"),
            required: false,
        })
    }
}

impl FileConfig {
    /// The file's settings; a key in a file group or others may read is an
    /// error (as ssh refuses such a private key), not silently used.
    pub fn load(at: Option<&Location>) -> Result<Self> {
        let Some(at) = at else {
            return Ok(Self::default());
        };
        let config = match Self::read(at)? {
            Some(config) => config,
            None => return Ok(Self::default()),
        };
        if config.api_key.is_some() {
            refuse_if_exposed(&at.path)?;
        }
        Ok(config)
    }

    /// The file as it is, None when an optional one does not exist.
    pub fn read(at: &Location) -> Result<Option<Self>> {
        match std::fs::read_to_string(&at.path) {
            Ok(text) => toml::from_str(&text)
                .map(Some)
                .with_context(|| format!("config file {} is not valid", at.path.display())),
            Err(e) if !at.required && e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(anyhow!(e).context(format!("cannot read {}", at.path.display()))),
        }
    }

    /// Replace the file: its directory made owner-only if it is new, the
    /// file written owner-only beside it and renamed over it, so no moment
    /// exists when the key is on disk readable by others.
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let text = toml::to_string(self).context("cannot write the config as TOML")?;
        let mut staged = path.as_os_str().to_owned();
        staged.push(".new");
        let staged = PathBuf::from(staged);
        let write = || -> std::io::Result<()> {
            let mut file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&staged)?;
            // `mode` applies only when the file is created; a leftover keeps its own.
            file.set_permissions(Permissions::from_mode(0o600))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&staged, path)
        };
        write().with_context(|| format!("cannot write {}", path.display()))
    }
}

fn refuse_if_exposed(path: &Path) -> Result<()> {
    let mode = std::fs::metadata(path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(Failed::new(
            Kind::Config,
            format!(
                "{} holds an API key and group or others may read or write it \
                 (mode {mode:03o}); `chmod 600 {}` or `dialectic auth login` again",
                path.display(),
                path.display()
            ),
        )
        .into());
    }
    Ok(())
}
