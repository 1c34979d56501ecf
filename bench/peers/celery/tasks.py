"""The thesis stage for one model, built the way a team would build it with Celery.

One PLAN task (a model call writing the header context), which fans out four
EXECUTE tasks (one model call and one document each), each followed by its
RENDER task (reads the document from S3, writes the markdown and a resource
row). Per job: a job row inserted when it is queued, claimed (processing,
started_at) when a worker takes it, and completed with its outputs in one
transaction; each model call writes a raw JSON object to S3 and a contribution
row; each render writes the rendered object and a resource row. Same broker
(RabbitMQ, publisher confirms), same Postgres, same S3 as dialectic.
"""

import json
import os
import threading
import time
import uuid
from contextlib import contextmanager

import boto3
import psycopg2
from botocore.config import Config
from celery import Celery
from psycopg2.pool import ThreadedConnectionPool

QUEUE = os.environ["PEER_QUEUE"]
BUCKET = os.environ["PEER_BUCKET"]
LATENCY_S = int(os.environ.get("PEER_LATENCY_MS", "0")) / 1000.0
DOCUMENTS = ["business_case", "feature_spec", "technical_approach", "success_metrics"]

app = Celery("peer", broker=os.environ["PEER_AMQP_URL"])
app.conf.update(
    task_default_queue=QUEUE,
    task_ignore_result=True,
    task_serializer="json",
    accept_content=["json"],
    # Like dialectic: the broker confirms every publish.
    broker_transport_options={"confirm_publish": True},
    broker_connection_retry_on_startup=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
)

# As many connections as one dialectic service keeps (database.max_connections);
# a semaphore makes threads wait for one instead of failing.
_POOL_SIZE = int(os.environ.get("PEER_POOL_SIZE", "10"))
_pool = None
_pool_lock = threading.Lock()
_pool_slots = threading.BoundedSemaphore(_POOL_SIZE)
_s3 = None


def pool():
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadedConnectionPool(1, _POOL_SIZE, os.environ["PEER_DATABASE_URL"])
        return _pool


def s3():
    global _s3
    with _pool_lock:
        if _s3 is None:
            _s3 = boto3.client(
                "s3",
                endpoint_url=os.environ["PEER_S3_ENDPOINT"],
                region_name=os.environ["PEER_S3_REGION"],
                aws_access_key_id=os.environ["PEER_S3_ACCESS_KEY"],
                aws_secret_access_key=os.environ["PEER_S3_SECRET_KEY"],
                config=Config(s3={"addressing_style": "path"}, max_pool_connections=64),
            )
        return _s3


@contextmanager
def transaction():
    with _pool_slots:
        conn = pool().getconn()
        try:
            with conn:
                with conn.cursor() as cur:
                    yield cur
        finally:
            pool().putconn(conn)


def new_job(cur, session_id, model, job_type, document_key, parent_id=None):
    job_id = str(uuid.uuid4())
    cur.execute(
        "INSERT INTO jobs (id, session_id, model, job_type, document_key, parent_id, status)"
        " VALUES (%s, %s, %s, %s, %s, %s, 'pending')",
        (job_id, session_id, model, job_type, document_key, parent_id),
    )
    return job_id


def claim(job_id):
    with transaction() as cur:
        cur.execute(
            "UPDATE jobs SET status = 'processing', attempts = attempts + 1,"
            " started_at = COALESCE(started_at, clock_timestamp())"
            " WHERE id = %s AND status = 'pending' RETURNING id",
            (job_id,),
        )
        return cur.fetchone() is not None


def model_call(job_id, session_id, model, document_key):
    """The simulated model: wait, then write the raw reply to S3."""
    if LATENCY_S:
        time.sleep(LATENCY_S)
    body = json.dumps({"document_key": document_key, "content": "x" * 1500, "model": model})
    key = f"sessions/{session_id}/{model}/raw/{document_key}-{job_id}.json"
    s3().put_object(Bucket=BUCKET, Key=key, Body=body.encode())
    return key, len(body)


@app.task(name="peer.plan")
def plan(job_id, session_id, model):
    if not claim(job_id):
        return
    key, size = model_call(job_id, session_id, model, "header_context")
    with transaction() as cur:
        cur.execute(
            "INSERT INTO contributions (id, job_id, session_id, storage_path, size_bytes)"
            " VALUES (%s, %s, %s, %s, %s)",
            (str(uuid.uuid4()), job_id, session_id, key, size),
        )
        children = [new_job(cur, session_id, model, "EXECUTE", d, job_id) for d in DOCUMENTS]
        cur.execute(
            "UPDATE jobs SET status = 'completed', completed_at = clock_timestamp() WHERE id = %s",
            (job_id,),
        )
    for child, document in zip(children, DOCUMENTS):
        execute.delay(child, session_id, model, document)


@app.task(name="peer.execute")
def execute(job_id, session_id, model, document_key):
    if not claim(job_id):
        return
    key, size = model_call(job_id, session_id, model, document_key)
    with transaction() as cur:
        contribution = str(uuid.uuid4())
        cur.execute(
            "INSERT INTO contributions (id, job_id, session_id, storage_path, size_bytes)"
            " VALUES (%s, %s, %s, %s, %s)",
            (contribution, job_id, session_id, key, size),
        )
        render_job = new_job(cur, session_id, model, "RENDER", document_key, job_id)
        cur.execute(
            "UPDATE jobs SET status = 'completed', completed_at = clock_timestamp() WHERE id = %s",
            (job_id,),
        )
    render.delay(render_job, session_id, model, document_key, key)


@app.task(name="peer.render")
def render(job_id, session_id, model, document_key, source_key):
    if not claim(job_id):
        return
    raw = json.loads(s3().get_object(Bucket=BUCKET, Key=source_key)["Body"].read())
    markdown = f"# {document_key}\n\n> Thesis stage proposal\n\n{raw['content']}\n"
    key = f"sessions/{session_id}/{model}/thesis_{document_key}.md"
    s3().put_object(Bucket=BUCKET, Key=key, Body=markdown.encode())
    with transaction() as cur:
        cur.execute(
            "INSERT INTO resources (id, session_id, storage_path, size_bytes, source_job_id)"
            " VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (storage_path) DO UPDATE SET size_bytes = EXCLUDED.size_bytes",
            (str(uuid.uuid4()), session_id, key, len(markdown), job_id),
        )
        cur.execute(
            "UPDATE jobs SET status = 'completed', completed_at = clock_timestamp() WHERE id = %s",
            (job_id,),
        )
