// The dialectic API from a browser: gRPC-Web calls (application/grpc-web+proto)
// with the few protobuf messages this page needs, encoded by hand so the page
// needs no build step. A real application would generate them from proto/.
"use strict";

const SERVICE = "dialectic.v1.DialecticService";
const SESSION_STATE_REVIEW = 3;
const SESSION_STATE_FAILED = 6;
const TRAILERS = 0x80;
const $ = (id) => document.getElementById(id);

// --- protobuf: varints and length-delimited fields are all these messages use.
function varint(n) {
  const out = [];
  while (n > 0x7f) { out.push((n & 0x7f) | 0x80); n = Math.floor(n / 128); }
  out.push(n);
  return out;
}

// fields: [number, value] pairs; strings and byte arrays are length-delimited,
// numbers and booleans varints; an array value repeats the field.
function encode(fields) {
  const out = [];
  for (const [number, value] of fields) {
    for (const v of Array.isArray(value) ? value : [value]) {
      if (typeof v === "string") {
        const bytes = new TextEncoder().encode(v);
        out.push(...varint((number << 3) | 2), ...varint(bytes.length), ...bytes);
      } else {
        out.push(...varint(number << 3), ...varint(Number(v)));
      }
    }
  }
  return new Uint8Array(out);
}

// A message as { field number: [values] }: varints as numbers, the rest as bytes.
function decode(bytes) {
  const fields = {};
  let at = 0;
  const readVarint = () => {
    let n = 0, scale = 1, b;
    do { b = bytes[at++]; n += (b & 0x7f) * scale; scale *= 128; } while (b & 0x80);
    return n;
  };
  while (at < bytes.length) {
    const key = readVarint();
    const number = Math.floor(key / 8);
    let value;
    switch (key & 7) {
      case 0: value = readVarint(); break;
      case 2: { const len = readVarint(); value = bytes.subarray(at, at + len); at += len; break; }
      case 1: at += 8; continue;
      case 5: at += 4; continue;
      default: throw new Error(`unsupported wire type in field ${number}`);
    }
    (fields[number] ||= []).push(value);
  }
  return fields;
}

const text = (m, n) => (m[n] ? new TextDecoder().decode(m[n][0]) : "");
const number = (m, n) => (m[n] ? m[n][0] : 0);
const messages = (m, n) => (m[n] || []).map(decode);

// --- gRPC-Web framing
function frame(message) {
  const out = new Uint8Array(5 + message.length);
  new DataView(out.buffer).setUint32(1, message.length);
  out.set(message, 5);
  return out;
}

// Whole frames at the front of `buffer`, and what is left of it.
function frames(buffer) {
  const found = [];
  while (buffer.length >= 5) {
    const len = new DataView(buffer.buffer, buffer.byteOffset).getUint32(1);
    if (buffer.length < 5 + len) break;
    found.push({ flag: buffer[0], payload: buffer.slice(5, 5 + len) });
    buffer = buffer.slice(5 + len);
  }
  return { found, rest: buffer };
}

function grpcStatus(headers, trailerFrame) {
  let status = headers.get("grpc-status"), message = headers.get("grpc-message") || "";
  if (status === null && trailerFrame) {
    for (const line of new TextDecoder().decode(trailerFrame.payload).split("\r\n")) {
      const [name, ...rest] = line.split(":");
      if (name.toLowerCase() === "grpc-status") status = rest.join(":").trim();
      if (name.toLowerCase() === "grpc-message") message = decodeURIComponent(rest.join(":").trim());
    }
  }
  return { status: status ?? "2", message };
}

const api = { gateway: "", key: "" };

function request(method, fields) {
  return fetch(`${api.gateway}/${SERVICE}/${method}`, {
    method: "POST",
    headers: {
      "content-type": "application/grpc-web+proto",
      "x-grpc-web": "1",
      authorization: `Bearer ${api.key}`,
    },
    body: frame(encode(fields)),
  });
}

async function call(method, fields) {
  const response = await request(method, fields);
  const { found } = frames(new Uint8Array(await response.arrayBuffer()));
  const { status, message } = grpcStatus(response.headers, found.find((f) => f.flag & TRAILERS));
  if (status !== "0") throw new Error(`${method}: grpc-status ${status} ${message}`);
  return decode(found.find((f) => !(f.flag & TRAILERS))?.payload ?? new Uint8Array());
}

// Calls onEvent with each message of a server stream until it returns true.
async function stream(method, fields, onEvent) {
  const response = await request(method, fields);
  const reader = response.body.getReader();
  let buffer = new Uint8Array();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    const joined = new Uint8Array(buffer.length + value.length);
    joined.set(buffer);
    joined.set(value, buffer.length);
    const { found, rest } = frames(joined);
    buffer = rest;
    for (const f of found) {
      if (f.flag & TRAILERS) {
        const { status, message } = grpcStatus(new Headers(), f);
        if (status !== "0") throw new Error(`${method}: grpc-status ${status} ${message}`);
        return;
      }
      if (await onEvent(decode(f.payload))) { await reader.cancel(); return; }
    }
  }
}

// --- the page
function show(list, line) {
  const item = document.createElement("li");
  item.textContent = line;
  $(list).append(item);
}

function fail(error) {
  $("status").textContent = `error: ${error.message}`;
  $("status").className = "error";
}

async function signIn() {
  api.gateway = $("gateway").value.replace(/\/$/, "");
  api.key = $("key").value;
  const answer = await call("ListProjects", [[1, 50]]);
  $("projects").replaceChildren();
  for (const p of messages(answer, 1)) show("projects", `${text(p, 2)} (${text(p, 1)})`);
}

async function showFirstDocument(sessionId, stage) {
  const listed = await call("ListStageDocuments", [[1, sessionId], [2, stage], [3, 1]]);
  const first = messages(listed, 1)[0];
  if (!first) throw new Error(`stage ${stage} has no rendered document`);
  const content = await call("GetDocumentContent", [[1, text(first, 1)]]);
  $("document-title").textContent = text(first, 4);
  $("document").dataset.resourceId = text(first, 1);
  $("document").textContent = text(content, 2);
}

async function startSession() {
  const prompt = $("prompt").value;
  const project = await call("CreateProject", [[1, "From the browser"], [2, prompt]]);
  await signIn();
  // auto_advance: every stage runs, up to the iteration's review.
  const session = await call("StartSession", [[1, text(project, 1)], [2, ["simulated"]], [5, true]]);
  await watchSession(text(session, 1));
}

// Follows a session's events until it waits for review, then shows a
// document; or until a stage fails, then says why and offers the retry.
async function watchSession(sessionId) {
  $("session").textContent = sessionId;
  $("status").textContent = "running";
  $("status").className = "";
  $("retry").hidden = true;
  let stage = "";
  await stream("WatchSession", [[1, sessionId]], async (event) => {
    stage = text(event, 4) || stage;
    show("events", `${text(event, 2)} ${text(event, 3)} ${stage}`);
    if (number(event, 13) === SESSION_STATE_FAILED) {
      // Nothing moves until someone retries: the event's message (the
      // session's notice) names the failed step, its error and the command.
      $("status").textContent = `failed: ${text(event, 9)}`;
      $("status").className = "error";
      $("retry").hidden = false;
      return true;
    }
    if (number(event, 13) !== SESSION_STATE_REVIEW) return false;
    stage ||= text(await call("GetSession", [[1, sessionId]]), 5);
    await showFirstDocument(sessionId, stage);
    $("status").textContent = "review";
    return true;
  });
}

// With ?report=URL the page posts what it shows there when its run ends
// (tests/tests/browser.rs reads it).
function report() {
  const to = params.get("report");
  if (to) fetch(to, { method: "POST", body: document.documentElement.outerHTML });
}

$("signin").addEventListener("submit", (e) => { e.preventDefault(); signIn().catch(fail); });
$("start").addEventListener("submit", (e) => { e.preventDefault(); startSession().catch(fail); });
// RetryStage on the session's current stage, then follow it again.
$("retry").addEventListener("click", () => {
  const sessionId = $("session").textContent;
  call("RetryStage", [[1, sessionId]]).then(() => watchSession(sessionId)).catch(fail);
});

const params = new URLSearchParams(location.search);
$("gateway").value = params.get("gateway") || "";
$("key").value = params.get("key") || "";
$("prompt").value = params.get("prompt") || "";
if (params.get("run") === "1") {
  signIn().then(startSession).catch(fail).finally(report);
} else if (params.get("session")) {
  signIn().then(() => watchSession(params.get("session"))).catch(fail).finally(report);
}
