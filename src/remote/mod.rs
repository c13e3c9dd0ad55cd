//! Remote targets: running providers on other machines over OpenSSH. The
//! host logic (discovery, metadata, checks, plans) stays on the
//! controller; a target needs only `sh` and what its providers need.
//!
//! - [`inventory`]: Ansible's YAML inventories, read into typed hosts.
//! - [`Target`] and [`select`]: which machines a command runs on, from
//!   `-t` and an inventory.
//! - `connection.rs`: one ssh connection per target (a ControlMaster with a
//!   private control socket), the providers copied there once per digest
//!   (`bundle.rs`), and the command line of each provider call
//!   (`script.rs`), which the host runs through the one process runner.
//! - [`programs`]: which copy of ral's native providers' program (and so
//!   which bundle) a target's machine gets, read as ELF files
//!   (`elf.rs`): another architecture's copy, a static one for an older
//!   glibc, or none, and why.
//! - [`kept`]: masters kept open between runs for the next ones to reuse,
//!   and how `ral connections` lists and closes them.
//! - [`fan_out`]: many targets at once, with a bound on the connections
//!   opened together.

mod bundle;
mod connection;
mod control_dir;
mod destination;
mod elf;
mod fan_out;
pub mod inventory;
pub mod kept;
pub mod mux;
pub mod programs;
pub mod script;
mod target;

pub use bundle::Bundle;
pub use connection::{ssh_resolved, Connector, Session, SshSettings, DEFAULT_PERSIST};
pub use destination::Destination;
pub use fan_out::fan_out;
pub use programs::Bundles;
pub use target::{select, Target};
