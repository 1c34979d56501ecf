#!/usr/bin/env python3
"""Runs the Celery peer for one rung and prints one JSON line with its figures.

Fresh database, bucket and queue per run (like dialectic's bench), a Celery
worker (threads pool, --concurrency like dialectic's worker slots) started as
its own process, S sessions x N models of the thesis DAG in tasks.py, timed
until every job row is completed. Called by dialectic-bench for each rung;
standalone:

    PEER_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
    PEER_AMQP_URL=amqp://guest:guest@127.0.0.1:5672/%2f PEER_S3_ENDPOINT=http://127.0.0.1:9000 \
    PEER_S3_REGION=us-east-1 PEER_S3_ACCESS_KEY=dialectic PEER_S3_SECRET_KEY=dialectic-secret \
    python peer.py --sessions 10 --latency-ms 0
"""

import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS_PER_SESSION_MODEL = 9  # one plan, four documents, four renders
CRITICAL_MODEL_CALLS = 2  # the plan, then one document

SCHEMA = """
CREATE TABLE sessions (id uuid PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE jobs (
  id uuid PRIMARY KEY, session_id uuid NOT NULL REFERENCES sessions (id), model text NOT NULL,
  job_type text NOT NULL, document_key text, parent_id uuid REFERENCES jobs (id),
  status text NOT NULL, attempts integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(), started_at timestamptz, completed_at timestamptz);
CREATE INDEX jobs_session ON jobs (session_id);
CREATE INDEX jobs_open ON jobs (status) WHERE status <> 'completed';
CREATE TABLE contributions (
  id uuid PRIMARY KEY, job_id uuid NOT NULL UNIQUE REFERENCES jobs (id), session_id uuid NOT NULL,
  storage_path text NOT NULL, size_bytes bigint NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE resources (
  id uuid PRIMARY KEY, session_id uuid NOT NULL, storage_path text NOT NULL UNIQUE,
  size_bytes bigint NOT NULL, source_job_id uuid REFERENCES jobs (id),
  created_at timestamptz NOT NULL DEFAULT now());
"""


def with_database(url, database):
    base = url.split("?", 1)[0]
    return base.rsplit("/", 1)[0] + "/" + database


def percentile(values, p):
    if not values:
        return 0.0
    return values[round((len(values) - 1) * p)]


def proc_cpu_rss(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        rss = 0.0
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    rss = int(line.split()[1]) / 1024.0
        return cpu, rss
    except (OSError, IndexError, ValueError):
        return 0.0, 0.0


def run_sessions(cur, models, sessions, done_before, timeout, worker, log_name):
    """Starts `sessions` thesis DAGs and waits until every job since is
    completed (`done_before` were already); returns the polls it made."""
    import tasks  # imported by main() once the environment is set

    started = time.time()
    for _ in range(sessions):
        session_id = str(uuid.uuid4())
        cur.execute("INSERT INTO sessions (id) VALUES (%s)", (session_id,))
        for model in models:
            job_id = tasks.new_job(cur, session_id, model, "PLAN", "header_context")
            tasks.plan.delay(job_id, session_id, model)
    expected = done_before + sessions * len(models) * JOBS_PER_SESSION_MODEL
    polls = 0
    while True:
        cur.execute("SELECT count(*) FROM jobs WHERE status = 'completed'")
        polls += 1
        if cur.fetchone()[0] >= expected:
            return polls
        if time.time() - started > timeout:
            raise RuntimeError(f"timed out: fewer than {expected} jobs done")
        if worker.poll() is not None:
            raise RuntimeError(f"worker exited; see {log_name}")
        time.sleep(1.0 if sessions > 100 else 0.25)  # as dialectic's bench polls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--latency-ms", type=int, default=0)
    parser.add_argument("--models", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--timeout", type=int, default=600)
    # Sessions run first and left out of the figures, as dialectic's bench does.
    parser.add_argument("--warmup", type=int, default=0)
    args = parser.parse_args()

    suffix = uuid.uuid4().hex[:12]
    database = f"celery_peer_{suffix}"
    admin_url = with_database(os.environ["PEER_DATABASE_URL"], "postgres")
    db_url = with_database(os.environ["PEER_DATABASE_URL"], database)
    admin = psycopg2.connect(admin_url)
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {database}")
    db = psycopg2.connect(db_url)
    db.autocommit = True
    db.cursor().execute(SCHEMA)

    os.environ.update(
        PEER_QUEUE=f"celery-peer-{suffix}",
        PEER_BUCKET=f"celery-peer-{suffix}",
        PEER_LATENCY_MS=str(args.latency_ms),
        PEER_DATABASE_URL=db_url,
    )
    sys.path.insert(0, HERE)
    import tasks  # noqa: E402  (reads the environment set just above)

    s3 = tasks.s3()
    s3.create_bucket(Bucket=os.environ["PEER_BUCKET"])
    log = tempfile.NamedTemporaryFile(prefix=f"celery-peer-{suffix}-", suffix=".log", delete=False)
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool", "threads",
         "--concurrency", str(args.concurrency), "-Q", os.environ["PEER_QUEUE"],
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "WARNING",
         "-n", f"peer-{suffix}@%h"],
        cwd=HERE, env=os.environ.copy(), stdout=log, stderr=log, stdin=subprocess.DEVNULL,
    )
    result = {"sessions": args.sessions, "models": args.models, "latency_ms": args.latency_ms,
              "concurrency": args.concurrency}
    try:
        # Ready once the worker consumes the queue.
        with tasks.app.connection_for_write() as conn:
            channel = conn.default_channel
            deadline = time.time() + 60
            while True:
                try:
                    consumers = channel.queue_declare(os.environ["PEER_QUEUE"], passive=True).consumer_count
                except Exception:  # the queue does not exist until the worker declares it
                    consumers = 0
                    channel = conn.channel()
                if consumers > 0:
                    break
                if time.time() > deadline or worker.poll() is not None:
                    raise RuntimeError(f"celery worker did not start; see {log.name}")
                time.sleep(0.2)
        cur = db.cursor()
        models = [f"simulated-{k}" for k in range(1, args.models + 1)]
        if args.warmup:
            run_sessions(cur, models, args.warmup, 0, args.timeout, worker, log.name)
        cur.execute("SELECT clock_timestamp()")
        since = cur.fetchone()[0]
        warm_jobs = args.warmup * args.models * JOBS_PER_SESSION_MODEL
        time.sleep(1.5)  # other backends flush their statistics within a second
        cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (database,))
        xacts_before = cur.fetchone()[0]
        cpu_before, _ = proc_cpu_rss(worker.pid)
        started = time.time()
        polls = run_sessions(cur, models, args.sessions, warm_jobs, args.timeout, worker, log.name)
        own_xacts = 1 + args.sessions * (1 + args.models) + polls
        cur.execute("SELECT EXTRACT(EPOCH FROM max(completed_at)) FROM jobs WHERE created_at >= %s", (since,))
        own_xacts += 1
        elapsed = max(float(cur.fetchone()[0] or started) - started, 1e-6)
        cpu_after, rss = proc_cpu_rss(worker.pid)
        cur.execute("SELECT EXTRACT(EPOCH FROM (started_at - created_at)) * 1000 FROM jobs"
                    " WHERE started_at IS NOT NULL AND created_at >= %s ORDER BY 1", (since,))
        dispatch = [float(r[0]) for r in cur.fetchall()]
        cur.execute("SELECT EXTRACT(EPOCH FROM (max(j.completed_at) - s.created_at)) * 1000"
                    " FROM sessions s JOIN jobs j ON j.session_id = s.id WHERE s.created_at >= %s"
                    " GROUP BY s.id ORDER BY 1", (since,))
        session_ms = [float(r[0]) for r in cur.fetchall() if r[0] is not None]
        cur.execute("SELECT count(*) FROM jobs WHERE created_at >= %s", (since,))
        jobs = cur.fetchone()[0]
        own_xacts += 4
        time.sleep(1.5)  # other backends flush their statistics within a second
        cur.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = %s", (database,))
        xacts = cur.fetchone()[0] - xacts_before - own_xacts
        critical_ms = CRITICAL_MODEL_CALLS * args.latency_ms
        p50 = percentile(session_ms, 0.5)
        result.update(
            warmup_sessions=args.warmup,
            elapsed_s=round(elapsed, 2),
            jobs=jobs,
            jobs_per_s=round(jobs / elapsed, 1),
            sessions_per_s=round(args.sessions / elapsed, 2),
            dispatch_ms={"p50": round(percentile(dispatch, 0.5), 1),
                         "p95": round(percentile(dispatch, 0.95), 1),
                         "p99": round(percentile(dispatch, 0.99), 1)},
            session_ms={"p50": round(p50), "max": round(percentile(session_ms, 1.0))},
            critical_path_efficiency={"p50": round(critical_ms / p50, 3) if p50 else 0.0},
            pg_xacts_per_job=round(xacts / max(jobs, 1), 2),
            amqp_messages_per_job=1.0,  # one task message per job, by construction
            worker_cpu_ms_per_job=round((cpu_after - cpu_before) * 1000 / max(jobs, 1), 2),
            worker_cpu_s=round(cpu_after - cpu_before, 2),
            worker_peak_rss_mib=round(rss, 1),
        )
    except Exception as e:  # report, never hang the bench
        result["error"] = str(e)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        try:
            with tasks.app.connection_for_write() as conn:
                conn.default_channel.queue_delete(os.environ["PEER_QUEUE"])
        except Exception:
            pass
        try:
            bucket = os.environ["PEER_BUCKET"]
            keys = [
                obj["Key"]
                for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
                for obj in page.get("Contents", [])
            ]
            # One request per object; in parallel, as dialectic's bench cleans up.
            with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
                list(pool.map(lambda key: s3.delete_object(Bucket=bucket, Key=key), keys))
            s3.delete_bucket(Bucket=bucket)
        except Exception:
            pass
        db.close()
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
        admin.close()
        if "error" not in result:
            os.unlink(log.name)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
