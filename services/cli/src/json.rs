//! `--output json`: one JSON document per answer (one line per event when
//! watching), with the API's field names, for scripts.

use dialectic_proto::v1::{
    BlackboardEntry, ExportUrl, Pipeline, Project, ProjectDocument, QueryResponse, RecipeSummary,
    Session, SessionEvent, StageDocument, StageRecipe, Wallet, WalletTransaction,
};
use serde_json::{Value, json};

fn time(t: &Option<prost_types::Timestamp>) -> Value {
    match t {
        Some(t) => json!(t.seconds as f64 + f64::from(t.nanos) / 1e9),
        None => Value::Null,
    }
}

pub fn project(p: &Project) -> Value {
    json!({
        "id": p.id, "name": p.name, "slug": p.slug,
        "process_template_id": p.process_template_id, "pipeline": p.pipeline,
        "created_at": time(&p.created_at),
    })
}

pub fn session(s: &Session) -> Value {
    json!({
        "id": s.id, "project_id": s.project_id, "status": s.status, "iteration": s.iteration,
        "current_stage": s.current_stage, "models": s.models, "auto_advance": s.auto_advance,
        "cost": s.cost, "notice": s.notice, "pipeline_version": s.pipeline_version,
        "skipped_steps": s.skipped_steps.iter().map(|k| json!({
            "iteration": k.iteration, "step_key": k.step_key, "reason": k.reason,
        })).collect::<Vec<_>>(),
        "position": s.position.as_ref().map(|p| json!({
            "stage_number": p.stage_number, "stage_count": p.stage_count, "stage_name": p.stage_name,
            "step_key": p.step_key, "step_name": p.step_name, "unit": p.unit, "index": p.index,
            "count": p.count, "stage_percent": p.stage_percent, "summary": p.summary,
        })),
        "created_at": time(&s.created_at), "updated_at": time(&s.updated_at),
        "jobs": s.jobs.iter().map(|j| json!({
            "stage": j.stage_slug, "plan": j.plan, "execute": j.execute, "render": j.render,
            "completed": j.completed, "failed": j.failed, "in_flight": j.in_flight, "superseded": j.superseded, "cost": j.cost,
        })).collect::<Vec<_>>(),
    })
}

pub fn document(d: &StageDocument) -> Value {
    json!({
        "resource_id": d.resource_id, "stage": d.stage_slug, "iteration": d.iteration,
        "document_key": d.document_key, "model": d.model, "storage_key": d.storage_key,
        "size_bytes": d.size_bytes, "incomplete": d.incomplete, "updated_at": time(&d.updated_at),
    })
}

pub fn event(e: &SessionEvent) -> Value {
    json!({
        "kind": e.kind, "session_id": e.session_id, "session_status": e.session_status,
        "stage": e.stage_slug, "job_id": e.job_id, "job_type": e.job_type,
        "document_key": e.document_key, "model": e.model, "message": e.message,
        "stage_percent": e.stage_percent, "at": time(&e.at),
    })
}

fn transaction(t: &WalletTransaction) -> Value {
    json!({
        "id": t.id, "kind": t.kind, "amount": t.amount, "balance_after": t.balance_after,
        "reason": t.reason, "session_id": t.session_id, "job_id": t.job_id,
        "created_at": time(&t.created_at),
    })
}

pub fn wallet(w: &Wallet) -> Value {
    json!({
        "wallet_id": w.wallet_id, "total": w.total, "held": w.held, "available": w.available,
        "history": w.history.iter().map(transaction).collect::<Vec<_>>(),
    })
}

pub fn project_document(d: &ProjectDocument) -> Value {
    json!({"resource_id": d.resource_id, "project_id": d.project_id, "file_name": d.file_name,
           "position": d.position, "size_bytes": d.size_bytes, "content_hash": d.content_hash,
           "chunks": d.chunks, "storage_key": d.storage_key, "created_at": time(&d.created_at)})
}

/// An entry's data is JSON already: it is embedded, not quoted.
pub fn board_entry(e: &BlackboardEntry) -> Value {
    json!({"id": e.id, "entry_type": e.entry_type, "seq": e.seq, "iteration": e.iteration,
           "stage": e.stage_slug, "step_key": e.step_key, "model": e.model, "job_id": e.job_id,
           "data": serde_json::from_str::<Value>(&e.data_json).unwrap_or(Value::Null),
           "created_at": time(&e.created_at)})
}

pub fn pipeline(p: &Pipeline) -> Value {
    json!({"slug": p.slug, "name": p.name, "version": p.version, "stages": p.stages,
           "current": p.current, "created_at": time(&p.created_at)})
}

pub fn recipes(list: &[RecipeSummary]) -> Value {
    list.iter()
        .map(|r| json!({"stage": r.stage_slug, "name": r.display_name, "is_cloned": r.is_cloned, "steps": r.steps}))
        .collect()
}

pub fn recipe(r: &StageRecipe) -> Value {
    json!({
        "stage": r.stage_slug, "is_cloned": r.is_cloned,
        "steps": r.steps.iter().map(|s| json!({
            "id": s.id, "step_key": s.step_key, "name": s.name, "job_type": s.job_type,
            "granularity_strategy": s.granularity_strategy, "output_type": s.output_type,
            "skipped": s.skipped, "after": s.after,
        })).collect::<Vec<_>>(),
    })
}

pub fn export_url(u: &ExportUrl) -> Value {
    json!({"url": u.url, "storage_key": u.storage_key, "size_bytes": u.size_bytes, "expires_at": time(&u.expires_at)})
}

pub fn answer(a: &QueryResponse) -> Value {
    json!({
        "answer": a.answer, "query_type": a.query_type, "confidence": a.confidence,
        "cached": a.cached, "cost": a.cost, "sub_queries": a.sub_queries, "caveats": a.caveats,
        "citations": a.citations.iter().map(|c| json!({
            "source_id": c.source_id, "source_name": c.source_name, "chunk_id": c.chunk_id,
            "start": c.start, "end": c.end, "quote": c.quote,
        })).collect::<Vec<_>>(),
    })
}
