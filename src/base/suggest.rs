//! "Did you mean ...?": the known name closest to a mistyped one (a type,
//! a provider, an attribute, a file), for the errors that name what was
//! not found. Close means a few edits away for its length (a swap of two
//! neighbours counts as one: `hots` is `host`), or the known name holding
//! the whole of the mistyped one (`aliases` in `host_aliases`).

/// The candidate `query` most likely stands for, if one is close enough.
pub fn closest<'a>(query: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // A name longer than this is no typo of a known one, and comparing
    // it would cost time in proportion to its length.
    const LONGEST: usize = 256;
    if query.is_empty() || query.len() > LONGEST {
        return None;
    }
    let exact = query;
    // Case is no edit: `HOST` is `host`.
    let query = query.to_lowercase();
    let query = query.as_str();
    let allowed = (query.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|candidate| *candidate != exact)
        .filter_map(|candidate| {
            let lower = candidate.to_lowercase();
            let edits = strsim::damerau_levenshtein(query, &lower);
            let holds = query.chars().count() >= 3 && lower.contains(query);
            // A name holding the query ranks after any within the edits.
            let rank = if edits <= allowed {
                edits
            } else if holds {
                allowed + 1 + candidate.len() - query.len()
            } else {
                return None;
            };
            Some((rank, candidate))
        })
        .min()
        .map(|(_, candidate)| candidate)
}

/// ` (did you mean 'NAME'?)`, or nothing: to follow the name not found.
pub fn did_you_mean<'a>(query: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(query, candidates)
        .map(|name| format!(" (did you mean '{}'?)", crate::text::escape(name)))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_or_containing_name_is_suggested_and_a_far_one_is_not() {
        let types = ["user", "group", "host", "file", "mount", "service"];
        assert_eq!(closest("usr", types), Some("user"));
        assert_eq!(closest("hots", types), Some("host"));
        assert_eq!(closest("serivce", types), Some("service"));
        assert_eq!(closest("zzz", types), None);
        assert_eq!(closest("", types), None);
        assert_eq!(
            closest("user", types),
            None,
            "the name itself is no suggestion"
        );
        assert_eq!(closest("HOST", types), Some("host"));
        assert_eq!(closest("HoSt", types), Some("host"));
        assert_eq!(closest(&"u".repeat(300), types), None);
        let attrs = ["ensure", "ip", "host_aliases", "comment"];
        assert_eq!(closest("aliases", attrs), Some("host_aliases"));
        assert_eq!(closest("comments", attrs), Some("comment"));
        assert_eq!(closest("ipp", attrs), Some("ip"));
        assert_eq!(
            did_you_mean("hots", types),
            " (did you mean 'host'?)".to_owned()
        );
        assert_eq!(did_you_mean("zzz", types), "");
    }
}
