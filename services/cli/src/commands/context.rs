//! `context add|use|list|delete`: several gateways in one config file, each
//! with its URL, CA and key, and one of them in use, as kubectl's contexts.
//! None of these talk to a gateway.

use crate::cli::ContextCommand;
use crate::commands::auth::prefix;
use crate::config::{Connection, DEFAULT_CONTEXT, FileConfig, Location};
use crate::exit::{Failed, Kind};
use crate::output::{Out, Render, lines};
use anyhow::{Context as _, Result};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The global flags a context is made from.
pub struct Flags {
    pub gateway: Option<String>,
    pub ca_cert: Option<PathBuf>,
}

pub fn run(command: ContextCommand, at: Location, flags: Flags, out: Out) -> Result<()> {
    // Every verb may create the file, even one named with --config-file.
    let at = Location {
        required: false,
        ..at
    };
    let mut file = FileConfig::read(&at)?.unwrap_or_default();
    match command {
        ContextCommand::List => {
            out.show(&Listed::of(&file));
            return Ok(());
        }
        ContextCommand::Add { name, make_current } => {
            add(&mut file, &name, flags)?;
            if make_current {
                file.current_context = Some(name.clone());
            }
            out.step(format!("context {name} saved in {}", at.path.display()));
        }
        ContextCommand::Use { name } => {
            file.connection(Some(&name))?;
            file.current_context = (name != DEFAULT_CONTEXT).then(|| name.clone());
            out.step(format!("using context {name}"));
        }
        ContextCommand::Delete { name } => {
            delete(&mut file, &name)?;
            out.step(format!("context {name} deleted"));
        }
    }
    file.save(&at.path)?;
    if !out.is_text() {
        out.show(&Listed::of(&file));
    }
    Ok(())
}

/// A context's URL and CA from the flags, its key kept: `auth login` sets that.
fn add(file: &mut FileConfig, name: &str, flags: Flags) -> Result<()> {
    let Some(url) = flags.gateway else {
        return Err(Failed::new(
            Kind::Usage,
            format!("`context add {name}` needs --gateway URL"),
        )
        .into());
    };
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(Failed::new(Kind::Usage, "a context's name is one word").into());
    }
    let ca_cert = flags.ca_cert.as_deref().map(absolute).transpose()?;
    let kept_key = file
        .connection(Some(name))
        .ok()
        .and_then(|(_, c)| c.api_key);
    file.set_connection(
        name,
        Connection {
            gateway_url: Some(url),
            ca_cert,
            api_key: kept_key,
        },
    );
    Ok(())
}

/// The CA's path as the config file keeps it: absolute, so the context works
/// from any directory, and checked now rather than at the first call.
pub fn absolute(path: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(path)
        .with_context(|| format!("cannot read the CA certificate {}", path.display()))
        .map_err(|e| Failed::new(Kind::Config, format!("{e:#}")).into())
}

fn delete(file: &mut FileConfig, name: &str) -> Result<()> {
    if name == DEFAULT_CONTEXT {
        file.set_connection(DEFAULT_CONTEXT, Connection::default());
    } else if file.contexts.remove(name).is_none() {
        return Err(file.unknown(name).into());
    }
    if file.current_context.as_deref() == Some(name) {
        file.current_context = None;
    }
    Ok(())
}

struct Listed {
    current: String,
    contexts: Vec<(String, Connection)>,
}

impl Listed {
    fn of(file: &FileConfig) -> Self {
        let contexts = file
            .names()
            .into_iter()
            .filter_map(|name| file.connection(Some(&name)).ok())
            .collect();
        Self {
            current: file
                .current_context
                .clone()
                .unwrap_or_else(|| DEFAULT_CONTEXT.to_string()),
            contexts,
        }
    }
}

fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".to_string())
}

impl Render for Listed {
    fn text(&self) -> String {
        let header = format!(
            "{:<2}{:<16} {:<36} {:<12} {}\n",
            "", "NAME", "GATEWAY", "KEY", "CA"
        );
        header
            + &lines(&self.contexts, "no contexts", |(name, c)| {
                format!(
                    "{:<2}{:<16} {:<36} {:<12} {}",
                    if *name == self.current { "*" } else { "" },
                    name,
                    or_dash(c.gateway_url.clone()),
                    or_dash(c.api_key.as_deref().map(prefix)),
                    or_dash(c.ca_cert.as_ref().map(|p| p.display().to_string())),
                )
            })
    }
    fn json(&self) -> Value {
        let contexts: Vec<Value> = self
            .contexts
            .iter()
            .map(|(name, c)| {
                json!({
                    "name": name,
                    "current": *name == self.current,
                    "gateway_url": c.gateway_url,
                    "ca_cert": c.ca_cert,
                    "key_prefix": c.api_key.as_deref().map(prefix),
                })
            })
            .collect();
        json!({ "current_context": self.current, "contexts": contexts })
    }
}
