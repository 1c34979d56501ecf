//! The browser client in `examples/web/` against the real stack, in headless
//! Chromium (Debian's `chromium`): the page, bundled with the generated
//! TypeScript client (`deploy/clients.sh web`), signs in with a key typed into
//! its form, lists the projects, starts a session and follows `WatchSession`
//! over gRPC-Web until the session is in review, then shows one rendered
//! document. A small harness page the test serves stands in for the person:
//! it loads the page in a frame, fills the form (the key reaches the harness
//! from the test's server, never through a URL) and posts the DOM the page
//! shows when its run ends, with the page's address. The test checks the
//! document's text on the page is what the API holds, that the key is neither
//! in the page's address nor in its DOM, and saves a screenshot (its path is
//! printed) for a developer to look at.
//!
//! `deploy/test.sh` installs Chromium when it is missing;
//! `DIALECTIC_SKIP_BROWSER=1` skips the test on a machine without it.

use dialectic_e2e::TestEnv;
use dialectic_proto::v1::GetDocumentContentRequest;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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

/// One report of the harness: the DOM the page shows when its run ends, and
/// the page's address then.
struct Report {
    dom: String,
    page_url: String,
}

/// Serves the bundled page (`deploy/clients.sh web`) and the harness on
/// loopback, the page's own origin, and takes the harness's report
/// (`POST /report`).
struct PageServer {
    origin: String,
    /// What `/harness.html` answers: the harness of the current run.
    harness: Arc<Mutex<String>>,
    reports: mpsc::Receiver<Report>,
    _bundle: TempDir,
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover bundle in the temp directory harms nothing.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The page as `deploy/clients.sh web` bundles it (esbuild, the generated client).
async fn bundle_page() -> TempDir {
    let dir = TempDir(std::env::temp_dir().join(format!("dialectic-web-{}", uuid::Uuid::new_v4())));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/clients.sh");
    let status = tokio::process::Command::new(script)
        .arg("web")
        .arg(&dir.0)
        .status()
        .await
        .expect("deploy/clients.sh runs");
    assert!(
        status.success(),
        "deploy/clients.sh web bundles the page: {status}"
    );
    dir
}

async fn serve_page() -> PageServer {
    let bundle = bundle_page().await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("page port");
    let origin = format!("http://{}", listener.local_addr().expect("page address"));
    let root = bundle.0.clone();
    let harness = Arc::new(Mutex::new(String::new()));
    let (report, reports) = mpsc::channel(4);
    let served = harness.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let page = Page {
                root: root.clone(),
                harness: served.clone(),
                report: report.clone(),
            };
            tokio::spawn(answer(socket, page));
        }
    });
    PageServer {
        origin,
        harness,
        reports,
        _bundle: bundle,
    }
}

/// What one connection of the page server may answer with.
struct Page {
    root: PathBuf,
    harness: Arc<Mutex<String>>,
    report: mpsc::Sender<Report>,
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
    let length: usize = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while request.len() < body_start + length {
        let n = socket.read(&mut buffer).await.ok().filter(|n| *n > 0)?;
        request.extend_from_slice(&buffer[..n]);
    }
    Some((head, request[body_start..].to_vec()))
}

/// The value of header `name` in a request head.
fn header<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// One request: one of the page's files, the harness, or the report.
async fn answer(mut socket: TcpStream, page: Page) {
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
            let report = Report {
                dom: String::from_utf8_lossy(&body).into_owned(),
                page_url: header(&head, "x-page-url").unwrap_or_default().to_string(),
            };
            page.report
                .send(report)
                .await
                .expect("the test takes the report");
            ("204 No Content", "text/plain", Vec::new())
        }
        "harness.html" => {
            let harness = page.harness.lock().expect("the harness").clone();
            ("200 OK", "text/html", harness.into_bytes())
        }
        "index.html" | "app.js" => {
            let kind = if name.ends_with(".js") {
                "text/javascript"
            } else {
                "text/html"
            };
            let file = tokio::fs::read(page.root.join(name))
                .await
                .expect("the page's file");
            ("200 OK", kind, file)
        }
        _ => ("404 Not Found", "text/plain", b"not found".to_vec()),
    };
    let header = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {kind}; charset=utf-8\r\n\
         content-length: {}\r\ncache-control: no-store\r\nconnection: close\r\n\r\n",
        reply.len()
    );
    if socket.write_all(header.as_bytes()).await.is_ok() {
        // A browser may close the connection first; the page sees it either way.
        let _closed_by_browser = socket.write_all(&reply).await;
    }
}

/// What the harness types into the page, and whether it reports.
struct Visit<'a> {
    /// The page's address in the frame: `index.html`, or with `?session=ID`.
    page: &'a str,
    gateway: &'a str,
    key: &'a str,
    /// Typed into the start form once signed in; empty: no session started.
    prompt: &'a str,
    report: bool,
}

/// The harness page: it stands in for a person at `visit.page`, typing the
/// gateway and the key into the sign-in form (and a prompt into the start
/// form), and posts the page's DOM and address to `/report` when the run ends
/// (the status reads `review`, `error: …` or `failed: …`).
fn harness(visit: &Visit) -> String {
    let settings = serde_json::json!({
        "gateway": visit.gateway,
        "key": visit.key,
        "prompt": visit.prompt,
        "report": visit.report,
    });
    let page = serde_json::json!(visit.page);
    format!(
        r#"<!doctype html>
<html><body style="margin:0">
<iframe id="page" style="border:0;width:100%;height:100vh"></iframe>
<script>
const SETTINGS = {settings};
const frame = document.getElementById("page");
const until = (check) => new Promise((done) => {{
  const tick = () => (check() ? done() : setTimeout(tick, 100));
  tick();
}});
frame.addEventListener("load", async () => {{
  const doc = frame.contentDocument;
  const $ = (id) => doc.getElementById(id);
  const status = () => $("status").textContent;
  const over = () => status() === "review" || /^(error|failed)/.test(status());
  $("gateway").value = SETTINGS.gateway;
  $("key").value = SETTINGS.key;
  $("signin").requestSubmit();
  await until(() => !$("start-button").disabled || over());
  if (SETTINGS.prompt && !over()) {{
    $("prompt").value = SETTINGS.prompt;
    $("start").requestSubmit();
  }}
  if (!SETTINGS.report) return;
  await until(over);
  await fetch("/report", {{
    method: "POST",
    headers: {{ "x-page-url": frame.contentWindow.location.href }},
    body: doc.documentElement.outerHTML,
  }});
}}, {{ once: true }});
frame.src = {page};
</script>
</body></html>
"#
    )
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

/// Serves `visit`'s harness as `/harness.html`; its address.
fn set_harness(server: &PageServer, visit: &Visit) -> String {
    *server.harness.lock().expect("the harness") = harness(visit);
    format!("{}/harness.html", server.origin)
}

/// Opens the harness of `visit` in headless Chromium; what it reports when
/// the page's run ends (the browser is stopped then).
async fn page_report(browser: &Path, server: &mut PageServer, visit: &Visit<'_>) -> Report {
    let url = set_harness(server, visit);
    let mut chromium = chromium_command(browser, &url, &[])
        .spawn()
        .expect("chromium starts");
    let report = tokio::time::timeout(Duration::from_secs(PAGE_SECONDS), server.reports.recv())
        .await
        .expect("the page reports within its time")
        .expect("a report");
    chromium.kill().await.expect("chromium stops");
    report
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
    let run = Visit {
        page: "index.html",
        gateway: &gateway,
        key: &key,
        prompt: PROMPT,
        report: true,
    };

    let Report { dom, page_url } = page_report(&browser, &mut server, &run).await;
    assert!(
        page_url.starts_with(&format!("{}/index.html", server.origin)),
        "the harness reports the page's address: {page_url:?}"
    );
    assert!(
        !page_url.contains(&key) && !dom.contains(&key),
        "the key is neither in the page's address ({page_url}) nor in its DOM:\n{dom}"
    );
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
    let page = format!("index.html?session={session_id}");
    let follow = set_harness(
        &server,
        &Visit {
            page: &page,
            gateway: &gateway,
            key: &key,
            prompt: "",
            report: false,
        },
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
