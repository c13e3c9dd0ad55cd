//! Calling conventions: how arguments are passed to a provider and how its
//! answers are read back. Only the simple convention exists so far; each
//! convention gets its own module here.

pub mod json;
pub mod quoting;
pub mod simple;
