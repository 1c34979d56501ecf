//! Issue 42, "`dialectic session watch` prints the bars to stderr and nothing
//! but data to stdout". Under `script` (tests/cli_progress.rs) stdout and
//! stderr share one pseudo-terminal, so which stream carried what cannot be
//! told; here each gets its own (or a pipe), read to its end on a thread of
//! its own.
//!
//! The rule kept (as gh's): bars only when both streams are terminals. Piped
//! or redirected stdout (deploy/run.sh tees it) gets the event lines, and
//! stderr, a terminal or not, gets no bar.

use dialectic_e2e::TestEnv;
use dialectic_e2e::terminal::{Screen, bar, bar_text, counts};
use dialectic_proto::v1::Session;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Each pseudo-terminal's size.
const COLS: u16 = 120;
const ROWS: u16 = 40;

const PROMPT: &str = "A lending library for power tools, run by neighbours for neighbours.";

const REVIEW: &str = "iteration_complete_pending_review";

/// Where one of the CLI's output streams goes.
#[derive(Clone, Copy, Debug)]
enum Sink {
    Terminal,
    Pipe,
}

/// What the CLI wrote to each stream, as sent: a terminal's bytes after its
/// line discipline (LF as CR LF), a pipe's as written.
#[derive(Debug)]
struct Streams {
    stdout: String,
    stderr: String,
}

/// A new pseudo-terminal, COLS×ROWS: (master, slave).
///
/// `openpty` does not set close-on-exec, and a slave inherited by some other
/// child would keep its master from ever reading to the end; between the two
/// calls no other thread of this file spawns, as it has one test.
fn pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: ROWS,
        ws_col: COLS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors to the ints given; no name
    // buffer is asked for and the default termios is used.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors are open and nothing else owns them.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&master, &slave] {
        // SAFETY: fcntl on a descriptor this function owns.
        let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        assert_eq!(rc, 0, "FD_CLOEXEC: {}", std::io::Error::last_os_error());
    }
    (master, slave)
}

/// Everything written to the terminal until the last process holding its
/// slave closed it. Linux then fails the master's read with EIO rather than
/// returning 0; both end it.
fn read_to_end(master: OwnedFd) -> String {
    let mut file = File::from(master);
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match file.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) => panic!("reading a terminal: {e}"),
        }
    }
    String::from_utf8(all).expect("utf-8 on the terminal")
}

/// `dialectic args…` against `env`'s gateway with stdout and stderr where
/// asked; it must succeed.
async fn dialectic(
    env: &TestEnv,
    binary: &Path,
    args: &[&str],
    stdout: Sink,
    stderr: Sink,
) -> Streams {
    let mut command = tokio::process::Command::new(binary);
    dialectic_e2e::against_gateway(command.args(args), env).env("TERM", "xterm-256color");
    // A terminal is read on a thread of its own from the start: one not read
    // fills its few kilobytes of buffer and stops the CLI mid-write.
    let attach = |sink: Sink| -> (Stdio, Option<JoinHandle<String>>) {
        match sink {
            Sink::Pipe => (Stdio::piped(), None),
            Sink::Terminal => {
                let (master, slave) = pty();
                let reader = tokio::task::spawn_blocking(move || read_to_end(master));
                (Stdio::from(slave), Some(reader))
            }
        }
    };
    let (out, out_reader) = attach(stdout);
    let (err, err_reader) = attach(stderr);
    command.stdout(out).stderr(err);
    let child = command.spawn().expect("dialectic starts");
    // The command holds this process's copies of the slaves; with them
    // closed, the child's exit is what ends each terminal's stream.
    drop(command);
    let output = tokio::time::timeout(Duration::from_secs(400), child.wait_with_output())
        .await
        .expect("dialectic finished in time")
        .expect("dialectic ran");
    let mut streams = Vec::new();
    for (reader, piped) in [(out_reader, output.stdout), (err_reader, output.stderr)] {
        streams.push(match reader {
            Some(reader) => tokio::time::timeout(Duration::from_secs(30), reader)
                .await
                .expect("the terminal's stream ended with the process")
                .expect("the reader did not panic"),
            None => String::from_utf8(piped).expect("utf-8 on the pipe"),
        });
    }
    let stderr = streams.pop().expect("stderr");
    let stdout = streams.pop().expect("stdout");
    assert!(
        output.status.success(),
        "dialectic {args:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    Streams { stdout, stderr }
}

/// What a terminal received as the lines a program wrote: its line
/// discipline turned each LF into CR LF.
fn written(terminal: &str) -> String {
    terminal.replace("\r\n", "\n")
}

/// What stdout may hold: data lines, nothing drawn. No control character
/// but the newline (indicatif's cursor movements and erasures start with
/// ESC, its redraws with CR), no spinner (braille), no stage's bar and no
/// bar's status line.
fn assert_data_only(stdout: &str, session: &Session) {
    let bad = stdout
        .chars()
        .find(|&c| (c.is_control() && c != '\n') || ('\u{2800}'..='\u{28ff}').contains(&c));
    assert!(
        bad.is_none(),
        "stdout holds {bad:?}, not only data lines:\n{stdout:?}"
    );
    for line in stdout.lines() {
        assert!(
            !session
                .jobs
                .iter()
                .any(|j| bar_text(line, &j.stage_slug).is_some()),
            "a bar on stdout: {line:?}\n{stdout}"
        );
        assert!(
            !(line.starts_with(&format!("session {} ", session.id)) && line.contains("  cost ")),
            "the bars' status line on stdout: {line:?}\n{stdout}"
        );
    }
}

/// The frames `stderr` drew on a terminal.
fn render(stderr: &str) -> Screen {
    let mut screen = Screen::new(usize::from(COLS));
    screen.feed(stderr);
    screen
}

/// Checks the last frame on `screen`: one bar per stage of `session`, every
/// job done, and the status line under them. A watch that ends at review
/// may leave the last documents `rendering` (RENDER jobs do not hold a
/// stage), so unless `settled` (as `run` waits) a bar may say so, with fewer
/// jobs done than the session has now.
fn assert_last_frame(screen: &Screen, session: &Session, settled: bool) {
    let shown = screen.shown();
    let all = shown.join("\n");
    for stage in &session.jobs {
        let slug = &stage.stage_slug;
        let total = u64::from(stage.plan + stage.execute + stage.render - stage.superseded);
        let done = u64::from(stage.completed + stage.failed);
        let bars: Vec<_> = shown.iter().filter_map(|l| bar(l, slug)).collect();
        if settled {
            assert_eq!((done, stage.in_flight), (total, 0), "{stage:?} settled");
            assert_eq!(
                bars,
                [(done, total, format!("done  cost {}", stage.cost))],
                "{slug}'s last bar shows its jobs done and its cost:\n{all}"
            );
        } else {
            assert!(
                matches!(&bars[..], [(d, t, rest)] if d <= t && *t <= total
                    && (rest.starts_with("done  cost ") || rest.starts_with("rendering  cost "))),
                "{slug}'s last bar: its jobs done, or its documents rendering:\n{all}"
            );
        }
    }
    let status = format!("session {} {REVIEW}  cost ", session.id);
    let cost = format!("{status}{} tokens", session.cost);
    assert!(
        shown
            .iter()
            .any(|l| l.contains(if settled { &cost } else { &status })),
        "the bars' status line with the session's cost:\n{all}"
    );
}

/// Checks every frame of every stage's bar: counts only of jobs that
/// exist (a stage without one yet says what it is doing, not "0/0 jobs",
/// which reads as finished work), and drawn before the stage was done:
/// waiting for its first job, or with some of its jobs done (a simulated
/// stage can finish between two reads of the counts, so a counted frame is
/// not certain).
fn assert_drawn_as_it_ran(screen: &Screen, session: &Session) {
    for stage in &session.jobs {
        let slug = &stage.stage_slug;
        let done = u64::from(stage.completed + stage.failed);
        let frames: Vec<&str> = screen
            .erased
            .iter()
            .filter_map(|l| bar_text(l, slug))
            .collect();
        for text in &frames {
            let counted = counts(text).is_some_and(|(_, total, _)| total > 0);
            assert!(
                counted || ["waiting", "done", "failed", "paused"].contains(text),
                "{slug}'s bar said {text:?}"
            );
        }
        assert!(
            frames
                .iter()
                .any(|text| *text == "waiting" || counts(text).is_some_and(|(d, _, _)| d < done)),
            "{slug}'s bar was drawn while the stage ran: {frames:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bars_go_to_stderr_and_stdout_keeps_only_data() {
    let binary = dialectic_e2e::workspace_binary("dialectic-cli", "dialectic");
    let mut env = TestEnv::new().await;
    env.start_all().await;

    // `run`, both streams terminals: bars on stderr while the session works;
    // stdout gets the ids as they are made and the summary, undrawn.
    let run = dialectic(
        &env,
        &binary,
        &[
            "run",
            "--name",
            "Streams",
            "--prompt",
            PROMPT,
            "--model",
            "simulated",
        ],
        Sink::Terminal,
        Sink::Terminal,
    )
    .await;
    let stdout = written(&run.stdout);
    let session_id = stdout
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("session ")?.split(' ').next())
        .unwrap_or_else(|| panic!("run's second line names the session:\n{stdout}"))
        .to_string();
    let finished = env.session(&session_id).await;
    assert_eq!(finished.status, REVIEW);
    assert_eq!(finished.jobs.len(), 5, "{finished:?}");
    assert_data_only(&stdout, &finished);
    let docs = dialectic(
        &env,
        &binary,
        &["doc", "list", "--session", &session_id],
        Sink::Pipe,
        Sink::Pipe,
    )
    .await
    .stdout;
    // Ids, documents, summary: `run`'s text, nothing drawn between.
    let head = format!("project {}\nsession {session_id} ", finished.project_id);
    let (_status, after_ids) = stdout
        .strip_prefix(&head)
        .and_then(|rest| rest.split_once('\n'))
        .unwrap_or_else(|| panic!("run's stdout starts with its ids:\n{stdout}"));
    let summary = after_ids
        .strip_prefix(docs.as_str())
        .and_then(|rest| rest.strip_prefix('\n'))
        .unwrap_or_else(|| {
            panic!("the documents follow the ids, as `doc list` prints them:\n{stdout}")
        });
    let summary: Vec<&str> = summary.lines().collect();
    assert!(summary[0].starts_with("stage ") && summary[0].contains("documents"));
    for (row, stage) in summary[1..].iter().zip(&finished.jobs) {
        assert!(
            row.starts_with(&format!("{} ", stage.stage_slug)) && row.ends_with(" completed"),
            "{}'s summary row: {row:?}\n{stdout}",
            stage.stage_slug
        );
    }
    assert_eq!(
        summary.get(1 + finished.jobs.len()).copied(),
        Some(
            format!(
                "session {session_id} is {REVIEW} (iteration 1), cost {} tokens",
                finished.cost
            )
            .as_str()
        ),
        "the summary's last line:\n{stdout}"
    );
    let ran = render(&run.stderr);
    assert_last_frame(&ran, &finished, true);
    assert_drawn_as_it_ran(&ran, &finished);
    let shown = ran.shown();
    assert!(
        !shown.iter().any(|l| l.starts_with("project ")
            || l.starts_with("stage ")
            || l.starts_with(&format!("session {session_id} is "))),
        "no data on stderr:\n{}",
        shown.join("\n")
    );

    // `session watch` of a session as it works, both terminals: the bars on
    // stderr. Bars stand in for the event lines (the rare ones kept, such
    // as a failure, print above the bars, on stderr too), so stdout has
    // nothing to say.
    let (_, live_id) = env.new_session(PROMPT, &["simulated"], true).await;
    let live = dialectic(
        &env,
        &binary,
        // Without --until a watch stops at the first stage's pending_
        // status, auto-advanced or not.
        &["session", "watch", "--session", &live_id, "--until", REVIEW],
        Sink::Terminal,
        Sink::Terminal,
    )
    .await;
    assert_eq!(live.stdout, "", "nothing on stdout but data");
    let watched = env.session(&live_id).await;
    assert_eq!(watched.jobs.len(), 5, "{watched:?}");
    let drawn = render(&live.stderr);
    assert_last_frame(&drawn, &watched, false);
    assert_drawn_as_it_ran(&drawn, &watched);

    // `session watch` of the finished session, both terminals: its bars,
    // every job done, and again nothing on stdout.
    let watch = ["session", "watch", "--session", session_id.as_str()];
    let both = dialectic(&env, &binary, &watch, Sink::Terminal, Sink::Terminal).await;
    assert_eq!(both.stdout, "", "nothing on stdout but data");
    assert_last_frame(&render(&both.stderr), &finished, true);

    // stdout a pipe, stderr a terminal: the event lines on stdout, and under
    // the both-terminals rule no bar at all; stderr stays empty.
    let piped = dialectic(&env, &binary, &watch, Sink::Pipe, Sink::Terminal).await;
    assert_eq!(
        piped.stdout,
        format!("[snapshot] - {REVIEW} - - - 0%\n"),
        "the event lines, byte for byte"
    );
    assert_eq!(piped.stderr, "", "no bars unless stdout is a terminal too");

    // stdout a terminal, stderr a pipe (`2>log`): the same lines on stdout,
    // undrawn, and no bar in the log.
    let logged = dialectic(&env, &binary, &watch, Sink::Terminal, Sink::Pipe).await;
    assert_eq!(
        written(&logged.stdout),
        format!("[snapshot] - {REVIEW} - - - 0%\n")
    );
    assert_eq!(logged.stderr, "", "no bars unless stderr is a terminal too");

    env.teardown().await;
}
