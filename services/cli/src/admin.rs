//! `dialectic admin`: operator commands that talk to the broker directly
//! rather than through the gateway.

use crate::exit::{Failed, Kind};
use crate::output::{Out, Render, lines};
use anyhow::Result;
use clap::{Args, Subcommand};
use dialectic_queue::Topology;
use dialectic_queue::dead::{self, DeadLetter, Selection};
use serde_json::{Value, json};

#[derive(Args)]
pub struct AdminArgs {
    /// RabbitMQ URL (the services' `amqp.url`).
    #[arg(
        long,
        env = "DIALECTIC_AMQP__URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f",
        global = true
    )]
    amqp_url: String,
    /// Exchange and queue name prefix (the services' `amqp.prefix`).
    #[arg(
        long,
        env = "DIALECTIC_AMQP__PREFIX",
        default_value = "dialectic",
        global = true
    )]
    amqp_prefix: String,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand)]
enum AdminCommand {
    /// The dead-letter queue: messages that could never be handled.
    Dlq {
        #[command(subcommand)]
        command: DlqCommand,
    },
}

#[derive(Subcommand)]
enum DlqCommand {
    /// List dead letters (oldest first) without removing them.
    List {
        /// At most this many dead letters.
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Print one dead letter in full (its id or an unambiguous prefix).
    Show {
        /// The dead letter's id, or a prefix only it has.
        id: String,
    },
    /// Send dead letters back to the queue they came from. Replaying a finished
    /// job's dispatch is harmless: the job cannot be claimed again.
    Replay {
        /// Ids (or prefixes) to replay.
        ids: Vec<String>,
        /// Replay every dead letter.
        #[arg(long, conflicts_with = "ids")]
        all: bool,
        /// Look at most this many messages deep.
        #[arg(long, default_value_t = 10_000)]
        limit: usize,
    },
}

pub async fn run(args: AdminArgs, out: Out) -> Result<()> {
    let connection = dialectic_queue::connect(&args.amqp_url)
        .await
        .map_err(|e| {
            Failed::new(
                Kind::Unavailable,
                format!("cannot reach RabbitMQ at {}: {e}", mask(&args.amqp_url)),
            )
        })?;
    let topology = Topology::new(args.amqp_prefix, 0);
    let AdminCommand::Dlq { command } = args.command;
    let result = dlq(&connection, &topology, command, out).await;
    let _ = connection.close(200, "done".into()).await;
    result
}

fn letter_json(letter: &DeadLetter) -> Value {
    json!({
        "id": letter.id,
        "routing_key": letter.routing_key,
        "reason": letter.reason,
        "deaths": letter.deaths,
        "summary": letter.summary,
        "traceparent": letter.traceparent,
        "size_bytes": letter.body.len(),
    })
}

/// `dlq list`: the letters, oldest first.
struct Letters {
    queue: String,
    letters: Vec<DeadLetter>,
}

impl Render for Letters {
    fn text(&self) -> String {
        lines(&self.letters, &format!("{} is empty", self.queue), |l| {
            format!(
                "{}  {:<16} {:<24} {}",
                l.id, l.routing_key, l.reason, l.summary
            )
        })
    }
    fn json(&self) -> Value {
        self.letters.iter().map(letter_json).collect()
    }
}

/// `dlq show`: one letter in full, and how many identical copies wait.
struct Shown<'a> {
    letter: &'a DeadLetter,
    copies: usize,
}

impl Render for Shown<'_> {
    fn text(&self) -> String {
        let l = self.letter;
        let mut text = format!(
            "id           {}\nrouting key  {}\nreason       {}\ndeaths       {}\nmessage      {}\n",
            l.id, l.routing_key, l.reason, l.deaths, l.summary
        );
        if let Some(tp) = &l.traceparent {
            text.push_str(&format!("traceparent  {tp}\n"));
        }
        text.push_str(&format!("bytes        {}\n", l.body.len()));
        if self.copies > 1 {
            text.push_str(&format!(
                "copies       {} identical messages\n",
                self.copies
            ));
        }
        text
    }
    fn json(&self) -> Value {
        let mut value = letter_json(self.letter);
        value["copies"] = self.copies.into();
        value
    }
}

/// `dlq replay`: what went back to its queue.
struct Replayed(Vec<DeadLetter>);

impl Render for Replayed {
    fn text(&self) -> String {
        let mut text: String = self
            .0
            .iter()
            .map(|l| format!("replayed {}  {}  {}\n", l.id, l.routing_key, l.summary))
            .collect();
        text.push_str(&format!("{} message(s) replayed\n", self.0.len()));
        text
    }
    fn json(&self) -> Value {
        self.0.iter().map(letter_json).collect()
    }
}

async fn dlq(
    connection: &lapin::Connection,
    topology: &Topology,
    command: DlqCommand,
    out: Out,
) -> Result<()> {
    match command {
        DlqCommand::List { limit } => out.show(&Letters {
            queue: topology.dead_queue(),
            letters: dead::list(connection, topology, limit).await?,
        }),
        DlqCommand::Show { id } => {
            let letters = dead::list(connection, topology, usize::MAX).await?;
            let matching: Vec<&DeadLetter> =
                letters.iter().filter(|l| l.id.starts_with(&id)).collect();
            let Some(letter) = matching.first() else {
                return Err(
                    Failed::new(Kind::NotFound, format!("no dead letter with id {id}")).into(),
                );
            };
            out.show(&Shown {
                letter,
                copies: matching.len(),
            });
        }
        DlqCommand::Replay { ids, all, limit } => {
            let selection = match (all, ids.is_empty()) {
                (true, _) => Selection::All,
                (false, false) => Selection::Ids(ids),
                (false, true) => {
                    return Err(Failed::new(Kind::Usage, "name the ids to replay, or --all").into());
                }
            };
            out.show(&Replayed(
                dead::replay(connection, topology, &selection, limit).await?,
            ));
        }
    }
    Ok(())
}

/// The URL without its password, for error messages.
fn mask(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_masked() {
        assert_eq!(
            super::mask("amqp://guest:secret@host:5672/%2f"),
            "amqp://guest:***@host:5672/%2f"
        );
        assert_eq!(super::mask("amqp://host"), "amqp://host");
    }
}
