"""Runs one session to review through the generated client (docs/clients.md).

Creates a project, starts a session on the simulated model with auto_advance,
follows WatchSession until the session waits for review, and prints its
state. Reads the gateway from DIALECTIC_GATEWAY_URL (http://host:port, or
https:// for TLS with the system's roots) and the key from DIALECTIC_API_KEY,
as the CLI does:

    eval "$(deploy/clients.sh env)"
    PYTHONPATH=clients/python/gen $DIALECTIC_CLIENTS_PYTHON clients/python/example.py
"""

import os
import sys
from urllib.parse import urlsplit

import grpc

from dialectic.v1 import gateway_pb2 as api
from dialectic.v1 import gateway_pb2_grpc as api_grpc

PROMPT = "A repair café in the library basement: who mends what, and who pays for parts?"


def channel(url: str) -> grpc.Channel:
    parts = urlsplit(url)
    if parts.scheme == "https":
        return grpc.secure_channel(parts.netloc, grpc.ssl_channel_credentials())
    return grpc.insecure_channel(parts.netloc or url)


def main() -> int:
    url = os.environ.get("DIALECTIC_GATEWAY_URL", "http://127.0.0.1:7051")
    key = os.environ.get("DIALECTIC_API_KEY")
    if not key:
        print("DIALECTIC_API_KEY is not set", file=sys.stderr)
        return 2
    # Every call carries the key; the gateway takes it from no other place.
    auth = [("authorization", f"Bearer {key}")]
    with channel(url) as ch:
        client = api_grpc.DialecticServiceStub(ch)
        project = client.CreateProject(
            api.CreateProjectRequest(name="From Python", initial_user_prompt=PROMPT), metadata=auth
        )
        print(f"project {project.id}")
        started = client.StartSession(
            api.StartSessionRequest(project_id=project.id, models=["simulated"], auto_advance=True),
            metadata=auth,
        )
        print(f"started {started.id}")
        # The stream ends by itself once the session waits for review; a failed
        # stage stops it here instead (its message names the step and the error).
        events = client.WatchSession(api.WatchSessionRequest(session_id=started.id), metadata=auth)
        for event in events:
            kind = api.SessionEventKind.Name(event.event_kind)
            print(f"event {kind} {event.stage_slug} {event.message}")
            if event.state in (api.SESSION_STATE_REVIEW, api.SESSION_STATE_FAILED):
                events.cancel()
                break
        session = client.GetSession(api.GetSessionRequest(session_id=started.id), metadata=auth)
        print(f"session {session.id} state {api.SessionState.Name(session.state)}")
        return 0 if session.state == api.SESSION_STATE_REVIEW else 1


if __name__ == "__main__":
    sys.exit(main())
