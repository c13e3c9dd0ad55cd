//! Path text the way Holo builds it: joined and cleaned lexically, so
//! `./target/` and `run/holo.pid` give `target/run/holo.pid`, and the
//! environment form that drops a leading `./` and a trailing `/`.

/// Cleans a path lexically: no empty or `.` components, `..` resolved
/// against what precedes it where possible, no trailing slash. An empty
/// result is `.`.
pub fn clean(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                // `/..` is `/`; a relative path keeps its leading `..`.
                _ if absolute => {}
                _ => parts.push(".."),
            },
            part => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

/// Joins and cleans, like Go's `filepath.Join`.
pub fn join(base: &str, rest: &str) -> String {
    if base.is_empty() {
        return clean(rest);
    }
    clean(&format!("{base}/{rest}"))
}

/// The form given to plugins: `/` stays, otherwise one leading `./` and one
/// trailing `/` are dropped.
pub fn for_env(path: &str) -> String {
    if path == "/" {
        return path.to_owned();
    }
    let path = path.strip_prefix("./").unwrap_or(path);
    path.strip_suffix('/').unwrap_or(path).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaning_matches_holo_paths() {
        assert_eq!(join("./target/", "run/holo.pid"), "target/run/holo.pid");
        assert_eq!(join("/", "usr/share/holo/files"), "/usr/share/holo/files");
        assert_eq!(join("/", "/usr/share/holo"), "/usr/share/holo");
        assert_eq!(clean("a//b/./c/../d/"), "a/b/d");
        assert_eq!(clean("../x/.."), "..");
        assert_eq!(clean("/../x"), "/x");
        assert_eq!(clean("./"), ".");
        assert_eq!(for_env("./target/"), "target");
        assert_eq!(for_env("/"), "/");
    }
}
