//! Renderers: one data model ([`crate::Provider`],
//! [`crate::Resource`], [`crate::Change`], update
//! [`Outcome`]s), three outputs behind one [`Printer`]: [`human`] writes
//! Puppet-style text, [`json`] writes libral's JSON shapes, [`manifest`]
//! writes resources as the YAML manifest `ral plan` reads (through
//! [`yaml`]). Plans and runs: [`plan`] (text), [`html`] (the report
//! page; [`html_fleet`] that of a run over many targets), all showing
//! multi-line values as [`diff`]s. Core code never prints; it hands data
//! to a printer.

pub mod diff;
pub mod html;
pub mod html_fleet;
pub mod human;
pub mod json;
pub mod manifest;
pub mod plan;
pub mod yaml;

use std::io;

use crate::error::Error;
use crate::provider::Provider;
use crate::resource::Resource;
use crate::update::Outcome;

/// Everything ralsh shows, in one output form. A listing is streamed:
/// [`listed`](Printer::listed) for each resource as it comes,
/// [`flush`](Printer::flush) when the provider pauses, then
/// [`end_list`](Printer::end_list).
pub trait Printer<'p> {
    /// The providers found (`long`: with their summaries).
    fn providers(&mut self, providers: &[Provider], long: bool) -> io::Result<()>;

    /// A provider's attributes, with desc, type and kind.
    fn explain(&mut self, provider: &Provider) -> io::Result<()>;

    /// One resource of a listing of `provider`.
    fn listed(&mut self, provider: &'p Provider, resource: &Resource) -> io::Result<()>;

    /// Makes what was printed so far visible.
    fn flush(&mut self) -> io::Result<()>;

    /// Ends a listing of `provider`, or the resources [`found`] one by one
    /// for several names; `error` is what cut a listing short.
    ///
    /// [`found`]: Printer::found
    fn end_list(&mut self, provider: &'p Provider, error: Option<&str>) -> io::Result<()>;

    /// What find said of `name`: the resource, or that there is none.
    fn found(
        &mut self,
        provider: &Provider,
        name: &str,
        found: Option<&Resource>,
    ) -> io::Result<()>;

    /// The outcomes of a batch of updates (`noop`: previews), each with
    /// the name it was asked for; failures are reported by the caller.
    fn outcomes(
        &mut self,
        provider: &Provider,
        results: &[(String, Result<Outcome, Error>)],
        noop: bool,
    ) -> io::Result<()>;
}
