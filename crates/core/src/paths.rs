//! Storage keys of seed 001 "File Structure". `construct` and `deconstruct`
//! are inverse: every key this system writes can be read back into the context
//! that produced it.

use crate::ids::{ProjectId, ResourceId};
use crate::slug::{is_safe_segment, slugify};
use std::fmt;

/// How a document's file name records where it came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Lineage {
    /// `{model}_{n}_{document_key}`
    Plain,
    /// `{model}_critiquing_{source_model}_{n}_{document_key}`
    Critiquing { source_model: String },
    /// `{model}_from_{source_models}_{n}_{document_key}` (source models joined
    /// by [`SOURCE_MODELS_JOIN`]; see [`Lineage::pairwise`])
    PairwiseFrom { source_models: String },
    /// `{model}_reducing_{source_contribution_short}_{n}_{document_key}`
    Reducing { source_short: String },
}

/// Joins the two models of a pairwise name. Not `+`: S3 clients that list
/// with `encoding-type=url` (boto3, the AWS CLI) decode it as a space and then
/// cannot fetch the key. Model slugs never hold a double dash (`slugify`
/// collapses dashes), so the pair splits back unambiguously.
pub const SOURCE_MODELS_JOIN: &str = "--";

impl Lineage {
    /// The lineage of a document reconciling `origin`'s proposal with `critic`'s critique of it.
    pub fn pairwise(origin: &str, critic: &str) -> Lineage {
        Lineage::PairwiseFrom {
            source_models: format!("{origin}{SOURCE_MODELS_JOIN}{critic}"),
        }
    }

    /// The model whose proposal a pairwise document reconciles.
    pub fn pairwise_origin(source_models: &str) -> &str {
        source_models
            .split(SOURCE_MODELS_JOIN)
            .next()
            .unwrap_or(source_models)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentName {
    pub model_slug: String,
    /// The seed's `{n}`: the attempt that produced the file (0-based), so
    /// a retried attempt never overwrites what an earlier one wrote.
    pub attempt: u32,
    pub document_key: String,
    pub lineage: Lineage,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileKind {
    /// The project's initial prompt at the project root.
    ProjectPrompt { name_slug: String },
    /// `{k}_{stage}/seed_prompt.md`: the full prompt sent for the stage.
    SeedPrompt,
    /// `{k}_{stage}/user_feedback_{stage}.md`
    UserFeedback,
    /// `raw_responses/{name}_raw.json`, or for continuation turns
    /// `_work/{name}_continuation_{turn}_raw.json`.
    RawChunk {
        name: DocumentName,
        continuation: Option<u32>,
    },
    /// The one canonical rendered markdown, at the stage root: `{name}.md`.
    RenderedDocument { name: DocumentName },
    /// A user's edited version of a document: `documents/{name}_edit_{version}.json`.
    UserEdit { name: DocumentName, version: u32 },
}

/// Where an uploaded project document lives (seed 001's `general_resource/`
/// folder): `projects/{project}/general_resource/{name}_{id8}.{ext}`. The
/// name is slugged, never the raw file name, and the resource id's random
/// digits keep two uploads of one name apart.
pub fn project_document_key(
    project_id: ProjectId,
    resource_id: ResourceId,
    file_name: &str,
) -> String {
    let base = file_name.rsplit(['/', '\\']).next().unwrap_or_default();
    let (stem, extension) = match base.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, slugify(ext, 10, "txt")),
        _ => (base, "txt".to_string()),
    };
    format!(
        "projects/{project_id}/general_resource/{}_{}.{extension}",
        slugify(stem, 60, "document"),
        resource_id.short()
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathContext {
    pub project_id: ProjectId,
    /// `session_{id8}`: the first eight hex digits of the session id.
    pub session_short: String,
    pub iteration: u32,
    /// Position of the stage in the process (`1_thesis`).
    pub stage_number: u32,
    pub stage_slug: String,
    pub file: FileKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("{field} {value:?} is not a safe path segment")]
    UnsafeSegment { field: &'static str, value: String },
    #[error("storage key {0:?} does not match the dialectic layout")]
    Unrecognised(String),
}

const CONTINUATION: &str = "_continuation_";
const EDIT: &str = "_edit_";

fn check(field: &'static str, value: &str) -> Result<(), PathError> {
    // Underscores separate name parts, so model slugs and lineage parts may not contain them.
    let ok = match field {
        "document key" | "stage slug" => {
            is_safe_segment(value) && !value.contains(CONTINUATION.trim_matches('_'))
        }
        "source models" => value
            .split(SOURCE_MODELS_JOIN)
            .all(|m| is_safe_segment(m) && !m.contains('_')),
        _ => is_safe_segment(value) && !value.contains('_'),
    };
    if ok {
        Ok(())
    } else {
        Err(PathError::UnsafeSegment {
            field,
            value: value.chars().take(64).collect(),
        })
    }
}

impl DocumentName {
    pub fn validate(&self) -> Result<(), PathError> {
        check("model slug", &self.model_slug)?;
        check("document key", &self.document_key)?;
        if self
            .document_key
            .split('_')
            .next()
            .is_some_and(|first| first.parse::<u32>().is_ok())
        {
            return Err(PathError::UnsafeSegment {
                field: "document key",
                value: self.document_key.clone(),
            });
        }
        match &self.lineage {
            Lineage::Plain => Ok(()),
            Lineage::Critiquing { source_model } => check("source model", source_model),
            Lineage::PairwiseFrom { source_models } => check("source models", source_models),
            Lineage::Reducing { source_short } => check("source contribution", source_short),
        }
    }

    pub fn base(&self) -> String {
        let DocumentName {
            model_slug,
            attempt,
            document_key,
            lineage,
        } = self;
        match lineage {
            Lineage::Plain => format!("{model_slug}_{attempt}_{document_key}"),
            Lineage::Critiquing { source_model } => {
                format!("{model_slug}_critiquing_{source_model}_{attempt}_{document_key}")
            }
            Lineage::PairwiseFrom { source_models } => {
                format!("{model_slug}_from_{source_models}_{attempt}_{document_key}")
            }
            Lineage::Reducing { source_short } => {
                format!("{model_slug}_reducing_{source_short}_{attempt}_{document_key}")
            }
        }
    }

    fn parse(base: &str) -> Option<DocumentName> {
        let parts: Vec<&str> = base.split('_').collect();
        let model_slug = (*parts.first()?).to_string();
        let (lineage, rest) = match parts.get(1).copied() {
            Some("critiquing") => (
                Lineage::Critiquing {
                    source_model: parts.get(2)?.to_string(),
                },
                &parts[3..],
            ),
            Some("from") => (
                Lineage::PairwiseFrom {
                    source_models: parts.get(2)?.to_string(),
                },
                &parts[3..],
            ),
            Some("reducing") => (
                Lineage::Reducing {
                    source_short: parts.get(2)?.to_string(),
                },
                &parts[3..],
            ),
            _ => (Lineage::Plain, &parts[1..]),
        };
        let attempt = rest.first()?.parse().ok()?;
        let document_key = rest.get(1..)?.join("_");
        let name = DocumentName {
            model_slug,
            attempt,
            document_key,
            lineage,
        };
        name.validate().ok()?;
        Some(name)
    }
}

impl PathContext {
    fn stage_dir(&self) -> String {
        format!(
            "projects/{}/session_{}/iteration_{}/{}_{}",
            self.project_id, self.session_short, self.iteration, self.stage_number, self.stage_slug
        )
    }

    /// The object key for this context.
    pub fn construct(&self) -> Result<String, PathError> {
        let dir = || -> Result<String, PathError> {
            check("session", &self.session_short)?;
            check("stage slug", &self.stage_slug)?;
            Ok(self.stage_dir())
        };
        Ok(match &self.file {
            FileKind::ProjectPrompt { name_slug } => {
                check("prompt name", name_slug)?;
                format!("projects/{}/{name_slug}.md", self.project_id)
            }
            FileKind::SeedPrompt => format!("{}/seed_prompt.md", dir()?),
            FileKind::UserFeedback => format!("{}/user_feedback_{}.md", dir()?, self.stage_slug),
            FileKind::RawChunk {
                name,
                continuation: None,
            } => {
                name.validate()?;
                format!("{}/raw_responses/{}_raw.json", dir()?, name.base())
            }
            FileKind::RawChunk {
                name,
                continuation: Some(turn),
            } => {
                name.validate()?;
                format!(
                    "{}/_work/{}{CONTINUATION}{turn}_raw.json",
                    dir()?,
                    name.base()
                )
            }
            FileKind::RenderedDocument { name } => {
                name.validate()?;
                format!("{}/{}.md", dir()?, name.base())
            }
            FileKind::UserEdit { name, version } => {
                name.validate()?;
                format!("{}/documents/{}{EDIT}{version}.json", dir()?, name.base())
            }
        })
    }

    /// Reads a key written by `construct` back into its context.
    pub fn deconstruct(key: &str) -> Result<PathContext, PathError> {
        let bad = || PathError::Unrecognised(key.chars().take(200).collect());
        let parts: Vec<&str> = key.split('/').collect();
        if parts.first() != Some(&"projects") || parts.len() < 3 {
            return Err(bad());
        }
        let project_id: ProjectId = parts[1].parse().map_err(|_| bad())?;
        if parts.len() == 3 {
            let name_slug = parts[2].strip_suffix(".md").ok_or_else(bad)?.to_string();
            let ctx = PathContext {
                project_id,
                session_short: String::new(),
                iteration: 0,
                stage_number: 0,
                stage_slug: String::new(),
                file: FileKind::ProjectPrompt { name_slug },
            };
            return ctx.accept_if_canonical(key).ok_or_else(bad);
        }
        let session_short = parts[2]
            .strip_prefix("session_")
            .ok_or_else(bad)?
            .to_string();
        let iteration = parts
            .get(3)
            .and_then(|p| p.strip_prefix("iteration_"))
            .and_then(|n| n.parse().ok())
            .ok_or_else(bad)?;
        let (stage_number, stage_slug) = parts
            .get(4)
            .and_then(|p| p.split_once('_'))
            .ok_or_else(bad)?;
        let stage_number: u32 = stage_number.parse().map_err(|_| bad())?;
        let stage_slug = stage_slug.to_string();
        let file = match &parts[5..] {
            ["seed_prompt.md"] => FileKind::SeedPrompt,
            [name] if *name == format!("user_feedback_{stage_slug}.md") => FileKind::UserFeedback,
            ["raw_responses", name] => {
                let base = name.strip_suffix("_raw.json").ok_or_else(bad)?;
                FileKind::RawChunk {
                    name: DocumentName::parse(base).ok_or_else(bad)?,
                    continuation: None,
                }
            }
            ["_work", name] => {
                let stem = name.strip_suffix("_raw.json").ok_or_else(bad)?;
                let (base, turn) = stem.rsplit_once(CONTINUATION).ok_or_else(bad)?;
                let turn = turn.parse().map_err(|_| bad())?;
                FileKind::RawChunk {
                    name: DocumentName::parse(base).ok_or_else(bad)?,
                    continuation: Some(turn),
                }
            }
            ["documents", name] => {
                let stem = name.strip_suffix(".json").ok_or_else(bad)?;
                let (base, version) = stem.rsplit_once(EDIT).ok_or_else(bad)?;
                FileKind::UserEdit {
                    name: DocumentName::parse(base).ok_or_else(bad)?,
                    version: version.parse().map_err(|_| bad())?,
                }
            }
            [name] => {
                let base = name.strip_suffix(".md").ok_or_else(bad)?;
                FileKind::RenderedDocument {
                    name: DocumentName::parse(base).ok_or_else(bad)?,
                }
            }
            _ => return Err(bad()),
        };
        let ctx = PathContext {
            project_id,
            session_short,
            iteration,
            stage_number,
            stage_slug,
            file,
        };
        ctx.accept_if_canonical(key).ok_or_else(bad)
    }

    /// Only keys that `construct` would produce are accepted: an id in upper
    /// case or a number with a leading zero names no object this system wrote.
    fn accept_if_canonical(self, key: &str) -> Option<PathContext> {
        (self.construct().ok().as_deref() == Some(key)).then_some(self)
    }
}

/// The key of the whole document a raw chunk belongs to: a continuation
/// turn's chunk (under `_work/`) stands for the document its chain assembled
/// at the root path; every other key stands for itself.
pub fn whole_document_key(key: &str) -> String {
    let Ok(mut ctx) = PathContext::deconstruct(key) else {
        return key.to_string();
    };
    match &mut ctx.file {
        FileKind::RawChunk { continuation, .. } if continuation.is_some() => {
            *continuation = None;
            ctx.construct().unwrap_or_else(|_| key.to_string())
        }
        _ => key.to_string(),
    }
}

impl fmt::Display for PathContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.construct() {
            Ok(key) => f.write_str(&key),
            Err(e) => write!(f, "<invalid path: {e}>"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_document_key_is_slugged_and_kept_apart_by_its_id() {
        let project = ProjectId::new();
        let id = ResourceId::from_u128(0xabcdef12);
        assert_eq!(
            project_document_key(project, id, "../Base Agreement (2019).MD"),
            format!("projects/{project}/general_resource/base-agreement-2019_abcdef12.md")
        );
        assert_eq!(
            project_document_key(project, id, ".env"),
            format!("projects/{project}/general_resource/env_abcdef12.txt")
        );
    }

    fn ctx(file: FileKind) -> PathContext {
        PathContext {
            project_id: ProjectId::new(),
            session_short: "0a1b2c3d".into(),
            iteration: 1,
            stage_number: 2,
            stage_slug: "antithesis".into(),
            file,
        }
    }

    fn name(lineage: Lineage) -> DocumentName {
        DocumentName {
            model_slug: "gpt-4-1".into(),
            attempt: 0,
            document_key: "business_case".into(),
            lineage,
        }
    }

    /// A tiny deterministic generator, so the property test needs no extra crate.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((self.0 >> 33) as usize) % n
        }
        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.next(from.len())]
        }
    }

    #[test]
    fn every_generated_context_round_trips() {
        let models = ["a", "gpt-4o", "claude-3-5", "m2", "simulated-b", "x-9-y"];
        let keys = [
            "business_case",
            "header_context",
            "synthesis_pairwise",
            "technical_feasibility_assessment",
            "comparison_vector",
            "x",
        ];
        let stages = [
            "thesis",
            "antithesis",
            "synthesis",
            "parenthesis",
            "paralysis",
        ];
        let mut rng = Lcg(42);
        for case in 0..2000 {
            let model_slug = rng.pick(&models).to_string();
            let lineage = match rng.next(4) {
                0 => Lineage::Plain,
                1 => Lineage::Critiquing {
                    source_model: rng.pick(&models).to_string(),
                },
                2 => Lineage::pairwise(rng.pick(&models), rng.pick(&models)),
                _ => Lineage::Reducing {
                    source_short: format!("{:08x}", rng.next(u32::MAX as usize)),
                },
            };
            let name = DocumentName {
                model_slug,
                attempt: rng.next(12) as u32,
                document_key: rng.pick(&keys).to_string(),
                lineage,
            };
            let file = match rng.next(5) {
                0 => FileKind::RawChunk {
                    name,
                    continuation: None,
                },
                1 => FileKind::RawChunk {
                    name,
                    continuation: Some(rng.next(50) as u32),
                },
                2 => FileKind::UserEdit {
                    name,
                    version: 1 + rng.next(9) as u32,
                },
                3 => FileKind::RenderedDocument { name },
                _ => FileKind::UserFeedback,
            };
            let stage = rng.next(stages.len());
            let original = PathContext {
                project_id: ProjectId::new(),
                session_short: format!("{:08x}", rng.next(u32::MAX as usize)),
                iteration: 1 + rng.next(5) as u32,
                stage_number: stage as u32 + 1,
                stage_slug: stages[stage].to_string(),
                file,
            };
            let key = original.construct().expect("valid context");
            assert_eq!(
                PathContext::deconstruct(&key),
                Ok(original),
                "case {case}: {key}"
            );
        }
    }

    #[test]
    fn layout_matches_seed_001() {
        let raw = ctx(FileKind::RawChunk {
            name: name(Lineage::Plain),
            continuation: None,
        });
        let key = raw.construct().unwrap();
        assert!(key.ends_with("/session_0a1b2c3d/iteration_1/2_antithesis/raw_responses/gpt-4-1_0_business_case_raw.json"), "{key}");
        let cont = ctx(FileKind::RawChunk {
            name: name(Lineage::Plain),
            continuation: Some(1),
        });
        let key = cont.construct().unwrap();
        assert!(
            key.contains("/_work/")
                && key.ends_with("gpt-4-1_0_business_case_continuation_1_raw.json"),
            "{key}"
        );
        let root = PathContext {
            file: FileKind::RawChunk {
                name: name(Lineage::Plain),
                continuation: None,
            },
            ..cont.clone()
        }
        .construct()
        .unwrap();
        assert_eq!(whole_document_key(&key), root);
        assert_eq!(whole_document_key(&root), root);
        assert_eq!(whole_document_key("not/a/key"), "not/a/key");
        let critique = ctx(FileKind::RenderedDocument {
            name: name(Lineage::Critiquing {
                source_model: "claude".into(),
            }),
        });
        assert!(
            critique
                .construct()
                .unwrap()
                .ends_with("/2_antithesis/gpt-4-1_critiquing_claude_0_business_case.md")
        );
    }

    #[test]
    fn every_kind_round_trips() {
        let lineages = [
            Lineage::Plain,
            Lineage::Critiquing {
                source_model: "claude-3".into(),
            },
            Lineage::pairwise("a", "b"),
            Lineage::Reducing {
                source_short: "1234abcd".into(),
            },
        ];
        let mut files = vec![FileKind::SeedPrompt, FileKind::UserFeedback];
        for lineage in lineages {
            files.push(FileKind::RawChunk {
                name: name(lineage.clone()),
                continuation: None,
            });
            files.push(FileKind::RawChunk {
                name: name(lineage.clone()),
                continuation: Some(3),
            });
            files.push(FileKind::UserEdit {
                name: name(lineage.clone()),
                version: 2,
            });
            files.push(FileKind::RenderedDocument {
                name: name(lineage),
            });
        }
        for file in files {
            let original = ctx(file);
            let key = original.construct().unwrap();
            assert_eq!(PathContext::deconstruct(&key).unwrap(), original, "{key}");
        }
        let prompt = PathContext {
            session_short: String::new(),
            iteration: 0,
            stage_number: 0,
            stage_slug: String::new(),
            ..ctx(FileKind::ProjectPrompt {
                name_slug: "my-idea".into(),
            })
        };
        assert_eq!(
            PathContext::deconstruct(&prompt.construct().unwrap()).unwrap(),
            prompt
        );
    }

    #[test]
    fn unsafe_segments_and_foreign_keys_are_rejected() {
        let mut bad = name(Lineage::Plain);
        bad.model_slug = "../etc".into();
        assert!(
            ctx(FileKind::RenderedDocument { name: bad })
                .construct()
                .is_err()
        );
        let mut underscore = name(Lineage::Plain);
        underscore.model_slug = "a_b".into();
        assert!(
            ctx(FileKind::RenderedDocument { name: underscore })
                .construct()
                .is_err()
        );
        for key in [
            "",
            "projects",
            "projects/x/y.md",
            "other/1/2",
            "projects/00000000-0000-0000-0000-000000000000/session_a/iteration_x/1_t/a.md",
            // Found by the path_deconstruct fuzz target: an upper-case project id
            // was read as the lower-case one, so two keys named one context.
            "projects/0191d3c2-7a1e-7c3e-9f00-012345678Fab/u239135-78ase.md",
            "projects/0191d3c2-7a1e-7c3e-9f00-012345678fab/session_0191d3c2/iteration_01/1_thesis/seed_prompt.md",
        ] {
            assert!(PathContext::deconstruct(key).is_err(), "{key}");
        }
    }
}
