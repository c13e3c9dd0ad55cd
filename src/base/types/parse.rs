//! The type-expression parser: a small recursive descent over the type
//! string, with errors that say what was expected and where.

use super::{AttrType, BadType, Pattern};

impl AttrType {
    /// Parses a type string from metadata. Keywords are case-insensitive and
    /// spaces around brackets and commas are ignored.
    pub fn parse(text: &str) -> Result<AttrType, BadType> {
        parse(text)
    }
}

/// Parses a whole type string.
pub fn parse(text: &str) -> Result<AttrType, BadType> {
    let bad = |reason| BadType {
        text: text.to_owned(),
        reason,
    };
    let mut parser = Parser { text, pos: 0 };
    let parsed = parser.ty().map_err(bad)?;
    parser.skip_space();
    if parser.pos < text.len() {
        return Err(bad(format!(
            "unexpected '{}' after the type",
            &text[parser.pos..]
        )));
    }
    Ok(parsed)
}

/// Nesting deeper than this is refused, so a hostile type string cannot
/// exhaust the stack.
const MAX_DEPTH: usize = 8;

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.rest().chars().next()
    }

    fn expect(&mut self, wanted: char) -> Result<(), String> {
        match self.peek() {
            Some(c) if c == wanted => {
                self.pos += c.len_utf8();
                Ok(())
            }
            Some(c) => Err(format!("expected '{wanted}' but found '{c}'")),
            None => Err(format!("expected '{wanted}' but the type ends")),
        }
    }

    /// Reads characters while `keep` holds.
    fn take_while(&mut self, keep: impl Fn(char) -> bool) -> &str {
        let start = self.pos;
        let len: usize = self
            .rest()
            .chars()
            .take_while(|&c| keep(c))
            .map(char::len_utf8)
            .sum();
        self.pos += len;
        &self.text[start..self.pos]
    }

    fn ty(&mut self) -> Result<AttrType, String> {
        self.ty_at(0)
    }

    fn ty_at(&mut self, depth: usize) -> Result<AttrType, String> {
        if depth > MAX_DEPTH {
            return Err(format!("types nest deeper than {MAX_DEPTH} levels"));
        }
        self.skip_space();
        let name = self
            .take_while(|c| c.is_ascii_alphabetic())
            .to_ascii_lowercase();
        let has_args = self.peek() == Some('[');
        let no_args = |parsed: AttrType| {
            if has_args {
                Err(format!("'{name}' takes no '[...]'"))
            } else {
                Ok(parsed)
            }
        };
        let needs_args = |form: &str| {
            if has_args {
                Ok(())
            } else {
                Err(format!("'{name}' needs its parameters: {form}"))
            }
        };
        match name.as_str() {
            "string" => no_args(AttrType::String),
            "boolean" => no_args(AttrType::Boolean),
            "float" => no_args(AttrType::Float),
            "hash" => no_args(AttrType::Hash),
            "data" => no_args(AttrType::Data),
            "integer" if !has_args => Ok(AttrType::Integer(None)),
            "integer" => self.integer_range(),
            "pattern" => {
                needs_args("pattern[/regex/]")?;
                self.pattern()
            }
            "enum" => {
                needs_args("enum[a, b, ...]")?;
                self.members()
            }
            "array" | "optional" => {
                needs_args(&format!("{name}[T]"))?;
                self.wrapped(&name, depth)
            }
            "variant" => {
                needs_args("variant[T1, T2, ...]")?;
                self.variant(depth)
            }
            "" => match self.peek() {
                Some(c) => Err(format!("expected a type name but found '{c}'")),
                None => Err("expected a type name".to_owned()),
            },
            other => Err(format!(
                "unknown type '{other}' (known: string, boolean, integer, float, pattern, enum, array, hash, data, optional, variant)"
            )),
        }
    }

    /// `[min, max]` after `integer`: a range that holds a number.
    fn integer_range(&mut self) -> Result<AttrType, String> {
        self.expect('[')?;
        let min = self.integer()?;
        self.expect(',')?;
        let max = self.integer()?;
        self.expect(']')?;
        if min > max {
            return Err(format!("the range {min} to {max} is empty"));
        }
        Ok(AttrType::Integer(Some((min, max))))
    }

    /// `[/regex/]` after `pattern`.
    fn pattern(&mut self) -> Result<AttrType, String> {
        self.expect('[')?;
        let pattern = self.regex()?;
        self.expect(']')?;
        Ok(AttrType::Pattern(pattern))
    }

    /// `[a, b, ...]` after `enum`.
    fn members(&mut self) -> Result<AttrType, String> {
        self.expect('[')?;
        let mut members = vec![self.enum_member()?];
        while self.peek() == Some(',') {
            self.expect(',')?;
            members.push(self.enum_member()?);
        }
        self.expect(']')?;
        Ok(AttrType::Enum(members))
    }

    /// `[T]` after `array` or `optional` (`name`), one level deeper.
    fn wrapped(&mut self, name: &str, depth: usize) -> Result<AttrType, String> {
        self.expect('[')?;
        if self.peek() == Some(']') {
            return Err(format!("'{name}[]' needs a type inside the brackets"));
        }
        let inner = Box::new(self.ty_at(depth + 1)?);
        self.expect(']')?;
        Ok(if name == "array" {
            AttrType::Array(inner)
        } else {
            AttrType::Optional(inner)
        })
    }

    /// `[T1, T2, ...]` after `variant`, one level deeper.
    fn variant(&mut self, depth: usize) -> Result<AttrType, String> {
        self.expect('[')?;
        let mut types = vec![self.ty_at(depth + 1)?];
        while self.peek() == Some(',') {
            self.expect(',')?;
            types.push(self.ty_at(depth + 1)?);
        }
        self.expect(']')?;
        Ok(AttrType::Variant(types))
    }

    fn integer(&mut self) -> Result<i64, String> {
        self.skip_space();
        let word = self.take_while(|c| c == '-' || c == '+' || c.is_ascii_digit());
        super::convert::decimal_integer(word)
            .map_err(|reason| format!("integer bound '{word}': {reason}"))
    }

    fn enum_member(&mut self) -> Result<String, String> {
        self.skip_space();
        let member = self.take_while(|c| !(c.is_whitespace() || ",[]".contains(c)));
        if member.is_empty() {
            return Err(match self.rest().chars().next() {
                Some(c) => format!("expected an enum member but found '{c}'"),
                None => "expected an enum member but the type ends".to_owned(),
            });
        }
        Ok(member.to_owned())
    }

    /// `/regex/`, where a `/` inside is written `\/`.
    fn regex(&mut self) -> Result<Pattern, String> {
        self.expect('/')?;
        let start = self.pos;
        let mut escaped = false;
        for (offset, c) in self.rest().char_indices() {
            match c {
                '/' if !escaped => {
                    let source = self.text[start..start + offset].replace("\\/", "/");
                    self.pos = start + offset + 1;
                    return Pattern::new(&source).map_err(|e| {
                        let detail = e.to_string();
                        let last = detail.lines().last().unwrap_or_default().trim();
                        format!("invalid regular expression /{source}/: {last}")
                    });
                }
                '\\' => escaped = !escaped,
                _ => escaped = false,
            }
        }
        Err("the regular expression has no closing '/'".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spacing_and_case_do_not_matter() {
        for (a, b) in [
            ("Integer[ 1 ,5 ]", "integer[1, 5]"),
            ("ARRAY[ string ]", "array[string]"),
            (
                "Optional [ Variant[integer , enum[ auto,off ]] ]",
                "optional[variant[integer, enum[auto, off]]]",
            ),
            (" hash ", "hash"),
        ] {
            assert_eq!(parse(a), parse(b), "{a}");
            assert_eq!(parse(a).unwrap().to_string(), b);
        }
    }

    #[test]
    fn patterns_may_hold_brackets_commas_and_escaped_slashes() {
        let parsed = parse("variant[pattern[/^[a-z,]+\\/x$/], integer]").unwrap();
        assert_eq!(
            parsed.to_string(),
            "variant[pattern[/^[a-z,]+\\/x$/], integer]"
        );
        assert_eq!(parse(&parsed.to_string()), Ok(parsed));
    }

    #[test]
    fn malformed_types_say_what_is_wrong() {
        for (text, needle) in [
            ("enum", "'enum' needs its parameters"),
            ("enum[]", "expected an enum member but found ']'"),
            ("enum[a,", "expected an enum member but the type ends"),
            ("array[]", "'array[]' needs a type inside"),
            ("array", "'array' needs its parameters"),
            ("integer[5, 1]", "the range 5 to 1 is empty"),
            ("integer[0x10, 20]", "expected ',' but found 'x'"),
            ("integer[-, 20]", "integer bound '-'"),
            ("integer[1]", "expected ',' but found ']'"),
            ("pattern[/(/]", "invalid regular expression /(/"),
            ("pattern[/abc]", "no closing '/'"),
            ("strin", "unknown type 'strin'"),
            ("string[x]", "'string' takes no '[...]'"),
            ("", "expected a type name"),
            ("string]", "unexpected ']' after the type"),
            ("variant[integer,]", "expected a type name but found ']'"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.to_string().contains(needle), "{text:?}: {err}");
            assert!(
                err.to_string().starts_with(&format!("type '{text}'")),
                "{err}"
            );
        }
    }

    #[test]
    fn deep_nesting_is_refused() {
        let text = format!("{}string{}", "array[".repeat(12), "]".repeat(12));
        assert!(parse(&text)
            .unwrap_err()
            .to_string()
            .contains("nest deeper"));
    }
}
