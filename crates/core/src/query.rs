//! Asking a project questions (seed 004 §3–§5): the rules of the query
//! pipeline that need no I/O. Sources are cut into chunks with their place in
//! the source's text and embedded once (the store keeps both, and ranks them
//! for a question: `dialectic_store::query::top_chunks`); the chunks most like
//! the question go to the model; every citation the model returns must quote
//! text of a chunk it was given, or it is removed with a caveat and the
//! confidence drops; with no valid citation left the answer says the evidence
//! is missing instead of claiming anything.

use crate::context::{LOCAL_DIMS, hashed_ngram_embedding};
use serde::{Deserialize, Serialize};

/// The answer when no citation survives the check.
pub const NOT_ENOUGH_EVIDENCE: &str =
    "There is not enough evidence in this project's documents to answer this question.";

/// How much one removed citation lowers the confidence.
const CONFIDENCE_PENALTY: f64 = 0.2;

/// A chunk longer than this is cut at the next paragraph boundary after it.
pub const CHUNK_CHARS: usize = 1_200;

/// The shortest quote a citation may make unless configured otherwise
/// (`executor.query_min_quote_chars`): shorter ones, like a heading, support no claim.
pub const DEFAULT_MIN_QUOTE_CHARS: usize = 20;

/// What the citation check asks of a quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuoteRules {
    /// The fewest characters a quote may have.
    pub min_chars: usize,
}

impl Default for QuoteRules {
    fn default() -> Self {
        Self {
            min_chars: DEFAULT_MIN_QUOTE_CHARS,
        }
    }
}

impl QuoteRules {
    /// Why `quote` cannot support a claim, if it cannot: too short, or only
    /// markup (headings, rules, emphasis marks) with no statement in it.
    pub fn problem(&self, quote: &str) -> Option<String> {
        let quote = quote.trim();
        let chars = quote.chars().count();
        if chars < self.min_chars {
            return Some(format!(
                "{quote:?} is {chars} characters, fewer than the {} a quote needs",
                self.min_chars
            ));
        }
        only_markup(quote).then(|| format!("{quote:?} is only markup"))
    }
}

/// Every line is a heading or has no letter or digit (`---`, `**`, `|:-|`).
fn only_markup(quote: &str) -> bool {
    quote
        .lines()
        .map(str::trim)
        .all(|line| line.starts_with('#') || !line.chars().any(char::is_alphanumeric))
}

/// Where a source's text comes from. Only an upload is the user's own
/// words; everything else a model wrote (a rendered document may carry a
/// user's edit, but it began as a model's output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// A file the user uploaded to the project.
    UploadedDocument,
    /// A pipeline's rendered markdown document.
    RenderedDocument,
    /// A JSON contribution, read as its `content` (e.g. a resolved clause).
    Contribution,
    /// A finding a step published on the blackboard.
    BlackboardEntry,
}

impl SourceKind {
    pub const ALL: [SourceKind; 4] = [
        Self::UploadedDocument,
        Self::RenderedDocument,
        Self::Contribution,
        Self::BlackboardEntry,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::UploadedDocument => "uploaded_document",
            Self::RenderedDocument => "rendered_document",
            Self::Contribution => "contribution",
            Self::BlackboardEntry => "blackboard_entry",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Whether a model wrote the text, so a citation of it is not the user's evidence.
    pub fn model_written(self) -> bool {
        self != Self::UploadedDocument
    }
}

/// The text a cache key is made from: trimmed, whitespace collapsed, lower case,
/// so questions that differ only in spacing or case share an answer.
pub fn normalise(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// The name a question's answer is cached under within its project.
pub fn cache_name(model: &str, text: &str) -> String {
    format!(
        "query:{}",
        crate::digest::sha256_hex(format!("{model}\n{}", normalise(text)).as_bytes())
    )
}

/// A stored text a question may be answered from.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Resource id (uploaded or rendered document) or blackboard entry id.
    pub id: String,
    /// What a person calls it: a file name, a document, `blackboard:buried_change`.
    pub name: String,
    pub kind: SourceKind,
    pub text: String,
}

/// A part of a source, with its character range in the source's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// `{source id}:{index}`.
    pub id: String,
    pub source_id: String,
    pub source_name: String,
    pub source_kind: SourceKind,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// Cuts a source into chunks at paragraph boundaries (blank lines), each at
/// most about [`CHUNK_CHARS`] characters; ranges count characters, not bytes.
pub fn chunks(source: &Source) -> Vec<Chunk> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut current = String::new();
    let mut offset = 0usize;
    let push = |out: &mut Vec<Chunk>, start: usize, text: &str| {
        let trimmed_start = text.chars().take_while(|c| c.is_whitespace()).count();
        let body = text.trim();
        if body.is_empty() {
            return;
        }
        let begin = start + trimmed_start;
        out.push(Chunk {
            id: format!("{}:{}", source.id, out.len()),
            source_id: source.id.clone(),
            source_name: source.name.clone(),
            source_kind: source.kind,
            start: begin,
            end: begin + body.chars().count(),
            text: body.to_string(),
        });
    };
    for paragraph in source.text.split_inclusive("\n\n") {
        if !current.is_empty() && current.chars().count() >= CHUNK_CHARS {
            push(&mut out, start, &current);
            start = offset;
            current.clear();
        }
        current.push_str(paragraph);
        offset += paragraph.chars().count();
    }
    push(&mut out, start, &current);
    out
}

/// How much naming an entity the classifier extracted (a section number, a
/// name) lifts a chunk over chunks that are only similar: the direct lookup.
/// More than any cosine, so chunks naming one come first.
pub const ENTITY_BOOST: f64 = 1.0;

/// The stored embedding of a chunk's text: the local hashed n-gram vector,
/// unit length, so a dot product with [`query_terms`] is the cosine.
pub fn embedding(text: &str) -> Vec<f32> {
    hashed_ngram_embedding(text, LOCAL_DIMS)
}

/// A question's embedding as its non-zero dimensions (index, weight): a
/// question has a few dozen, so ranking a chunk reads only those values of
/// its stored vector.
pub fn query_terms(question: &str) -> Vec<(usize, f32)> {
    embedding(question)
        .into_iter()
        .enumerate()
        .filter(|(_, w)| *w != 0.0)
        .collect()
}

/// The entities as a chunk's lower-cased text is searched for them.
pub fn entity_needles(entities: &[String]) -> Vec<String> {
    entities
        .iter()
        .map(|e| e.trim().to_lowercase())
        .filter(|e| !e.is_empty())
        .collect()
}

/// The text of a JSON contribution a question reads (and a client fetches):
/// its reply's `content`; empty when it has none.
pub fn contribution_text(raw: &str) -> String {
    crate::sanitize::parse_model_json(raw)
        .ok()
        .and_then(|(v, _)| v["content"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The text of a blackboard finding a question reads (and a client fetches):
/// its data as compact JSON.
pub fn finding_text(data: &serde_json::Value) -> String {
    data.to_string()
}

/// The chunks as the synthesis prompt shows them: a header naming each
/// chunk's id and source, then its text.
pub fn chunk_sections(chunks: &[Chunk]) -> String {
    chunks
        .iter()
        .map(|c| format!("--- Chunk {} ({}) ---\n{}\n", c.id, c.source_name, c.text))
        .collect()
}

/// What the synthesis of one part is told for its query type: the seed's
/// dispatch (truth → truth synthesis, conflict → conflict detection, ripple →
/// ripple analysis) as instructions to one answering call.
pub fn focus(query_type: &str) -> &'static str {
    match query_type {
        "truth_reconstitution" => {
            "Say what is in force now and since when; where a later document changed it, cite the change."
        }
        "conflict_detection" => {
            "Look for conflicts: text in force that contradicts other text, and references to text that was removed or moved; cite both sides of each."
        }
        "ripple_analysis" => {
            "Say which clauses the proposed change would touch and how; cite each clause it affects."
        }
        _ => "Answer the question plainly.",
    }
}

/// A sub-question the classifier split a compound question into.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubQuery {
    pub query_type: String,
    pub query_text: String,
}

/// What the classifier said about a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub query_type: String,
    pub entities: Vec<String>,
    /// One entry per part; the question itself when it is not compound.
    pub parts: Vec<SubQuery>,
}

pub const QUERY_TYPES: [&str; 4] = [
    "truth_reconstitution",
    "conflict_detection",
    "ripple_analysis",
    "general",
];

/// Reads a classifier reply; an unknown type counts as `general`, and a
/// compound question's parts come from its `sub_queries`.
pub fn route(question: &str, reply: &serde_json::Value) -> Route {
    let known = |t: &str| {
        if QUERY_TYPES.contains(&t) {
            t.to_string()
        } else {
            "general".to_string()
        }
    };
    let query_type = known(reply["query_type"].as_str().unwrap_or("general"));
    let entities = reply["entities"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| e.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let parts: Vec<SubQuery> = reply["sub_queries"]
        .as_array()
        .map(|subs| {
            subs.iter()
                .filter_map(|s| {
                    let text = s["query_text"].as_str()?.trim();
                    (!text.is_empty()).then(|| SubQuery {
                        query_type: known(s["query_type"].as_str().unwrap_or("general")),
                        query_text: text.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let parts = if parts.len() > 1 {
        parts
    } else {
        vec![SubQuery {
            query_type: query_type.clone(),
            query_text: question.to_string(),
        }]
    };
    Route {
        query_type,
        entities,
        parts,
    }
}

/// A citation that passed the check: its quote is the source's text at
/// `start..end` (characters of the whole text a client fetches for the
/// source, not of the chunk).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Citation {
    pub source_id: String,
    pub source_name: String,
    pub source_kind: SourceKind,
    pub chunk_id: String,
    pub start: usize,
    pub end: usize,
    pub quote: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub text: String,
    pub citations: Vec<Citation>,
    pub caveats: Vec<String>,
    pub confidence: f64,
}

/// Checks a synthesis reply against the chunks it was given: a citation must
/// name one of them and quote text that occurs in it (its range, in the
/// source's text, is taken from where the quote is, whatever the reply said) that `rules` accept. What
/// fails is removed and named in a caveat, each lowering the confidence; with
/// nothing left, the answer is [`NOT_ENOUGH_EVIDENCE`] at confidence 0.
pub fn checked_answer(reply: &serde_json::Value, given: &[Chunk], rules: &QuoteRules) -> Answer {
    let mut caveats: Vec<String> = reply["caveats"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let mut confidence = reply["confidence"].as_f64().unwrap_or(0.5).clamp(0.0, 1.0);
    let mut citations = Vec::new();
    for raw in reply["citations"].as_array().into_iter().flatten() {
        match cite(raw, given, rules) {
            Ok(citation) => citations.push(citation),
            Err(why) => {
                caveats.push(format!("a citation was removed: {why}"));
                confidence = (confidence - CONFIDENCE_PENALTY).max(0.0);
            }
        }
    }
    let text = reply["answer"]
        .as_str()
        .unwrap_or_default()
        .trim()
        .to_string();
    if citations.is_empty() || text.is_empty() {
        return Answer {
            text: NOT_ENOUGH_EVIDENCE.to_string(),
            citations: Vec::new(),
            caveats,
            confidence: 0.0,
        };
    }
    Answer {
        text,
        citations,
        caveats,
        confidence,
    }
}

fn cite(raw: &serde_json::Value, given: &[Chunk], rules: &QuoteRules) -> Result<Citation, String> {
    let chunk_id = raw["chunk_id"].as_str().unwrap_or_default();
    let quote = raw["quote"].as_str().unwrap_or_default().trim();
    let chunk = given
        .iter()
        .find(|c| c.id == chunk_id)
        .ok_or_else(|| format!("chunk {chunk_id:?} was not retrieved for this question"))?;
    if quote.is_empty() {
        return Err(format!("its quote of chunk {chunk_id} is empty"));
    }
    if let Some(problem) = rules.problem(quote) {
        return Err(format!("{problem} (chunk {chunk_id})"));
    }
    let at = chunk
        .text
        .find(quote)
        .ok_or_else(|| format!("{quote:?} does not occur in chunk {chunk_id}"))?;
    let start = chunk.start + chunk.text[..at].chars().count();
    Ok(Citation {
        source_id: chunk.source_id.clone(),
        source_name: chunk.source_name.clone(),
        source_kind: chunk.source_kind,
        chunk_id: chunk.id.clone(),
        start,
        end: start + quote.chars().count(),
        quote: quote.to_string(),
    })
}

/// One answer from the answers to a compound question's parts, in order: the
/// texts joined, every citation and caveat kept, the lowest confidence.
pub fn merge(parts: Vec<Answer>) -> Answer {
    let confidence = parts
        .iter()
        .map(|a| a.confidence)
        .fold(f64::INFINITY, f64::min);
    let mut merged = Answer {
        text: String::new(),
        citations: Vec::new(),
        caveats: Vec::new(),
        confidence: if confidence.is_finite() {
            confidence
        } else {
            0.0
        },
    };
    for part in parts {
        if !merged.text.is_empty() {
            merged.text.push_str("\n\n");
        }
        merged.text.push_str(&part.text);
        merged.citations.extend(part.citations);
        merged.caveats.extend(part.caveats);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn source(text: &str) -> Source {
        Source {
            id: "r1".into(),
            name: "lease.md".into(),
            kind: SourceKind::UploadedDocument,
            text: text.into(),
        }
    }

    #[test]
    fn chunks_keep_their_character_range_in_the_source() {
        let text = "Préambule.\n\n4.2 Rent is due on the first.\n\n";
        let cut = chunks(&source(text));
        assert_eq!(cut.len(), 1);
        let chars: Vec<char> = text.chars().collect();
        let at: String = chars[cut[0].start..cut[0].end].iter().collect();
        assert_eq!(at, cut[0].text);
        let long = "a".repeat(CHUNK_CHARS) + "\n\nsecond part";
        let cut = chunks(&source(&long));
        assert_eq!(cut.len(), 2);
        assert_eq!(cut[1].text, "second part");
        assert_eq!(
            (cut[1].start, cut[1].id.as_str()),
            (CHUNK_CHARS + 2, "r1:1")
        );
    }

    #[test]
    fn query_terms_rank_like_the_cosine_and_ranges_are_of_the_source() {
        let text = format!(
            "{}\n\n4.2 Rent is due on the fifth day of each month.",
            "x".repeat(CHUNK_CHARS)
        );
        let cut = chunks(&source(&text));
        assert_eq!(cut.len(), 2);
        let question = "When is the rent due?";
        let dot = |c: &Chunk| -> f64 {
            let e = embedding(&c.text);
            query_terms(question)
                .iter()
                .map(|(i, w)| f64::from(e[*i] * w))
                .sum()
        };
        for c in &cut {
            let cosine = crate::context::cosine(&embedding(question), &embedding(&c.text));
            assert!((dot(c) - cosine).abs() < 1e-5, "{c:?}");
        }
        assert!(dot(&cut[1]) > dot(&cut[0]));
        assert!(query_terms(question).len() < LOCAL_DIMS / 2);

        let reply = json!({"answer": "Rent is due on the fifth.",
            "citations": [{"chunk_id": "r1:1", "quote": "Rent is due on the fifth day"}]});
        let answer = checked_answer(&reply, &cut, &QuoteRules::default());
        let c = &answer.citations[0];
        let at: String = text.chars().skip(c.start).take(c.end - c.start).collect();
        assert_eq!((at.as_str(), c.start), (c.quote.as_str(), CHUNK_CHARS + 6));
        assert_eq!(entity_needles(&[" 4.2 ".into(), " ".into()]), ["4.2"]);
    }

    #[test]
    fn citations_must_quote_a_given_chunk_or_go_with_a_caveat() {
        let given = chunks(&source("4.2 Rent is due on the fifth day of each month."));
        let reply = json!({
            "answer": "Rent is due on the fifth.",
            "confidence": 0.9,
            "citations": [
                {"chunk_id": "r1:0", "quote": "due on the fifth day", "start": 0, "end": 3},
                {"chunk_id": "r1:0", "quote": "due on the first day"},
                {"chunk_id": "r9:0", "quote": "Rent"},
            ],
        });
        let answer = checked_answer(&reply, &given, &QuoteRules::default());
        assert_eq!(answer.citations.len(), 1);
        assert_eq!(
            (answer.citations[0].start, answer.citations[0].end),
            (12, 32)
        );
        assert_eq!(answer.caveats.len(), 2, "{:?}", answer.caveats);
        assert!(answer.caveats[0].contains("does not occur"));
        assert!(answer.caveats[1].contains("not retrieved"));
        assert!((answer.confidence - 0.5).abs() < 1e-9);

        let fabricated = json!({"answer": "Rent is free.", "confidence": 0.9,
            "citations": [{"chunk_id": "r1:0", "quote": "rent is free"}]});
        let answer = checked_answer(&fabricated, &given, &QuoteRules::default());
        assert_eq!(
            (answer.text.as_str(), answer.confidence),
            (NOT_ENOUGH_EVIDENCE, 0.0)
        );
        assert_eq!(answer.caveats.len(), 1);
    }

    fn citing(quotes: &[&str]) -> serde_json::Value {
        let citations: Vec<_> = quotes
            .iter()
            .map(|q| json!({"chunk_id": "r1:0", "quote": q}))
            .collect();
        json!({"answer": "Rent is due on the fifth.", "confidence": 0.9, "citations": citations})
    }

    #[test]
    fn short_or_markup_quotes_are_refused_like_fabricated_ones() {
        let given = chunks(&source(
            "## Overview\n**\n---\n## Payment schedule and late fees\n\
             4.2 Rent is due on the fifth day of each month.",
        ));
        let markup = [
            "## Overview",
            "---",
            "**",
            "## Payment schedule and late fees",
            "---\n## Payment schedule and late fees",
        ];
        let mut quotes = markup.to_vec();
        quotes.push("Rent is due on the fifth");
        let answer = checked_answer(&citing(&quotes), &given, &QuoteRules::default());
        let kept: Vec<&str> = answer.citations.iter().map(|c| c.quote.as_str()).collect();
        assert_eq!(kept, ["Rent is due on the fifth"]);
        assert_eq!(answer.caveats.len(), markup.len(), "{:?}", answer.caveats);
        assert!(
            answer.caveats[0].contains("fewer than the 20"),
            "{:?}",
            answer.caveats
        );
        assert!(
            answer.caveats[3].contains("only markup"),
            "{:?}",
            answer.caveats
        );
        assert!(
            answer.caveats[4].contains("only markup"),
            "{:?}",
            answer.caveats
        );

        let strict = QuoteRules { min_chars: 30 };
        let answer = checked_answer(&citing(&["Rent is due on the fifth"]), &given, &strict);
        assert_eq!(answer.text, NOT_ENOUGH_EVIDENCE);
        let lenient = QuoteRules { min_chars: 5 };
        let answer = checked_answer(&citing(&["4.2 Rent"]), &given, &lenient);
        assert_eq!(answer.citations.len(), 1, "{:?}", answer.caveats);
    }

    #[test]
    fn citations_say_whether_a_model_wrote_their_source() {
        let finding = Source {
            id: "e1".into(),
            name: "blackboard:buried_change".into(),
            kind: SourceKind::BlackboardEntry,
            text: "Amendment 2 deletes Exhibit B, which 7.1 still cites.".into(),
        };
        let mut given = chunks(&source("4.2 Rent is due on the fifth day of each month."));
        given.extend(chunks(&finding));
        let reply = json!({"answer": "Rent is due on the fifth; Exhibit B is gone.",
            "citations": [{"chunk_id": "r1:0", "quote": "Rent is due on the fifth day"},
                          {"chunk_id": "e1:0", "quote": "Amendment 2 deletes Exhibit B"}]});
        let answer = checked_answer(&reply, &given, &QuoteRules::default());
        let marked: Vec<(SourceKind, bool)> = answer
            .citations
            .iter()
            .map(|c| (c.source_kind, c.source_kind.model_written()))
            .collect();
        assert_eq!(
            marked,
            [
                (SourceKind::UploadedDocument, false),
                (SourceKind::BlackboardEntry, true)
            ]
        );
        for kind in SourceKind::ALL {
            assert_eq!(SourceKind::parse(kind.as_str()), Some(kind));
            assert_eq!(kind.model_written(), kind != SourceKind::UploadedDocument);
        }
    }

    #[test]
    fn a_compound_question_is_split_only_when_the_classifier_gives_parts() {
        let single = route(
            "What is the rent?",
            &json!({"query_type": "truth_reconstitution"}),
        );
        assert_eq!(single.parts.len(), 1);
        assert_eq!(single.parts[0].query_text, "What is the rent?");
        let compound = route(
            "Rent and conflicts?",
            &json!({"query_type": "weird", "sub_queries": [
                {"query_type": "truth_reconstitution", "query_text": "What is the rent?"},
                {"query_type": "conflict_detection", "query_text": "Any conflicts?"}]}),
        );
        assert_eq!(compound.query_type, "general");
        assert_eq!(compound.parts.len(), 2);
        assert_eq!(
            cache_name("m", "  What is\nthe RENT? "),
            cache_name("m", "what is the rent?")
        );
        assert_ne!(cache_name("m", "a"), cache_name("n", "a"));
    }
}
