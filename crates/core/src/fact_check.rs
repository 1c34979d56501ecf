//! Fact-checking against the writer's sources (seed 003): a claim a model
//! calls verified stays verified only when its quote occurs, word for word,
//! in one of the `source` uploads. Anything else is deferred with the reason,
//! so nothing is called verified on the model's word alone.
//!
//! A step opts in with its output's `verify_claims = "claims"`: the reply's
//! array of claims, each an object with `claim`, `verdict` ("verified" or
//! "deferred"), `quote`, `source` and `reason`. The check rewrites the reply
//! before it is stored: the source that holds the quote is named by the
//! engine (a model's guess at a file name is not trusted), and the counts go
//! in `sources_verified` and `claims_deferred`.

use crate::query::QuoteRules;
use serde_json::{Map, Value};

pub const VERIFIED: &str = "verified";
pub const DEFERRED: &str = "deferred";
/// The counts the check writes into the reply, beside its claims.
pub const SOURCES_VERIFIED: &str = "sources_verified";
pub const CLAIMS_DEFERRED: &str = "claims_deferred";

/// A source upload as the check reads it.
#[derive(Debug, Clone, Copy)]
pub struct SourceText<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

/// What the check found in one reply.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub verified: usize,
    pub deferred: usize,
}

/// Checks every claim of `reply[items]` against `sources` and records the
/// tally in the reply. A reply without the array is left as it is (its
/// required keys are checked elsewhere).
pub fn check_claims(
    reply: &mut Value,
    items: &str,
    sources: &[SourceText<'_>],
    rules: &QuoteRules,
) -> Tally {
    let mut tally = Tally::default();
    let Some(claims) = reply.get_mut(items).and_then(Value::as_array_mut) else {
        return tally;
    };
    for claim in claims.iter_mut().filter_map(Value::as_object_mut) {
        match judge(claim, sources, rules) {
            Ok(source) => {
                claim.insert("verdict".into(), VERIFIED.into());
                claim.insert("source".into(), source.into());
                claim.insert("reason".into(), "".into());
                tally.verified += 1;
            }
            Err(reason) => {
                claim.insert("verdict".into(), DEFERRED.into());
                claim.insert("reason".into(), reason.into());
                tally.deferred += 1;
            }
        }
    }
    if let Some(fields) = reply.as_object_mut() {
        fields.insert(SOURCES_VERIFIED.into(), tally.verified.into());
        fields.insert(CLAIMS_DEFERRED.into(), tally.deferred.into());
    }
    tally
}

/// Why a writer's override cannot be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("the document has no claims to override (no `{0}` list)")]
    NoClaims(String),
    #[error("claim {number} does not exist: the document holds {count} claim(s), numbered from 1")]
    NoSuchClaim { number: usize, count: usize },
}

/// Seed 003's user override: the writer keeps their own view of claim
/// `number` (1-based) with a rationale. The checked verdict stays as the
/// check left it; the override is kept beside it (`override`: rationale and
/// when), and `overrides` counts the claims that carry one. A second
/// override of the same claim replaces the first.
pub fn record_override(
    reply: &mut Value,
    items: &str,
    number: usize,
    rationale: &str,
    at: &str,
) -> Result<(), OverrideError> {
    let claims = reply
        .get_mut(items)
        .and_then(Value::as_array_mut)
        .ok_or_else(|| OverrideError::NoClaims(items.to_string()))?;
    let count = claims.len();
    let claim = number
        .checked_sub(1)
        .and_then(|i| claims.get_mut(i))
        .and_then(Value::as_object_mut)
        .ok_or(OverrideError::NoSuchClaim { number, count })?;
    claim.insert(
        "override".into(),
        serde_json::json!({ "rationale": rationale, "at": at }),
    );
    let overrides = claims
        .iter()
        .filter(|c| c.get("override").is_some())
        .count();
    if let Some(fields) = reply.as_object_mut() {
        fields.insert("overrides".into(), overrides.into());
    }
    Ok(())
}

/// The name of the source that holds a verified claim's quote, or why the
/// claim is deferred.
fn judge(
    claim: &Map<String, Value>,
    sources: &[SourceText<'_>],
    rules: &QuoteRules,
) -> Result<String, String> {
    let text = |key: &str| claim.get(key).and_then(Value::as_str).unwrap_or("").trim();
    match text("verdict") {
        VERIFIED => {}
        DEFERRED => {
            let reason = text("reason");
            return Err(if reason.is_empty() {
                "no quote from a source supports it".to_string()
            } else {
                reason.to_string()
            });
        }
        other => {
            return Err(format!(
                "the verdict {other:?} is neither verified nor deferred"
            ));
        }
    }
    if sources.is_empty() {
        return Err("no source was uploaded to check it against".into());
    }
    let quote = text("quote");
    if let Some(problem) = rules.problem(quote) {
        return Err(format!("its quote cannot support it: {problem}"));
    }
    let needle = squeeze(quote);
    sources
        .iter()
        .find(|s| squeeze(s.text).contains(&needle))
        .map(|s| s.name.to_string())
        .ok_or_else(|| format!("the quote {quote:?} occurs in none of the sources"))
}

/// The text with every run of whitespace one space: a quote that wraps
/// where its source did not is still the source's words.
fn squeeze(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CENSUS: SourceText<'static> = SourceText {
        name: "census.md",
        text: "The town counted 4,210 residents in 2020.\nIts library opened in 1911.",
    };

    fn checked(claims: Value, sources: &[SourceText<'_>]) -> (Value, Tally) {
        let mut reply = json!({ "claims": claims });
        let tally = check_claims(&mut reply, "claims", sources, &QuoteRules::default());
        (reply, tally)
    }

    #[test]
    fn a_claim_whose_quote_is_in_a_source_is_verified_and_the_engine_names_the_source() {
        let (reply, tally) = checked(
            json!([{"claim": "4,210 people", "verdict": "verified", "source": "wrong.md",
                    "quote": "The town counted 4,210\n residents in 2020."}]),
            &[CENSUS],
        );
        assert_eq!(
            tally,
            Tally {
                verified: 1,
                deferred: 0
            }
        );
        assert_eq!(reply["claims"][0]["verdict"], "verified");
        assert_eq!(reply["claims"][0]["source"], "census.md");
        assert_eq!(reply["sources_verified"], 1);
        assert_eq!(reply["claims_deferred"], 0);
    }

    #[test]
    fn a_quote_no_source_holds_is_deferred_with_the_reason() {
        let (reply, tally) = checked(
            json!([{"claim": "5,000 people", "verdict": "verified", "source": "census.md",
                    "quote": "The town counted 5,000 residents in 2020."}]),
            &[CENSUS],
        );
        assert_eq!(
            tally,
            Tally {
                verified: 0,
                deferred: 1
            }
        );
        assert_eq!(reply["claims"][0]["verdict"], "deferred");
        let reason = reply["claims"][0]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("occurs in none of the sources"), "{reason}");
    }

    #[test]
    fn a_short_or_missing_quote_supports_nothing() {
        let (reply, tally) = checked(
            json!([
                {"claim": "a", "verdict": "verified", "quote": "1911."},
                {"claim": "b", "verdict": "verified"},
            ]),
            &[CENSUS],
        );
        assert_eq!(tally.deferred, 2, "{reply}");
    }

    #[test]
    fn the_models_own_deferral_keeps_its_reason_and_a_bare_one_gets_one() {
        let (reply, _) = checked(
            json!([
                {"claim": "a", "verdict": "deferred", "reason": "the sources disagree"},
                {"claim": "b", "verdict": "deferred"},
                {"claim": "c", "verdict": "probably"},
            ]),
            &[CENSUS],
        );
        assert_eq!(reply["claims"][0]["reason"], "the sources disagree");
        assert_eq!(
            reply["claims"][1]["reason"],
            "no quote from a source supports it"
        );
        assert!(
            reply["claims"][2]["reason"]
                .as_str()
                .unwrap_or_default()
                .contains("probably")
        );
        assert_eq!(reply["claims_deferred"], 3);
    }

    #[test]
    fn with_no_sources_every_claim_is_deferred() {
        let (reply, tally) = checked(
            json!([{"claim": "a", "verdict": "verified",
                    "quote": "The town counted 4,210 residents in 2020."}]),
            &[],
        );
        assert_eq!(
            tally,
            Tally {
                verified: 0,
                deferred: 1
            }
        );
        assert_eq!(
            reply["claims"][0]["reason"],
            "no source was uploaded to check it against"
        );
    }

    #[test]
    fn an_override_is_kept_beside_the_checked_verdict() {
        let (mut reply, _) = checked(
            json!([{"claim": "a", "verdict": "deferred", "reason": "no source covers it"},
                   {"claim": "b", "verdict": "deferred"}]),
            &[CENSUS],
        );
        record_override(
            &mut reply,
            "claims",
            2,
            "my own count",
            "2026-11-29T15:00:00Z",
        )
        .expect("recorded");
        assert_eq!(reply["claims"][1]["verdict"], "deferred");
        assert_eq!(reply["claims"][1]["override"]["rationale"], "my own count");
        assert_eq!(reply["overrides"], 1);
        record_override(&mut reply, "claims", 2, "the town hall says so", "later")
            .expect("replaced");
        assert_eq!(
            reply["claims"][1]["override"]["rationale"],
            "the town hall says so"
        );
        assert_eq!(reply["overrides"], 1);
        assert_eq!(
            record_override(&mut reply, "claims", 3, "x", "t"),
            Err(OverrideError::NoSuchClaim {
                number: 3,
                count: 2
            })
        );
        assert_eq!(
            record_override(&mut reply, "claims", 0, "x", "t"),
            Err(OverrideError::NoSuchClaim {
                number: 0,
                count: 2
            })
        );
        assert!(record_override(&mut json!({}), "claims", 1, "x", "t").is_err());
    }
}
