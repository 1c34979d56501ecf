//! Revisiting an earlier stage (seed 003 "Artifact Versioning Convention" and
//! "Change Impact Assessment"): what each impact level does to the stages
//! after the revised one, and how archived documents are named.

use crate::job::UnknownValue;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impact {
    /// The substance downstream still holds: flag later stages for review.
    Minor,
    /// Later documents are archived; the user decides when to re-run them.
    Moderate,
    /// Later documents are archived and the stages re-run from the revised one at once.
    Major,
}

impl Impact {
    pub fn parse(value: &str) -> Result<Self, UnknownValue> {
        match value.trim().to_ascii_lowercase().as_str() {
            "minor" => Ok(Impact::Minor),
            "moderate" => Ok(Impact::Moderate),
            "major" => Ok(Impact::Major),
            other => Err(UnknownValue::new(
                "impact (minor, moderate or major)",
                other,
            )),
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Impact::Minor => "minor",
            Impact::Moderate => "moderate",
            Impact::Major => "major",
        }
    }

    /// Later stages' documents become archived versions.
    pub const fn archives(self) -> bool {
        !matches!(self, Impact::Minor)
    }

    /// The session goes back to the stage after the revised one.
    pub const fn rewinds(self) -> bool {
        !matches!(self, Impact::Minor)
    }

    /// That stage starts without waiting for the user.
    pub const fn restarts_at_once(self) -> bool {
        matches!(self, Impact::Major)
    }
}

/// `name.md` → `name.v{N}.md` (seed 003: `{filename}.v{N}.md`); a name
/// without an extension just gets `.v{N}`.
pub fn archived_name(file_name: &str, version: u32) -> String {
    match file_name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() && !ext.contains('/') => {
            format!("{stem}.v{version}.{ext}")
        }
        _ => format!("{file_name}.v{version}"),
    }
}

/// Where a document's archived version goes: its name (`name.v{N}.md`) and
/// key, beside the current one.
pub fn archived_version(storage_path: &str, file_name: &str, version: u32) -> (String, String) {
    let name = archived_name(file_name, version);
    let key = format!("{storage_path}/{name}");
    (name, key)
}

/// Which later documents a revisit archives, before any is looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Archives {
    Nothing,
    /// Those downstream of what changed (`affected`).
    ByLineage,
    /// Every document of these stages.
    AllOf(Vec<String>),
}

/// What a revisit of one impact does to the later stages it reached (seed
/// 003 "Assessment Process" steps 3–5). A preview and the revisit itself
/// both start from this value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reach {
    pub needs_review: Vec<String>,
    pub archives: Archives,
    /// The stages that run again at once.
    pub reruns: Vec<String>,
}

/// `reached`: the later stages this iteration has already run, in order.
pub fn reach(impact: Impact, reached: &[String]) -> Reach {
    match impact {
        Impact::Minor => Reach {
            needs_review: reached.to_vec(),
            archives: Archives::Nothing,
            reruns: Vec::new(),
        },
        Impact::Moderate => Reach {
            needs_review: Vec::new(),
            archives: Archives::ByLineage,
            reruns: Vec::new(),
        },
        Impact::Major => Reach {
            needs_review: Vec::new(),
            archives: Archives::AllOf(reached.to_vec()),
            reruns: reached.to_vec(),
        },
    }
}

/// The text a stored reply or edit holds (what a rendered document shows of
/// it): its `content` string, or its JSON when the output is structured.
pub fn document_text(raw: &str) -> Result<String, serde_json::Error> {
    let value: serde_json::Value = serde_json::from_str(raw)?;
    let shown = match value.get("content") {
        Some(serde_json::Value::String(s)) => return Ok(s.clone()),
        Some(other) => other,
        None => &value,
    };
    serde_json::to_string_pretty(shown)
}

/// What a later step reads of a stored reply or edit: the JSON itself
/// (pretty, so a diff is by line) of a structured output a document only
/// shows, else the document's text.
pub fn read_text(raw: &str, json_backed: bool) -> Result<String, serde_json::Error> {
    if !json_backed {
        return document_text(raw);
    }
    let value: serde_json::Value = serde_json::from_str(raw)?;
    serde_json::to_string_pretty(&value)
}

/// A unified diff (3 lines of context) of `before` against `after`, under
/// the two labels; empty when they differ at most in trailing whitespace.
pub fn unified_diff(before: &str, after: &str, before_label: &str, after_label: &str) -> String {
    // A missing last newline is no change a reader cares about.
    let (before, after) = (
        format!("{}\n", before.trim_end()),
        format!("{}\n", after.trim_end()),
    );
    if before == after {
        return String::new();
    }
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(before_label, after_label)
        .to_string()
}

/// A finished job of a stage after the revised one, as a moderate revisit
/// weighs it (see `affected`).
#[derive(Debug, Clone)]
pub struct LaterJob<Id> {
    pub id: Id,
    pub stage: String,
    /// The document keys it wrote (its output type, and a rendered document's).
    pub document_keys: Vec<String>,
    /// The storage keys of what it wrote: raw replies and rendered documents.
    pub wrote: Vec<String>,
    /// Its `document` input rules that name a later stage.
    pub reads: Vec<LaterRead>,
    /// What it read of the revised stage has changed since it started.
    pub read_a_change: bool,
    /// A stage root: the re-run plans its stage again whatever it read.
    pub reruns: bool,
}

/// A `document` rule naming a stage after the revised one: its stage and
/// key (`*` for all), and the storage keys a fan-out job was restricted to.
#[derive(Debug, Clone)]
pub struct LaterRead {
    pub stage: String,
    pub document_key: String,
    pub keys: Option<Vec<String>>,
}

impl LaterRead {
    /// `reader` (which started after `writer`) read what `writer` wrote.
    fn reads_from<Id>(&self, writer: &LaterJob<Id>) -> bool {
        if writer.stage != self.stage {
            return false;
        }
        match &self.keys {
            Some(keys) => keys.iter().any(|k| writer.wrote.contains(k)),
            None => self.document_key == "*" || writer.document_keys.contains(&self.document_key),
        }
    }
}

/// The jobs a moderate revisit archives, by lineage. `jobs` come in the
/// order they started, so everything a job read was written by a job before
/// it. A job is affected when what it read of the revised stage changed, or
/// when it read a document written by an affected job. Header contexts,
/// feedback and seed prompts are guidance, not lineage: they are not rules
/// here, so a re-planned stage does not by itself affect the jobs under it.
pub fn affected<Id: Copy + Ord>(jobs: &[LaterJob<Id>]) -> BTreeSet<Id> {
    let mut affected = BTreeSet::new();
    for (at, job) in jobs.iter().enumerate() {
        let inherits = || {
            jobs[..at].iter().any(|writer| {
                affected.contains(&writer.id) && job.reads.iter().any(|r| r.reads_from(writer))
            })
        };
        if job.reruns || job.read_a_change || inherits() {
            affected.insert(job.id);
        }
    }
    affected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u32, stage: &str, key: &str, reads: Vec<LaterRead>) -> LaterJob<u32> {
        LaterJob {
            id,
            stage: stage.into(),
            document_keys: vec![key.into()],
            wrote: vec![format!("{stage}/{key}-{id}")],
            reads,
            read_a_change: false,
            reruns: false,
        }
    }

    fn read(stage: &str, key: &str, keys: Option<&[&str]>) -> LaterRead {
        LaterRead {
            stage: stage.into(),
            document_key: key.into(),
            keys: keys.map(|k| k.iter().map(|s| s.to_string()).collect()),
        }
    }

    /// The essay after an outline edit that changed section 2 of 3: the
    /// maps of sections 2 and 3 changed their item; the paragraphs of section
    /// 1 read only its map and the draft before them, so they are kept; every
    /// paragraph from the first affected one on reads the draft so far.
    #[test]
    fn lineage_keeps_what_read_nothing_that_changed() {
        let mut maps: Vec<_> = (1..=3)
            .map(|n| job(n, "arguments", "map", vec![]))
            .collect();
        maps[1].read_a_change = true;
        maps[2].read_a_change = true;
        let mut jobs = vec![LaterJob {
            reruns: true,
            ..job(0, "arguments", "header_context", vec![])
        }];
        jobs.extend(maps);
        for (id, map) in [(10, 1), (11, 1), (12, 2), (13, 2), (14, 3)] {
            let map_key = format!("arguments/map-{map}");
            jobs.push(job(
                id,
                "writing",
                "paragraph",
                vec![
                    read("arguments", "map", Some(&[map_key.as_str()])),
                    read("writing", "paragraph", None),
                ],
            ));
        }
        jobs.push(job(
            20,
            "writing",
            "essay",
            vec![read("writing", "paragraph", None)],
        ));
        assert_eq!(affected(&jobs), BTreeSet::from([0, 2, 3, 12, 13, 14, 20]));
    }

    #[test]
    fn a_job_inherits_only_from_writers_of_what_it_reads() {
        let mut first = job(1, "a", "x", vec![]);
        first.read_a_change = true;
        let jobs = vec![
            first,
            job(2, "a", "y", vec![]),
            job(3, "b", "z", vec![read("a", "y", None)]),
            job(4, "b", "w", vec![read("a", "*", None)]),
            job(5, "b", "v", vec![read("a", "x", Some(&["a/y-2"]))]),
        ];
        assert_eq!(affected(&jobs), BTreeSet::from([1, 4]));
    }

    #[test]
    fn impact_levels_parse_and_act_as_seed_003_says() {
        assert_eq!(Impact::parse(" Major "), Ok(Impact::Major));
        assert!(Impact::parse("huge").is_err());
        let table = [
            (Impact::Minor, false, false, false),
            (Impact::Moderate, true, true, false),
            (Impact::Major, true, true, true),
        ];
        for (impact, archives, rewinds, at_once) in table {
            assert_eq!(
                (
                    impact.archives(),
                    impact.rewinds(),
                    impact.restarts_at_once()
                ),
                (archives, rewinds, at_once),
                "{}",
                impact.as_str()
            );
            assert_eq!(Impact::parse(impact.as_str()), Ok(impact));
        }
    }

    #[test]
    fn each_impact_reaches_what_seed_003_says() {
        let reached = vec!["b".to_string(), "c".to_string()];
        let minor = reach(Impact::Minor, &reached);
        assert_eq!(
            (minor.needs_review.as_slice(), &minor.archives),
            (reached.as_slice(), &Archives::Nothing)
        );
        assert!(minor.reruns.is_empty());
        let moderate = reach(Impact::Moderate, &reached);
        assert_eq!(moderate.archives, Archives::ByLineage);
        assert!(moderate.needs_review.is_empty() && moderate.reruns.is_empty());
        let major = reach(Impact::Major, &reached);
        assert_eq!(major.archives, Archives::AllOf(reached.clone()));
        assert_eq!(major.reruns, reached);
    }

    #[test]
    fn a_diff_shows_the_changed_lines_under_its_labels() {
        let diff = unified_diff("a\nb\nc\n", "a\nB\nc\n", "read", "now");
        assert!(diff.starts_with("--- read\n+++ now\n"), "{diff}");
        assert!(diff.contains("-b\n+B\n"), "{diff}");
        assert_eq!(unified_diff("same\n", "same\n", "read", "now"), "");
    }

    #[test]
    fn document_text_is_the_content_or_the_json() {
        assert_eq!(document_text(r#"{"content": "Hi"}"#).expect("json"), "Hi");
        assert_eq!(
            document_text(r#"{"sections": [1]}"#).expect("json"),
            "{\n  \"sections\": [\n    1\n  ]\n}"
        );
        assert!(document_text("not json").is_err());
        let shown = r#"{"content": "Hi", "sections": [1]}"#;
        assert_eq!(read_text(shown, false).expect("json"), "Hi");
        assert!(
            read_text(shown, true)
                .expect("json")
                .contains("\"sections\"")
        );
    }

    #[test]
    fn archived_versions_keep_the_extension() {
        assert_eq!(
            archived_version("s/p", "doc.md", 2),
            ("doc.v2.md".to_string(), "s/p/doc.v2.md".to_string())
        );
        assert_eq!(
            archived_name("simulated_0_business_case_critique.md", 1),
            "simulated_0_business_case_critique.v1.md"
        );
        assert_eq!(archived_name("notes", 3), "notes.v3");
        assert_eq!(archived_name(".hidden", 2), ".hidden.v2");
    }
}
