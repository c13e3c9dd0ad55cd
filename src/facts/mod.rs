//! A host's facts, for templates (`{{ facts.os.family }}`) and people
//! (`ral facts`): the core facts the bundled `facts` provider gathers
//! natively on the host (see [`crate::sdk::facts`] for each fact, and
//! which come from below the root and which are always the machine's),
//! with the custom facts of the data directories' `facts.d` on top
//! ([`custom`]).
//!
//! [`of_host`] asks a [`Host`] once: here the provider runs in this
//! process; on a remote target it runs there as `ral-provider facts`,
//! over the target's connection, as every provider does, and so do the
//! custom facts' programs (the bundle carries each `facts.d`, see
//! `cli::remote::Fleet`). The static custom facts files are read here.
//!
//! A sketch, the host and registry made as `ral plan` makes them:
//!
//! ```no_run
//! # fn sketch(host: &ral::Host, registry: &ral::discovery::Registry) -> Result<(), ral::Error> {
//! let facts = ral::facts::of_host(host, registry)?;
//! println!("{}", facts["os"]["family"]);
//! # Ok(())
//! # }
//! ```

pub mod custom;

use crate::discovery::Registry;
use crate::error::Error;
use crate::host::Host;

pub use crate::sdk::facts::{gather, Facts};

/// The provider that gathers the core facts, and its one resource.
pub const PROVIDER: &str = "facts::facts";
const RESOURCE: &str = "facts";

/// The facts of `host`: its core facts, asked of the `facts` provider of
/// `registry` once, with the custom facts of the registry's data
/// directories on top (a custom fact replaces the core fact of its
/// name). Top-level facts are sorted by name, as Facter prints them.
///
/// Fails when the provider is missing (the bundled providers could not
/// be written out) or its call fails (no connection to the target); a
/// custom facts file that cannot be read or parsed is only a warning.
pub fn of_host(host: &Host, registry: &Registry) -> Result<Facts, Error> {
    let provider = registry.resolve(PROVIDER)?;
    let resource = host.find(provider, RESOURCE)?;
    let mut facts: Facts = resource
        .map(|resource| {
            resource
                .attrs
                .iter()
                .map(|(name, value)| (name.clone(), serde_json::Value::from(value)))
                .collect()
        })
        .unwrap_or_default();
    let dirs = custom::dirs(registry.data_dirs());
    let target = host
        .config()
        .remote
        .as_ref()
        .map(|s| s.target.name.as_str());
    for (name, value) in custom::read(host, &dirs, target) {
        facts.insert(name, value);
    }
    facts.sort_keys();
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use crate::metadata::Metadata;
    use crate::sdk::{Call, Log};

    /// The native `facts` provider's every fact is declared in its
    /// metadata, with the type its value has.
    #[test]
    fn each_fact_of_the_native_provider_is_the_type_its_metadata_declares() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(
            root.path().join("etc/os-release"),
            "NAME=Debian\nID=debian\n",
        )
        .unwrap();
        let facts = crate::native::find("facts").expect("the facts provider is native");
        let call = Call::new(
            root.path(),
            false,
            Log::new(Box::new(std::io::sink()), false),
        );
        let all = facts.0.get(&call, &[]).unwrap();
        assert_eq!(all.len(), 1);
        let meta = Metadata::parse(facts.0.metadata(), std::path::Path::new("facts.yaml")).unwrap();
        for (key, value) in &all[0] {
            let declared = meta
                .attributes
                .get(key)
                .unwrap_or_else(|| panic!("{key} is not declared"));
            assert!(
                declared.attr_type.check_json(value).is_ok(),
                "{key}: {value} is not a {}",
                declared.attr_type
            );
        }
        assert!(all[0].contains_key("os"), "{:?}", all[0].keys());
    }
}
