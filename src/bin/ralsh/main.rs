//! `ralsh`, the resource shell: list providers, list, show and change
//! resources. All the work happens in the `ral` library; this binary parses
//! arguments, picks a renderer and maps the outcome to an exit status.

mod app;
mod args;
mod complete;
#[path = "../common/load.rs"]
mod load;
#[path = "../common/logging.rs"]
mod logging;
#[path = "../common/man.rs"]
mod man;
mod manual;
mod progress;
#[path = "../common/remote.rs"]
mod remote;
mod targets;
#[path = "../common/unread.rs"]
mod unread;

fn main() -> std::process::ExitCode {
    let code = app::run();
    ral::cache_dir::remove_run_cache();
    code
}
