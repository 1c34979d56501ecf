//! Client channels that spread internal calls over every replica of the
//! service they call. A Kubernetes ClusterIP balances connections, and one
//! HTTP/2 connection carries every call, so a replica added later would get
//! nothing from callers already running. Instead the caller resolves the
//! service's name itself (a headless Service returns one address per ready
//! pod), keeps a connection to each address, sends each call to the less
//! loaded of two (tower's power-of-two-choices balancer, through tonic), and
//! resolves again every `internal.resolve_interval_ms`: a new replica gets
//! calls within one interval, and a replica that left stops getting them.
//!
//! A name that does not resolve keeps the last addresses it had; before the
//! first answer it is dialled by name, so calls fail fast with UNAVAILABLE
//! instead of waiting for an address that may never come.

use dialectic_config::InternalConfig;
use std::collections::BTreeSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;
use tonic::transport::channel::Change;
use tonic::transport::{Channel, Endpoint};

#[derive(Debug, thiserror::Error)]
pub enum BalanceError {
    #[error("internal service URL {url:?}: {reason}")]
    Url { url: String, reason: String },
}

/// Where one service is reached: an address, or its unresolved name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Target {
    Address(SocketAddr),
    Name,
}

/// A channel to the service at `url`, balanced over every address its host
/// name resolves to (or a plain channel when the host is an IP address).
pub fn balanced_channel(url: &str, internal: &InternalConfig) -> Result<Channel, BalanceError> {
    let bad = |reason: String| BalanceError::Url {
        url: url.to_string(),
        reason,
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(e.to_string()))?;
    let host = uri.host().ok_or_else(|| bad("no host".into()))?;
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = uri
        .port_u16()
        .unwrap_or(if uri.scheme_str() == Some("https") {
            443
        } else {
            80
        });
    let by_name = endpoint(url).map_err(bad)?;
    if host.parse::<IpAddr>().is_ok() {
        return Ok(by_name.connect_lazy());
    }
    let (channel, changes) = Channel::balance_channel::<Target>(64);
    let resolver = Resolver {
        host,
        port,
        scheme: uri.scheme_str().unwrap_or("http").to_string(),
        hosts_file: internal.hosts_file.trim().to_string(),
        interval: Duration::from_millis(internal.resolve_interval_ms.max(100)),
    };
    tokio::spawn(resolver.run(by_name, changes));
    Ok(channel)
}

fn endpoint(url: &str) -> Result<Endpoint, String> {
    Endpoint::from_shared(url.to_string())
        .map(|e| e.connect_timeout(Duration::from_secs(5)).tcp_nodelay(true))
        .map_err(|e| e.to_string())
}

struct Resolver {
    host: String,
    port: u16,
    scheme: String,
    hosts_file: String,
    interval: Duration,
}

type Changes = tokio::sync::mpsc::Sender<Change<Target, Endpoint>>;

impl Resolver {
    /// Re-resolves until the channel is dropped (its receiver then closes).
    async fn run(self, by_name: Endpoint, changes: Changes) {
        let mut current = BTreeSet::new();
        loop {
            let wanted = match self.resolve().await {
                Ok(found) if !found.is_empty() => found.into_iter().map(Target::Address).collect(),
                Ok(_) | Err(_) if !current.is_empty() => current.clone(),
                outcome => {
                    if let Err(e) = outcome {
                        tracing::warn!(host = %self.host, error = %e, "cannot resolve an internal service");
                    }
                    BTreeSet::from([Target::Name])
                }
            };
            for change in diff(&current, &wanted) {
                let change = match change {
                    Change::Insert(target, ()) => {
                        let endpoint = self.endpoint_for(&target, &by_name);
                        Change::Insert(target, endpoint)
                    }
                    Change::Remove(target) => Change::Remove(target),
                };
                if changes.send(change).await.is_err() {
                    return;
                }
            }
            if current != wanted {
                tracing::info!(host = %self.host, replicas = wanted.len(), "internal service addresses changed");
            }
            current = wanted;
            tokio::time::sleep(self.interval).await;
        }
    }

    fn endpoint_for(&self, target: &Target, by_name: &Endpoint) -> Endpoint {
        match target {
            Target::Name => by_name.clone(),
            Target::Address(addr) => {
                endpoint(&format!("{}://{addr}", self.scheme)).unwrap_or_else(|_| by_name.clone())
            }
        }
    }

    async fn resolve(&self) -> std::io::Result<BTreeSet<SocketAddr>> {
        if !self.hosts_file.is_empty() {
            let text = tokio::fs::read_to_string(&self.hosts_file).await?;
            let pinned = hosts_entries(&text, &self.host);
            if !pinned.is_empty() {
                return Ok(pinned
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, self.port))
                    .collect());
            }
        }
        Ok(tokio::net::lookup_host((self.host.as_str(), self.port))
            .await?
            .collect())
    }
}

/// The addresses a hosts(5)-format text gives `host`, every line that names it.
fn hosts_entries(text: &str, host: &str) -> BTreeSet<IpAddr> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let ip = fields.next()?.parse::<IpAddr>().ok()?;
            fields
                .any(|name| name.eq_ignore_ascii_case(host))
                .then_some(ip)
        })
        .collect()
}

/// The changes that turn the `current` set of targets into `wanted`:
/// additions before removals, so the balancer is never left empty.
fn diff(current: &BTreeSet<Target>, wanted: &BTreeSet<Target>) -> Vec<Change<Target, ()>> {
    let added = wanted
        .difference(current)
        .cloned()
        .map(|t| Change::Insert(t, ()));
    let removed = current.difference(wanted).cloned().map(Change::Remove);
    added.chain(removed).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> Target {
        Target::Address(s.parse().expect("address"))
    }

    #[test]
    fn a_hosts_file_gives_every_address_of_a_name() {
        let text = "127.0.0.2 wallet.test # first\n127.0.0.3  other wallet.test\n\
                    # 127.0.0.9 wallet.test\n127.0.0.4 walletXtest\nnot-an-ip wallet.test\n";
        let found: Vec<String> = hosts_entries(text, "Wallet.Test")
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(found, ["127.0.0.2", "127.0.0.3"]);
    }

    #[test]
    fn changes_add_before_they_remove() {
        let current = BTreeSet::from([Target::Name, addr("127.0.0.2:1")]);
        let wanted = BTreeSet::from([addr("127.0.0.2:1"), addr("127.0.0.3:1")]);
        let changes: Vec<String> = diff(&current, &wanted)
            .into_iter()
            .map(|c| match c {
                Change::Insert(t, ()) => format!("+{t:?}"),
                Change::Remove(t) => format!("-{t:?}"),
            })
            .collect();
        assert_eq!(changes, ["+Address(127.0.0.3:1)", "-Name"]);
    }
}
