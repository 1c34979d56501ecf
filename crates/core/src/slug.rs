//! Slugs used in storage keys. Keys are built from ids and validated slugs,
//! never from raw user strings.

/// Lower-case ASCII letters, digits and single dashes; at most `max_len` chars.
/// Never empty: falls back to `fallback`.
pub fn slugify(input: &str, max_len: usize, fallback: &str) -> String {
    let mut out = String::with_capacity(input.len().min(max_len));
    let mut last_dash = true;
    for c in input.chars() {
        if out.len() >= max_len {
            break;
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
            last_dash = false;
        } else if !last_dash {
            out.push('-');
            last_dash = true;
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        fallback.to_string()
    } else {
        out
    }
}

/// True when `value` is already a safe path segment (what `slugify` would keep,
/// plus underscores and dots used by model identifiers such as `gpt-4.1_mini`).
pub fn is_safe_segment(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 128
        && value != "."
        && value != ".."
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugify_strips_everything_unsafe() {
        assert_eq!(slugify("  Hello, World!/../x ", 40, "p"), "hello-world-x");
        assert_eq!(slugify("///", 40, "project"), "project");
        assert_eq!(slugify("abcdefgh", 4, "p"), "abcd");
        assert!(is_safe_segment("gpt-4.1_mini"));
        assert!(!is_safe_segment(".."));
        assert!(!is_safe_segment("a/b"));
    }
}
