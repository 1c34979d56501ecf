//! The `dialectic` binary as a person sees it: `run` under a pseudo-terminal
//! (util-linux `script`) draws one bar per stage with its jobs done out of its
//! total and the cost so far; piped, or with `--output json`, it prints the
//! lines scripts read.

use dialectic_e2e::TestEnv;
use dialectic_e2e::terminal::{Screen, bar};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

/// The pseudo-terminal's width.
const COLS: usize = 120;

const PROMPT: &str = "A lending library for power tools, run by neighbours for neighbours.";

fn quoted(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// `dialectic args…` against `env`'s gateway, its stdout a pipe unless `tty`,
/// in which case it runs on a [`COLS`]×40 pseudo-terminal and stdout is what the
/// terminal received.
async fn dialectic(env: &TestEnv, binary: &Path, args: &[&str], tty: bool) -> Output {
    let mut command = if tty {
        let line = std::iter::once(binary.to_str().expect("utf-8 path"))
            .chain(args.iter().copied())
            .map(quoted)
            .collect::<Vec<_>>()
            .join(" ");
        let mut script = tokio::process::Command::new("script");
        // -e: its exit status; -f: flush as it comes; the log goes nowhere.
        script
            .arg("-qfec")
            .arg(format!("stty cols {COLS} rows 40 2>/dev/null; exec {line}"));
        script.arg("/dev/null");
        script.env("TERM", "xterm-256color");
        script
    } else {
        let mut direct = tokio::process::Command::new(binary);
        direct.args(args);
        direct
    };
    dialectic_e2e::against_gateway(&mut command, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = tokio::time::timeout(
        Duration::from_secs(400),
        command
            .spawn()
            .expect("dialectic starts")
            .wait_with_output(),
    )
    .await
    .expect("dialectic finished in time")
    .expect("dialectic ran");
    assert!(
        output.status.success(),
        "dialectic {args:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn run_draws_a_bar_per_stage_on_a_terminal_and_lines_otherwise() {
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start_all().await;

    let run = dialectic(
        &env,
        &binary,
        &[
            "run",
            "--name",
            "Bars",
            "--prompt",
            PROMPT,
            "--model",
            "simulated",
        ],
        true,
    )
    .await;
    let mut screen = Screen::new(COLS);
    screen.feed(&String::from_utf8_lossy(&run.stdout));
    let shown = screen.shown();
    let all = shown.join("\n");
    let session_id = shown
        .iter()
        .find_map(|l| l.strip_prefix("session ")?.split(' ').next())
        .expect("run prints the session id")
        .to_string();
    let finished = env.session(&session_id).await;
    assert_eq!(finished.status, "iteration_complete_pending_review");
    assert_eq!(
        finished
            .jobs
            .iter()
            .map(|j| j.stage_slug.as_str())
            .collect::<Vec<_>>(),
        [
            "thesis",
            "antithesis",
            "synthesis",
            "parenthesis",
            "paralysis"
        ]
    );
    for stage in &finished.jobs {
        let total = u64::from(stage.plan + stage.execute + stage.render - stage.superseded);
        let done = u64::from(stage.completed + stage.failed);
        assert_eq!((done, stage.in_flight), (total, 0), "{stage:?} settled");
        // The last frame, left on screen: one bar per stage, all done.
        let bars: Vec<_> = shown
            .iter()
            .filter_map(|l| bar(l, &stage.stage_slug))
            .collect();
        assert_eq!(
            bars,
            [(done, total, format!("done  cost {}", stage.cost))],
            "{}'s bar shows its jobs done of its total and its cost:\n{all}",
            stage.stage_slug
        );
        // Every frame before it: counts that only grow, never past the total.
        let frames: Vec<_> = screen
            .erased
            .iter()
            .filter_map(|l| bar(l, &stage.stage_slug))
            .collect();
        // Drawn while it ran: frames before its jobs were done, or there is
        // no growth to check. Before its first job a bar says only
        // "waiting", and a simulated stage can finish between two reads of
        // the counts, so a waiting frame shows it was drawn early too.
        let waiting = screen
            .erased
            .iter()
            .filter(|l| l.starts_with(stage.stage_slug.as_str()) && l.ends_with("] waiting"))
            .count();
        assert!(
            frames.len() + waiting >= 2
                && (waiting > 0 || frames.iter().any(|(d, _, _)| *d < done)),
            "{}'s bar was drawn while its jobs ran, more than once: {frames:?}",
            stage.stage_slug
        );
        assert!(
            frames.windows(2).all(|w| w[0].0 <= w[1].0)
                && frames.iter().all(|(d, t, _)| d <= t && *t <= total),
            "{}'s frames: {frames:?}",
            stage.stage_slug
        );
    }
    assert!(
        shown.iter().any(|l| l.ends_with(&format!(
            "session {session_id} iteration_complete_pending_review  cost {} tokens",
            finished.cost
        )) || l.contains(&format!(
            "session {session_id} iteration_complete_pending_review  cost {} tokens  at ",
            finished.cost
        ))),
        "a status line with the session's cost:\n{all}"
    );
    assert!(
        !shown.iter().any(|l| l.starts_with('[')),
        "bars replace the event lines:\n{all}"
    );
    // The summary table follows the bars, whole: nothing drew over it.
    let table = shown
        .iter()
        .position(|l| l.starts_with("stage ") && l.contains("documents"))
        .unwrap_or_else(|| panic!("no summary table:\n{all}"));
    let last_bar = shown
        .iter()
        .rposition(|l| l.contains(" jobs  "))
        .expect("bars");
    assert!(last_bar < table, "the bars come first:\n{all}");
    for stage in &finished.jobs {
        assert!(
            shown[table..]
                .iter()
                .any(|l| l.starts_with(&format!("{} ", stage.stage_slug))
                    && l.ends_with("completed")),
            "{}'s summary row:\n{all}",
            stage.stage_slug
        );
    }
    assert!(
        shown[table..].contains(&format!(
            "session {session_id} is iteration_complete_pending_review (iteration 1), cost {} tokens",
            finished.cost
        )),
        "the summary's last line:\n{all}"
    );

    // Piped: today's event lines, no bar, no control sequence.
    let piped = dialectic(&env, &binary, &["watch", "--session", &session_id], false).await;
    let text = String::from_utf8(piped.stdout).expect("utf-8");
    assert!(
        text.starts_with("[snapshot] ") && !text.contains('\u{1b}') && !text.contains(" jobs "),
        "plain lines when stdout is not a terminal:\n{text}"
    );
    assert_eq!(
        text, "[snapshot] - iteration_complete_pending_review - - - 0%\n",
        "today's line, byte for byte"
    );

    // --output json on a terminal: one JSON document per line, no bar.
    let json = dialectic(
        &env,
        &binary,
        &["--output", "json", "watch", "--session", &session_id],
        true,
    )
    .await;
    let text = String::from_utf8(json.stdout).expect("utf-8");
    assert!(!text.contains('\u{1b}'), "no control sequence: {text:?}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(!lines.is_empty());
    for line in lines {
        let event: serde_json::Value = serde_json::from_str(line.trim_end_matches('\r'))
            .unwrap_or_else(|e| panic!("{line:?} is not JSON ({e}); all:\n{text}"));
        assert_eq!(event["session_id"], session_id.as_str());
        // The proto3 JSON mapping: enum names and RFC 3339 times.
        assert_eq!(event["event_kind"], "SESSION_EVENT_KIND_SNAPSHOT");
        assert_eq!(event["state"], "SESSION_STATE_REVIEW");
        assert!(is_rfc3339(&event["at"]), "{event}");
    }

    // `projects --output json` printed created_at as epoch seconds before the mapping.
    let projects = dialectic(&env, &binary, &["--output", "json", "projects"], false).await;
    let listed: serde_json::Value =
        serde_json::from_slice(&projects.stdout).expect("projects as JSON");
    let first = &listed[0];
    assert!(is_rfc3339(&first["created_at"]), "{listed}");
    // `--output yaml`: the same document, as YAML.
    let as_yaml = dialectic(
        &env,
        &binary,
        &["--output", "yaml", "project", "list"],
        false,
    )
    .await;
    let text = String::from_utf8_lossy(&as_yaml.stdout);
    assert!(text.starts_with("---\n"), "{text}");
    let from_yaml: serde_json::Value = serde_norway::from_str(&text).expect("projects as YAML");
    assert_eq!(from_yaml, listed, "YAML holds what JSON holds");

    env.teardown().await;
}

fn is_rfc3339(value: &serde_json::Value) -> bool {
    value
        .as_str()
        .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok())
}
