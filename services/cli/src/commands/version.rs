//! `dialectic version`: this CLI's release and what the gateway runs, so a
//! bug report names both.

use crate::gateway::Gateway;
use crate::json;
use crate::output::{Out, Render};
use anyhow::Result;
use dialectic_proto::v1::{GetServerInfoRequest, ServerInfo};
use serde_json::{Value, json};

const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

struct Versions {
    server: Option<ServerInfo>,
}

impl Render for Versions {
    fn text(&self) -> String {
        let mut text = format!("client: {CLIENT_VERSION}\n");
        if let Some(server) = &self.server {
            text += &format!(
                "server: {} (build {}, api {})\n",
                server.version, server.build, server.api
            );
            text += &format!("features: {}\n", server.features.join(", "));
        }
        text
    }

    fn json(&self) -> Value {
        json!({
            "client": { "version": CLIENT_VERSION },
            "server": self.server.as_ref().map(json::server_info),
        })
    }
}

/// Prints the client's release even when the gateway cannot be asked, and
/// then fails with the reason, as `kubectl version` does.
pub async fn show(gateway: Result<Gateway>, out: Out) -> Result<()> {
    let server = match gateway {
        Ok(gateway) => server_info(&gateway).await,
        Err(error) => Err(error),
    };
    match server {
        Ok(info) => {
            out.show(&Versions { server: Some(info) });
            Ok(())
        }
        Err(error) => {
            out.show(&Versions { server: None });
            Err(error)
        }
    }
}

async fn server_info(gateway: &Gateway) -> Result<ServerInfo> {
    Ok(gateway
        .call(|mut client| {
            let request = gateway.request(GetServerInfoRequest {});
            async move { client.get_server_info(request).await }
        })
        .await?)
}
