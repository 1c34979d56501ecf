//! Lists that follow `next_page_token` (issue 61): every page up to
//! `--limit` (default: all), a count on stderr while many pages come in at a
//! terminal, and the token kept when `--limit` stopped with more left.

use crate::output::{Out, Render, note};
use anyhow::{Result, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{Value, json};
use std::future::Future;
use std::io::IsTerminal;

/// The largest page the gateway returns; bigger asks are cut to it.
const MAX_PAGE: u32 = 200;

/// How much of a list to fetch.
#[derive(Args, Clone, Debug, Default)]
pub struct PageArgs {
    /// At most this many rows; default: all of them. With --limit, --output
    /// json/yaml is an object that keeps `next_page_token` (empty when
    /// nothing is left).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Continue a list from the `next_page_token` a `--limit` run printed.
    #[arg(long)]
    pub page_token: Option<String>,
}

/// What to list and in which order (the API's `filter` and `order_by`).
#[derive(Args, Clone, Debug, Default)]
pub struct QueryArgs {
    /// A filter, e.g. `name:"draft*"`, `state = RUNNING`,
    /// `created_at > "2026-01-01T00:00:00Z"`, joined by AND (docs/api.md).
    #[arg(long)]
    pub filter: Option<String>,
    /// `created_at desc` (default), `created_at`; projects also `name`, `name desc`.
    #[arg(long)]
    pub order_by: Option<String>,
}

/// The rows a list call gathered.
pub struct Listed<T> {
    /// The JSON key of the rows when the answer is an object (`projects`).
    pub key: &'static str,
    pub items: Vec<T>,
    /// Where the list goes on; empty when every row was read.
    pub next_page_token: String,
    /// A `--limit` was given: JSON keeps the token, in an object.
    pub limited: bool,
}

impl<T> Render for Listed<T>
where
    Vec<T>: Render,
{
    fn text(&self) -> String {
        self.items.text()
    }
    fn json(&self) -> Value {
        if self.limited {
            json!({ self.key: self.items.json(), "next_page_token": self.next_page_token })
        } else {
            self.items.json()
        }
    }
}

impl<T> Listed<T>
where
    Vec<T>: Render,
{
    /// Prints the rows; on a text run, a note on stderr says how to go on.
    pub fn show(&self, out: Out) {
        out.show(self);
        if out.is_text() && !self.next_page_token.is_empty() {
            note(&format!(
                "more {} exist; continue with --page-token {}",
                self.key, self.next_page_token
            ));
        }
    }
}

/// Fetches pages with `fetch(page_size, page_token)` until the list ends or
/// `page.limit` rows are read.
pub async fn collect<T, F, Fut>(
    key: &'static str,
    page: &PageArgs,
    mut fetch: F,
) -> Result<Listed<T>>
where
    F: FnMut(u32, String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String)>>,
{
    let mut items = Vec::new();
    let mut token = page.page_token.clone().unwrap_or_default();
    let mut progress = Progress::new(key);
    loop {
        let want = page.limit.map_or(MAX_PAGE, |l| {
            let left = l.saturating_sub(u32::try_from(items.len()).unwrap_or(u32::MAX));
            left.min(MAX_PAGE)
        });
        if want == 0 {
            break;
        }
        let (rows, next) = fetch(want, token.clone()).await?;
        // A server that hands back the token it was sent would loop forever.
        if !next.is_empty() && next == token {
            bail!("the gateway returned page token {next:?} again; stopping");
        }
        items.extend(rows);
        token = next;
        progress.update(items.len());
        if token.is_empty() {
            break;
        }
    }
    progress.finish();
    Ok(Listed {
        key,
        items,
        next_page_token: token,
        limited: page.limit.is_some(),
    })
}

/// Every row of a list.
pub async fn all<T, F, Fut>(key: &'static str, fetch: F) -> Result<Vec<T>>
where
    F: FnMut(u32, String) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, String)>>,
{
    Ok(collect(key, &PageArgs::default(), fetch).await?.items)
}

/// A count of rows read, drawn on stderr only when it is a terminal and
/// only once a second page came in (a one-page list draws nothing).
struct Progress {
    key: &'static str,
    terminal: bool,
    bar: Option<ProgressBar>,
}

impl Progress {
    fn new(key: &'static str) -> Self {
        Self {
            key,
            terminal: std::io::stderr().is_terminal(),
            bar: None,
        }
    }

    fn update(&mut self, read: usize) {
        if !self.terminal || read <= MAX_PAGE as usize {
            return;
        }
        let key = self.key;
        let bar = self.bar.get_or_insert_with(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {pos} {msg} read")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(key);
            bar
        });
        bar.set_position(read as u64);
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A list of `n` numbers served in pages, as the gateway serves one.
    async fn pages(n: u32, page: &PageArgs) -> (Listed<u32>, Vec<u32>) {
        let mut asked = Vec::new();
        let listed = collect("numbers", page, |size, token| {
            asked.push(size);
            let start: u32 = token.parse().unwrap_or(0);
            let end = (start + size).min(n);
            let next = if end < n {
                end.to_string()
            } else {
                String::new()
            };
            async move { Ok(((start..end).collect(), next)) }
        })
        .await
        .expect("listed");
        (listed, asked)
    }

    #[tokio::test]
    async fn follows_tokens_to_the_end_or_the_limit() {
        let (all, asked) = pages(450, &PageArgs::default()).await;
        assert_eq!(all.items, (0..450).collect::<Vec<_>>());
        assert_eq!(
            (asked, all.next_page_token.as_str()),
            (vec![200, 200, 200], "")
        );
        let limit = PageArgs {
            limit: Some(250),
            page_token: None,
        };
        let (some, asked) = pages(450, &limit).await;
        assert_eq!(some.items, (0..250).collect::<Vec<_>>());
        assert_eq!(
            (asked, some.next_page_token.as_str()),
            (vec![200, 50], "250")
        );
        let on = PageArgs {
            limit: Some(10),
            page_token: Some("445".into()),
        };
        let (rest, _) = pages(450, &on).await;
        assert_eq!(
            (rest.items, rest.next_page_token),
            ((445..450).collect(), String::new())
        );
    }

    #[tokio::test]
    async fn a_token_that_never_moves_stops_the_list() {
        let stuck = collect("numbers", &PageArgs::default(), |_, _| async {
            Ok((vec![1u32], "same".to_string()))
        })
        .await;
        assert!(stuck.is_err());
    }
}
