//! How every answer is printed: each implements [`Render`] once, as text
//! and as JSON, and [`Out`] picks by `--output`. Data goes to stdout; notes,
//! progress bars and errors go to stderr.

use crate::exit::Kind;
use crate::shape::{self, Shape};
use serde_json::Value;
use std::fmt::Display;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// The JSON document as YAML, each answer its own `---` document, as
    /// kubectl prints it.
    Yaml,
}

/// An answer the CLI prints.
pub trait Render {
    /// What a person reads, each line ending in a newline.
    fn text(&self) -> String;
    /// One JSON document: the proto3 JSON mapping for API messages.
    fn json(&self) -> Value;
}

/// Where answers go, and in which format.
#[derive(Clone, Copy, Debug)]
pub struct Out {
    pub format: Format,
}

impl Out {
    pub fn new(format: Format) -> Self {
        Self { format }
    }

    /// The answer as `--output` asks, newline-terminated.
    pub fn render(&self, answer: &(impl Render + ?Sized)) -> String {
        match self.format {
            Format::Text => answer.text(),
            Format::Json => format!("{}\n", answer.json()),
            Format::Yaml => yaml(&answer.json()),
        }
    }

    /// The answer cut as `--fields` and `--jq` ask: a field the answer does
    /// not have, or a jq filter that fails on it, is an error.
    pub fn shaped(&self, answer: &(impl Render + ?Sized), shape: &Shape) -> Result<String, String> {
        if shape.is_plain() {
            return Ok(self.render(answer));
        }
        let mut value = answer.json();
        if !shape.fields.is_empty() {
            value = shape::select(&value, &shape.fields)?;
        }
        if let Some(filter) = &shape.jq {
            return shape::jq(filter, &value);
        }
        Ok(match self.format {
            Format::Text => shape::table(&value, &shape.fields, !shape.no_headers),
            Format::Json => format!("{value}\n"),
            Format::Yaml => yaml(&value),
        })
    }

    /// Prints the answer. A shaping error ends the run as a usage error: the
    /// answer is in hand, but not what the command line asked to see of it.
    pub fn show(&self, answer: &(impl Render + ?Sized)) {
        match self.shaped(answer, shape::get()) {
            Ok(text) => print!("{text}"),
            Err(message) => {
                eprintln!("error: {message}");
                std::process::exit(i32::from(Kind::Usage.code()));
            }
        }
    }

    /// A line of a long command's running account (`run`'s ids as they are
    /// made): a person sees it at once, a script gets one document at the end.
    pub fn step(&self, line: impl Display) {
        if self.is_text() {
            println!("{line}");
        }
    }

    pub fn is_text(&self) -> bool {
        self.format == Format::Text
    }
}

/// One YAML document. A JSON value always has a YAML form; were the
/// emitter ever to refuse one, the JSON (itself valid YAML) stands in.
fn yaml(value: &Value) -> String {
    match serde_norway::to_string(value) {
        Ok(body) => format!("---\n{body}"),
        Err(_) => format!("---\n{value}\n"),
    }
}

/// Progress notes go to stderr so stdout stays parseable.
pub fn note(message: &str) {
    eprintln!("note: {message}");
}

/// Lines of `items`, or `empty` when there are none.
pub fn lines<T>(items: &[T], empty: &str, line: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        return format!("{empty}\n");
    }
    items.iter().map(|item| line(item) + "\n").collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct Answer;

    impl Render for Answer {
        fn text(&self) -> String {
            "done\n".into()
        }
        fn json(&self) -> Value {
            json!({"done": true})
        }
    }

    #[test]
    fn one_answer_renders_in_the_format_asked() {
        assert_eq!(Out::new(Format::Text).render(&Answer), "done\n");
        assert_eq!(Out::new(Format::Json).render(&Answer), "{\"done\":true}\n");
        assert_eq!(Out::new(Format::Yaml).render(&Answer), "---\ndone: true\n");
    }

    #[test]
    fn an_empty_list_says_so() {
        assert_eq!(
            lines(&[] as &[u8], "none yet", |_| String::new()),
            "none yet\n"
        );
        assert_eq!(lines(&[1, 2], "none", |n| format!("#{n}")), "#1\n#2\n");
    }
}
