//! Model-call telemetry as a deployment sees it (issue 56, item 6): six
//! service processes export spans over OTLP/gRPC to an `https://` collector
//! stand-in whose certificate a test CA signed (given as
//! `OTEL_EXPORTER_OTLP_CERTIFICATE`), and serve `/metrics`. One session's
//! thesis stage runs on the simulated model; the executor's `/metrics` must
//! show that model's calls, latencies and tokens exactly as the wallet's
//! ledger recorded them, and each call must arrive as a `chat {model}` span
//! carrying OpenTelemetry's GenAI attributes
//! (<https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/>).
//! The CA and the certificate are made with the `openssl` command. Every
//! process's `/metrics` also carries `dialectic_build_info`, the
//! grpc-ecosystem server metrics and the process metrics (issue 60).

use dialectic_e2e::{ALL_SERVICES, KillOnDrop, TestEnv, eventually, sample_sum, scrape_metrics};
use dialectic_proto::v1::GetSessionRequest;
use dialectic_proto::v1::dialectic_service_client::DialecticServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::AnyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// One exported span: its service, name, kind and attributes (as text).
#[derive(Debug, Clone)]
struct SpanRecord {
    service: String,
    name: String,
    kind: i32,
    attributes: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Collector {
    spans: Arc<Mutex<Vec<SpanRecord>>>,
}

impl Collector {
    fn spans(&self) -> Vec<SpanRecord> {
        self.spans.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// A value as text; an array as its items joined with commas.
fn text_of(value: Option<&AnyValue>) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::ArrayValue(items)) => items
            .values
            .iter()
            .map(|v| text_of(Some(v)))
            .collect::<Vec<_>>()
            .join(","),
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
                .map(|a| text_of(a.value.as_ref()))
                .unwrap_or_default();
            for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
                kept.push(SpanRecord {
                    service: service.clone(),
                    name: span.name,
                    kind: span.kind,
                    attributes: span
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), text_of(a.value.as_ref())))
                        .collect(),
                });
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

fn openssl(dir: &Path, args: &[&str]) {
    let output = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// In `dir`: `ca.pem`, and `tls.crt`/`tls.key` for 127.0.0.1 signed by it.
fn certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(["-subj", "/CN=collector test CA"]);
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(dir, &ca);
    let mut leaf = vec!["req", "-new", "-nodes", "-subj", "/CN=collector"];
    leaf.extend(ec);
    leaf.extend(["-keyout", "tls.key", "-out", "tls.csr"]);
    openssl(dir, &leaf);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("extensions");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "tls.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
            "-out",
            "tls.crt",
        ],
    );
}

/// The collector stand-in serving TLS with `dir`'s certificate; its endpoint.
async fn tls_collector(dir: &Path, collector: Collector) -> String {
    use tonic::transport::{Identity, Server, ServerTlsConfig};
    let _ = rustls::crypto::CryptoProvider::install_default(
        rustls::crypto::aws_lc_rs::default_provider(),
    );
    let read = |name: &str| std::fs::read(dir.join(name)).expect(name);
    let identity = Identity::from_pem(read("tls.crt"), read("tls.key"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("collector port");
    let endpoint = format!("https://{}", listener.local_addr().expect("addr"));
    let mut server = Server::builder()
        .tls_config(ServerTlsConfig::new().identity(identity))
        .expect("collector tls");
    tokio::spawn(async move {
        let _ = server
            .add_service(TraceServiceServer::new(collector))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
            .await;
    });
    endpoint
}

/// What the wallet's ledger captured for a session's model calls.
#[derive(Debug, PartialEq)]
struct Ledger {
    calls: i64,
    input: i64,
    output: i64,
    cache_read: i64,
    cache_write: i64,
}

async fn ledger(env: &TestEnv, session_id: &str) -> Ledger {
    let session = uuid::Uuid::parse_str(session_id).expect("session id");
    let row: (i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT count(*),
                COALESCE(sum(c.input_tokens), 0)::bigint,
                COALESCE(sum(c.output_tokens), 0)::bigint,
                COALESCE(sum(c.cached_input_tokens), 0)::bigint,
                COALESCE(sum(c.cache_write_input_tokens), 0)::bigint
           FROM token_wallet_transactions c
           JOIN token_wallet_transactions h ON h.id = c.hold_id
          WHERE c.kind = 'capture' AND h.session_id = $1",
    )
    .bind(session)
    .fetch_one(env.store.pool())
    .await
    .expect("ledger");
    Ledger {
        calls: row.0,
        input: row.1,
        output: row.2,
        cache_read: row.3,
        cache_write: row.4,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_executor_shows_each_models_calls_as_the_ledger_counts_them() {
    let env = TestEnv::new().await;
    let log_dir = std::env::temp_dir().join(format!("dialectic-model-telemetry-{}", env.database));
    std::fs::create_dir_all(&log_dir).expect("log dir");
    certificates(&log_dir);
    let collector = Collector::default();
    let endpoint = tls_collector(&log_dir, collector.clone()).await;

    let mut settings = env.settings.clone();
    let ports = dialectic_e2e::free_ports(2 * ALL_SERVICES.len());
    let (service_ports, metrics_ports) = ports.split_at(ALL_SERVICES.len());
    let ports = dialectic_e2e::listen_apart(&mut settings, service_ports);
    let metric_ports: BTreeMap<&str, u16> = ALL_SERVICES
        .into_iter()
        .zip(metrics_ports.iter().copied())
        .collect();
    settings.telemetry.otlp_endpoint = endpoint;
    let config = log_dir.join("services.toml");
    std::fs::write(&config, toml::to_string(&settings).expect("settings")).expect("config");
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_chaos-service"));
    let mut processes = KillOnDrop(Vec::new());
    for name in ALL_SERVICES {
        let log = std::fs::File::create(log_dir.join(format!("{name}.log"))).expect("log");
        let child = dialectic_e2e::chaos::service_command(&binary, &config, name, "info")
            .env("OTEL_BSP_SCHEDULE_DELAY", "200")
            .env("OTEL_EXPORTER_OTLP_CERTIFICATE", log_dir.join("ca.pem"))
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
    let (_, session_id) = dialectic_e2e::start_project_session(
        &mut client,
        "",
        "A tool library for a village hall.",
        &["simulated"],
        false,
    )
    .await;
    eventually(120, "the thesis stage to finish", || {
        let mut client = client.clone();
        let session_id = session_id.clone();
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

    // Every call is over, so the executor's figures are final; the ledger's
    // captures may still be on their way.
    let page = scrape_metrics(metric_ports["executor"])
        .await
        .expect("the executor's /metrics");
    let model = "model=\"simulated\"";
    let figure = |series: &str, labels: &[&str]| -> i64 {
        let mut all = vec![model];
        all.extend_from_slice(labels);
        sample_sum(&page, series, &all) as i64
    };
    let calls = figure("dialectic_model_calls_total", &["result=\"ok\""]);
    let ledger = eventually(30, "every call captured", || {
        let env = &env;
        let session_id = session_id.clone();
        async move {
            let ledger = ledger(env, &session_id).await;
            (ledger.calls >= calls).then_some(ledger)
        }
    })
    .await;
    println!("ledger: {ledger:?}");
    assert!(ledger.calls >= 1 && ledger.input > 0 && ledger.output > 0);
    let tokens = |direction: &str| {
        figure(
            "dialectic_model_tokens_total",
            &[&format!("direction=\"{direction}\"")],
        )
    };
    assert_eq!(
        Ledger {
            calls,
            input: tokens("input"),
            output: tokens("output"),
            cache_read: tokens("cache_read"),
            cache_write: tokens("cache_write"),
        },
        ledger,
        "the executor's /metrics against the ledger\n{page}"
    );
    assert_eq!(
        figure(
            "dialectic_model_call_duration_seconds_count",
            &["result=\"ok\""]
        ),
        ledger.calls,
        "one latency per call\n{page}"
    );
    assert_eq!(figure("dialectic_model_errors_total", &[]), 0, "{page}");
    for family in [
        "dialectic_model_call_duration_seconds histogram",
        "dialectic_model_time_to_first_token_seconds histogram",
        "dialectic_model_errors_total counter",
    ] {
        assert!(page.contains(&format!("# TYPE {family}\n")), "{family}");
    }

    // Each call is a GenAI span, exported through TLS to the collector.
    let chats = eventually(30, "a chat span per call", || {
        let spans = collector.spans();
        let want = ledger.calls as usize;
        async move {
            let chats: Vec<SpanRecord> = spans
                .into_iter()
                .filter(|s| s.service == "executor" && s.name == "chat simulated")
                .collect();
            (chats.len() >= want).then_some(chats)
        }
    })
    .await;
    assert_eq!(chats.len() as i64, ledger.calls, "{chats:#?}");
    let client_kind = opentelemetry_proto::tonic::trace::v1::span::SpanKind::Client as i32;
    let mut input = 0;
    let mut output = 0;
    for span in &chats {
        let attribute = |key: &str| span.attributes.get(key).map(String::as_str);
        assert_eq!(span.kind, client_kind, "{span:#?}");
        assert_eq!(attribute("gen_ai.operation.name"), Some("chat"));
        assert_eq!(attribute("gen_ai.provider.name"), Some("simulated"));
        assert_eq!(attribute("gen_ai.request.model"), Some("simulated"));
        assert!(
            attribute("gen_ai.request.max_tokens").is_some_and(|t| t.parse::<u32>().is_ok()),
            "{span:#?}"
        );
        assert!(
            matches!(
                attribute("gen_ai.response.finish_reasons"),
                Some("stop" | "length")
            ),
            "{span:#?}"
        );
        assert_eq!(attribute("error.type"), None, "{span:#?}");
        let count = |key: &str| {
            attribute(key)
                .and_then(|t| t.parse::<i64>().ok())
                .unwrap_or_else(|| panic!("{key}: {span:#?}"))
        };
        input += count("gen_ai.usage.input_tokens");
        output += count("gen_ai.usage.output_tokens");
    }
    assert_eq!((input, output), (ledger.input, ledger.output));

    // Every process says what it is (issue 60): one build_info series, 1;
    // and counts its RPCs under the grpc-ecosystem names.
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    for name in ALL_SERVICES {
        let page = scrape_metrics(metric_ports[name])
            .await
            .unwrap_or_else(|| panic!("{name} /metrics"));
        let series: Vec<&str> = page
            .lines()
            .filter(|l| l.starts_with("dialectic_build_info{"))
            .collect();
        assert_eq!(series.len(), 1, "{name}: {series:?}");
        // The readiness probes, under the grpc-ecosystem names too.
        let check = [
            "grpc_type=\"unary\"",
            "grpc_service=\"grpc.health.v1.Health\"",
            "grpc_method=\"Check\"",
        ];
        let handled_ok = [check.as_slice(), &["grpc_code=\"OK\""]].concat();
        for (series, labels) in [
            ("grpc_server_started_total", check.as_slice()),
            ("grpc_server_handled_total", handled_ok.as_slice()),
            ("grpc_server_handling_seconds_count", check.as_slice()),
        ] {
            assert!(
                sample_sum(&page, series, labels) >= 1.0,
                "{name}: {series}\n{page}"
            );
        }
        // And the standard process metrics.
        for series in ["process_resident_memory_bytes", "process_open_fds"] {
            assert!(
                sample_sum(&page, series, &[]) > 0.0,
                "{name}: {series}\n{page}"
            );
        }
        assert!(
            page.contains("\nprocess_cpu_seconds_total "),
            "{name}\n{page}"
        );
        if name == "gateway" {
            let start = [
                "grpc_service=\"dialectic.v1.DialecticService\"",
                "grpc_method=\"StartSession\"",
                "grpc_code=\"OK\"",
            ];
            assert_eq!(
                sample_sum(&page, "grpc_server_handled_total", &start),
                1.0,
                "{page}"
            );
        }
        assert!(
            series[0].contains(&version)
                && series[0].contains("commit=\"")
                && sample_sum(series[0], "dialectic_build_info", &[]) == 1.0,
            "{name}: {series:?}"
        );
    }

    drop(processes);
    env.teardown().await;
    let _ = std::fs::remove_dir_all(&log_dir);
}
