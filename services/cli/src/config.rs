//! The CLI's config file: flags and environment win over it. It may hold an
//! API key, so it is written owner-only and refused when others can read it.

use crate::exit::{Failed, Kind};
use anyhow::{Context, Result, anyhow};
use std::collections::BTreeMap;
use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The context the file's top-level settings form: a file written before
/// contexts existed keeps working, and one gateway needs no table.
pub const DEFAULT_CONTEXT: &str = "default";

/// One gateway: where it is, which CA signed its certificate, which key.
#[derive(Clone, Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Connection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

/// `cli.toml`: the default context's settings at the top level, named ones
/// under `[contexts.NAME]`, and which one is in use, as kubectl's contexts.
#[derive(Default, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gateway_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_cert: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub contexts: BTreeMap<String, Connection>,
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
        if config.holds_a_key() {
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

    fn holds_a_key(&self) -> bool {
        self.api_key.is_some() || self.contexts.values().any(|c| c.api_key.is_some())
    }

    /// The context `named` (else the current one, else the default) and its
    /// settings; a name the file does not hold is an error naming those it does.
    pub fn connection(&self, named: Option<&str>) -> Result<(String, Connection), Failed> {
        let name = named
            .or(self.current_context.as_deref())
            .unwrap_or(DEFAULT_CONTEXT);
        if name == DEFAULT_CONTEXT {
            return Ok((name.to_string(), self.top_level()));
        }
        match self.contexts.get(name) {
            Some(connection) => Ok((name.to_string(), connection.clone())),
            None => Err(self.unknown(name)),
        }
    }

    pub fn unknown(&self, name: &str) -> Failed {
        Failed::new(
            Kind::Usage,
            format!(
                "no context named {name:?} (known: {}); \
                 `dialectic context add {name} --gateway URL` adds it",
                self.names().join(", ")
            ),
        )
    }

    /// Every context's name, the default first.
    pub fn names(&self) -> Vec<String> {
        std::iter::once(DEFAULT_CONTEXT.to_string())
            .chain(self.contexts.keys().cloned())
            .collect()
    }

    fn top_level(&self) -> Connection {
        Connection {
            gateway_url: self.gateway_url.clone(),
            ca_cert: self.ca_cert.clone(),
            api_key: self.api_key.clone(),
        }
    }

    /// Replaces the context `name`'s settings, adding it if it is new.
    pub fn set_connection(&mut self, name: &str, connection: Connection) {
        if name == DEFAULT_CONTEXT {
            self.gateway_url = connection.gateway_url;
            self.ca_cert = connection.ca_cert;
            self.api_key = connection.api_key;
        } else {
            self.contexts.insert(name.to_string(), connection);
        }
    }

    /// Replace the file: its directory made owner-only if it is new, the
    /// file written owner-only beside it and renamed over it, so no moment
    /// exists when the key is on disk readable by others.
    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let mut builder = DirBuilder::new();
            owner_only::dir(builder.recursive(true));
            builder
                .create(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let text = toml::to_string(self).context("cannot write the config as TOML")?;
        let mut staged = path.as_os_str().to_owned();
        staged.push(".new");
        let staged = PathBuf::from(staged);
        let write = || -> std::io::Result<()> {
            let mut options = OpenOptions::new();
            owner_only::file(options.write(true).create(true).truncate(true));
            let mut file = options.open(&staged)?;
            // `mode` applies only when the file is created; a leftover keeps its own.
            owner_only::restrict(&file)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&staged, path)
        };
        write().with_context(|| format!("cannot write {}", path.display()))
    }
}

/// Any failure reading the config file exits as a configuration error,
/// unless it already has a kind of its own.
pub fn as_config_error(e: anyhow::Error) -> anyhow::Error {
    match e.downcast::<Failed>() {
        Ok(failed) => failed.into(),
        Err(e) => Failed::new(Kind::Config, format!("{e:#}")).into(),
    }
}

fn refuse_if_exposed(path: &Path) -> Result<()> {
    let metadata =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if let Some(mode) = owner_only::exposed(&metadata) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> FileConfig {
        toml::from_str(text).expect("valid config")
    }

    #[test]
    fn a_file_from_before_contexts_is_the_default_context() {
        let file = parsed("gateway_url = \"http://a:1\"\napi_key = \"k\"\n");
        let (name, connection) = file.connection(None).expect("default");
        assert_eq!(name, DEFAULT_CONTEXT);
        assert_eq!(connection.gateway_url.as_deref(), Some("http://a:1"));
        assert_eq!(connection.api_key.as_deref(), Some("k"));
    }

    #[test]
    fn the_current_context_is_used_unless_one_is_named() {
        let mut file = parsed("gateway_url = \"http://a:1\"\n");
        file.set_connection(
            "prod",
            Connection {
                gateway_url: Some("https://prod".into()),
                ca_cert: Some("/ca.pem".into()),
                api_key: Some("p".into()),
            },
        );
        file.current_context = Some("prod".into());
        let file = parsed(&toml::to_string(&file).expect("TOML"));
        let url = |named| file.connection(named).expect("known").1.gateway_url;
        assert_eq!(url(None).as_deref(), Some("https://prod"));
        assert_eq!(url(Some("default")).as_deref(), Some("http://a:1"));
        let unknown = file.connection(Some("stage")).err().expect("unknown");
        assert_eq!(unknown.kind, Kind::Usage);
        assert!(
            unknown.message.contains("default, prod"),
            "{}",
            unknown.message
        );
    }

    #[test]
    fn a_key_in_any_context_makes_the_file_secret() {
        assert!(!parsed("gateway_url = \"http://a:1\"\n").holds_a_key());
        assert!(parsed("[contexts.prod]\napi_key = \"p\"\n").holds_a_key());
    }
}

/// Owner-only files by Unix mode. Elsewhere (Windows, docs/running.md) a
/// file under the user's profile inherits its ACL, which only the user and
/// administrators pass, so nothing is set and nothing is refused.
#[cfg(unix)]
mod owner_only {
    use std::fs::{DirBuilder, File, Metadata, OpenOptions, Permissions};
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};

    pub fn dir(builder: &mut DirBuilder) {
        builder.mode(0o700);
    }

    pub fn file(options: &mut OpenOptions) {
        options.mode(0o600);
    }

    pub fn restrict(file: &File) -> std::io::Result<()> {
        file.set_permissions(Permissions::from_mode(0o600))
    }

    /// The file's mode when group or others may read or write it.
    pub fn exposed(metadata: &Metadata) -> Option<u32> {
        let mode = metadata.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then_some(mode)
    }
}

#[cfg(not(unix))]
mod owner_only {
    use std::fs::{DirBuilder, File, Metadata, OpenOptions};

    pub fn dir(_: &mut DirBuilder) {}

    pub fn file(_: &mut OpenOptions) {}

    pub fn restrict(_: &File) -> std::io::Result<()> {
        Ok(())
    }

    pub fn exposed(_: &Metadata) -> Option<u32> {
        None
    }
}
