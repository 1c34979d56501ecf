//! Granularity strategies: how one recipe step becomes jobs under a root job.
//! Every stage has one root job per selected model (the root's model authors
//! everything below it); a step's strategy then splits its work by the source
//! documents its anchor input rules match. See docs/recipes.md for examples.

use crate::paths::{FileKind, Lineage, PathContext};
use crate::payload::SourceSelection;
use crate::recipe::Granularity;
use std::collections::BTreeMap;

/// A document an input rule matched, with what its storage name says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceDoc {
    /// Resource or contribution id.
    pub id: String,
    pub key: String,
    pub document_key: String,
    /// Slug of the model that wrote it.
    pub author: String,
    /// The lineage it is about: the critiqued model of a critique, the first
    /// origin of a pairwise synthesis. None for plain documents.
    pub about: Option<String>,
    /// When the anchor rule names an `items` array: how many items it holds.
    pub items: Option<usize>,
}

impl SourceDoc {
    /// Reads author and lineage from a storage key written under the seed 001 layout.
    pub fn from_key(id: impl Into<String>, key: &str, document_key: &str) -> Self {
        let (author, about) = match PathContext::deconstruct(key).map(|c| c.file) {
            Ok(FileKind::RawChunk { name, .. } | FileKind::RenderedDocument { name }) => {
                let about = match &name.lineage {
                    Lineage::Plain => None,
                    Lineage::Critiquing { source_model } => Some(source_model.clone()),
                    Lineage::PairwiseFrom { source_models } => {
                        Some(Lineage::pairwise_origin(source_models).to_string())
                    }
                    Lineage::Reducing { .. } => None,
                };
                (name.model_slug, about)
            }
            _ => (String::new(), None),
        };
        Self {
            id: id.into(),
            key: key.to_string(),
            document_key: document_key.to_string(),
            author,
            about,
            items: None,
        }
    }

    /// Names a reducing job's output: ids minted together share their first
    /// eight digits (a v7 timestamp), so two sources would name one file.
    fn short_id(&self) -> String {
        crate::ids::short_of_text(&self.id)
    }
}

/// One job a step fans out to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FanOutJob {
    /// Distinguishes sibling jobs of one step in their natural key; empty for a single job.
    pub discriminator: String,
    pub lineage: Lineage,
    pub sources: Vec<SourceSelection>,
    /// A `sequential` job after the first: it waits for the job before it.
    pub after_previous: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FanOutError {
    #[error("strategy {strategy} needs {needed} document input rule(s); the step has {found}")]
    MissingAnchor {
        strategy: &'static str,
        needed: usize,
        found: usize,
    },
    #[error("strategy {strategy} found no source documents for input rule {rule}")]
    NoSources { strategy: &'static str, rule: usize },
}

/// An anchor: a `document` input rule (its index) and the documents it matched.
pub type Anchor = (usize, Vec<SourceDoc>);

fn single() -> Vec<FanOutJob> {
    vec![FanOutJob {
        after_previous: false,
        discriminator: String::new(),
        lineage: Lineage::Plain,
        sources: Vec::new(),
    }]
}

fn keys(docs: &[&SourceDoc]) -> Vec<String> {
    docs.iter().map(|d| d.key.clone()).collect()
}

/// One job per document, restricted to it.
fn one_per_document(rule: usize, docs: &[SourceDoc]) -> Vec<FanOutJob> {
    docs.iter()
        .map(|d| FanOutJob {
            after_previous: false,
            discriminator: format!("doc-{}", d.id),
            lineage: Lineage::Reducing {
                source_short: d.short_id(),
            },
            sources: vec![SourceSelection {
                rule,
                keys: vec![d.key.clone()],
                item: None,
            }],
        })
        .collect()
}

/// One job per item of each document, in document then item order.
fn one_per_item(rule: usize, docs: &[SourceDoc]) -> Vec<FanOutJob> {
    docs.iter()
        .flat_map(|d| (0..d.items.unwrap_or(0)).map(move |i| (d, i)))
        .map(|(d, i)| FanOutJob {
            after_previous: false,
            discriminator: format!("item-{}-{}", d.id, i + 1),
            lineage: Lineage::Reducing {
                source_short: format!("{}-{:02}", d.short_id(), i + 1),
            },
            sources: vec![SourceSelection {
                rule,
                keys: vec![d.key.clone()],
                item: Some(i),
            }],
        })
        .collect()
}

/// A chain over the anchor's documents (or, when its rule names `items`,
/// over their items) in order: each job after the first waits for the one
/// before it, and its name starts with its place, so the chain's outputs
/// list in chain order wherever documents are listed by name.
fn chain(rule: usize, docs: &[SourceDoc]) -> Vec<FanOutJob> {
    let links = if docs.iter().any(|d| d.items.is_some()) {
        one_per_item(rule, docs)
    } else {
        one_per_document(rule, docs)
    };
    links
        .into_iter()
        .enumerate()
        .map(|(place, mut job)| {
            job.after_previous = place > 0;
            if let Lineage::Reducing { source_short } = &mut job.lineage {
                *source_short = format!("{:03}-{source_short}", place + 1);
            }
            job
        })
        .collect()
}

/// The place (1-based) of a chained job's output in its chain, read back
/// from the name [`chain`] gives it; None for a name no chain gave.
pub fn chain_place(lineage: &Lineage) -> Option<u32> {
    let Lineage::Reducing { source_short } = lineage else {
        return None;
    };
    // Other names lead with an eight-digit short id, never three digits.
    let (place, _) = source_short.split_once('-')?;
    (place.len() == 3 && place.bytes().all(|b| b.is_ascii_digit()))
        .then(|| place.parse().ok())
        .flatten()
}

/// The jobs one step creates under one root, given its anchors (the first and,
/// for pairwise, second `document` rules, with what they matched).
pub fn fan_out(strategy: Granularity, anchors: &[Anchor]) -> Result<Vec<FanOutJob>, FanOutError> {
    let name = strategy.as_str();
    let anchor = |i: usize| -> Result<&Anchor, FanOutError> {
        let found = anchors.get(i).ok_or(FanOutError::MissingAnchor {
            strategy: name,
            needed: i + 1,
            found: anchors.len(),
        })?;
        if found.1.is_empty() {
            return Err(FanOutError::NoSources {
                strategy: name,
                rule: found.0,
            });
        }
        Ok(found)
    };
    match strategy {
        Granularity::AllToOne | Granularity::PerModel => Ok(single()),
        Granularity::PerSourceDocument => {
            let (rule, docs) = anchor(0)?;
            Ok(one_per_document(*rule, docs))
        }
        Granularity::PerSourceDocumentByLineage => {
            let (rule, docs) = anchor(0)?;
            let mut by_lineage: BTreeMap<&str, Vec<&SourceDoc>> = BTreeMap::new();
            for d in docs {
                by_lineage.entry(d.author.as_str()).or_default().push(d);
            }
            Ok(by_lineage
                .into_iter()
                .map(|(lineage, docs)| FanOutJob {
                    after_previous: false,
                    discriminator: format!("critiquing-{lineage}"),
                    lineage: Lineage::Critiquing {
                        source_model: lineage.to_string(),
                    },
                    sources: vec![SourceSelection {
                        rule: *rule,
                        keys: keys(&docs),
                        item: None,
                    }],
                })
                .collect())
        }
        Granularity::PairwiseByOrigin => {
            let (first_rule, originals) = anchor(0)?;
            let (second_rule, responses) = anchor(1)?;
            let mut by_lineage: BTreeMap<&str, Vec<&SourceDoc>> = BTreeMap::new();
            for d in originals {
                by_lineage.entry(d.author.as_str()).or_default().push(d);
            }
            let mut jobs = Vec::new();
            for (lineage, originals) in by_lineage {
                let mut by_responder: BTreeMap<&str, Vec<&SourceDoc>> = BTreeMap::new();
                for r in responses
                    .iter()
                    .filter(|r| r.about.as_deref() == Some(lineage))
                {
                    by_responder.entry(r.author.as_str()).or_default().push(r);
                }
                for (responder, responses) in by_responder {
                    jobs.push(FanOutJob {
                        after_previous: false,
                        discriminator: format!("from-{lineage}+{responder}"),
                        lineage: Lineage::pairwise(lineage, responder),
                        sources: vec![
                            SourceSelection {
                                rule: *first_rule,
                                keys: keys(&originals),
                                item: None,
                            },
                            SourceSelection {
                                rule: *second_rule,
                                keys: keys(&responses),
                                item: None,
                            },
                        ],
                    });
                }
            }
            if jobs.is_empty() {
                return Err(FanOutError::NoSources {
                    strategy: name,
                    rule: *second_rule,
                });
            }
            Ok(jobs)
        }
        Granularity::Sequential | Granularity::PerItem => {
            let (rule, docs) = anchor(0)?;
            let jobs = match strategy {
                Granularity::Sequential => chain(*rule, docs),
                _ => one_per_item(*rule, docs),
            };
            if jobs.is_empty() {
                return Err(FanOutError::NoSources {
                    strategy: name,
                    rule: *rule,
                });
            }
            Ok(jobs)
        }
        Granularity::PerSourceGroup => {
            let (rule, docs) = anchor(0)?;
            let mut groups: BTreeMap<&str, Vec<&SourceDoc>> = BTreeMap::new();
            for d in docs {
                let origin = d.about.as_deref().unwrap_or(d.author.as_str());
                groups.entry(origin).or_default().push(d);
            }
            Ok(groups
                .into_iter()
                .map(|(origin, docs)| {
                    let short = docs.first().map(|d| d.short_id()).unwrap_or_default();
                    FanOutJob {
                        after_previous: false,
                        discriminator: format!("reducing-{origin}"),
                        lineage: Lineage::Reducing {
                            source_short: short,
                        },
                        sources: vec![SourceSelection {
                            rule: *rule,
                            keys: keys(&docs),
                            item: None,
                        }],
                    }
                })
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "projects/01a2051b-0d29-7309-8ae0-a15e27bb96b8/session_01a2051b/iteration_1";

    fn thesis(model: &str, key: &str) -> SourceDoc {
        SourceDoc::from_key(
            format!("{model}-{key}-0000-0000"),
            &format!("{P}/1_thesis/{model}_0_{key}.md"),
            key,
        )
    }

    fn critique(critic: &str, about: &str, key: &str) -> SourceDoc {
        SourceDoc::from_key(
            format!("{critic}{about}-{key}"),
            &format!("{P}/2_antithesis/{critic}_critiquing_{about}_0_{key}.md"),
            key,
        )
    }

    fn pairwise(author: &str, pair: &str, id: &str) -> SourceDoc {
        SourceDoc::from_key(
            id,
            &format!(
                "{P}/3_synthesis/raw_responses/{author}_from_{pair}_0_synthesis_pairwise_raw.json"
            ),
            "synthesis_pairwise",
        )
    }

    #[test]
    fn per_item_makes_one_job_per_item_of_each_document() {
        let outline = |id: &str, items: usize| SourceDoc {
            items: Some(items),
            ..SourceDoc::from_key(
                id,
                &format!("{P}/1_write/raw_responses/a_0_outline_raw.json"),
                "outline",
            )
        };
        let jobs = fan_out(
            Granularity::PerItem,
            &[(1, vec![outline("01a2051b-0d29-7309-8ae0-a15e27bb96b8", 3)])],
        )
        .expect("fans out");
        let items: Vec<(Option<usize>, String)> = jobs
            .iter()
            .map(|j| {
                let Lineage::Reducing { source_short } = &j.lineage else {
                    panic!("reducing lineage")
                };
                (j.sources[0].item, source_short.clone())
            })
            .collect();
        assert_eq!(
            items,
            [
                (Some(0), "27bb96b8-01".to_string()),
                (Some(1), "27bb96b8-02".to_string()),
                (Some(2), "27bb96b8-03".to_string())
            ]
        );
        assert!(jobs.iter().all(|j| j.sources[0].rule == 1));
        assert_eq!(
            fan_out(Granularity::PerItem, &[(1, vec![outline("x", 0)])]),
            Err(FanOutError::NoSources {
                strategy: "per_item",
                rule: 1
            })
        );
    }

    #[test]
    fn sequential_chains_one_job_per_document_in_order() {
        let docs = vec![
            thesis("a", "base_agreement"),
            thesis("a", "amendment_one"),
            thesis("a", "amendment_two"),
        ];
        let jobs = fan_out(Granularity::Sequential, &[(0, docs.clone())]).expect("chains");
        let chain: Vec<(bool, &str)> = jobs
            .iter()
            .map(|j| (j.after_previous, j.sources[0].keys[0].as_str()))
            .collect();
        assert_eq!(
            chain,
            [
                (false, docs[0].key.as_str()),
                (true, docs[1].key.as_str()),
                (true, docs[2].key.as_str())
            ]
        );
    }

    #[test]
    fn sequential_over_items_chains_every_item_in_order_and_names_lead_with_the_place() {
        let map = |id: &str, items: usize| SourceDoc {
            items: Some(items),
            ..SourceDoc::from_key(
                id,
                &format!("{P}/3_argue/raw_responses/a_reducing_{id}_0_argument_map_raw.json"),
                "argument_map",
            )
        };
        let docs = vec![map("ffffffff", 2), map("00000000", 1)];
        let jobs = fan_out(Granularity::Sequential, &[(0, docs)]).expect("chains");
        let chain: Vec<(bool, Option<usize>, String)> = jobs
            .iter()
            .map(|j| {
                let Lineage::Reducing { source_short } = &j.lineage else {
                    panic!("reducing lineage")
                };
                (j.after_previous, j.sources[0].item, source_short.clone())
            })
            .collect();
        let short = |id: &str| SourceDoc::from_key(id, "", "").short_id();
        assert_eq!(
            chain,
            [
                (false, Some(0), format!("001-{}-01", short("ffffffff"))),
                (true, Some(1), format!("002-{}-02", short("ffffffff"))),
                (true, Some(0), format!("003-{}-01", short("00000000"))),
            ]
        );
    }

    #[test]
    fn names_tell_author_and_lineage() {
        let c = critique("b", "a", "risk_register");
        assert_eq!((c.author.as_str(), c.about.as_deref()), ("b", Some("a")));
        let p = pairwise("a", "b--a", "x");
        assert_eq!((p.author.as_str(), p.about.as_deref()), ("a", Some("b")));
        assert_eq!(thesis("a", "feature_spec").about, None);
    }

    #[test]
    fn all_to_one_and_per_model_make_one_unrestricted_job() {
        for g in [Granularity::AllToOne, Granularity::PerModel] {
            let jobs = fan_out(g, &[]).unwrap();
            assert_eq!(jobs.len(), 1);
            assert!(jobs[0].sources.is_empty());
            assert_eq!(jobs[0].lineage, Lineage::Plain);
        }
    }

    #[test]
    fn by_lineage_makes_one_job_per_authoring_model() {
        let docs = vec![
            thesis("a", "business_case"),
            thesis("b", "business_case"),
            thesis("a", "feature_spec"),
            thesis("b", "feature_spec"),
        ];
        let jobs = fan_out(Granularity::PerSourceDocumentByLineage, &[(2, docs)]).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            jobs[0].lineage,
            Lineage::Critiquing {
                source_model: "a".into()
            }
        );
        assert_eq!(jobs[0].sources[0].rule, 2);
        assert_eq!(jobs[0].sources[0].keys.len(), 2);
        assert!(jobs[0].sources[0].keys.iter().all(|k| k.contains("/a_0_")));
    }

    #[test]
    fn pairwise_pairs_each_lineage_with_each_critic_of_it() {
        let originals = vec![thesis("a", "business_case"), thesis("b", "business_case")];
        let critiques = vec![
            critique("a", "a", "risk_register"),
            critique("b", "a", "risk_register"),
            critique("a", "b", "risk_register"),
            critique("b", "b", "risk_register"),
        ];
        let jobs = fan_out(
            Granularity::PairwiseByOrigin,
            &[(2, originals), (3, critiques)],
        )
        .unwrap();
        let pairs: Vec<_> = jobs.iter().map(|j| j.discriminator.as_str()).collect();
        assert_eq!(pairs, ["from-a+a", "from-a+b", "from-b+a", "from-b+b"]);
        assert_eq!(
            jobs[1].sources[1].keys,
            vec![critique("b", "a", "risk_register").key]
        );
    }

    #[test]
    fn per_source_group_groups_by_first_origin() {
        let docs = vec![
            // v7 ids minted together: one timestamp prefix, distinct tails.
            pairwise("a", "a--a", "01a211e4-0000-7000-8000-000011111111"),
            pairwise("a", "a--b", "01a211e4-0000-7000-8000-000022222222"),
            pairwise("a", "b--a", "01a211e4-0000-7000-8000-000033333333"),
            pairwise("a", "b--b", "01a211e4-0000-7000-8000-000044444444"),
        ];
        let jobs = fan_out(Granularity::PerSourceGroup, &[(1, docs)]).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            jobs[0].lineage,
            Lineage::Reducing {
                source_short: "11111111".into()
            }
        );
        assert_eq!(
            jobs[1].lineage,
            Lineage::Reducing {
                source_short: "33333333".into()
            },
            "groups of sources minted together still name different files"
        );
        assert_eq!(jobs[1].sources[0].keys.len(), 2);
    }

    #[test]
    fn per_source_document_makes_one_job_per_document() {
        let docs = vec![thesis("a", "business_case"), thesis("a", "feature_spec")];
        assert_eq!(
            fan_out(Granularity::PerSourceDocument, &[(0, docs)])
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn missing_sources_are_errors_naming_the_rule() {
        assert_eq!(
            fan_out(Granularity::PerSourceDocumentByLineage, &[(4, vec![])]),
            Err(FanOutError::NoSources {
                strategy: "per_source_document_by_lineage",
                rule: 4
            })
        );
        assert!(matches!(
            fan_out(
                Granularity::PairwiseByOrigin,
                &[(1, vec![thesis("a", "x")])]
            ),
            Err(FanOutError::MissingAnchor { .. })
        ));
    }

    #[test]
    fn a_chained_name_gives_its_place_back_and_no_other_name_does() {
        let docs = vec![thesis("a", "base_agreement"), thesis("a", "amendment_one")];
        let places: Vec<Option<u32>> = fan_out(Granularity::Sequential, &[(0, docs.clone())])
            .expect("chains")
            .iter()
            .map(|j| chain_place(&j.lineage))
            .collect();
        assert_eq!(places, [Some(1), Some(2)]);
        let unchained: Vec<Option<u32>> = fan_out(Granularity::PerSourceDocument, &[(0, docs)])
            .expect("one per document")
            .iter()
            .map(|j| chain_place(&j.lineage))
            .collect();
        assert_eq!(unchained, [None, None]);
        let item = Lineage::Reducing {
            source_short: "123abcde-01".into(),
        };
        assert_eq!(chain_place(&item), None);
        assert_eq!(chain_place(&Lineage::Plain), None);
    }
}
