//! A YAML loader that hands over the values at one depth as each is read,
//! instead of building the whole document first: memory follows the
//! largest value handed over, not the document. The mappings above that
//! depth keep only their keys (to refuse a key given twice); everything
//! else is built and checked as marked-yaml's own loader does with
//! `error_on_duplicate_keys`, `prevent_coercion` and a top-level mapping,
//! so a document loads or fails here exactly as it would there.

use std::collections::HashMap;

use marked_yaml::types::{MarkedMappingNode, MarkedScalarNode, MarkedSequenceNode, Node, Span};
use marked_yaml::{LoadError, Marker};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker as YamlMarker, TScalarStyle};

/// Loads `text`, whose top level must be a mapping, and calls `value` for
/// each value at `depth` (1: the top level's values) with the keys that
/// lead to it, in document order; also for a value above `depth` that is
/// no mapping (a null, a scalar or a sequence where a mapping could be),
/// with the shorter path. A value is handed over once read whole, before
/// the rest of the document is read; the first error of the document
/// (which may come after values were handed over) is returned.
pub fn load_streamed(
    text: &str,
    depth: usize,
    value: &mut dyn FnMut(&[&MarkedScalarNode], Node),
) -> Result<(), LoadError> {
    let mut loader = Loader {
        depth,
        stack: Vec::new(),
        error: None,
        value,
    };
    let mut parser = Parser::new(text.chars());
    parser
        .load(&mut loader, false)
        .map_err(|e| LoadError::ScanError(marker(*e.marker()), e))?;
    match loader.error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

fn marker(mark: YamlMarker) -> Marker {
    Marker::new(0, mark.index(), mark.line(), mark.col() + 1)
}

/// A collection being read.
enum Frame {
    /// A mapping above the depth handed over: the keys it had (with where
    /// each was) and the key whose value is being read.
    Streamed {
        keys: HashMap<String, Marker>,
        key: Option<MarkedScalarNode>,
    },
    Mapping {
        node: MarkedMappingNode,
        key: Option<MarkedScalarNode>,
    },
    Sequence(MarkedSequenceNode),
}

/// What completed inside the collection on top of the stack.
enum Done {
    /// A value built whole.
    Node(Node),
    /// A streamed mapping, whose values were handed over already.
    Streamed,
}

struct Loader<'v> {
    depth: usize,
    stack: Vec<Frame>,
    error: Option<LoadError>,
    value: &'v mut dyn FnMut(&[&MarkedScalarNode], Node),
}

impl MarkedEventReceiver for Loader<'_> {
    fn on_event(&mut self, event: Event, mark: YamlMarker) {
        // The first error is the document's: what follows is not looked at.
        if self.error.is_some() {
            return;
        }
        if let Err(error) = self.event(event, marker(mark)) {
            self.error = Some(error);
        }
    }
}

impl Loader<'_> {
    fn event(&mut self, event: Event, mark: Marker) -> Result<(), LoadError> {
        match event {
            Event::MappingStart(anchor, tag) => {
                if tag.is_some() {
                    return Err(LoadError::UnexpectedTag(mark));
                }
                if anchor != 0 {
                    return Err(LoadError::UnexpectedAnchor(mark));
                }
                self.mapping_start(mark)
            }
            Event::SequenceStart(anchor, tag) => {
                if tag.is_some() {
                    return Err(LoadError::UnexpectedTag(mark));
                }
                if anchor != 0 {
                    return Err(LoadError::UnexpectedAnchor(mark));
                }
                self.sequence_start(mark)
            }
            Event::MappingEnd | Event::SequenceEnd => self.end(mark),
            Event::Scalar(text, style, anchor, tag) => {
                if anchor != 0 {
                    return Err(LoadError::UnexpectedAnchor(mark));
                }
                if tag.is_some() {
                    return Err(LoadError::UnexpectedTag(mark));
                }
                self.scalar(text, style, mark)
            }
            // An alias needs an anchor, which is refused where it is
            // defined; the parser refuses one that names none.
            Event::Alias(_) => Err(LoadError::UnexpectedAnchor(mark)),
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd
            | Event::Nothing => Ok(()),
        }
    }

    /// A mapping starts: streamed (its entries handed out one by one) at
    /// the streamed depths, else built whole.
    fn mapping_start(&mut self, mark: Marker) -> Result<(), LoadError> {
        self.check_value_expected(mark)?;
        let streamed = match self.stack.last() {
            None => self.depth > 0,
            Some(Frame::Streamed { .. }) => self.stack.len() < self.depth,
            Some(_) => false,
        };
        self.stack.push(if streamed {
            Frame::Streamed {
                keys: HashMap::new(),
                key: None,
            }
        } else {
            Frame::Mapping {
                node: MarkedMappingNode::new_empty(Span::new_start(mark)),
                key: None,
            }
        });
        Ok(())
    }

    fn sequence_start(&mut self, mark: Marker) -> Result<(), LoadError> {
        if self.stack.is_empty() {
            return Err(LoadError::TopLevelMustBeMapping(mark));
        }
        self.check_value_expected(mark)?;
        let node = MarkedSequenceNode::new_empty(Span::new_start(mark));
        self.stack.push(Frame::Sequence(node));
        Ok(())
    }

    /// A mapping or a sequence ends.
    fn end(&mut self, mark: Marker) -> Result<(), LoadError> {
        let done = match self.stack.pop() {
            Some(Frame::Streamed { .. }) => Done::Streamed,
            Some(Frame::Mapping { mut node, .. }) => {
                end_span(node.span_mut(), mark);
                Done::Node(Node::Mapping(node))
            }
            Some(Frame::Sequence(mut node)) => {
                end_span(node.span_mut(), mark);
                Done::Node(Node::Sequence(node))
            }
            None => return Ok(()),
        };
        self.complete(done)
    }

    /// A scalar: a mapping's key where one is expected, else a value.
    fn scalar(&mut self, text: String, style: TScalarStyle, mark: Marker) -> Result<(), LoadError> {
        let mut node = MarkedScalarNode::new(Span::new_start(mark), text);
        node.set_coerce(matches!(style, TScalarStyle::Plain));
        match self.stack.last_mut() {
            None => Err(LoadError::TopLevelMustBeMapping(mark)),
            Some(Frame::Streamed { key, .. } | Frame::Mapping { key, .. }) if key.is_none() => {
                *key = Some(node);
                Ok(())
            }
            Some(_) => self.complete(Done::Node(Node::Scalar(node))),
        }
    }

    /// A collection may start where a value is expected, not where a key
    /// is.
    fn check_value_expected(&self, mark: Marker) -> Result<(), LoadError> {
        match self.stack.last() {
            Some(Frame::Streamed { key: None, .. } | Frame::Mapping { key: None, .. }) => {
                Err(LoadError::MappingKeyMustBeScalar(mark))
            }
            _ => Ok(()),
        }
    }

    /// Puts what completed into the collection on top: a mapping's value
    /// (its key given twice is an error), a sequence's item, or a value
    /// handed over.
    fn complete(&mut self, done: Done) -> Result<(), LoadError> {
        let Some(top) = self.stack.last_mut() else {
            // The top-level mapping is read.
            return Ok(());
        };
        match (top, done) {
            (Frame::Sequence(items), Done::Node(node)) => items.push(node),
            (Frame::Mapping { node: map, key }, Done::Node(node)) => {
                let Some(key) = key.take() else {
                    return Ok(());
                };
                if let Some((prev_key, _)) = map.get_key_value(&key) {
                    return Err(duplicate(prev_key.clone(), key));
                }
                map.insert(key, node);
            }
            (Frame::Streamed { keys, key }, done) => {
                let Some(key) = key.take() else {
                    return Ok(());
                };
                if let Some(first) = keys.get(key.as_str()) {
                    let prev_key = MarkedScalarNode::new(Span::new_start(*first), key.as_str());
                    return Err(duplicate(prev_key, key));
                }
                let at = key
                    .span()
                    .start()
                    .copied()
                    .unwrap_or(Marker::new(0, 0, 0, 0));
                keys.insert(key.as_str().to_owned(), at);
                if let Done::Node(node) = done {
                    self.hand_over(key, node);
                }
            }
            // A streamed mapping is only ever a streamed mapping's value.
            (_, Done::Streamed) => {}
        }
        Ok(())
    }

    /// Calls the receiver with `node` and the keys leading to it: those
    /// of the streamed mappings below the top one, and `key`.
    fn hand_over(&mut self, key: MarkedScalarNode, node: Node) {
        let mut path: Vec<&MarkedScalarNode> = Vec::with_capacity(self.stack.len());
        for frame in &self.stack[..self.stack.len() - 1] {
            if let Frame::Streamed { key: Some(key), .. } = frame {
                path.push(key);
            }
        }
        path.push(&key);
        (self.value)(&path, node);
    }
}

fn end_span(span: &mut Span, end: Marker) {
    if let Some(start) = span.start().copied() {
        *span = Span::new_with_marks(start, end);
    }
}

fn duplicate(prev_key: MarkedScalarNode, key: MarkedScalarNode) -> LoadError {
    LoadError::DuplicateKey(Box::new(marked_yaml::loader::DuplicateKeyInner {
        prev_key,
        key,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What marked-yaml's loader makes of `text` with the options the
    /// manifests use.
    fn whole(text: &str) -> Result<Node, LoadError> {
        let options = marked_yaml::LoaderOptions::default()
            .error_on_duplicate_keys(true)
            .prevent_coercion(true)
            .toplevel_mapping();
        marked_yaml::parse_yaml_with_options(0, text, options)
    }

    /// The values at `depth` this loader hands over, as (keys, node).
    fn streamed(text: &str, depth: usize) -> Result<Vec<(Vec<String>, Node)>, LoadError> {
        let mut found = Vec::new();
        load_streamed(text, depth, &mut |path, node| {
            found.push((path.iter().map(|k| k.as_str().to_owned()).collect(), node));
        })?;
        Ok(found)
    }

    /// The same values, picked out of marked-yaml's whole document.
    fn picked(
        node: &Node,
        depth: usize,
        path: &mut Vec<String>,
        out: &mut Vec<(Vec<String>, Node)>,
    ) {
        match node {
            Node::Mapping(map) if path.len() < depth => {
                for (key, value) in map.iter() {
                    path.push(key.as_str().to_owned());
                    picked(value, depth, path, out);
                    path.pop();
                }
            }
            _ => out.push((path.clone(), node.clone())),
        }
    }

    /// Each scalar's line and whether it may be coerced (was unquoted),
    /// keys included, in document order.
    fn marks(node: &Node) -> Vec<(usize, bool)> {
        let mark =
            |s: &MarkedScalarNode| (s.span().start().map_or(0, |m| m.line()), s.may_coerce());
        match node {
            Node::Scalar(s) => vec![mark(s)],
            Node::Sequence(items) => items.iter().flat_map(marks).collect(),
            Node::Mapping(map) => map
                .iter()
                .flat_map(|(k, v)| {
                    let mut all = vec![mark(k)];
                    all.extend(marks(v));
                    all
                })
                .collect(),
        }
    }

    #[test]
    fn hands_over_what_the_whole_document_holds_with_the_same_lines_and_nulls() {
        let text = "user:\n  alice: {uid: 1500, shell: /bin/bash}\n  bob:\nfile:\n  /a:\n    \
                    content: \"x\\n\"\n    list: [1, 'null', ~]\n    map: {k: v}\nempty: {}\nnull:\n\
                    scalar: 5\nseq: [a]\n";
        let whole = whole(text).unwrap();
        let mut expected = Vec::new();
        picked(&whole, 2, &mut Vec::new(), &mut expected);
        let got = streamed(text, 2).unwrap();
        assert_eq!(got.len(), expected.len());
        for ((path, node), (want_path, want)) in got.iter().zip(&expected) {
            assert_eq!(path, want_path);
            assert_eq!(node, want);
            assert_eq!(marks(node), marks(want), "{path:?}");
        }
        assert_eq!(got[0].0, ["user", "alice"]);
        assert_eq!(got.last().unwrap().0, ["seq"]);
    }

    #[test]
    fn fails_as_the_whole_document_would() {
        for text in [
            "user:\n  alice: {}\n  alice: {}\n",
            "user: {}\nuser: {}\n",
            "t:\n  a: {x: 1, x: 2}\n",
            "a: &x {}\nb: *x\n",
            "a: !tag {}\n",
            "t:\n  a: !!str x\n",
            "- a\n",
            "just text\n",
            "? [a]\n: b\n",
            "t:\n  ? {a: 1}\n  : b\n",
            "t: {a: [\n",
            "t:\n  a: {x: 1, x: 2}\n  a: {}\n",
            "t:\n  a: {}\n  a: {x: [\n",
        ] {
            let want = whole(text).unwrap_err();
            let got = streamed(text, 2).unwrap_err();
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "{text:?}");
        }
    }

    #[test]
    fn an_empty_document_hands_over_nothing() {
        assert!(streamed("# nothing\n", 2).unwrap().is_empty());
        assert!(streamed("{}\n", 2).unwrap().is_empty());
    }
}
