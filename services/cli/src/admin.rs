//! `dialectic admin`: operator commands that talk to the broker directly
//! rather than through the gateway.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use dialectic_queue::Topology;
use dialectic_queue::dead::{self, DeadLetter, Selection};

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
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Print one dead letter in full (its id or an unambiguous prefix).
    Show { id: String },
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

pub async fn run(args: AdminArgs) -> Result<()> {
    let connection = dialectic_queue::connect(&args.amqp_url)
        .await
        .with_context(|| format!("cannot reach RabbitMQ at {}", mask(&args.amqp_url)))?;
    let topology = Topology::new(args.amqp_prefix, 0);
    let AdminCommand::Dlq { command } = args.command;
    let result = dlq(&connection, &topology, command).await;
    let _ = connection.close(200, "done".into()).await;
    result
}

async fn dlq(
    connection: &lapin::Connection,
    topology: &Topology,
    command: DlqCommand,
) -> Result<()> {
    match command {
        DlqCommand::List { limit } => {
            let letters = dead::list(connection, topology, limit).await?;
            if letters.is_empty() {
                println!("{} is empty", topology.dead_queue());
            }
            for letter in &letters {
                println!(
                    "{}  {:<16} {:<24} {}",
                    letter.id, letter.routing_key, letter.reason, letter.summary
                );
            }
        }
        DlqCommand::Show { id } => {
            let letters = dead::list(connection, topology, usize::MAX).await?;
            let matching: Vec<&DeadLetter> =
                letters.iter().filter(|l| l.id.starts_with(&id)).collect();
            match matching.as_slice() {
                [] => bail!("no dead letter with id {id}"),
                [letter, ..] => {
                    println!("id           {}", letter.id);
                    println!("routing key  {}", letter.routing_key);
                    println!("reason       {}", letter.reason);
                    println!("deaths       {}", letter.deaths);
                    println!("message      {}", letter.summary);
                    if let Some(tp) = &letter.traceparent {
                        println!("traceparent  {tp}");
                    }
                    println!("bytes        {}", letter.body.len());
                    if matching.len() > 1 {
                        println!("copies       {} identical messages", matching.len());
                    }
                }
            }
        }
        DlqCommand::Replay { ids, all, limit } => {
            let selection = match (all, ids.is_empty()) {
                (true, _) => Selection::All,
                (false, false) => Selection::Ids(ids),
                (false, true) => bail!("name the ids to replay, or --all"),
            };
            let replayed = dead::replay(connection, topology, &selection, limit).await?;
            for letter in &replayed {
                println!(
                    "replayed {}  {}  {}",
                    letter.id, letter.routing_key, letter.summary
                );
            }
            println!("{} message(s) replayed", replayed.len());
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
