//! Integration tests that need what a fresh machine may lack (root, an
//! OpenSSH server, an Ansible virtualenv, Chromium, Facter, a Debian 11
//! root). Whether each need is met is
//! decided when this binary starts (`host.rs`): a test whose need is
//! missing is reported ignored, with the reason, instead of failing;
//! `.ci/run` sets `RAL_TEST_NEEDS=all`, so that there it fails instead.

#[path = "../common/account_cases.rs"]
mod account_cases;
mod ansible;
mod as_root;
mod facts;
mod host;
mod host_readers;
mod html_browser;
mod mounts;
mod no_python;
mod old_target;
mod over_ssh;
#[path = "../common/pids.rs"]
mod pids;
#[path = "../common/property.rs"]
mod property;
mod provider_package;
#[path = "../common/quoting_cases.rs"]
mod quoting_cases;
mod remote;
mod selftest;
mod sshd;
#[allow(dead_code)] // shared with tests/ralsh, which uses the rest
#[path = "../ralsh/support.rs"]
mod support;

use std::process::ExitCode;

fn main() -> ExitCode {
    // libtest takes any number of filters, libtest-mimic one: the others
    // are applied here, so that `cargo test -- a b` works across binaries.
    let (args, filters) = host::arguments(std::env::args_os());
    let host = host::Host::probe();
    if !args.list {
        host.report();
    }
    let trials = [
        ansible::tests(),
        as_root::tests(),
        facts::tests(),
        host_readers::tests(),
        html_browser::tests(),
        mounts::tests(),
        no_python::tests(),
        old_target::tests(),
        over_ssh::tests(),
        provider_package::tests(),
        remote::tests(),
        selftest::tests(),
    ]
    .concat()
    .into_iter()
    .map(|test| host.trial(test))
    .filter(|trial| filters.matches(trial.name()))
    .collect();
    libtest_mimic::run(&args, trials).exit_code()
}
