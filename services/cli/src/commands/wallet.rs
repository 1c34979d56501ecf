//! Your wallet: balance, held, available, recent transactions.

use crate::cli::{WalletArgs, WalletCommand};
use crate::gateway::Gateway;
use crate::output::{Out, Render};
use crate::{format, json};
use anyhow::Result;
use dialectic_proto::v1::{GetWalletRequest, Wallet};
use serde_json::Value;

impl Render for Wallet {
    fn text(&self) -> String {
        format::wallet(self)
    }
    fn json(&self) -> Value {
        json::wallet(self)
    }
}

pub async fn dispatch(gateway: &Gateway, out: Out, args: WalletArgs) -> Result<()> {
    let history = match args.command {
        Some(WalletCommand::Show(h)) => h.history,
        None => args.history.history,
    };
    show(gateway, out, history).await
}

pub async fn show(gateway: &Gateway, out: Out, history: u32) -> Result<()> {
    let wallet = gateway
        .call(|mut c| {
            let request = gateway.request(GetWalletRequest { history });
            async move { c.get_wallet(request).await }
        })
        .await?;
    out.show(&wallet);
    Ok(())
}
