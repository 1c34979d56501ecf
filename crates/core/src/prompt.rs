//! Prompt assembly (seed 001 Phase 2): raw ingredients in a
//! `PromptConstructionPayload`, one `ChatRequest` out, one model call per job.

use crate::shape::JsonKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// For assistant turns replayed in a continuation: the chunk they came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contribution_id: Option<String>,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
            contribution_id: None,
        }
    }
    pub fn assistant(content: impl Into<String>, contribution_id: Option<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: content.into(),
            contribution_id,
        }
    }
}

/// A document handed to the model as context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceDocument {
    /// Contribution, resource or feedback id it was read from.
    pub id: String,
    /// document | header_context | feedback | seed_prompt
    pub kind: String,
    pub stage_slug: String,
    pub document_key: String,
    pub model: Option<String>,
    pub content: String,
    pub section_header: Option<String>,
    /// From the step's `inputs_relevance`, 0..=1; used to order compression.
    pub relevance: f64,
    /// The S3 object it was read from; None for the seed prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_key: Option<String>,
}

/// One input a request carries, as the request was sent (after compression):
/// what it is, where it came from and a digest of the text the model saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRef {
    /// Contribution, resource, feedback or session id it was read from.
    pub id: String,
    pub kind: String,
    pub stage_slug: String,
    pub document_key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_key: Option<String>,
    /// [`content_digest`] of the text in the prompt.
    pub digest: String,
}

/// First 12 hex digits of the SHA-256 of a text: enough to tell inputs apart.
pub fn content_digest(text: &str) -> String {
    let mut hex = crate::digest::sha256_hex(text.as_bytes());
    hex.truncate(12);
    hex
}

impl InputRef {
    pub fn of(doc: &ResourceDocument) -> Self {
        InputRef {
            id: doc.id.clone(),
            kind: doc.kind.clone(),
            stage_slug: doc.stage_slug.clone(),
            document_key: doc.document_key.clone(),
            storage_key: doc.storage_key.clone(),
            digest: content_digest(&doc.content),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptConstructionPayload {
    pub system_instruction: Option<String>,
    pub conversation_history: Vec<Message>,
    pub resource_documents: Vec<ResourceDocument>,
    pub current_user_prompt: String,
}

/// Opens the note a retry adds when the model's last reply was refused.
pub const REJECTED_REPLY: &str = "Your previous reply was not accepted:";

/// What one model call receives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub system_instruction: Option<String>,
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    /// Output the step must produce (e.g. `business_case`), for providers that shape replies.
    pub output_type: String,
    /// For planning steps: the documents the plan must cover.
    #[serde(default)]
    pub output_hints: Vec<String>,
    /// Keys the reply's JSON object must have (the step's `required_keys`), for
    /// providers that can constrain structured output.
    #[serde(default)]
    pub required_keys: Vec<String>,
    /// The JSON type of the reply's keys (the output rule's `key_types`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub key_types: BTreeMap<String, JsonKind>,
    /// Blackboard entry types the step may publish (its output rule's
    /// `publishes`); providers never send it, the simulated model obeys it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub publishes: Vec<String>,
    /// The step's sampling temperature, when its recipe sets one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The JSON Schema the reply must match (`structured::reply_schema`);
    /// providers send it in their model's structured-output dialect, and
    /// send none when this is None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<serde_json::Value>,
    /// What the last user message holds, in order: provenance for logs and
    /// tests. Providers never send it; the simulated model echoes it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRef>,
    /// The job that sent it: provenance, like `inputs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Where the inputs end in the message that carries them: the system
    /// instruction and the inputs come before the step's instruction, so the
    /// jobs of a step that read the same inputs send the same prefix, and a
    /// provider's prompt cache can hold it (Anthropic is told where it ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<SharedPrefix>,
}

/// The end of a request's cacheable prefix: the first `bytes` of
/// `messages[message]` (a char boundary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedPrefix {
    pub message: usize,
    pub bytes: usize,
}

/// Folds resource documents into the final user message (seed 000 steps 9–11):
/// history first, then the current prompt with its context sections.
pub fn assemble(
    payload: &PromptConstructionPayload,
    model: &str,
    max_tokens: u32,
    output_type: &str,
    output_hints: &[String],
) -> ChatRequest {
    let mut user = String::new();
    for doc in &payload.resource_documents {
        let header = doc.section_header.clone().unwrap_or_else(|| {
            format!(
                "--- {} ({} / {}) ---",
                doc.document_key, doc.stage_slug, doc.kind
            )
        });
        user.push_str(&header);
        user.push('\n');
        user.push_str(&doc.content);
        user.push_str("\n\n");
    }
    let shared_prefix = (!user.is_empty()).then_some(SharedPrefix {
        message: payload.conversation_history.len(),
        bytes: user.len(),
    });
    user.push_str(&payload.current_user_prompt);
    let mut messages = payload.conversation_history.clone();
    messages.push(Message::user(user));
    ChatRequest {
        model: model.to_string(),
        system_instruction: payload.system_instruction.clone(),
        messages,
        max_tokens,
        output_type: output_type.to_string(),
        output_hints: output_hints.to_vec(),
        required_keys: Vec::new(),
        key_types: BTreeMap::new(),
        publishes: Vec::new(),
        temperature: None,
        response_schema: None,
        inputs: payload
            .resource_documents
            .iter()
            .map(InputRef::of)
            .collect(),
        job_id: None,
        shared_prefix,
    }
}

/// The session settings a step's prompt reads as template variables:
/// `{% if pushback == "minimal" %}…{% endif %}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptSettings {
    pub pushback: crate::pushback::Pushback,
}

/// A step's prompt with the session's settings filled in. A prompt with no
/// template syntax is sent as written.
pub fn fill_step_prompt(prompt: &str, settings: PromptSettings) -> String {
    if !prompt.contains("{{") && !prompt.contains("{%") {
        return prompt.to_string();
    }
    fill_template(prompt, &[("pushback", settings.pushback.as_str())])
}

/// A document template minijinja cannot parse or render, with its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TemplateError(pub String);

impl From<minijinja::Error> for TemplateError {
    fn from(e: minijinja::Error) -> Self {
        let reason = e
            .detail()
            .map_or_else(|| e.kind().to_string(), str::to_string);
        Self(match e.line() {
            Some(line) => format!("line {line} of the template: {reason}"),
            None => reason,
        })
    }
}

/// Instructions one render of a document template may run. A shipped
/// template uses a few dozen; a tenant's pipeline file that loops over a
/// document inside a loop over it would otherwise hold a renderer thread for
/// minutes. Out of fuel, installing refuses the template and rendering falls
/// back to the literal fill.
pub const TEMPLATE_FUEL: u64 = 100_000;

/// The engine document templates run on: the template's text comes out as
/// written (its trailing newline kept, no block trimming), nothing is
/// auto-escaped whatever the template's name, and a render has
/// [`TEMPLATE_FUEL`] to spend.
fn template_environment<'a>() -> Result<minijinja::Environment<'a>, TemplateError> {
    let mut env = minijinja::Environment::new();
    env.set_fuel(Some(TEMPLATE_FUEL));
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()?,
    );
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
    Ok(env)
}

/// A variable a template uses that `vars` does not name: false and empty
/// like an undefined value, but printed as its own placeholder `{{name}}`.
#[derive(Debug)]
struct Unknown(String);

impl minijinja::value::Object for Unknown {
    fn repr(self: &std::sync::Arc<Self>) -> minijinja::value::ObjectRepr {
        minijinja::value::ObjectRepr::Plain
    }

    fn enumerate(self: &std::sync::Arc<Self>) -> minijinja::value::Enumerator {
        minijinja::value::Enumerator::Empty
    }

    fn is_true(self: &std::sync::Arc<Self>) -> bool {
        false
    }

    fn render(self: &std::sync::Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{{{{{}}}}}", self.0)
    }
}

/// Renders `template` with `vars`, each other variable it uses [`Unknown`].
fn render_template(template: &str, vars: &[(&str, &str)]) -> Result<String, TemplateError> {
    render_with_data(template, vars, &serde_json::Map::new())
}

/// Like [`render_template`], with the top-level fields of `data` bound too
/// (as JSON values, so a template can loop over a list); `vars` win.
fn render_with_data(
    template: &str,
    vars: &[(&str, &str)],
    data: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, TemplateError> {
    let env = template_environment()?;
    let compiled = env.template_from_str(template)?;
    let mut context: BTreeMap<String, minijinja::Value> = compiled
        .undeclared_variables(false)
        .into_iter()
        .map(|name| {
            let unknown = minijinja::Value::from_object(Unknown(name.clone()));
            (name, unknown)
        })
        .collect();
    for (name, value) in data {
        context.insert(name.clone(), jinja_value(value));
    }
    for (name, value) in vars {
        context.insert((*name).to_string(), minijinja::Value::from(*value));
    }
    Ok(compiled.render(minijinja::Value::from(context))?)
}

/// A reply's JSON as a template value (minijinja is built without serde).
fn jinja_value(value: &serde_json::Value) -> minijinja::Value {
    use serde_json::Value as Json;
    match value {
        Json::Null => minijinja::Value::from(()),
        Json::Bool(b) => minijinja::Value::from(*b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => minijinja::Value::from(i),
            (None, Some(f)) => minijinja::Value::from(f),
            (None, None) => minijinja::Value::from(n.to_string()),
        },
        Json::String(s) => minijinja::Value::from(s.as_str()),
        Json::Array(items) => items.iter().map(jinja_value).collect(),
        Json::Object(fields) => fields
            .iter()
            .map(|(k, v)| (k.clone(), jinja_value(v)))
            .collect::<BTreeMap<String, minijinja::Value>>()
            .into(),
    }
}

/// Checks a document template as a pipeline file is installed: it must parse
/// and render (every variable bound to an empty string), so an unknown
/// filter or tag is found there, not when a document renders.
pub fn check_template(template: &str) -> Result<(), TemplateError> {
    let env = template_environment()?;
    let compiled = env.template_from_str(template)?;
    let context: BTreeMap<String, minijinja::Value> = compiled
        .undeclared_variables(false)
        .into_iter()
        .map(|name| (name, minijinja::Value::from("")))
        .collect();
    compiled.render(minijinja::Value::from(context))?;
    Ok(())
}

/// Fills a document template (`pipelines/*.toml` `document_templates`) with
/// minijinja: `{{name}}` (or `{{ name }}`) is the value of `name` in `vars`,
/// and Jinja syntax (`{% if model %}…{% endif %}`, `{# note #}`) works in the
/// template's text. What comes out is the template's text as written around
/// the values: its trailing newline kept, no auto-escaping (`<` and `&` stay).
///
/// - A value is inserted as text and never read as a template, so `{{`, `{%`
///   or `{#` in a model's reply stay as written. (The string replacement this
///   replaced substituted one name after another over the whole text, so a
///   reply containing `{{stage}}` had it replaced too; that no longer happens.)
/// - A name `vars` does not hold prints as its own placeholder, `{{name}}`,
///   as the string replacement left it (no shipped template uses one; a typo
///   in an installed template stays visible in the document instead of
///   vanishing); in `{% if %}` or `{% for %}` it is false and empty, like any
///   undefined value. The renderer passes `title`, `content`, `model` and
///   `stage`.
/// - A template minijinja cannot parse or render is filled the way it was
///   before the move to minijinja: each exact `{{name}}` of `vars` replaced,
///   all else as written. Pipeline files are checked with [`check_template`]
///   when installed, so only a template stored before that check can get here.
pub fn fill_template(template: &str, vars: &[(&str, &str)]) -> String {
    render_template(template, vars).unwrap_or_else(|_| fill_literally(template, vars))
}

/// [`fill_template`] for a document whose reply is the JSON object `data`:
/// each of its top-level fields is a variable too (`{% for s in sections %}`),
/// so the document of a JSON output shows its data, not only its `content`.
/// `vars` (`title`, `content`, `model`, `stage`) win over fields of the same name.
pub fn fill_document(template: &str, vars: &[(&str, &str)], data: &serde_json::Value) -> String {
    let empty = serde_json::Map::new();
    let fields = data.as_object().unwrap_or(&empty);
    render_with_data(template, vars, fields).unwrap_or_else(|_| fill_literally(template, vars))
}

/// One pass over `template`, replacing each exact `{{name}}` of `vars`; the
/// inserted values are not scanned again.
fn fill_literally(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let inner = &rest[start + 2..];
        let known = vars.iter().find(|(name, _)| {
            inner
                .strip_prefix(name)
                .is_some_and(|after| after.starts_with("}}"))
        });
        match known {
            Some((name, value)) => {
                out.push_str(value);
                rest = &inner[name.len() + 2..];
            }
            None => {
                out.push('{');
                rest = &rest[start + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// `business_case` → `Business Case`.
pub fn title_from_key(document_key: &str) -> String {
    document_key
        .split(['_', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut chars = w.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assembly_puts_resources_before_the_prompt_and_keeps_history() {
        let payload = PromptConstructionPayload {
            system_instruction: Some("sys".into()),
            conversation_history: vec![
                Message::user("first"),
                Message::assistant("chunk", Some("c1".into())),
            ],
            resource_documents: vec![ResourceDocument {
                id: "r".into(),
                kind: "header_context".into(),
                stage_slug: "thesis".into(),
                document_key: "header_context".into(),
                model: None,
                content: "{}".into(),
                section_header: None,
                relevance: 1.0,
                storage_key: None,
            }],
            current_user_prompt: "write it".into(),
        };
        let req = assemble(&payload, "m", 100, "business_case", &[]);
        assert_eq!(req.messages.len(), 3);
        let last = &req.messages[2].content;
        assert!(last.find("header_context").unwrap() < last.find("write it").unwrap());
        assert_eq!(req.messages[1].contribution_id.as_deref(), Some("c1"));
        assert_eq!(req.inputs.len(), 1);
        assert_eq!(req.inputs[0].digest, content_digest("{}"));
    }

    #[test]
    fn templates_and_titles() {
        assert_eq!(
            fill_template(
                "# {{title}}\n{{content}} {{x}}",
                &[("title", "T"), ("content", "C")]
            ),
            "# T\nC {{x}}"
        );
        assert_eq!(title_from_key("business_case"), "Business Case");
    }

    const VARS: [(&str, &str); 2] = [("title", "T"), ("content", "C")];

    #[test]
    fn templates_keep_their_text_and_newlines_and_escape_nothing() {
        assert_eq!(
            fill_template("# {{title}}\n\n{{content}}\n", &VARS),
            "# T\n\nC\n"
        );
        assert_eq!(fill_template("{{content}}\n\n\n", &VARS), "C\n\n\n");
        assert_eq!(fill_template("a\r\n{{title}}\r\n", &VARS), "a\r\nT\r\n");
        assert_eq!(fill_template("  {{ title }}  \n", &VARS), "  T  \n");
        assert_eq!(
            fill_template("{{content}}", &[("content", "<b>&amp;\"'</b>")]),
            "<b>&amp;\"'</b>"
        );
        assert_eq!(fill_template("", &VARS), "");
    }

    #[test]
    fn values_are_text_never_template_syntax() {
        let reply = "{{title}} {{ stage }} {% if x %}y{% endif %} {# z #} {%- raw -%}";
        assert_eq!(
            fill_template(
                "{{content}}|{{stage}}",
                &[("content", reply), ("stage", "thesis")]
            ),
            format!("{reply}|thesis")
        );
    }

    #[test]
    fn unknown_placeholders_stay_as_written() {
        assert_eq!(
            fill_template("{{titel}} {{ other }} {{title}}", &VARS),
            "{{titel}} {{other}} T"
        );
        assert_eq!(
            fill_template(
                "{% if other %}yes{% else %}no{% endif %}{% for x in other %}{{x}}{% endfor %}{{ other.x }}",
                &VARS
            ),
            "no"
        );
    }

    #[test]
    fn jinja_syntax_works_in_the_template_text() {
        let template = "{# a note #}# {{title}}{% if model %} ({{model}}){% endif %}\n";
        assert_eq!(fill_template(template, &VARS), "# T\n");
        assert_eq!(
            fill_template(template, &[("title", "T"), ("model", "m")]),
            "# T (m)\n"
        );
    }

    #[test]
    fn a_template_that_does_not_parse_fills_as_before() {
        let broken = "{{{title}}} {% nope {{content}} {# {{x}}\n";
        assert!(check_template(broken).is_err());
        assert_eq!(fill_template(broken, &VARS), "{T} {% nope C {# {{x}}\n");
    }

    #[test]
    fn check_template_names_what_is_wrong_and_where() {
        assert_eq!(check_template("# {{title}}\n\n{{content}}\n"), Ok(()));
        assert_eq!(check_template("{% if model %}{{model}}{% endif %}"), Ok(()));
        let unclosed = check_template("# {{title}}\n\n{% if model %}x\n").expect_err("unclosed");
        assert!(unclosed.0.starts_with("line "), "{unclosed}");
        assert!(check_template("{{ title | no_such_filter }}").is_err());
        assert!(check_template("{% include \"other.md\" %}").is_err());
    }

    /// Loops over a document inside loops over it: a render that never ends
    /// without fuel (10^12 steps here) is refused at install and filled
    /// literally at render.
    #[test]
    fn a_runaway_template_runs_out_of_fuel() {
        let runaway = "{% for a in content %}{% for b in content %}{% for c in content %}.\
                       {% endfor %}{% endfor %}{% endfor %}{{content}}";
        let literal = format!(
            "{{% for a in \"{0}\" %}}{{% for b in \"{0}\" %}}.{{% endfor %}}{{% endfor %}}",
            "y".repeat(1_000)
        );
        let refused = check_template(&literal).expect_err("out of fuel");
        assert!(refused.0.contains("fuel"), "{refused}");
        let content = "x".repeat(10_000);
        assert_eq!(
            fill_template(runaway, &[("content", &content)]),
            runaway.replace("{{content}}", &content)
        );
    }

    #[test]
    fn a_step_prompt_reads_the_sessions_pushback() {
        use crate::pushback::Pushback;
        let prompt = "Argue.{% if pushback == \"minimal\" %} Only fatal flaws.{% else %} Every flaw.{% endif %} ({{ pushback }})";
        let at = |pushback| fill_step_prompt(prompt, PromptSettings { pushback });
        assert_eq!(at(Pushback::Minimal), "Argue. Only fatal flaws. (minimal)");
        assert_eq!(at(Pushback::Full), "Argue. Every flaw. (full)");
        let plain = "Reply with {\"content\": ...} as JSON.";
        assert_eq!(fill_step_prompt(plain, PromptSettings::default()), plain);
    }
}
