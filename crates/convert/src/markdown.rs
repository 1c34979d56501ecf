//! The markdown both converters write.

/// The anchor that starts page `page` (1-based) of a converted PDF: an HTML
/// comment, so rendered markdown hides it while a citation's quote can be
/// traced back to the page it sits on.
pub fn page_anchor(page: u32) -> String {
    format!("<!-- page {page} -->")
}

/// A heading at `level` (1 to 6).
pub(crate) fn heading(level: usize, text: &str) -> String {
    format!("{} {}", "#".repeat(level.clamp(1, 6)), one_line(text))
}

/// `rows` as a markdown table, the first row its header; short rows are
/// padded so every row has as many cells as the widest.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let mut out = String::new();
    for (index, row) in rows.iter().enumerate() {
        out.push('|');
        for column in 0..width {
            let cell = row.get(column).map(String::as_str).unwrap_or("");
            out.push(' ');
            out.push_str(&cell_text(cell));
            out.push_str(" |");
        }
        out.push('\n');
        if index == 0 {
            out.push('|');
            out.push_str(&" --- |".repeat(width));
            out.push('\n');
        }
    }
    out
}

/// A cell's text on one line, its pipes escaped so they do not split it.
fn cell_text(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}

/// Whitespace runs (line breaks included) collapsed to single spaces.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_short_rows_and_escape_pipes() {
        let rows = vec![
            vec!["Item".to_string(), "Amount".to_string()],
            vec!["Fees | travel".to_string()],
        ];
        assert_eq!(
            table(&rows),
            "| Item | Amount |\n| --- | --- |\n| Fees \\| travel |  |\n"
        );
    }

    #[test]
    fn headings_are_one_line() {
        assert_eq!(heading(2, "7.1\n Payment"), "## 7.1 Payment");
        assert_eq!(heading(9, "Deep"), "###### Deep");
    }
}
