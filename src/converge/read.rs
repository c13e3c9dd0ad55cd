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

/// A provider with the names to read from it.
pub type Group<'a> = (&'a Provider, Vec<&'a str>);

/// What one read found for one name: the resource, not found, or why it
/// could not be read.
pub type Found = std::result::Result<Option<Resource>, String>;

/// Reads the named resources of each provider; `groups` pairs a provider
/// with its names. At most `jobs` providers are read at once. The answer
/// has one result per name, in order, per group.
pub fn read_all(host: &Host, groups: &[Group], jobs: usize) -> Vec<Vec<Found>> {
    let results: Vec<Mutex<Vec<Found>>> = groups.iter().map(|_| Mutex::new(Vec::new())).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let at = next.fetch_add(1, Ordering::SeqCst);
        let Some((provider, names)) = groups.get(at) else {
            break;
        };
        let found = read(host, provider, names);
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
pub fn read(host: &Host, provider: &Provider, names: &[&str]) -> Vec<Found> {
    let meta = &provider.meta;
    let listing = meta.invoke == Invoke::Simple
        && meta.supports(Action::List)
        && (names.len() > 1 || !meta.supports(Action::Find));
    let outcome = if listing {
        list_picking(host, provider, names)
    } else {
        host.get_many(provider, names).map(|found| {
            found
                .into_iter()
                .map(|one| one.map_err(|e| e.to_string()))
                .collect()
        })
    };
    match outcome {
        Ok(found) => found,
        // Nothing could be read: each name fails with the reason.
        Err(e) => {
            let message = e.to_string();
            names.iter().map(|_| Err(message.clone())).collect()
        }
    }
}

/// Lists every resource and keeps the named ones.
fn list_picking(host: &Host, provider: &Provider, names: &[&str]) -> Result<Vec<Found>> {
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
    Ok(found.into_iter().map(Ok).collect())
}
