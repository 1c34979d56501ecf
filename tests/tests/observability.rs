//! Telemetry across services, as a deployment runs them: six service processes
//! (one per service, like one pod each) export spans over OTLP/gRPC to a
//! collector stand-in on loopback and serve Prometheus `/metrics`. One session's
//! spans must share one trace id across gateway, planner, executor, wallet and
//! renderer (the trace crosses gRPC metadata and AMQP headers), and each
//! service's `/metrics` must show what it did.

use dialectic_e2e::{ALL_SERVICES, KillOnDrop, TestEnv, eventually, sample_sum, scrape_metrics};
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use dialectic_proto::v1::{
    CreateProjectRequest, GetSessionRequest, StartSessionRequest, SubmitStageResponsesRequest,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// One exported span: the exporting process's service.name, trace id (hex),
/// span name and its string attributes.
#[derive(Debug, Clone)]
struct SpanRecord {
    service: String,
    trace_id: String,
    name: String,
    attributes: BTreeMap<String, String>,
}

/// The OTLP collector stand-in: keeps every span it is sent.
#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
}

fn string_of(value: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        _ => String::new(),
    }
}

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut kept = Vec::new();
        for resource_spans in request.into_inner().resource_spans {
            let service = resource_spans
                .resource
                .iter()
                .flat_map(|r| r.attributes.iter())
                .find(|a| a.key == "service.name")
                .map(|a| string_of(&a.value))
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    kept.push(SpanRecord {
                        service: service.clone(),
                        trace_id: span.trace_id.iter().map(|b| format!("{b:02x}")).collect(),
                        name: span.name.clone(),
                        attributes: span
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), string_of(&a.value)))
                            .collect(),
                    });
                }
            }
        }
        if let Ok(mut spans) = self.spans.lock() {
            spans.extend(kept);
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_session_is_one_trace_and_every_service_serves_metrics() {
    let env = TestEnv::new().await;

    // The collector stand-in, on loopback.
    let collector = Collector::default();
    let otlp = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("collector port");
    let otlp_addr: SocketAddr = otlp.local_addr().expect("collector addr");
    {
        let collector = collector.clone();
        tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(collector))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(otlp))
                .await;
        });
    }

    // One process per service, as the chart runs them.
    let mut settings = env.settings.clone();
    // Twelve distinct ports: the services' own and their metrics listeners.
    let ports = dialectic_e2e::free_ports(2 * ALL_SERVICES.len());
    let (service_ports, metrics_ports) = ports.split_at(ALL_SERVICES.len());
    // Billing on: the executor's wallet calls are the gRPC hop of the trace.
    let ports = dialectic_e2e::listen_apart(&mut settings, service_ports);
    let metric_ports: BTreeMap<&str, u16> = ALL_SERVICES
        .into_iter()
        .zip(metrics_ports.iter().copied())
        .collect();
    settings.telemetry.otlp_endpoint = format!("http://{otlp_addr}");
    let log_dir = std::env::temp_dir().join(format!("dialectic-observability-{}", env.database));
    std::fs::create_dir_all(&log_dir).expect("log dir");
    let config = log_dir.join("services.toml");
    std::fs::write(&config, toml::to_string(&settings).expect("settings")).expect("config");
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_chaos-service"));
    let mut processes = KillOnDrop(Vec::new());
    for name in ALL_SERVICES {
        let log = std::fs::File::create(log_dir.join(format!("{name}.log"))).expect("log");
        let child = dialectic_e2e::chaos::service_command(&binary, &config, name, "info")
            // Export soon after a span ends, so the test does not wait 5 s per batch.
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .arg("--set")
            .arg(format!(
                "telemetry.metrics_listen=127.0.0.1:{}",
                metric_ports[name]
            ))
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start a service process");
        processes.0.push(child);
    }
    for name in ALL_SERVICES {
        dialectic_e2e::wait_until_serving(name, ports[name], &log_dir).await;
    }

    // One session: the thesis stage with one model, rendered.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{}", ports["gateway"]))
            .expect("gateway address")
            .connect()
            .await
            .expect("gateway");
    let mut client = DialecticServiceClient::with_interceptor(
        channel,
        dialectic_e2e::BearerKey(settings.gateway.bootstrap_key.clone()),
    );
    let project = client
        .create_project(CreateProjectRequest {
            name: "Observed".into(),
            initial_user_prompt: "A shared bicycle repair co-op for a small town.".into(),
            client_request_id: String::new(),
            prompt_file: None,
            pipeline: String::new(),
        })
        .await
        .expect("create project")
        .into_inner();
    let session = client
        .start_session(StartSessionRequest {
            project_id: project.id.clone(),
            models: vec!["simulated".into()],
            description: String::new(),
            client_request_id: String::new(),
            auto_advance: false,
            ..Default::default()
        })
        .await
        .expect("start session")
        .into_inner();
    eventually(120, "the thesis stage to finish and render", || {
        let mut client = client.clone();
        let session_id = session.id.clone();
        async move {
            let s = client
                .get_session(GetSessionRequest { session_id })
                .await
                .ok()?
                .into_inner();
            (s.status == "pending_antithesis" && s.jobs.iter().all(|j| j.in_flight == 0))
                .then_some(())
        }
    })
    .await;

    // The planner's span for this session's stage names the trace; every
    // service that worked on the session must have spans in it.
    let wanted: BTreeSet<&str> = ["gateway", "planner", "executor", "wallet", "renderer"].into();
    let (trace_id, by_service) =
        eventually(30, "every service's spans of the session's trace", || {
            let spans = collector
                .spans
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default();
            let session_id = session.id.clone();
            let wanted = wanted.clone();
            async move {
                let trace_id = spans
                    .iter()
                    .find(|s| {
                        s.service == "planner"
                            && s.name == "start_stage"
                            && s.attributes.get("session_id") == Some(&session_id)
                            && s.attributes.get("stage").map(String::as_str) == Some("thesis")
                    })?
                    .trace_id
                    .clone();
                let mut by_service: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                for span in spans.iter().filter(|s| s.trace_id == trace_id) {
                    by_service
                        .entry(span.service.clone())
                        .or_default()
                        .insert(span.name.clone());
                }
                let renderer_done = by_service
                    .get("renderer")
                    .is_some_and(|names| names.contains("job"));
                (wanted.iter().all(|w| by_service.contains_key(*w)) && renderer_done)
                    .then_some((trace_id, by_service))
            }
        })
        .await;
    println!("trace {trace_id}: {by_service:#?}");
    assert!(
        by_service["gateway"].contains("/dialectic.v1.DialecticService/StartSession"),
        "the trace starts at the gateway's StartSession: {by_service:#?}"
    );
    assert!(by_service["executor"].contains("job"), "{by_service:#?}");
    assert!(
        by_service["wallet"].contains("/dialectic.v1.wallet.WalletService/Hold"),
        "the executor's wallet call crossed gRPC metadata: {by_service:#?}"
    );
    // Nothing the back end did for the session escaped into another trace.
    // (The gateway's GetSession reads are requests of their own, so traces of
    // their own.)
    let spans = collector
        .spans
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default();
    let backend: Vec<&SpanRecord> = spans
        .iter()
        .filter(|s| s.service != "gateway" && s.attributes.get("session_id") == Some(&session.id))
        .collect();
    assert!(
        backend.len() >= 3,
        "the back end's spans name their session: {backend:#?}"
    );
    let strays: Vec<&&SpanRecord> = backend.iter().filter(|s| s.trace_id != trace_id).collect();
    assert!(
        strays.is_empty(),
        "spans of the session in other traces: {strays:#?}"
    );

    // /metrics of every service process.
    let mut pages = BTreeMap::new();
    for name in ALL_SERVICES {
        let page = eventually(20, &format!("{name} /metrics"), || {
            scrape_metrics(metric_ports[name])
        })
        .await;
        for family in [
            "dialectic_grpc_requests_total",
            "dialectic_grpc_request_duration_seconds",
            "dialectic_queue_lag_seconds",
            "dialectic_jobs",
            "dialectic_job_duration_seconds",
            "dialectic_model_tokens_total",
            "dialectic_model_cost_total",
            "dialectic_wallet_operations_total",
            "dialectic_wallet_held",
            "dialectic_compression_steps_total",
        ] {
            assert!(
                page.contains(&format!("# TYPE {family} ")),
                "{name} does not declare {family}"
            );
        }
        // Readiness probes went through the gRPC layer of every service.
        assert!(
            sample_sum(
                &page,
                "dialectic_grpc_requests_total",
                &["method=\"/grpc.health.v1.Health/Check\"", "code=\"0\""]
            ) >= 1.0,
            "{name}: no gRPC request counted\n{page}"
        );
        pages.insert(name, page);
    }
    let gateway = &pages["gateway"];
    assert_eq!(
        sample_sum(
            gateway,
            "dialectic_grpc_requests_total",
            &[
                "method=\"/dialectic.v1.DialecticService/StartSession\"",
                "code=\"0\""
            ]
        ),
        1.0,
        "{gateway}"
    );
    assert!(
        sample_sum(
            gateway,
            "dialectic_grpc_request_duration_seconds_count",
            &["method=\"/dialectic.v1.DialecticService/GetSession\""]
        ) >= 1.0
    );
    let executor = &pages["executor"];
    for direction in ["input", "output"] {
        assert!(
            sample_sum(
                executor,
                "dialectic_model_tokens_total",
                &["model=\"simulated\"", &format!("direction=\"{direction}\"")]
            ) > 0.0,
            "no {direction} tokens counted\n{executor}"
        );
    }
    assert!(
        sample_sum(
            executor,
            "dialectic_model_cost_total",
            &["model=\"simulated\""]
        ) > 0.0
    );
    assert!(
        sample_sum(
            executor,
            "dialectic_job_duration_seconds_count",
            &[
                "job_type=\"EXECUTE\"",
                "stage=\"thesis\"",
                "result=\"succeeded\""
            ]
        ) >= 1.0,
        "{executor}"
    );
    assert!(
        sample_sum(
            executor,
            "dialectic_queue_lag_seconds_count",
            &["job.execute\""]
        ) >= 1.0,
        "{executor}"
    );
    let renderer = &pages["renderer"];
    assert!(
        sample_sum(
            renderer,
            "dialectic_job_duration_seconds_count",
            &["job_type=\"RENDER\"", "stage=\"thesis\""]
        ) >= 1.0,
        "{renderer}"
    );
    let wallet = &pages["wallet"];
    for operation in ["hold", "capture"] {
        assert!(
            sample_sum(
                wallet,
                "dialectic_wallet_operations_total",
                &[&format!("operation=\"{operation}\""), "result=\"ok\""]
            ) >= 1.0,
            "no {operation} counted\n{wallet}"
        );
    }
    assert!(wallet.contains("\ndialectic_wallet_held "), "{wallet}");
    // The planner reads the job gauges every few seconds.
    let planner = eventually(20, "the planner's job gauges", || async {
        let page = scrape_metrics(metric_ports["planner"]).await?;
        (sample_sum(
            &page,
            "dialectic_jobs",
            &["job_type=\"EXECUTE\"", "status=\"completed\""],
        ) >= 1.0)
            .then_some(page)
    })
    .await;
    assert!(
        sample_sum(
            &planner,
            "dialectic_queue_lag_seconds_count",
            &["job.event\""]
        ) >= 1.0,
        "{planner}"
    );

    // A command later in the session's life (the thesis review, which starts
    // the antithesis stage) continues the session's trace.
    client
        .submit_stage_responses(SubmitStageResponsesRequest {
            session_id: session.id.clone(),
            stage_slug: "thesis".into(),
            responses: vec![],
            client_request_id: String::new(),
        })
        .await
        .expect("submit the thesis review");
    let antithesis_trace = eventually(120, "the antithesis stage's planner span", || {
        let spans = collector
            .spans
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        let session_id = session.id.clone();
        async move {
            spans
                .iter()
                .find(|s| {
                    s.service == "planner"
                        && s.name == "start_stage"
                        && s.attributes.get("session_id") == Some(&session_id)
                        && s.attributes.get("stage").map(String::as_str) == Some("antithesis")
                })
                .map(|s| s.trace_id.clone())
        }
    })
    .await;
    assert_eq!(
        antithesis_trace, trace_id,
        "the second stage is traced with the rest of the session"
    );

    drop(processes);
    env.teardown().await;
    let _ = std::fs::remove_dir_all(&log_dir);
}
