//! Reading WordprocessingML with quick-xml: names without their prefixes,
//! attribute values, and the refusal of a part that is not XML.

use crate::ConvertError;
use quick_xml::events::{BytesRef, BytesStart};

/// An element's name without its namespace prefix (`w:p` is `p`).
pub(crate) fn local(element: &BytesStart<'_>) -> Vec<u8> {
    element.local_name().as_ref().as_bytes().to_vec()
}

/// The value of the attribute named `name` (without prefix), if any. Values
/// read here are ids, numbers and formats, which carry no entities.
pub(crate) fn attribute(element: &BytesStart<'_>, name: &[u8]) -> Option<String> {
    element
        .attributes()
        .flatten()
        .find(|attribute| attribute.key.local_name().as_ref().as_bytes() == name)
        .map(|attribute| attribute.value.to_string())
}

/// The text an entity or character reference in text stands for.
pub(crate) fn reference(reference: &BytesRef<'_>) -> String {
    if let Ok(Some(character)) = reference.resolve_char_ref() {
        return character.to_string();
    }
    let name = reference.xml10_content();
    quick_xml::escape::resolve_predefined_entity(&name)
        .unwrap_or_default()
        .to_string()
}

pub(crate) fn malformed(part: &str, error: impl std::fmt::Display) -> ConvertError {
    ConvertError::Corrupt(format!("{part} is not well-formed XML: {error}"))
}
