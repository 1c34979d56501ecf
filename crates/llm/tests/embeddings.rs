//! The OpenAI-compatible embeddings client against a local HTTP server: the
//! request it sends, vectors put back in input order, billed tokens, and errors.

mod support;

use dialectic_llm::LlmError;
use dialectic_llm::embeddings::{Embedder, LocalEmbedder, OpenAiEmbedder};
use support::{http, serve};

#[tokio::test]
async fn embeddings_come_back_in_input_order_with_their_tokens() {
    // The server answers out of order; `index` says which input each vector is.
    let body = r#"{"object":"list","data":[
        {"object":"embedding","index":1,"embedding":[0.0,1.0]},
        {"object":"embedding","index":0,"embedding":[1.0,0.0]}],
        "model":"emb-test","usage":{"prompt_tokens":7,"total_tokens":7}}"#;
    let server = serve(vec![http("200 OK", "application/json", "", body)]).await;
    let embedder =
        OpenAiEmbedder::new(&server.url, "emb-test", Some("sk-test".into())).expect("client");
    assert_eq!(embedder.name(), "openai:emb-test");
    let out = embedder
        .embed(&["first text".into(), "second".into()])
        .await
        .expect("embeddings");
    assert_eq!(out.vectors, vec![vec![1.0, 0.0], vec![0.0, 1.0]]);
    assert_eq!(out.tokens, Some(7));
    let sent = server.requests.lock().expect("lock")[0].clone();
    assert!(sent.starts_with("POST /v1/embeddings "), "{sent}");
    assert!(
        sent.to_lowercase()
            .contains("authorization: bearer sk-test")
    );
    assert!(
        sent.contains(r#""input":["first text","second"]"#),
        "{sent}"
    );
    assert!(sent.contains(r#""model":"emb-test""#));
}

#[tokio::test]
async fn errors_say_whether_a_retry_can_help() {
    let server = serve(vec![
        http(
            "401 Unauthorized",
            "application/json",
            "",
            r#"{"error":{"message":"bad key"}}"#,
        ),
        http(
            "503 Service Unavailable",
            "application/json",
            "",
            r#"{"error":{"message":"busy"}}"#,
        ),
        http("200 OK", "application/json", "", r#"{"data":[]}"#),
    ])
    .await;
    let embedder = OpenAiEmbedder::new(&server.url, "emb-test", None).expect("client");
    let input = vec!["x".to_string()];
    match embedder.embed(&input).await {
        Err(LlmError::Permanent(m)) => assert!(m.contains("bad key"), "{m}"),
        other => panic!("auth failure is permanent: {:?}", other.err()),
    }
    assert!(matches!(
        embedder.embed(&input).await,
        Err(LlmError::Transient(_))
    ));
    match embedder.embed(&input).await {
        Err(LlmError::Permanent(m)) => assert!(m.contains("0 vectors for 1 inputs"), "{m}"),
        other => panic!("a short reply is refused: {:?}", other.err()),
    }
}

#[tokio::test]
async fn the_local_embedder_is_deterministic_and_offline() {
    let a = LocalEmbedder
        .embed(&["ladder insurance".into()])
        .await
        .expect("local");
    let b = LocalEmbedder
        .embed(&["ladder insurance".into()])
        .await
        .expect("local");
    assert_eq!(a.vectors, b.vectors);
    assert_eq!(a.vectors[0].len(), dialectic_core::context::LOCAL_DIMS);
    assert_eq!(a.tokens, None);
}
