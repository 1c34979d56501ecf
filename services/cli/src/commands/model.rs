//! The models a session may use.

use crate::cli::ModelCommand;
use crate::gateway::Gateway;
use crate::output::{Out, Render};
use crate::{format, json};
use anyhow::Result;
use dialectic_proto::v1::{ListModelsRequest, Model};
use serde_json::Value;

impl Render for Vec<Model> {
    fn text(&self) -> String {
        format::models(self)
    }
    fn json(&self) -> Value {
        self.iter().map(json::model).collect()
    }
}

pub async fn dispatch(gateway: &Gateway, out: Out, command: ModelCommand) -> Result<()> {
    match command {
        ModelCommand::List => list(gateway, out).await,
    }
}

pub async fn list(gateway: &Gateway, out: Out) -> Result<()> {
    let all = crate::paging::all("models", |page_size, page_token| async move {
        let page = gateway
            .call(|mut c| {
                let request = gateway.request(ListModelsRequest {
                    page_size,
                    page_token: page_token.clone(),
                });
                async move { c.list_models(request).await }
            })
            .await?;
        Ok((page.models, page.next_page_token))
    })
    .await?;
    out.show(&all);
    Ok(())
}
