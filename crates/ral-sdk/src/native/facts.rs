//! `facts::facts`: the machine's core facts ([`crate::facts`]) as
//! one read-only resource named `facts` (json calling convention). Here
//! the host serves it in its own process; on a remote target
//! `ral-provider facts` does, so each host is asked for its own facts
//! the same way.

use serde_json::Value as Json;

use crate::facts::gather;
use crate::{error_entry, Call, CallError, CallResult, Convention, Kind};
use crate::{Outcome, Provider, Resource, Update};

/// The one resource's name.
pub const NAME: &str = "facts";

/// The provider.
pub struct Facts;

impl Provider for Facts {
    fn metadata(&self) -> &'static str {
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../providers/facts.yaml"
        ))
    }

    fn convention(&self) -> Convention {
        Convention::Json
    }

    fn get(&self, call: &Call, names: &[String]) -> CallResult<Vec<Resource>> {
        let mut resources = Vec::new();
        if names.is_empty() || names.iter().any(|name| name == NAME) {
            let mut resource = Resource::new();
            resource.insert("name".into(), Json::from(NAME));
            resource.extend(gather(&call.root));
            resources.push(resource);
        }
        for name in names.iter().filter(|name| *name != NAME) {
            let why = CallError::of_kind(
                Kind::Unknown,
                format!("there is one resource of facts, named '{NAME}'"),
            );
            resources.push(error_entry(name, &why));
        }
        Ok(resources)
    }

    fn set(&self, _call: &Call, _updates: &[Update]) -> CallResult<Vec<Outcome>> {
        Err(CallError::new(
            "facts are read-only: they say what the machine is",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Log;

    fn call(root: &std::path::Path) -> Call {
        Call::new(root, false, Log::new(Box::new(std::io::sink()), false))
    }

    #[test]
    fn one_resource_whose_every_fact_the_metadata_declares() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(
            root.path().join("etc/os-release"),
            "NAME=Debian\nID=debian\n",
        )
        .unwrap();
        let all = Facts.get(&call(root.path()), &[]).unwrap();
        assert_eq!(all.len(), 1);
        let facts = &all[0];
        assert_eq!(facts["name"], NAME);
        assert_eq!(facts["os"]["name"], "Debian");
        // That each fact is the type the metadata declares is the host's
        // check (ral's facts module tests it).
        // What this machine always has.
        for key in [
            "kernel",
            "os",
            "processors",
            "memory",
            "virtual",
            "is_virtual",
        ] {
            assert!(facts.contains_key(key), "{key}");
        }
    }

    #[test]
    fn other_names_are_unknown_and_nothing_is_set() {
        let root = tempfile::tempdir().unwrap();
        let answer = Facts
            .get(&call(root.path()), &["other".to_owned(), NAME.to_owned()])
            .unwrap();
        assert_eq!(answer.len(), 2);
        assert_eq!(answer[0]["name"], NAME);
        assert_eq!(answer[1]["name"], "other");
        assert_eq!(answer[1]["error"]["kind"], "unknown");
        assert!(Facts.set(&call(root.path()), &[]).is_err());
    }
}
