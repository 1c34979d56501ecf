//! `--fields`, `--jq` and `--no-headers` (issue 61): what of an answer's
//! JSON document is printed. `--fields` keeps some keys of each row (a table
//! as text, the same keys in JSON or YAML); `--jq` runs a jq filter (the
//! `jaq` implementation) on the document and prints each result, strings
//! raw as `jq -r` does; `--no-headers` leaves out a table's header row.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::Val;
use serde_json::{Map, Value};
use std::sync::OnceLock;

/// How answers are cut down, set once from the command line.
#[derive(Clone, Debug, Default)]
pub struct Shape {
    pub fields: Vec<String>,
    pub jq: Option<String>,
    pub no_headers: bool,
}

static SHAPE: OnceLock<Shape> = OnceLock::new();

/// Every answer of this run is shaped alike, so the flags live here rather
/// than travel through each command (`Out` stays a plain `Copy` value).
pub fn set(shape: Shape) {
    let _ignored_when_set_twice = SHAPE.set(shape);
}

pub fn get() -> &'static Shape {
    static PLAIN: Shape = Shape {
        fields: Vec::new(),
        jq: None,
        no_headers: false,
    };
    SHAPE.get().unwrap_or(&PLAIN)
}

impl Shape {
    /// Nothing to cut: every format prints the answer as it always did.
    pub fn is_plain(&self) -> bool {
        self.fields.is_empty() && self.jq.is_none()
    }
}

/// `--fields a,b`: the names, trimmed, empty ones dropped.
pub fn fields_arg(text: &str) -> Result<Vec<String>, String> {
    let fields: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(String::from)
        .collect();
    if fields.is_empty() {
        return Err("name at least one field, e.g. --fields id,name".into());
    }
    Ok(fields)
}

/// `--jq EXPR`, parsed and compiled before any call is made.
pub fn jq_arg(text: &str) -> Result<String, String> {
    compile_and_run(text, None).map(|_| text.to_string())
}

/// The rows of a document: a list's items (also inside a `--limit` object,
/// beside its `next_page_token`), or the document itself.
fn rows_of(value: &Value) -> Vec<&Value> {
    match value {
        Value::Array(items) => items.iter().collect(),
        Value::Object(map) => match map.values().find(|v| v.is_array()) {
            Some(Value::Array(items)) if map.len() == 2 && map.contains_key("next_page_token") => {
                items.iter().collect()
            }
            _ => vec![value],
        },
        _ => vec![value],
    }
}

/// A field of a row: a key, or a dotted path into nested objects (`session.status`).
fn field<'v>(row: &'v Value, name: &str) -> Option<&'v Value> {
    name.split('.').try_fold(row, |v, key| v.get(key))
}

/// `value` with each row cut to `fields`, in their order; a field no row has
/// is refused with the ones there are, as a typo would be.
pub fn select(value: &Value, fields: &[String]) -> Result<Value, String> {
    let rows = rows_of(value);
    if let Some(first) = rows.first()
        && let Some(missing) = fields.iter().find(|f| field(first, f).is_none())
    {
        let known: Vec<&str> = first
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(format!(
            "no field {missing:?}; the fields are: {}",
            known.join(", ")
        ));
    }
    let cut = |row: &Value| -> Value {
        let mut kept = Map::new();
        for name in fields {
            kept.insert(
                name.clone(),
                field(row, name).cloned().unwrap_or(Value::Null),
            );
        }
        Value::Object(kept)
    };
    Ok(match value {
        Value::Array(items) => items.iter().map(cut).collect(),
        Value::Object(map) if rows.len() != 1 || !std::ptr::eq(rows[0], value) => {
            let mut map = map.clone();
            for v in map.values_mut() {
                if let Value::Array(items) = v {
                    *v = items.iter().map(cut).collect();
                }
            }
            Value::Object(map)
        }
        other => cut(other),
    })
}

/// A cell as a person reads it: strings without quotes, nothing for null.
fn cell(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The rows of `value` (already cut to `fields`) as aligned columns, with a
/// header row of the field names in capitals unless `headers` is false.
pub fn table(value: &Value, fields: &[String], headers: bool) -> String {
    let mut lines: Vec<Vec<String>> = Vec::new();
    if headers {
        lines.push(fields.iter().map(|f| f.to_uppercase()).collect());
    }
    for row in rows_of(value) {
        lines.push(
            fields
                .iter()
                .map(|f| field(row, f).map(cell).unwrap_or_default())
                .collect(),
        );
    }
    let widths: Vec<usize> = (0..fields.len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for line in &lines {
        let mut out = String::new();
        for (i, value) in line.iter().enumerate() {
            if i + 1 == line.len() {
                out.push_str(value);
            } else {
                let pad = widths[i] - value.chars().count();
                out.push_str(&format!("{value}{}  ", " ".repeat(pad)));
            }
        }
        text.push_str(out.trim_end());
        text.push('\n');
    }
    text
}

/// The results of `--jq` on `value`, one line each: a string as itself, any
/// other value as compact JSON.
pub fn jq(filter: &str, value: &Value) -> Result<String, String> {
    let results = compile_and_run(filter, Some(value))?;
    Ok(results
        .iter()
        .map(|v| match v {
            Value::String(s) => format!("{s}\n"),
            other => format!("{other}\n"),
        })
        .collect())
}

/// Compiles `filter`; with an input, runs it and returns its outputs.
fn compile_and_run(filter: &str, input: Option<&Value>) -> Result<Vec<Value>, String> {
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let program = File {
        code: filter,
        path: (),
    };
    let modules = loader
        .load(&arena, program)
        .map_err(|errors| format!("--jq {filter:?} does not parse: {errors:?}"))?;
    let compiled = Compiler::default()
        .with_funs(funs)
        .compile(modules)
        .map_err(|errors| format!("--jq {filter:?} does not compile: {errors:?}"))?;
    let Some(input) = input else {
        return Ok(Vec::new());
    };
    let input = jaq_json::read::parse_single(input.to_string().as_bytes())
        .map_err(|e| format!("the answer is not JSON jq reads: {e}"))?;
    let ctx = Ctx::<data::JustLut<Val>>::new(&compiled.lut, Vars::new([]));
    compiled
        .id
        .run((ctx, input))
        .map(unwrap_valr)
        .map(|result| {
            let value = result.map_err(|e| format!("--jq {filter:?}: {e}"))?;
            serde_json::from_str(&value.to_string())
                .map_err(|e| format!("--jq {filter:?} gave {value}, not JSON: {e}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fields_cut_each_row_and_refuse_an_unknown_one() {
        let rows = json!([{"id": "a", "name": "x", "n": 1}, {"id": "b", "name": "y", "n": 2}]);
        assert_eq!(
            select(&rows, &names(&["name", "id"])).expect("cut"),
            json!([{"name": "x", "id": "a"}, {"name": "y", "id": "b"}])
        );
        let limited = json!({"projects": rows, "next_page_token": "t"});
        assert_eq!(
            select(&limited, &names(&["id"])).expect("cut"),
            json!({"projects": [{"id": "a"}, {"id": "b"}], "next_page_token": "t"})
        );
        let one = json!({"id": "s", "progress": {"stage": "thesis"}});
        assert_eq!(
            select(&one, &names(&["progress.stage"])).expect("cut"),
            json!({"progress.stage": "thesis"})
        );
        let refused = select(&rows, &names(&["nme"])).expect_err("typo");
        assert!(refused.contains("id, n, name"), "{refused}");
    }

    #[test]
    fn a_table_aligns_its_columns_and_drops_its_header_on_request() {
        let rows = json!([{"id": "a", "name": "long name"}, {"id": "bbb", "name": null}]);
        let fields = names(&["id", "name"]);
        assert_eq!(
            table(&rows, &fields, true),
            "ID   NAME\na    long name\nbbb\n"
        );
        assert_eq!(table(&rows, &fields, false), "a    long name\nbbb\n");
    }

    #[test]
    fn jq_prints_strings_raw_and_the_rest_as_json() {
        let rows = json!([{"id": "a", "n": 1}, {"id": "b", "n": 2}]);
        assert_eq!(jq(".[].id", &rows).expect("ran"), "a\nb\n");
        assert_eq!(jq("map(.n) | add", &rows).expect("ran"), "3\n");
        assert_eq!(
            jq("[.[] | select(.n > 1)]", &rows).expect("ran"),
            "[{\"id\":\"b\",\"n\":2}]\n"
        );
        assert!(jq_arg(".[").is_err(), "a syntax error is refused up front");
        assert!(jq(".id", &rows).is_err(), "indexing an array by name fails");
    }
}
