//! Context-window management (seed 001 Phase 3): which parts of a prompt may
//! be compressed, in which order, whether compressing is worth it at all, and
//! the local embedding used to score and retrieve. Pure: counting tokens,
//! indexing and paying are the caller's.

use crate::prompt::{ChatRequest, Message, PromptConstructionPayload, ResourceDocument, assemble};

/// Dimensions of the local hashed n-gram embedding.
pub const LOCAL_DIMS: usize = 256;

/// A deterministic embedding that needs no weights and no network: character
/// trigrams of each lower-cased word plus the word itself, hashed (FNV-1a)
/// into `dims` buckets with a hash-derived sign, L2-normalised. Texts sharing
/// vocabulary point the same way, which is all retrieval needs here.
pub fn hashed_ngram_embedding(text: &str, dims: usize) -> Vec<f32> {
    let dims = dims.max(1);
    let mut v = vec![0f32; dims];
    let mut add = |feature: &[u8]| {
        let h = fnv1a(feature);
        let idx = (h % dims as u64) as usize;
        let sign = if (h >> 63) == 0 { 1.0 } else { -1.0 };
        v[idx] += sign;
    };
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let lower = word.to_lowercase();
        add(lower.as_bytes());
        let padded: Vec<char> = format!(" {lower} ").chars().collect();
        for tri in padded.windows(3) {
            let s: String = tri.iter().collect();
            add(s.as_bytes());
        }
    }
    normalise(&mut v);
    v
}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Cosine similarity; 0 for an empty or zero vector, or mismatched lengths.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        f64::from(dot / (na * nb))
    }
}

/// Splits a text into pieces of at most `max_tokens` (by `count`), cutting at
/// paragraph, then line, then sentence, then word boundaries, and merging
/// neighbours greedily so chunks are as full as allowed. Concatenating the
/// chunks gives back the text exactly.
pub fn chunk_text(text: &str, max_tokens: u64, count: &dyn Fn(&str) -> u64) -> Vec<String> {
    let max_tokens = max_tokens.max(1);
    let mut pieces = Vec::new();
    split_into(text, max_tokens, count, 0, &mut pieces);
    let mut chunks: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut current_tokens = 0;
    for (piece, tokens) in pieces {
        if !current.is_empty() && current_tokens + tokens > max_tokens {
            chunks.push(std::mem::take(&mut current));
            current_tokens = 0;
        }
        current.push_str(piece);
        current_tokens += tokens;
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

const SEPARATORS: [&str; 4] = ["\n\n", "\n", ". ", " "];

fn split_into<'a>(
    text: &'a str,
    max_tokens: u64,
    count: &dyn Fn(&str) -> u64,
    level: usize,
    out: &mut Vec<(&'a str, u64)>,
) {
    if text.is_empty() {
        return;
    }
    let tokens = count(text);
    if tokens <= max_tokens {
        out.push((text, tokens));
        return;
    }
    let Some(sep) = SEPARATORS.get(level) else {
        // One unbroken run longer than a chunk: cut it by characters.
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let per = (chars.len() as u64 * max_tokens / tokens.max(1)).max(1) as usize;
        let mut start = 0;
        while start < chars.len() {
            let end = (start + per).min(chars.len());
            let from = chars[start].0;
            let to = chars.get(end).map_or(text.len(), |c| c.0);
            let piece = &text[from..to];
            out.push((piece, count(piece)));
            start = end;
        }
        return;
    };
    let mut rest = text;
    while !rest.is_empty() {
        let (piece, tail) = match rest.find(sep) {
            Some(i) => rest.split_at(i + sep.len()),
            None => (rest, ""),
        };
        split_into(piece, max_tokens, count, level + 1, out);
        rest = tail;
    }
}

/// What a compression candidate points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An earlier chunk of a continued document (index into `Context::chunks`).
    History(usize),
    /// A resource document (index into the payload's `resource_documents`).
    Resource(usize),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub target: Target,
    /// Contribution or resource id, for logs and provenance.
    pub id: String,
    /// Lower is compressed first.
    pub value: f64,
}

/// A job's prompt in the parts compression works on: the original payload
/// (system, resources, prompt) and, for a continuation, the assistant turns so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    pub original: PromptConstructionPayload,
    /// One assistant message per earlier chunk; empty for a first turn.
    pub chunks: Vec<Message>,
    pub continue_instruction: String,
}

impl Context {
    /// The request as sent (seed 000 steps 9–11; seed 001 Phase 2 for a
    /// continuation: the original request, one assistant message per chunk,
    /// then the continue instruction).
    pub fn build(
        &self,
        model: &str,
        max_tokens: u32,
        output_type: &str,
        hints: &[String],
    ) -> ChatRequest {
        let first = assemble(&self.original, model, max_tokens, output_type, hints);
        if self.chunks.is_empty() {
            return first;
        }
        let mut history = first.messages;
        history.extend(self.chunks.iter().cloned());
        let continuation = PromptConstructionPayload {
            system_instruction: first.system_instruction,
            conversation_history: history,
            resource_documents: Vec::new(),
            current_user_prompt: self.continue_instruction.clone(),
        };
        // The resources are in the first user message, repeated in the history.
        // The first message stays first, so its prefix is still shared.
        ChatRequest {
            inputs: first.inputs,
            shared_prefix: first.shared_prefix,
            ..assemble(&continuation, model, max_tokens, output_type, hints)
        }
    }

    /// Seed 001 3.b.ii.2: every candidate, lowest value first. Immutable and
    /// never listed: the system instruction, the first user message (the
    /// original prompt; its resource documents are candidates of their own),
    /// the first assistant turn, and the last two assistant turns with the
    /// continue request. Middle turns score by age (older is worth less);
    /// resource documents by `inputs_relevance` × similarity to the prompt.
    pub fn candidates(&self, similarity: &dyn Fn(&ResourceDocument) -> f64) -> Vec<Candidate> {
        let mut out = Vec::new();
        let n = self.chunks.len();
        if n > 3 {
            let middle = 1..n - 2;
            let len = middle.len() as f64;
            for (k, i) in middle.enumerate() {
                out.push(Candidate {
                    target: Target::History(i),
                    id: self.chunks[i]
                        .contribution_id
                        .clone()
                        .unwrap_or_else(|| format!("turn {i}")),
                    value: (k as f64 + 1.0) / (len + 1.0),
                });
            }
        }
        for (i, doc) in self.original.resource_documents.iter().enumerate() {
            out.push(Candidate {
                target: Target::Resource(i),
                id: doc.id.clone(),
                value: doc.relevance.clamp(0.0, 1.0) * similarity(doc).clamp(0.0, 1.0),
            });
        }
        // Stable: equal values keep document order, so runs are reproducible.
        out.sort_by(|a, b| a.value.total_cmp(&b.value));
        out
    }

    pub fn text_of(&self, target: Target) -> Option<&str> {
        match target {
            Target::History(i) => self.chunks.get(i).map(|m| m.content.as_str()),
            Target::Resource(i) => self
                .original
                .resource_documents
                .get(i)
                .map(|d| d.content.as_str()),
        }
    }

    pub fn replace(&mut self, target: Target, text: String) {
        match target {
            Target::History(i) => {
                if let Some(m) = self.chunks.get_mut(i) {
                    m.content = text;
                }
            }
            Target::Resource(i) => {
                if let Some(d) = self.original.resource_documents.get_mut(i) {
                    d.content = text;
                }
            }
        }
    }
}

/// Input tokens a request may use: the window less the reply it must leave room for.
pub fn input_limit(context_window: u64, max_output: u64) -> u64 {
    context_window.saturating_sub(max_output)
}

#[derive(Debug, Clone, PartialEq)]
pub enum PreflightError {
    /// Stage 1: the balance cannot even pay for the inputs.
    Unaffordable { estimated: i64, balance: i64 },
    /// Stage 2: affordable, but more than 20% of the balance on one job.
    Irrational { estimated: i64, balance: i64 },
}

impl std::fmt::Display for PreflightError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unaffordable { estimated, balance } => write!(
                f,
                "compressing this prompt would cost an estimated {estimated} tokens of input, more than the balance of {balance}"
            ),
            Self::Irrational { estimated, balance } => write!(
                f,
                "compressing this prompt would cost an estimated {estimated} tokens of input, more than 20% of the balance of {balance}; \
                 shorten the inputs or add funds"
            ),
        }
    }
}

/// The share of a balance one job's compression may spend without asking.
pub const RATIONALITY_SHARE: f64 = 0.20;

/// Seed 001 3.b.ii.2 step 3, once before any compression: the estimated cost
/// of removing the excess plus sending the final prompt, checked first against
/// the balance, then against 20% of it. Returns the estimate.
pub fn preflight(
    initial_tokens: u64,
    limit: u64,
    input_rate: f64,
    balance: i64,
) -> Result<i64, PreflightError> {
    let to_remove = initial_tokens.saturating_sub(limit);
    let rag = to_remove as f64 * input_rate;
    let final_prompt = limit as f64 * input_rate;
    let estimated = (rag + final_prompt).ceil() as i64;
    if balance < estimated {
        return Err(PreflightError::Unaffordable { estimated, balance });
    }
    if estimated as f64 > balance as f64 * RATIONALITY_SHARE {
        return Err(PreflightError::Irrational { estimated, balance });
    }
    Ok(estimated)
}

/// How many tokens a victim of `tokens` should keep when the prompt is
/// `excess` over its limit: just enough to fit, or nothing.
pub fn target_tokens(tokens: u64, excess: u64) -> u64 {
    tokens.saturating_sub(excess)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, relevance: f64, content: &str) -> ResourceDocument {
        ResourceDocument {
            id: id.into(),
            kind: "document".into(),
            stage_slug: "thesis".into(),
            document_key: id.into(),
            model: None,
            content: content.into(),
            section_header: None,
            relevance,
            storage_key: None,
        }
    }

    fn context(chunks: usize, docs: Vec<ResourceDocument>) -> Context {
        Context {
            original: PromptConstructionPayload {
                system_instruction: Some("sys".into()),
                conversation_history: Vec::new(),
                resource_documents: docs,
                current_user_prompt: "write".into(),
            },
            chunks: (0..chunks)
                .map(|i| Message::assistant(format!("chunk {i}"), Some(format!("c{i}"))))
                .collect(),
            continue_instruction: "continue".into(),
        }
    }

    #[test]
    fn immutable_turns_are_never_candidates_and_older_turns_go_first() {
        let ctx = context(6, vec![]);
        let ids: Vec<_> = ctx.candidates(&|_| 1.0).into_iter().map(|c| c.id).collect();
        // First assistant (c0) and the last two (c4, c5) stay.
        assert_eq!(ids, vec!["c1", "c2", "c3"]);
        assert!(context(3, vec![]).candidates(&|_| 1.0).is_empty());
    }

    #[test]
    fn resources_score_by_relevance_times_similarity_and_mix_with_history() {
        let ctx = context(
            5,
            vec![doc("a", 1.0, "x"), doc("b", 0.1, "y"), doc("c", 0.9, "z")],
        );
        let sim = |d: &ResourceDocument| if d.id == "c" { 0.5 } else { 1.0 };
        let ids: Vec<_> = ctx.candidates(&sim).into_iter().map(|c| c.id).collect();
        // b 0.1, c1 ~0.33, c 0.45, c2 ~0.67, a 1.0
        assert_eq!(ids, vec!["b", "c1", "c", "c2", "a"]);
    }

    #[test]
    fn building_a_continuation_keeps_the_exact_turn_order() {
        let ctx = context(2, vec![doc("a", 1.0, "text")]);
        let req = ctx.build("m", 10, "t", &[]);
        assert_eq!(req.messages.len(), 4);
        assert!(req.messages[0].content.contains("text"));
        assert_eq!(req.messages[3].content, "continue");
        let first = context(0, vec![]).build("m", 10, "t", &[]);
        assert_eq!(first.messages.len(), 1);
    }

    #[test]
    fn the_inputs_are_a_prefix_before_the_instruction_and_a_continuation_keeps_it() {
        let first = context(0, vec![doc("a", 1.0, "text")]).build("m", 10, "t", &[]);
        let continued = context(2, vec![doc("a", 1.0, "text")]).build("m", 10, "t", &[]);
        for req in [&first, &continued] {
            let prefix = req.shared_prefix.expect("the inputs are a shared prefix");
            assert_eq!(prefix.message, 0);
            let (shared, rest) = req.messages[0].content.split_at(prefix.bytes);
            assert!(shared.ends_with("text\n\n"), "{shared:?}");
            assert_eq!(rest, "write", "the instruction comes last");
        }
        assert_eq!(
            context(0, vec![]).build("m", 10, "t", &[]).shared_prefix,
            None
        );
    }

    #[test]
    fn preflight_checks_affordability_then_the_twenty_percent_rule() {
        // 1000 tokens, limit 600: 400 to remove + 600 final = 1000 at rate 1.
        assert_eq!(
            preflight(1000, 600, 1.0, 999),
            Err(PreflightError::Unaffordable {
                estimated: 1000,
                balance: 999
            })
        );
        assert_eq!(
            preflight(1000, 600, 1.0, 4999),
            Err(PreflightError::Irrational {
                estimated: 1000,
                balance: 4999
            })
        );
        assert_eq!(preflight(1000, 600, 1.0, 5000), Ok(1000));
        assert!(
            PreflightError::Irrational {
                estimated: 1,
                balance: 2
            }
            .to_string()
            .contains("20%")
        );
    }

    #[test]
    fn embeddings_are_deterministic_and_similar_texts_are_closer() {
        let a = hashed_ngram_embedding("market risk and pricing strategy", LOCAL_DIMS);
        assert_eq!(
            a,
            hashed_ngram_embedding("market risk and pricing strategy", LOCAL_DIMS)
        );
        let b = hashed_ngram_embedding("pricing strategy under market risk", LOCAL_DIMS);
        let c = hashed_ngram_embedding("the cat sat on the mat", LOCAL_DIMS);
        assert!(cosine(&a, &b) > cosine(&a, &c));
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
        assert_eq!(cosine(&a, &[]), 0.0);
    }

    #[test]
    fn chunks_respect_the_limit_and_reassemble_exactly() {
        let words = |s: &str| s.split_whitespace().count() as u64;
        let text = "one two three four five.\n\nsix seven eight. nine ten eleven twelve thirteen fourteen\nfifteen";
        let chunks = chunk_text(text, 4, &words);
        assert_eq!(chunks.concat(), text);
        assert!(chunks.iter().all(|c| words(c) <= 4), "{chunks:?}");
        let long = "x".repeat(100);
        let by_len = |s: &str| s.len() as u64;
        let cut = chunk_text(&long, 30, &by_len);
        assert_eq!(cut.concat(), long);
        assert!(cut.iter().all(|c| c.len() <= 30));
        assert!(chunk_text("", 4, &words).is_empty());
    }
}
