//! `dialecticd secret-hook KIND`: the chart's pre-install/pre-upgrade hook
//! that creates a Secret of generated keys once, and never reads or replaces
//! an existing one. The keys are drawn here and go from this process's memory
//! to the Kubernetes API in a request body: no key is ever on a command line
//! (where `/proc/*/cmdline` shows it to every process of the node that can
//! list processes) or seen by another image.
//!
//! The request is Kubernetes' "create a Secret" (API reference,
//! <https://kubernetes.io/docs/reference/kubernetes-api/config-and-storage-resources/secret-v1/#create-create-a-secret>):
//! `POST /api/v1/namespaces/{namespace}/secrets` with a v1 Secret as JSON,
//! authenticated by the pod's service-account token as a bearer token
//! (<https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/>).
//! It answers 201 Created, or 409 Conflict when a Secret of that name exists.

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use dialectic_core::service_auth::{ServiceName, SigningKey, hex};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where Kubernetes mounts a pod's service-account token and the cluster CA.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// A Status body worth showing is short; a longer reply is cut.
const MAX_REPLY_SHOWN: usize = 2_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// One Ed25519 key pair per service: `{service}.key` (hex seed) and
    /// `{service}.pub`, as `dialecticd keys generate` writes them.
    ServiceKeys,
    /// The shared token secret, DIALECTIC_INTERNAL__TOKEN_SECRET (48 random bytes, hex).
    InternalSecret,
}

impl Kind {
    fn component(self) -> &'static str {
        match self {
            Kind::ServiceKeys => "service-keys",
            Kind::InternalSecret => "internal-secret",
        }
    }
}

#[derive(Args, Debug)]
pub struct SecretHookArgs {
    /// What the Secret holds.
    #[arg(value_enum)]
    kind: Kind,
    /// The Secret to create.
    #[arg(long, env = "SECRET_NAME")]
    secret: String,
    /// Its namespace.
    #[arg(long, env = "NAMESPACE")]
    namespace: String,
    /// The app.kubernetes.io/name label (the chart's name).
    #[arg(long, env = "CHART_NAME", default_value = "dialectic")]
    chart_name: String,
    /// The app.kubernetes.io/part-of label (the release's name).
    #[arg(long, env = "RELEASE_NAME")]
    release_name: String,
    /// The directory holding the service-account `token` and the cluster's `ca.crt`.
    #[arg(long, default_value = SERVICE_ACCOUNT_DIR)]
    api_dir: PathBuf,
    /// The API server's URL; by default https:// KUBERNETES_SERVICE_HOST and
    /// _PORT, as every pod is given them. http:// only to a loopback
    /// address (tests), since the token travels with the request.
    #[arg(long)]
    api_url: Option<String>,
}

/// What the API did with the create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    /// A Secret of that name exists; it was neither read nor changed.
    Exists,
}

/// The Kubernetes API as this pod reaches it.
pub struct Api {
    base: reqwest::Url,
    token: String,
    client: reqwest::Client,
}

impl Api {
    /// The in-cluster API: the token and CA from `dir`, the address from
    /// `url` or the KUBERNETES_SERVICE_* variables.
    pub fn in_cluster(dir: &Path, url: Option<&str>) -> anyhow::Result<Api> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
        };
        let token = String::from_utf8(read("token")?)
            .context("the service-account token is not text")?
            .trim()
            .to_string();
        let base = match url {
            Some(url) => url.to_string(),
            None => {
                let host = std::env::var("KUBERNETES_SERVICE_HOST")
                    .context("KUBERNETES_SERVICE_HOST is not set: not in a pod?")?;
                let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or("443".into());
                // An IPv6 service address needs brackets in a URL.
                match host.parse::<IpAddr>() {
                    Ok(IpAddr::V6(_)) => format!("https://[{host}]:{port}"),
                    _ => format!("https://{host}:{port}"),
                }
            }
        };
        let base = reqwest::Url::parse(&base).with_context(|| format!("API URL {base:?}"))?;
        let builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30));
        let client = match base.scheme() {
            "https" => {
                let ca = reqwest::Certificate::from_pem(&read("ca.crt")?)
                    .context("the cluster CA (ca.crt) is not a PEM certificate")?;
                // The cluster's CA only: the API server's certificate is signed by it.
                builder
                    .tls_built_in_root_certs(false)
                    .add_root_certificate(ca)
                    .build()?
            }
            "http" if is_loopback(&base) => builder.build()?,
            _ => bail!("API URL {base}: https, or http to a loopback address only"),
        };
        Ok(Api {
            base,
            token,
            client,
        })
    }

    /// Creates the Secret `name` holding `data` unless one of that name
    /// exists. The values go in `stringData` (the API stores them base64 in
    /// `data`).
    pub async fn create_secret(
        &self,
        namespace: &str,
        name: &str,
        labels: &BTreeMap<&str, String>,
        data: &BTreeMap<String, String>,
    ) -> anyhow::Result<Outcome> {
        let url = self
            .base
            .join(&format!("api/v1/namespaces/{namespace}/secrets"))?;
        let body = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": name, "labels": labels},
            "stringData": data,
        });
        let reply = self
            .client
            .post(url.clone())
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        let status = reply.status();
        match status.as_u16() {
            201 => Ok(Outcome::Created),
            409 => Ok(Outcome::Exists),
            _ => {
                // A Status object says why (Forbidden, Invalid, …); it holds
                // no key (the API does not echo Secret data).
                let text = reply.text().await.unwrap_or_default();
                let shown: String = text.chars().take(MAX_REPLY_SHOWN).collect();
                bail!("creating Secret {namespace}/{name}: HTTP {status}: {shown}")
            }
        }
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The Secret's members, drawn now.
pub fn generate(kind: Kind) -> anyhow::Result<BTreeMap<String, String>> {
    let mut data = BTreeMap::new();
    match kind {
        Kind::ServiceKeys => {
            for service in ServiceName::ALL {
                let seed = SigningKey::random_seed().context("drawing a key")?;
                let key = SigningKey::from_seed(&seed).context("deriving a key pair")?;
                // As generate_keys writes the files: hex and a newline.
                data.insert(
                    format!("{}.key", service.as_str()),
                    format!("{}\n", hex(&seed)),
                );
                data.insert(
                    format!("{}.pub", service.as_str()),
                    format!("{}\n", hex(&key.public_key())),
                );
            }
        }
        Kind::InternalSecret => {
            let a = SigningKey::random_seed().context("drawing the secret")?;
            let b = SigningKey::random_seed().context("drawing the secret")?;
            // 48 random bytes as 96 hex characters.
            let value = format!("{}{}", hex(&a), hex(&b[..16]));
            data.insert("DIALECTIC_INTERNAL__TOKEN_SECRET".into(), value);
        }
    }
    Ok(data)
}

/// `dialecticd secret-hook KIND`.
pub async fn run(args: SecretHookArgs) -> anyhow::Result<()> {
    let api = Api::in_cluster(&args.api_dir, args.api_url.as_deref())?;
    let labels = BTreeMap::from([
        ("app.kubernetes.io/name", args.chart_name.clone()),
        ("app.kubernetes.io/part-of", args.release_name.clone()),
        (
            "app.kubernetes.io/component",
            args.kind.component().to_string(),
        ),
    ]);
    let data = generate(args.kind)?;
    match api
        .create_secret(&args.namespace, &args.secret, &labels, &data)
        .await?
    {
        Outcome::Created => println!("created Secret {}", args.secret),
        Outcome::Exists => println!("Secret {} exists; left as it is", args.secret),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// One request as the fake API server read it.
    struct Seen {
        head: String,
        body: Value,
    }

    /// A fake Kubernetes API: answers one request with `status` and a
    /// Status object, and hands over what it read.
    async fn fake_api(status: u16) -> (String, tokio::task::JoinHandle<Seen>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let seen = read_request(&mut socket).await;
            let reply = json!({"kind": "Status", "apiVersion": "v1", "code": status,
                               "reason": if status == 403 { "Forbidden" } else { "AlreadyExists" }})
            .to_string();
            let text = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            socket.write_all(text.as_bytes()).await.expect("reply");
            seen
        });
        (format!("http://{addr}"), task)
    }

    async fn read_request(socket: &mut tokio::net::TcpStream) -> Seen {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = socket.read(&mut chunk).await.expect("read");
            assert!(n > 0, "the client closed before a whole request");
            buf.extend_from_slice(&chunk[..n]);
            let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().expect("length"))
                })
                .expect("a content-length");
            if buf.len() >= end + 4 + length {
                let body = serde_json::from_slice(&buf[end + 4..end + 4 + length]).expect("json");
                return Seen { head, body };
            }
        }
    }

    fn api_dir(token: &str) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        std::fs::write(dir.path().join("token"), format!("{token}\n")).expect("token");
        dir
    }

    /// A directory removed on drop (no tempfile crate in this package).
    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let path = std::env::temp_dir()
                    .join(format!("dialecticd-secret-hook-{}", uuid::Uuid::new_v4()));
                std::fs::create_dir_all(&path).expect("temp dir");
                Dir(path)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    /// The members a Secret body carries: `stringData`'s keys.
    fn members(body: &Value) -> Vec<String> {
        body["stringData"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    fn labels() -> BTreeMap<&'static str, String> {
        BTreeMap::from([("app.kubernetes.io/component", "service-keys".to_string())])
    }

    #[tokio::test]
    async fn creates_the_secret_as_the_api_reference_describes() {
        let (url, server) = fake_api(201).await;
        let dir = api_dir("sa-token-1");
        let api = Api::in_cluster(dir.path(), Some(&url)).expect("api");
        let data = generate(Kind::ServiceKeys).expect("keys");
        let done = api
            .create_secret("dialectic", "dialectic-service-keys", &labels(), &data)
            .await
            .expect("created");
        assert_eq!(done, Outcome::Created);
        let seen = server.await.expect("server");
        let request_line = seen.head.lines().next().unwrap_or_default();
        assert_eq!(
            request_line,
            "POST /api/v1/namespaces/dialectic/secrets HTTP/1.1"
        );
        let head = seen.head.to_ascii_lowercase();
        assert!(head.contains("authorization: bearer sa-token-1"), "{head}");
        assert!(head.contains("content-type: application/json"), "{head}");
        assert_eq!(seen.body["apiVersion"], "v1");
        assert_eq!(seen.body["kind"], "Secret");
        assert_eq!(seen.body["metadata"]["name"], "dialectic-service-keys");
        let mut want: Vec<String> = ServiceName::ALL
            .iter()
            .flat_map(|s| [format!("{}.key", s.as_str()), format!("{}.pub", s.as_str())])
            .collect();
        want.sort();
        assert_eq!(members(&seen.body), want);
        // Each .pub is the public half of its .key, as the services check.
        for service in ServiceName::ALL {
            let text = |kind: &str| {
                seen.body["stringData"][format!("{}.{kind}", service.as_str())]
                    .as_str()
                    .expect("a member")
                    .trim()
                    .to_string()
            };
            let seed: Vec<u8> = (0..32)
                .map(|i| u8::from_str_radix(&text("key")[2 * i..2 * i + 2], 16).expect("hex"))
                .collect();
            let seed: [u8; 32] = seed.try_into().expect("32 bytes");
            let pair = SigningKey::from_seed(&seed).expect("a key");
            assert_eq!(hex(&pair.public_key()), text("pub"));
        }
    }

    #[tokio::test]
    async fn an_existing_secret_is_left_and_a_refusal_fails_without_the_keys() {
        let dir = api_dir("t");
        let (url, server) = fake_api(409).await;
        let api = Api::in_cluster(dir.path(), Some(&url)).expect("api");
        let data = generate(Kind::InternalSecret).expect("secret");
        let value = data["DIALECTIC_INTERNAL__TOKEN_SECRET"].clone();
        assert_eq!(value.len(), 96);
        let done = api
            .create_secret("ns", "dialectic-internal", &labels(), &data)
            .await
            .expect("409 is success");
        assert_eq!(done, Outcome::Exists);
        server.await.expect("server");

        let (url, server) = fake_api(403).await;
        let api = Api::in_cluster(dir.path(), Some(&url)).expect("api");
        let error = api
            .create_secret("ns", "dialectic-internal", &labels(), &data)
            .await
            .expect_err("403 fails")
            .to_string();
        assert!(
            error.contains("HTTP 403") && error.contains("Forbidden"),
            "{error}"
        );
        assert!(
            !error.contains(&value),
            "the error shows the secret: {error}"
        );
        server.await.expect("server");
    }

    #[test]
    fn plaintext_only_to_loopback_and_https_needs_the_ca() {
        let dir = api_dir("t");
        let refused = Api::in_cluster(dir.path(), Some("http://10.0.0.1"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(refused.contains("loopback"), "{refused}");
        let no_ca = Api::in_cluster(dir.path(), Some("https://10.0.0.1"))
            .err()
            .map(|e| format!("{e:#}"))
            .unwrap_or_default();
        assert!(no_ca.contains("ca.crt"), "{no_ca}");
    }
}
