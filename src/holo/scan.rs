//! The scan report: `KEY: VALUE` lines, `ENTITY` starting an entity,
//! `SOURCE` naming resource files, `ACTION: verb (reason)`, every other key
//! an info line. Parse errors carry Holo's exact wording and line numbers
//! (counted after the whole report is trimmed, blank lines included).

/// The verb shown when a plugin names none.
pub const DEFAULT_VERB: &str = "Working on";

/// One entity a plugin can provision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entity {
    pub id: String,
    /// Index of the plugin in configuration order.
    pub plugin: usize,
    pub verb: String,
    pub reason: String,
    /// Resource files, translated for display.
    pub sources: Vec<String>,
    /// Informational `key: value` lines, values translated, in order.
    pub info: Vec<(String, String)>,
}

/// Parses one plugin's scan output; `translate` turns reported paths into
/// the paths shown. Every error is returned, in line order.
pub fn parse(
    plugin_id: &str,
    plugin: usize,
    stdout: &str,
    translate: &dyn Fn(&str) -> String,
) -> Result<Vec<Entity>, Vec<String>> {
    let mut entities: Vec<Entity> = Vec::new();
    let mut errors = Vec::new();
    for (index, line) in stdout.trim().split('\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let number = index + 1;
        let Some((key, value)) = split_line(line) else {
            errors.push(format!(
                "error in scan report of {plugin_id}, line {number}: parse error (line was \"{line}\")"
            ));
            continue;
        };
        if key == "ENTITY" {
            entities.push(Entity {
                id: value.to_owned(),
                plugin,
                verb: DEFAULT_VERB.to_owned(),
                reason: String::new(),
                sources: Vec::new(),
                info: Vec::new(),
            });
            continue;
        }
        let Some(entity) = entities.last_mut() else {
            errors.push(format!(
                "error in scan report of {plugin_id}, line {number}: expected entity ID, found attribute \"{line}\""
            ));
            continue;
        };
        match key {
            "SOURCE" => entity.sources.push(translate(value)),
            "ACTION" => {
                let (verb, reason) = split_action(value);
                entity.verb = verb.to_owned();
                entity.reason = reason.to_owned();
            }
            _ => entity.info.push((key.to_owned(), translate(value))),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    entities.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(entities)
}

/// `^\s*([^:]+): (.+)\s*$`: leading whitespace dropped, the key up to the
/// first colon, then ": " and a non-empty value kept as it is.
fn split_line(line: &str) -> Option<(&str, &str)> {
    // RE2's \s: ASCII whitespace only.
    let line = line.trim_start_matches([' ', '\t', '\n', '\x0c', '\r']);
    let (key, rest) = line.split_once(':')?;
    let value = rest.strip_prefix(' ')?;
    if key.is_empty() || value.is_empty() {
        return None;
    }
    Some((key, value))
}

/// `^([^()]+) \((.+)\)$`: a verb without parentheses, a space, and the
/// reason in parentheses; otherwise the whole value is the verb.
fn split_action(value: &str) -> (&str, &str) {
    if let Some(inner) = value.strip_suffix(')') {
        if let Some(open) = inner.find('(') {
            let verb = inner[..open].strip_suffix(' ');
            let reason = &inner[open + 1..];
            if let Some(verb) = verb.filter(|v| !v.is_empty() && !v.contains(')')) {
                if !reason.is_empty() {
                    return (verb, reason);
                }
            }
        }
    }
    (value, "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same(path: &str) -> String {
        path.to_owned()
    }

    #[test]
    fn entities_with_sources_actions_and_info_are_sorted() {
        let out = "\n\nENTITY: b:2\nSOURCE: /s/b\nfound in: /s/b\n\nENTITY: a:1\nACTION: Scrubbing (target was deleted)\ndelete: x  \n\n";
        let entities = parse("p", 0, out, &same).unwrap();
        assert_eq!(entities[0].id, "a:1");
        assert_eq!(entities[0].verb, "Scrubbing");
        assert_eq!(entities[0].reason, "target was deleted");
        assert_eq!(entities[0].info, vec![("delete".into(), "x".into())]);
        assert_eq!(entities[1].sources, vec!["/s/b".to_string()]);
        assert_eq!(entities[1].info, vec![("found in".into(), "/s/b".into())]);
        assert_eq!(entities[1].verb, DEFAULT_VERB);
    }

    #[test]
    fn values_keep_inner_and_trailing_space_before_the_report_end() {
        let entities = parse("p", 0, "ENTITY: a\nkey:  two spaces \nlast: x", &same).unwrap();
        assert_eq!(entities[0].info[0].1, " two spaces ");
    }

    #[test]
    fn every_error_is_reported_with_its_line_number() {
        let out = "\nSOURCE: early\nENTITY: a\n\nno colon here\n  \nkey:novalue\nENTITY:x\n";
        let errors = parse("files", 0, out, &same).unwrap_err();
        assert_eq!(
            errors,
            vec![
                "error in scan report of files, line 1: expected entity ID, found attribute \"SOURCE: early\"",
                "error in scan report of files, line 4: parse error (line was \"no colon here\")",
                "error in scan report of files, line 5: parse error (line was \"  \")",
                "error in scan report of files, line 6: parse error (line was \"key:novalue\")",
                "error in scan report of files, line 7: parse error (line was \"ENTITY:x\")",
            ]
        );
    }

    #[test]
    fn actions_without_a_reason_are_all_verb() {
        assert_eq!(split_action("Deleting"), ("Deleting", ""));
        assert_eq!(split_action("Doing (it) (now)"), ("Doing", "it) (now"));
        assert_eq!(split_action("(why)"), ("(why)", ""));
        assert_eq!(split_action("Doing it (now)"), ("Doing it", "now"));
    }
}
