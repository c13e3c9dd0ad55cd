//! Model plugins (LITP's Plugin API as executables, specified in
//! `plugin-protocol.md`): the model a plugin is given, its calls under the
//! host's process rules, and its answers parsed into typed validation
//! errors, model updates and tasks. What the tasks become in a plan is
//! `converge::expand`'s.

pub mod call;
pub mod model;
pub mod task;

pub use call::{call, Answer, CallInput, ModelUpdate, ValidationError};
pub use model::{Model, ModelItem};
pub use task::{AnswerError, PluginTask, Requirement, ResourceName, TaskKind};
