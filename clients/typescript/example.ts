// Runs one session to review through the generated client (docs/clients.md):
// creates a project, starts a session on the simulated model with
// auto_advance, follows WatchSession until the session waits for review, and
// prints its state. Reads the gateway from DIALECTIC_GATEWAY_URL and the key
// from DIALECTIC_API_KEY, as the CLI does. Node has no TypeScript loader of
// its own, so bundle it first:
//   deploy/clients.sh bundle-example /tmp/example.mjs && node /tmp/example.mjs
// The client speaks gRPC-Web: the gateway needs DIALECTIC_GATEWAY__WEB_ORIGINS set.
import { SessionEventKind, SessionState, dialecticClient } from "./client";

const PROMPT = "A tool library run by neighbours: who repairs what breaks?";

async function main(): Promise<number> {
  const gateway = process.env.DIALECTIC_GATEWAY_URL ?? "http://127.0.0.1:7051";
  const key = process.env.DIALECTIC_API_KEY;
  if (!key) {
    console.error("DIALECTIC_API_KEY is not set");
    return 2;
  }
  const client = dialecticClient(gateway, key);
  const project = await client.createProject({ name: "From TypeScript", initialUserPrompt: PROMPT });
  console.log(`project ${project.id}`);
  const started = await client.startSession({
    projectId: project.id,
    models: ["simulated"],
    autoAdvance: true,
  });
  console.log(`started ${started.id}`);
  // The stream ends by itself once the session waits for review; a failed
  // stage stops it here instead (its message names the step and the error).
  for await (const event of client.watchSession({ sessionId: started.id })) {
    console.log(`event ${SessionEventKind[event.eventKind]} ${event.stageSlug} ${event.message}`);
    if (event.state === SessionState.REVIEW || event.state === SessionState.FAILED) break;
  }
  const session = await client.getSession({ sessionId: started.id });
  console.log(`session ${session.id} state SESSION_STATE_${SessionState[session.state]}`);
  return session.state === SessionState.REVIEW ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
