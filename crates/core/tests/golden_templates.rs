//! Every document template the project ships, rendered the way the renderer
//! renders it, against checked-in golden files (tests/golden/templates/).
//!
//! The golden files were first written by the `{{name}}` string-replace
//! implementation, before `prompt::fill_template` moved to minijinja, so this
//! test pins that the move changed no rendered byte. Any later change to a
//! template or to the template engine shows up here as a failing file.
//!
//! To rewrite the golden files after a deliberate change:
//! `DIALECTIC_BLESS=1 cargo test -p dialectic-core --test golden_templates`,
//! then review the diff.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use dialectic_core::pipeline::PipelineFile;
use dialectic_core::prompt::{check_template, fill_template, title_from_key};

/// What a model reply might hold: markdown, UTF-8, HTML-ish characters (no
/// auto-escaping may touch them), and text that looks like template syntax
/// (a value is substituted as a value, never parsed). The renderer trims its
/// end before filling, and so does this test.
const CONTENT: &str = "Opening paragraph with ünïcödé — “quotes”, <b>angle</b> & ampersand, 50% off.\n\
\n\
## A section\n\
\n\
- braces {like this} and {{title}} and {{ content }} stay as written\n\
- {% if x %}not a block{% endif %}, {# not a comment #}, {%- raw -%} neither\n\
- a line with trailing spaces   \n\
\n\
```json\n\
{\"key\": [1, 2, 3], \"nested\": {\"a\": \"b\"}}\n\
```\n\
\n\
Last line.\n\n\n";

const MODEL: &str = "simulated";

struct Case {
    /// Where its golden file lives, under tests/golden/templates/.
    golden: String,
    template: String,
    stage: String,
    document_key: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/templates")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn pipeline_cases(prefix: &str, text: &str, cases: &mut Vec<Case>) {
    let file = PipelineFile::parse(text).expect("parses");
    for stage in &file.stages {
        for template in &stage.document_templates {
            cases.push(Case {
                golden: format!(
                    "{prefix}/{}/{}/{}",
                    file.name, stage.slug, template.file_name
                ),
                template: template.content.clone(),
                stage: stage.slug.clone(),
                document_key: template.document_key.clone(),
            });
        }
    }
}

/// `E'# {{title}}\n...', 'file.md'),` rows of the seed migrations, with the
/// stage and document key from the row's first line.
fn migration_cases(rel: &str, cases: &mut Vec<Case>) {
    let text = read(rel);
    let lines: Vec<&str> = text.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        let Some(start) = line.find("E'") else {
            continue;
        };
        if !line.contains("{{") {
            continue;
        }
        let rest = &line[start + 2..];
        let end = rest.find("', '").expect("template then file name");
        let template = rest[..end].replace("\\n", "\n").replace("''", "'");
        assert!(!template.contains('\\'), "{rel}: unhandled escape");
        let file_name = rest[end + 4..].split('\'').next().expect("file name");
        let head: Vec<&str> = lines[index - 1].split('\'').collect();
        let (stage, document_key) = (head[3], head[5]);
        let migration = Path::new(rel).file_stem().expect("name").to_string_lossy();
        cases.push(Case {
            golden: format!("migrations/{migration}/{stage}/{file_name}"),
            template,
            stage: stage.to_string(),
            document_key: document_key.to_string(),
        });
    }
}

/// The renderer's template for a document without one.
fn renderer_fallback(cases: &mut Vec<Case>) {
    let source = read("services/renderer/src/lib.rs");
    let marker = "const FALLBACK_TEMPLATE: &str = \"";
    let start = source.find(marker).expect("FALLBACK_TEMPLATE") + marker.len();
    let literal = &source[start..start + source[start..].find("\";").expect("end")];
    let template = literal.replace("\\n", "\n");
    assert!(!template.contains('\\'), "unhandled escape in {literal:?}");
    cases.push(Case {
        golden: "code/renderer_fallback/thesis/business_case.md".into(),
        template,
        stage: "thesis".into(),
        document_key: "business_case".into(),
    });
}

fn readme_example(cases: &mut Vec<Case>) {
    let section = read("docs/pipeline-files.md");
    let start = section.find("```toml\n").expect("example") + "```toml\n".len();
    let example = &section[start..start + section[start..].find("```").expect("end")];
    pipeline_cases("readme", example, cases);
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for name in ["dialectic", "essay", "contract_stack"] {
        pipeline_cases(
            "pipelines",
            &read(&format!("pipelines/{name}.toml")),
            &mut cases,
        );
    }
    let mut test_pipelines: Vec<PathBuf> = std::fs::read_dir(root().join("tests/pipelines"))
        .expect("tests/pipelines")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    test_pipelines.sort();
    for path in test_pipelines {
        let text = std::fs::read_to_string(&path).expect("read");
        pipeline_cases("tests_pipelines", &text, &mut cases);
    }
    migration_cases("migrations/20261122000002_seed.sql", &mut cases);
    migration_cases("migrations/20261122000003_stage_recipes.sql", &mut cases);
    renderer_fallback(&mut cases);
    readme_example(&mut cases);
    cases
}

/// What the renderer does with a template (services/renderer/src/lib.rs).
fn render(case: &Case) -> String {
    let title = title_from_key(&case.document_key);
    fill_template(
        &case.template,
        &[
            ("title", title.as_str()),
            ("content", CONTENT.trim_end()),
            ("model", MODEL),
            ("stage", case.stage.as_str()),
        ],
    )
}

fn files_under(dir: &Path, base: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("golden dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files_under(&path, base, out);
        } else {
            let rel = path.strip_prefix(base).expect("under base");
            out.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn every_shipped_template_renders_as_its_golden_file() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} templates found", cases.len());
    let names: BTreeSet<String> = cases.iter().map(|c| c.golden.clone()).collect();
    assert_eq!(
        names.len(),
        cases.len(),
        "two templates share a golden file"
    );
    let dir = golden_dir();
    if std::env::var_os("DIALECTIC_BLESS").is_some() {
        for case in &cases {
            let path = dir.join(&case.golden);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, render(case)).expect("write golden");
        }
    }
    let mut on_disk = BTreeSet::new();
    files_under(&dir, &dir, &mut on_disk);
    assert_eq!(
        on_disk, names,
        "golden files and templates differ (stale or missing golden files)"
    );
    let mut wrong = Vec::new();
    for case in &cases {
        // minijinja renders it, not the fallback for templates it refuses.
        assert_eq!(check_template(&case.template), Ok(()), "{}", case.golden);
        let expected = std::fs::read(dir.join(&case.golden)).expect("golden file");
        let rendered = render(case);
        if rendered.as_bytes() != expected.as_slice() {
            wrong.push(format!(
                "{}:\n  template {:?}\n  rendered {:?}\n  golden   {:?}",
                case.golden,
                case.template,
                rendered,
                String::from_utf8_lossy(&expected)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
