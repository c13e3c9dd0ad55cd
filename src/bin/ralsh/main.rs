//! `ralsh`, the resource shell: list providers, list, show and change
//! resources. All the work happens in the `ral` library; this binary parses
//! arguments, picks a renderer and maps the outcome to an exit status.

mod app;
mod args;
mod command;
mod complete;
mod manual;
mod progress;
mod targets;

use ral::cli::{load, logging, man, remote};

fn main() -> std::process::ExitCode {
    let code = app::run();
    ral::cache_dir::remove_run_cache();
    code
}
