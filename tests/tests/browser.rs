//! The browser client in `examples/web/` against the real stack, in headless
//! Chromium (Debian's `chromium`): the page signs in with a key, lists the
//! projects, starts a session and follows `WatchSession` over gRPC-Web until
//! the session is in review, then shows one rendered document. The page posts
//! the DOM it shows when its run ends; the test checks the document's text on
//! it is what the API holds, and saves a screenshot (its path is printed) for
//! a developer to look at.
//!
//! `deploy/test.sh` installs Chromium when it is missing;
//! `DIALECTIC_SKIP_BROWSER=1` skips the test on a machine without it.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::GetDocumentContentRequest;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const PROMPT: &str =
    "A seed library in the town hall: borrow seeds in spring, return seeds in autumn.";
/// Real time the page may take to run a session to review.
const PAGE_SECONDS: u64 = 120;

fn chromium() -> Option<PathBuf> {
    if std::env::var("DIALECTIC_SKIP_BROWSER").is_ok_and(|v| v == "1") {
        eprintln!("DIALECTIC_SKIP_BROWSER=1: the browser test is skipped");
        return None;
    }
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    Some(found.unwrap_or_else(|| {
        panic!(
            "no chromium: `apt-get install chromium` (deploy/test.sh does), \
             or DIALECTIC_SKIP_BROWSER=1"
        )
    }))
}

/// Serves `examples/web/` on loopback, the page's own origin, and takes the
/// page's report (`POST /report`: the DOM it shows when its run ends).
struct PageServer {
    origin: String,
    reports: mpsc::Receiver<String>,
}

async fn serve_page() -> PageServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("page port");
    let origin = format!("http://{}", listener.local_addr().expect("page address"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/web");
    let (report, reports) = mpsc::channel(4);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(answer(socket, root.clone(), report.clone()));
        }
    });
    PageServer { origin, reports }
}

/// Reads one HTTP/1.1 request: its head and its body (by content-length).
async fn read_request(socket: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut request = Vec::new();
    let mut buffer = vec![0; 64 * 1024];
    let (head, body_start) = loop {
        let n = socket.read(&mut buffer).await.ok().filter(|n| *n > 0)?;
        request.extend_from_slice(&buffer[..n]);
        if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break (
                String::from_utf8_lossy(&request[..end]).into_owned(),
                end + 4,
            );
        }
    };
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while request.len() < body_start + length {
        let n = socket.read(&mut buffer).await.ok().filter(|n| *n > 0)?;
        request.extend_from_slice(&buffer[..n]);
    }
    Some((head, request[body_start..].to_vec()))
}

/// One request of the page: one of its files, or its report.
async fn answer(mut socket: TcpStream, root: PathBuf, report: mpsc::Sender<String>) {
    let Some((head, body)) = read_request(&mut socket).await else {
        return;
    };
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let name = path
        .split('?')
        .next()
        .unwrap_or("/")
        .trim_start_matches('/');
    let (status, kind, reply) = match name {
        "report" => {
            let dom = String::from_utf8_lossy(&body).into_owned();
            report.send(dom).await.expect("the test takes the report");
            ("204 No Content", "text/plain", Vec::new())
        }
        "index.html" | "app.js" => {
            let kind = if name.ends_with(".js") {
                "text/javascript"
            } else {
                "text/html"
            };
            let file = tokio::fs::read(root.join(name))
                .await
                .expect("the page's file");
            ("200 OK", kind, file)
        }
        _ => ("404 Not Found", "text/plain", b"not found".to_vec()),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}; charset=utf-8\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        reply.len()
    );
    if socket.write_all(header.as_bytes()).await.is_ok() {
        // A browser may close the connection first; the page sees it either way.
        let _closed_by_browser = socket.write_all(&reply).await;
    }
}

fn chromium_command(browser: &Path, url: &str, args: &[&str]) -> tokio::process::Command {
    let profile = std::env::temp_dir().join(format!("dialectic-chromium-{}", uuid::Uuid::new_v4()));
    let mut command = tokio::process::Command::new(browser);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    command
}

/// Opens `url` in headless Chromium; the DOM the page reports when its run
/// ends (the browser is stopped then).
async fn page_dom(browser: &Path, server: &mut PageServer, url: &str) -> String {
    let mut chromium = chromium_command(browser, url, &[])
        .spawn()
        .expect("chromium starts");
    let dom = tokio::time::timeout(Duration::from_secs(PAGE_SECONDS), server.reports.recv())
        .await
        .expect("the page reports within its time")
        .expect("a report");
    chromium.kill().await.expect("chromium stops");
    dom
}

/// The text of the element with `id` in a serialised DOM, entities decoded.
fn element_text(dom: &str, id: &str) -> Option<String> {
    let open = dom.find(&format!("id=\"{id}\""))?;
    let start = open + dom[open..].find('>')? + 1;
    let end = start + dom[start..].find("</")?;
    Some(
        dom[start..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&nbsp;", "\u{a0}")
            .replace("&amp;", "&"),
    )
}

/// The `data-resource-id` of the element with `id`.
fn resource_of(dom: &str, id: &str) -> Option<String> {
    let open = dom.find(&format!("id=\"{id}\""))?;
    let tag = &dom[open..open + dom[open..].find('>')?];
    let at = tag.find("data-resource-id=\"")? + "data-resource-id=\"".len();
    Some(tag[at..].split('"').next()?.to_string())
}

fn page_url(origin: &str, params: &[(&str, &str)]) -> String {
    let query: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, NON_ALPHANUMERIC)))
        .collect();
    format!("{origin}/index.html?{}", query.join("&"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_web_page_runs_a_session_to_review_and_shows_a_document() {
    let Some(browser) = chromium() else {
        return;
    };
    let mut server = serve_page().await;
    let mut env = TestEnv::new().await;
    env.settings.gateway.web_origins = server.origin.clone();
    env.start_all().await;
    let gateway = format!("http://{}", env.addr("gateway"));
    let key = env.settings.gateway.bootstrap_key.clone();
    let report = format!("{}/report", server.origin);
    let run = page_url(
        &server.origin,
        &[
            ("gateway", &gateway),
            ("key", &key),
            ("prompt", PROMPT),
            ("run", "1"),
            ("report", &report),
        ],
    );

    let dom = page_dom(&browser, &mut server, &run).await;
    let status = element_text(&dom, "status");
    assert_eq!(
        status.as_deref(),
        Some("review"),
        "the page followed the session to review:\n{dom}"
    );
    assert!(
        element_text(&dom, "projects").is_some_and(|p| p.contains("From the browser")),
        "the page lists the project it created:\n{dom}"
    );
    let session_id = element_text(&dom, "session").expect("the session on the page");
    let resource_id = resource_of(&dom, "document").expect("the page names its document");
    let shown = element_text(&dom, "document").expect("the document on the page");
    let stored = env
        .gateway()
        .await
        .get_document_content(GetDocumentContentRequest { resource_id })
        .await
        .expect("the document through gRPC")
        .into_inner()
        .content;
    assert!(!stored.trim().is_empty());
    assert_eq!(shown, stored, "the page shows the document's text");

    // The screenshot step: the page following that session (now in review),
    // drawn for a developer to look at.
    let shot = std::env::temp_dir().join("dialectic-browser-page.png");
    // An earlier run's picture must not pass for this one's.
    match std::fs::remove_file(&shot) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("removing the last run's screenshot: {e}"),
    }
    let follow = page_url(
        &server.origin,
        &[
            ("gateway", &gateway),
            ("key", &key),
            ("session", &session_id),
        ],
    );
    let screenshot = format!("--screenshot={}", shot.display());
    let args = [
        screenshot.as_str(),
        "--window-size=1200,1600",
        "--virtual-time-budget=20000",
    ];
    let drawn = chromium_command(&browser, &follow, &args).status();
    let drawn = tokio::time::timeout(Duration::from_secs(PAGE_SECONDS), drawn)
        .await
        .expect("the screenshot within its time")
        .expect("chromium runs");
    assert!(drawn.success(), "chromium draws the page: {drawn:?}");
    let png = std::fs::read(&shot).expect("the screenshot is written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 1_000,
        "the screenshot is a picture ({} bytes)",
        png.len()
    );
    eprintln!("the page, drawn: {}", shot.display());
    env.teardown().await;
}
