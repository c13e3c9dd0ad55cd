//! What the readers of user-written YAML (manifests, inventories) share on
//! top of marked-yaml: a check of the text before parsing (one document,
//! bounded nesting), the lines of nodes, null and empty mappings, and load
//! errors as `(line, message)`.

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode, Node};

use crate::text::escape;

/// The line a scalar starts on (1-based; 0 when unknown).
pub fn line_of(scalar: &MarkedScalarNode) -> usize {
    scalar.span().start().map_or(0, |mark| mark.line())
}

/// Whether a scalar is YAML's null: unquoted `~`, `null` or nothing. Needs
/// a loader run with `prevent_coercion(true)`, which tells quoted scalars.
pub fn is_null(scalar: &MarkedScalarNode) -> bool {
    scalar.may_coerce() && matches!(scalar.as_str(), "" | "~" | "null" | "Null" | "NULL")
}

/// A mapping, or an empty one for a null (`web1:` with nothing after it);
/// `None` for anything else.
pub fn mapping_or_empty(node: &Node) -> Option<MarkedMappingNode> {
    match node {
        Node::Mapping(map) => Some(map.clone()),
        Node::Scalar(scalar) if is_null(scalar) => {
            Some(MarkedMappingNode::new_empty(*scalar.span()))
        }
        _ => None,
    }
}

/// A load error as `(line, message)`; `top_level` says what the top level
/// must be.
pub fn load_problem(error: marked_yaml::LoadError, top_level: &str) -> (usize, String) {
    use marked_yaml::LoadError;
    match error {
        LoadError::TopLevelMustBeMapping(mark) | LoadError::TopLevelMustBeSequence(mark) => {
            (mark.line(), top_level.to_owned())
        }
        LoadError::UnexpectedAnchor(mark) => (
            mark.line(),
            "anchors and aliases are not allowed: write each value out".to_owned(),
        ),
        LoadError::MappingKeyMustBeScalar(mark) => {
            (mark.line(), "a key must be a plain text".to_owned())
        }
        LoadError::UnexpectedTag(mark) => {
            (mark.line(), "YAML tags (!name) are not allowed".to_owned())
        }
        LoadError::ScanError(mark, e) => {
            let mut message = format!("invalid YAML: {}", e.info());
            // `subscribe: [File[/a], File[/b]]`, as Puppet writes it; or
            // a [ never closed.
            if e.info().contains("flow sequence") {
                message.push_str(
                    " (is a [ left without its ]? a reference TYPE[NAME] inside [ ] must be \
                     quoted: ['file[/a]', 'file[/b]'])",
                );
            }
            (mark.line(), message)
        }
        LoadError::DuplicateKey(keys) => {
            let first = keys.prev_key.span().start().map_or(0, |m| m.line());
            let again = keys.key.span().start().map_or(0, |m| m.line());
            (
                again,
                format!(
                    "'{}' is given twice (first on line {first})",
                    escape(keys.key.as_str())
                ),
            )
        }
    }
}

/// Refuses, before the YAML reader sees it, a second document (which it
/// would ignore) or nesting deeper than `max_depth` (which could exhaust
/// the stack). Block nesting is counted from the indentation of lines and
/// their `- ` entries, flow nesting from brackets and braces where a value
/// starts or inside a flow collection; quoted text is skipped. Overcounting
/// can only refuse more. `what` names the document in messages ("a
/// manifest").
pub fn shape_problem(text: &str, what: &str, max_depth: usize) -> Option<(usize, String)> {
    let mut content = false;
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        let marker = |m: &str| {
            line == m || line.starts_with(&format!("{m} ")) || line.starts_with(&format!("{m}\t"))
        };
        if marker("---") || marker("...") {
            if content {
                return Some((
                    number,
                    format!("{what} is one YAML document; give each document its own file"),
                ));
            }
            continue;
        }
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        content = true;
        let mut indent = line.len() - trimmed.len();
        if flow == 0 {
            while indents.last().is_some_and(|&top| top > indent) {
                indents.pop();
            }
            if indents.last() != Some(&indent) {
                indents.push(indent);
            }
            // Each `- ` opens one more level, at its own column.
            let mut rest = trimmed;
            while let Some(after) = rest.strip_prefix("- ") {
                let skipped = after.len() - after.trim_start().len();
                indent += 2 + skipped;
                rest = after.trim_start();
                indents.push(indent);
                if indents.len() > max_depth {
                    break;
                }
            }
        }
        flow = flow_depth(trimmed, flow, max_depth);
        if indents.len() + flow > max_depth {
            return Some((
                number,
                format!("{what} nests deeper than {max_depth} levels here"),
            ));
        }
    }
    None
}

/// The flow nesting after `line`, starting at `depth`. Outside a flow
/// collection a bracket opens one only where a value starts (after `:`,
/// `-` or at the line's start), so `note: a [b` is text; inside one every
/// bracket counts, as YAML allows none in plain text there. Quoted text is
/// skipped (a quote opens it only where a value starts, so the apostrophe
/// of `don't` does not), and so is a comment.
fn flow_depth(line: &str, mut depth: usize, max_depth: usize) -> usize {
    let mut quote: Option<char> = None;
    // The last character outside quotes that was not a blank.
    let mut last = ':';
    let mut blank_before = true;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        let after_blank = std::mem::replace(&mut blank_before, matches!(c, ' ' | '\t'));
        if let Some(q) = quote {
            if q == '"' && c == '\\' {
                chars.next();
            } else if c == q {
                // '' inside single quotes is an escaped quote.
                if q == '\'' && chars.peek() == Some(&'\'') {
                    chars.next();
                } else {
                    quote = None;
                    last = c;
                }
            }
            continue;
        }
        let starts_value = matches!(last, ':' | '-' | '[' | '{' | ',');
        match c {
            ' ' | '\t' => continue,
            '\'' | '"' if starts_value => quote = Some(c),
            '[' | '{' if depth > 0 || starts_value => depth += 1,
            ']' | '}' if depth > 0 => depth -= 1,
            // A comment starts only after a blank.
            '#' if after_blank => break,
            _ => {}
        }
        last = c;
        if depth > max_depth {
            break;
        }
    }
    depth
}

/// A YAML value as JSON, typed as YAML 1.2's core schema types it: an
/// unquoted `true`/`false`, integer, float or null is one; any other
/// scalar is text.
pub fn typed_json(node: &Node) -> serde_json::Value {
    use serde_json::Value as Json;
    match node {
        Node::Scalar(scalar) => {
            let text = scalar.as_str();
            if !scalar.may_coerce() {
                return Json::String(text.to_owned());
            }
            typed_plain(text)
        }
        Node::Sequence(items) => Json::Array(items.iter().map(typed_json).collect()),
        Node::Mapping(map) => Json::Object(
            map.iter()
                .map(|(key, value)| (key.as_str().to_owned(), typed_json(value)))
                .collect(),
        ),
    }
}

/// An unquoted YAML scalar's text, typed as YAML 1.2's core schema types
/// it: null, a boolean, an integer, a float, else text.
pub fn typed_plain(text: &str) -> serde_json::Value {
    use serde_json::Value as Json;
    match text {
        "" | "~" | "null" | "Null" | "NULL" => Json::Null,
        "true" | "True" | "TRUE" => Json::Bool(true),
        "false" | "False" | "FALSE" => Json::Bool(false),
        _ => {
            if let Ok(integer) = text.parse::<i64>() {
                Json::from(integer)
            } else if let Some(number) = text
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite() && text.bytes().any(|b| b.is_ascii_digit()))
                .and_then(serde_json::Number::from_f64)
            {
                Json::Number(number)
            } else {
                Json::String(text.to_owned())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_document_and_bounded_nesting() {
        let second = shape_problem("---\na: {}\n---\nb: {}\n", "a manifest", 8).unwrap();
        assert_eq!(second.0, 3);
        assert!(second.1.contains("a manifest is one YAML document"));
        assert!(shape_problem("a: 1\n...\n", "x", 8).is_some());
        assert!(shape_problem("---\na: 1\n", "x", 8).is_none());
        let dashes = format!("t:\n  a:\n    {}1\n", "- ".repeat(25_000));
        assert_eq!(shape_problem(&dashes, "x", 32).unwrap().0, 3);
        let brackets = format!("t: {}1{}\n", "[".repeat(40), "]".repeat(40));
        assert!(shape_problem(&brackets, "x", 32).is_some());
        // Brackets in text, quoted or plain, are no nesting.
        let text = "a:\n  b:\n".to_owned() + &"    note: don't [stop, {v: '[x'} # [[\n".repeat(40);
        assert!(shape_problem(&text, "x", 8).is_none());
    }
}
