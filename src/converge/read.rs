//! Reading the current state of many resources with the fewest provider
//! calls: per provider one listing or one get of all the names, the
//! providers read in parallel.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::Result;
use crate::host::Host;
use crate::metadata::{Action, Invoke};
use crate::provider::Provider;
use crate::resource::Resource;
use crate::types::Value;

/// A provider with the names to read from it.
pub type Group<'a> = (&'a Provider, Vec<&'a str>);

/// What one read found for one name.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// The provider knows the resource, in this state (which may be
    /// `ensure: absent`). Boxed: a plan holds one answer per resource
    /// until its tasks are made, by then mostly taken.
    Found(Box<Resource>),
    /// The provider does not know it.
    NotFound,
    /// It could not be read: why.
    Unreadable(String),
}

impl Observed {
    fn from_found(found: Option<Resource>) -> Observed {
        found.map_or(Observed::NotFound, |found| Observed::Found(Box::new(found)))
    }

    /// The state found, `None` when the provider does not know the
    /// resource (or it could not be read).
    pub fn resource(&self) -> Option<&Resource> {
        match self {
            Observed::Found(resource) => Some(resource),
            _ => None,
        }
    }

    /// [`Observed::resource`], taken.
    pub fn into_resource(self) -> Option<Resource> {
        match self {
            Observed::Found(resource) => Some(*resource),
            _ => None,
        }
    }
}

/// Reads the named resources of each provider; `groups` pairs a provider
/// with its names. At most `jobs` providers are read at once. The answer
/// has one result per name, in order, per group.
pub fn read_all(host: &Host, groups: &[Group], jobs: usize) -> Vec<Vec<Observed>> {
    read_all_told(host, groups, &[], jobs)
}

/// [`read_all`], telling the providers that run commands the manifest's
/// values of their names: `should` holds, per group, one list of
/// attributes per name
/// (or none: a group of another provider, or all of them).
pub fn read_all_told(
    host: &Host,
    groups: &[Group],
    should: &[Vec<&[(String, Value)]>],
    jobs: usize,
) -> Vec<Vec<Observed>> {
    let results: Vec<Mutex<Vec<Observed>>> =
        groups.iter().map(|_| Mutex::new(Vec::new())).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let at = next.fetch_add(1, Ordering::SeqCst);
        let Some((provider, names)) = groups.get(at) else {
            break;
        };
        let told = should.get(at).map_or(&[][..], Vec::as_slice);
        let found = read_told(host, provider, names, told);
        *results[at].lock().unwrap_or_else(|e| e.into_inner()) = found;
    };
    let workers = jobs.clamp(1, groups.len().max(1));
    std::thread::scope(|scope| {
        for _ in 1..workers {
            scope.spawn(work);
        }
        work();
    });
    results
        .into_iter()
        .map(|cell| cell.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect()
}

/// One provider's resources: a listing picked through when the provider
/// would otherwise be run once per name (a simple provider, several names
/// or no find), else one get of all the names.
pub fn read(host: &Host, provider: &Provider, names: &[&str]) -> Vec<Observed> {
    read_told(host, provider, names, &[])
}

/// [`read`], telling a provider that runs commands the manifest's values
/// of the names (`should`, one list of attributes per name, or none).
pub fn read_told(
    host: &Host,
    provider: &Provider,
    names: &[&str],
    should: &[&[(String, Value)]],
) -> Vec<Observed> {
    let meta = &provider.meta;
    let listing = meta.invoke == Invoke::Simple
        && meta.supports(Action::List)
        && (names.len() > 1 || !meta.supports(Action::Find));
    let outcome = if listing {
        list_picking(host, provider, names)
    } else {
        host.get_with_should(provider, names, should).map(|found| {
            found
                .into_iter()
                .map(|one| match one {
                    Ok(found) => Observed::from_found(found),
                    Err(e) => Observed::Unreadable(e.to_string()),
                })
                .collect()
        })
    };
    match outcome {
        Ok(found) => found,
        // Nothing could be read: each name fails with the reason.
        Err(e) => {
            let message = e.to_string();
            names
                .iter()
                .map(|_| Observed::Unreadable(message.clone()))
                .collect()
        }
    }
}

/// Lists every resource and keeps the named ones.
fn list_picking(host: &Host, provider: &Provider, names: &[&str]) -> Result<Vec<Observed>> {
    let wanted: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(at, name)| (*name, at))
        .collect();
    let mut found: Vec<Option<Resource>> = vec![None; names.len()];
    let mut pick = |resource: Resource| {
        if let Some(&at) = wanted.get(resource.name.as_str()) {
            found[at] = Some(resource);
        }
        Ok(())
    };
    host.list(provider, &mut pick)?;
    Ok(found.into_iter().map(Observed::from_found).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_smaller_than_the_state_it_holds() {
        // A plan holds one answer per resource: those without a state
        // must not take a state's room.
        assert!(std::mem::size_of::<Observed>() < std::mem::size_of::<Resource>());
        let found = Observed::from_found(Some(Resource::bare("a")));
        assert_eq!(found.resource(), Some(&Resource::bare("a")));
        assert_eq!(found.into_resource(), Some(Resource::bare("a")));
    }
}
