// The dialectic API from a browser, through the generated TypeScript client
// (clients/typescript: protobuf messages from proto/, gRPC-Web transport from
// @connectrpc/connect-web). deploy/clients.sh web bundles it with esbuild into
// dist/app.js, beside a copy of index.html.
//
// The API key is asked for in the sign-in form and kept in this script's
// memory only: never in the URL, the history, storage or the DOM (the field
// is emptied once signed in), so a reload asks for it again.
import {
  type DialecticClient,
  SessionEventKind,
  SessionState,
  dialecticClient,
} from "../../../clients/typescript/client";

const $ = <T extends HTMLElement = HTMLInputElement>(id: string) => document.getElementById(id) as T;

let client: DialecticClient | undefined;

function api(): DialecticClient {
  if (!client) throw new Error("sign in first");
  return client;
}

function show(list: string, line: string) {
  const item = document.createElement("li");
  item.textContent = line;
  $(list).append(item);
}

function setStatus(text: string, error = false) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

function fail(error: unknown) {
  setStatus(`error: ${error instanceof Error ? error.message : String(error)}`, true);
}

async function listProjects() {
  const { projects } = await api().listProjects({ pageSize: 50 });
  $("projects").replaceChildren();
  for (const p of projects) show("projects", `${p.name} (${p.id})`);
}

async function signIn() {
  const gateway = $("gateway").value.trim();
  const key = $("key").value;
  client = dialecticClient(gateway, key);
  try {
    await listProjects();
  } catch (error) {
    client = undefined;
    throw error;
  }
  $("key").value = "";
  $("signed-in").textContent = `signed in to ${gateway}`;
  $<HTMLButtonElement>("start-button").disabled = false;
  const following = new URLSearchParams(location.search).get("session");
  if (following) await watchSession(following);
}

async function showFirstDocument(sessionId: string, stage: string, iteration: number) {
  const listed = await api().listStageDocuments({ sessionId, stageSlug: stage, iteration });
  const first = listed.documents[0];
  if (!first) throw new Error(`stage ${stage} has no rendered document`);
  const content = await api().getDocumentContent({ resourceId: first.resourceId });
  $("document-title").textContent = first.documentKey;
  $("document").dataset.resourceId = first.resourceId;
  $("document").textContent = content.content;
}

async function startSession() {
  const prompt = $<HTMLTextAreaElement>("prompt").value;
  const project = await api().createProject({ name: "From the browser", initialUserPrompt: prompt });
  await listProjects();
  // auto_advance: every stage runs, up to the iteration's review.
  const session = await api().startSession({
    projectId: project.id,
    models: ["simulated"],
    autoAdvance: true,
  });
  await watchSession(session.id);
}

// Follows a session's events until it waits for review, then shows a
// document; or until a stage fails, then says why and offers the retry. A
// stream a proxy cuts is opened again after the last event seen
// (after_sequence), so no event is lost or shown twice; heartbeats only keep
// a quiet stream alive and are not shown.
async function watchSession(sessionId: string) {
  $("session").textContent = sessionId;
  setStatus("running");
  $("retry").hidden = true;
  const seen: Seen = { stage: "" };
  for (let resumes = 0; resumes < 30; resumes++) {
    try {
      await followEvents(sessionId, seen);
      return;
    } catch (error) {
      show("events", `stream broken (${String(error)}); resuming after event ${seen.last ?? 0n}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  setStatus("the event stream kept breaking; reload to follow the session again", true);
}

interface Seen {
  stage: string;
  last?: bigint;
}

// One stream, from the event after `seen.last`; it returns when the stream
// ends or the session reached review or a failed stage, and throws when the
// stream breaks.
async function followEvents(sessionId: string, seen: Seen) {
  for await (const event of api().watchSession({ sessionId, afterSequence: seen.last })) {
    if (event.eventKind === SessionEventKind.HEARTBEAT) continue;
    if (event.sequence > 0n) seen.last = event.sequence;
    seen.stage = event.stageSlug || seen.stage;
    show("events", `${SessionEventKind[event.eventKind]} ${event.sessionStatus} ${seen.stage}`);
    if (event.state === SessionState.FAILED) {
      // Nothing moves until someone retries: the event's message (the
      // session's notice) names the failed step, its error and the command.
      setStatus(`failed: ${event.message}`, true);
      $("retry").hidden = false;
      return;
    }
    if (event.state === SessionState.REVIEW) {
      const session = await api().getSession({ sessionId });
      await showFirstDocument(sessionId, seen.stage || session.currentStage, session.iteration);
      setStatus("review");
      return;
    }
  }
}

// An address that still carries a key (bookmarked from an older version of
// this page) loses it at once: the key is not read from there, and the entry
// in the history is replaced by one without it.
const params = new URLSearchParams(location.search);
if (params.has("key")) {
  params.delete("key");
  const rest = params.toString();
  history.replaceState(null, "", `${location.pathname}${rest ? `?${rest}` : ""}`);
  setStatus("the key is not taken from the address; enter it below", true);
}

$("signin").addEventListener("submit", (e) => {
  e.preventDefault();
  signIn().catch(fail);
});
$("start").addEventListener("submit", (e) => {
  e.preventDefault();
  startSession().catch(fail);
});
// RetryStage on the session's current stage, then follow it again.
$("retry").addEventListener("click", () => {
  const sessionId = $("session").textContent ?? "";
  api()
    .retryStage({ sessionId })
    .then(() => watchSession(sessionId))
    .catch(fail);
});
