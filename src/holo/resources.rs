//! Holo 3's virtual resource directory: the generators under
//! `ROOT/usr/share/holo/generators` render files into
//! `CACHE/generated-resources`, the static resources are copied in beside
//! them (generated files win), and paths that plugins report back from that
//! copy are translated to the static path, or to `GENERATOR::relpath` for a
//! generated file.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::output::{Printer, To};
use super::paths::join;
use super::plugin::{exit_text, os_text, Runner};
use super::stop::Stop;
use super::streams::run_streams;
use crate::fnv::fnv1a;
use crate::process::streams::StreamCall;

/// The virtual resource root and where its files came from.
pub struct Resources {
    root: String,
    /// `CACHE/generated-resources`.
    pub virtual_root: String,
    /// Path below the virtual root → the generator (relative to the
    /// generators directory) that created it.
    generated: HashMap<String, String>,
}

impl Resources {
    /// Runs the generators and builds the virtual resource directory.
    pub fn build(runner: &Runner, cache: &str, printer: &mut Printer) -> Result<Resources, Stop> {
        let virtual_root = join(cache, "generated-resources");
        let mut resources = Resources {
            root: runner.root.clone(),
            virtual_root,
            generated: HashMap::new(),
        };
        let fail = |printer: &mut Printer, message: String| {
            printer.error(&message);
            printer.end_paragraph(To::Err);
            Stop(1)
        };
        if let Err(e) = std::fs::create_dir_all(&resources.virtual_root) {
            return Err(fail(
                printer,
                format!("mkdir {}: {}", resources.virtual_root, os_text(&e)),
            ));
        }
        let generators_dir = join(&runner.root, "usr/share/holo/generators");
        let mut generators = Vec::new();
        walk(&generators_dir, &mut |path, kind| {
            if kind == Kind::File {
                generators.push(path.to_owned());
            }
            Ok(())
        })
        .map_err(|message| fail(printer, message))?;
        for generator in generators {
            resources
                .run_generator(runner, cache, &generators_dir, &generator, printer)
                .map_err(|message| fail(printer, message))?;
        }
        resources
            .copy_static(&join(&runner.root, "usr/share/holo"))
            .map_err(|message| fail(printer, message))?;
        Ok(resources)
    }

    fn run_generator(
        &mut self,
        runner: &Runner,
        cache: &str,
        generators_dir: &str,
        generator: &str,
        printer: &mut Printer,
    ) -> Result<(), String> {
        let own_cache = join(
            cache,
            &format!("generator-{:016x}", fnv1a(generator.as_bytes())),
        );
        std::fs::create_dir_all(&own_cache)
            .map_err(|e| format!("mkdir {own_cache}: {}", os_text(&e)))?;
        let env = self.generator_env(runner, own_cache);
        let arg0 = OsString::from(generator);
        let call = StreamCall {
            label: generator,
            program: Path::new(generator),
            arg0: &arg0,
            args: &[],
            env: &env,
            fd3: false,
            stdin: None,
            timeout: runner.timeout,
            release: false,
            dir: None,
            user: None,
        };
        let mut output = Vec::new();
        let ended = run_streams(&call, &mut |_, line| {
            output.push(String::from_utf8_lossy(line).into_owned())
        });
        for line in &output {
            let line = line.trim();
            if !line.is_empty() {
                printer.warning(&format!("output from {generator}: {line}"));
            }
        }
        let ended = ended.map_err(|e| match e {
            crate::error::Error::Spawn { source, .. } => {
                format!(
                    "could not run {generator}: fork/exec {generator}: {}",
                    os_text(&source)
                )
            }
            other => format!("could not run {generator}: {other}"),
        })?;
        if !ended.success() {
            return Err(format!("could not run {generator}: {}", exit_text(&ended)));
        }
        let owner = generator
            .strip_prefix(generators_dir)
            .map(|rest| rest.trim_start_matches('/'))
            .unwrap_or(generator);
        self.note_generated(owner)
    }

    /// A generator's environment: the caller's, with its own cache
    /// directory, the static resources' root and `OUT`, the virtual root.
    fn generator_env(&self, runner: &Runner, own_cache: String) -> Vec<(OsString, OsString)> {
        let mut env: Vec<(OsString, OsString)> = runner
            .base_env
            .iter()
            .filter(|(k, _)| {
                !["HOLO_CACHE_DIR", "HOLO_RESOURCE_ROOT", "OUT"].contains(&&*k.to_string_lossy())
            })
            .cloned()
            .collect();
        env.push(("HOLO_CACHE_DIR".into(), own_cache.into()));
        env.push((
            "HOLO_RESOURCE_ROOT".into(),
            join(&runner.root, "usr/share/holo").into(),
        ));
        env.push(("OUT".into(), self.virtual_root.clone().into()));
        env
    }

    /// Notes every file in the virtual root that no generator made before
    /// as made by `owner`.
    fn note_generated(&mut self, owner: &str) -> Result<(), String> {
        let virtual_root = self.virtual_root.clone();
        let generated = &mut self.generated;
        walk(&virtual_root, &mut |path, kind| {
            if kind != Kind::Dir {
                let rel = path
                    .strip_prefix(&virtual_root)
                    .unwrap_or(path)
                    .trim_start_matches('/');
                if !rel.is_empty() {
                    generated
                        .entry(rel.to_owned())
                        .or_insert_with(|| owner.to_owned());
                }
            }
            Ok(())
        })
    }

    /// Copies the static resources into the virtual root where no generated
    /// file has the same path: content and the owner's executable bit.
    fn copy_static(&self, static_root: &str) -> Result<(), String> {
        walk(static_root, &mut |path, kind| {
            let rel = path
                .strip_prefix(static_root)
                .unwrap_or(path)
                .trim_start_matches('/');
            let target = join(&self.virtual_root, rel);
            match kind {
                Kind::Dir => std::fs::create_dir_all(&target)
                    .map_err(|e| format!("mkdir {target}: {}", os_text(&e))),
                _ if std::fs::symlink_metadata(&target).is_ok() => Ok(()),
                Kind::File => {
                    let mode = std::fs::metadata(path)
                        .map_err(|e| format!("stat {path}: {}", os_text(&e)))?
                        .permissions()
                        .mode();
                    std::fs::copy(path, &target)
                        .map_err(|e| format!("copy {path}: {}", os_text(&e)))?;
                    std::fs::set_permissions(
                        &target,
                        std::fs::Permissions::from_mode(0o600 | (mode & 0o100)),
                    )
                    .map_err(|e| format!("chmod {target}: {}", os_text(&e)))
                }
                Kind::Link => {
                    let text = std::fs::read_link(path)
                        .map_err(|e| format!("readlink {path}: {}", os_text(&e)))?;
                    std::os::unix::fs::symlink(text, &target)
                        .map_err(|e| format!("symlink {target}: {}", os_text(&e)))
                }
                Kind::Other => Err(format!("readlink {path}: invalid argument")),
            }
        })
    }

    /// A path reported by a plugin, as the user should see it.
    pub fn translate(&self, path: &str) -> String {
        let Some(rel) = path
            .strip_prefix(&self.virtual_root)
            .and_then(|rest| rest.strip_prefix('/'))
        else {
            return path.to_owned();
        };
        if rel.is_empty() {
            return path.to_owned();
        }
        match self.generated.get(rel) {
            Some(generator) => format!(
                "{}::{rel}",
                join(
                    &self.root,
                    &format!("usr/share/holo/generators/{generator}")
                )
            ),
            None => join(&self.root, &format!("usr/share/holo/{rel}")),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Dir,
    File,
    Link,
    Other,
}

/// Visits `dir` and everything below it, depth first in name order, without
/// following symlinks. A missing `dir` is an error, as in Holo.
fn walk(dir: &str, visit: &mut dyn FnMut(&str, Kind) -> Result<(), String>) -> Result<(), String> {
    let meta =
        std::fs::symlink_metadata(dir).map_err(|e| format!("lstat {dir}: {}", os_text(&e)))?;
    walk_entry(dir, kind_of(&meta), visit)
}

fn walk_entry(
    path: &str,
    kind: Kind,
    visit: &mut dyn FnMut(&str, Kind) -> Result<(), String>,
) -> Result<(), String> {
    visit(path, kind)?;
    if kind != Kind::Dir {
        return Ok(());
    }
    let mut entries: Vec<(String, Kind)> = std::fs::read_dir(path)
        .map_err(|e| format!("open {path}: {}", os_text(&e)))?
        .map(|entry| {
            let entry = entry.map_err(|e| format!("readdirent {path}: {}", os_text(&e)))?;
            let meta = entry
                .metadata()
                .map_err(|e| format!("lstat {path}: {}", os_text(&e)))?;
            Ok((
                entry.file_name().to_string_lossy().into_owned(),
                kind_of(&meta),
            ))
        })
        .collect::<Result<_, String>>()?;
    entries.sort();
    for (name, kind) in entries {
        walk_entry(&join(path, &name), kind, visit)?;
    }
    Ok(())
}

fn kind_of(meta: &std::fs::Metadata) -> Kind {
    let kind = meta.file_type();
    if kind.is_dir() {
        Kind::Dir
    } else if kind.is_file() {
        Kind::File
    } else if kind.is_symlink() {
        Kind::Link
    } else {
        Kind::Other
    }
}
