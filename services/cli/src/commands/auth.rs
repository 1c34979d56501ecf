//! `auth login` keeps a key in the config file (never on the command line,
//! where `ps` shows it); `auth status` says which gateway and key are in use
//! and whether the key works.

use crate::commands::context;
use crate::config::{FileConfig, Location, as_config_error};
use crate::exit::{Failed, Kind};
use crate::gateway::Gateway;
use crate::output::{Out, Render, note};
use anyhow::{Context, Result};
use dialectic_proto::v1::GetWalletRequest;
use serde_json::{Value, json};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::Command;

/// `auth login`: the key into the context in use (with --gateway and
/// --ca-cert, those too), the rest of the file kept.
pub fn login(at: Location, named: Option<String>, flags: context::Flags, out: Out) -> Result<()> {
    // Login creates the file, even one named with --config-file.
    let at = Location {
        required: false,
        ..at
    };
    let mut file = FileConfig::read(&at)
        .map_err(as_config_error)?
        .unwrap_or_default();
    let (name, mut connection) = file.connection(named.as_deref())?;
    connection.api_key = Some(read_key()?);
    if flags.gateway.is_some() {
        connection.gateway_url = flags.gateway.clone();
    }
    if let Some(ca) = flags.ca_cert {
        connection.ca_cert = Some(context::absolute(&ca)?);
    }
    let key = connection.api_key.clone().unwrap_or_default();
    file.set_connection(&name, connection);
    file.save(&at.path)?;
    out.show(&LoggedIn {
        path: at.path,
        context: name,
        gateway: flags.gateway,
        key,
    });
    Ok(())
}

/// Enough of a key to tell keys apart, too little to use one.
pub fn prefix(key: &str) -> String {
    format!("{}…", key.chars().take(8).collect::<String>())
}

/// The key from stdin: piped, or typed at a prompt that does not echo it.
pub fn read_key() -> Result<String> {
    let stdin = std::io::stdin();
    let mut text = String::new();
    if stdin.is_terminal() {
        text = prompt()?;
    } else {
        stdin
            .lock()
            .read_to_string(&mut text)
            .context("cannot read the key from stdin")?;
    }
    let key = text.trim();
    if key.is_empty() || key.contains(char::is_whitespace) {
        return Err(Failed::new(Kind::Usage, "no API key on stdin (one key, one line)").into());
    }
    Ok(key.to_string())
}

/// `stty -echo` on the terminal while the key is typed: no dependency for
/// one prompt, and it fails closed (no prompt) where stty cannot.
fn prompt() -> Result<String> {
    let tty = || std::fs::File::open("/dev/tty").context("no terminal to prompt on");
    let silenced = Command::new("stty").arg("-echo").stdin(tty()?).status();
    if !silenced.is_ok_and(|s| s.success()) {
        return Err(Failed::new(
            Kind::Usage,
            "cannot hide the key as it is typed; pipe it on stdin instead",
        )
        .into());
    }
    eprint!("API key: ");
    let mut line = String::new();
    let read = std::io::stdin().read_line(&mut line);
    let _ = Command::new("stty").arg("echo").stdin(tty()?).status();
    eprintln!();
    read.context("cannot read the key")?;
    Ok(line)
}

pub struct LoggedIn {
    pub path: PathBuf,
    pub context: String,
    pub gateway: Option<String>,
    pub key: String,
}

impl Render for LoggedIn {
    fn text(&self) -> String {
        let gateway = self
            .gateway
            .as_deref()
            .map(|g| format!(" for {g}"))
            .unwrap_or_default();
        format!(
            "stored key {}{gateway} as context {} in {} (mode 600); \
             `dialectic auth status` checks it\n",
            prefix(&self.key),
            self.context,
            self.path.display()
        )
    }
    fn json(&self) -> Value {
        json!({
            "config_file": self.path,
            "context": self.context,
            "gateway_url": self.gateway,
            "key_prefix": prefix(&self.key),
        })
    }
}

/// Which gateway, which key and where it came from.
pub struct Identity {
    pub gateway: String,
    pub key: String,
    pub key_from: String,
}

struct Status<'a> {
    who: &'a Identity,
    wallet_id: String,
    available: i64,
}

impl Render for Status<'_> {
    fn text(&self) -> String {
        format!(
            "gateway  {}\nkey      {} (from {})\nworks    yes: wallet {}, {} tokens available\n",
            self.who.gateway,
            prefix(&self.who.key),
            self.who.key_from,
            self.wallet_id,
            self.available
        )
    }
    fn json(&self) -> Value {
        json!({
            "gateway_url": self.who.gateway,
            "key_prefix": prefix(&self.who.key),
            "key_from": self.who.key_from,
            "valid": true,
            "wallet_id": self.wallet_id,
            "available": self.available.to_string(),
        })
    }
}

/// There is no who-am-I call; GetWallet is the cheapest authenticated one
/// and names the key's wallet.
pub async fn status(gateway: &Gateway, out: Out, who: &Identity) -> Result<()> {
    let wallet = gateway
        .call(|mut c| {
            let request = gateway.request(GetWalletRequest { history: 0 });
            async move { c.get_wallet(request).await }
        })
        .await;
    let wallet = wallet.inspect_err(|_| {
        note(&format!(
            "gateway {}, key {} (from {})",
            who.gateway,
            prefix(&who.key),
            who.key_from
        ))
    })?;
    out.show(&Status {
        who,
        wallet_id: wallet.wallet_id,
        available: wallet.available,
    });
    Ok(())
}
