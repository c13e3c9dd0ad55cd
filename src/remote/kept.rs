//! Connections kept open between runs (`--persist`, as Ansible's
//! ControlPersist): each target's ssh master stays up for a while after
//! the run that used it, so that the next run within that time reuses it
//! instead of logging in again.
//!
//! The masters' sockets live in one private directory of this user:
//! `$XDG_RUNTIME_DIR/ral-connections`, else `ral-connections-UID` in
//! TMPDIR (or `/tmp`), made 0700 and refused when it is a link, another
//! user's, or open to others. A socket is named by a digest of everything
//! that makes one connection differ from another (the target's name, the
//! ssh program, its options and the destination: [`key`]), so two
//! settings never share a master. Beside each socket, `KEY.lock` is locked (`flock`) while a run
//! checks or starts that master, so two runs at once share one login; it
//! holds what `ral connections` shows and needs to close the master
//! ([`Info`]).
//!
//! A lock file is only ever removed by the holder of its lock, and a lock
//! is only taken on a file still at its path, so no two runs can both
//! believe they hold one.

use std::fs::{self, File};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::control_dir::lock;
use crate::error::{Error, Result};
use crate::text::hex;

/// The directory's name in `$XDG_RUNTIME_DIR` (already this user's).
const NAME: &str = "ral-connections";
/// What a lock file's name ends with.
const LOCK: &str = ".lock";
/// The longest socket path: `sun_path` holds 108 bytes, and ssh first
/// binds a temporary name 17 bytes longer.
const MAX_SOCKET: usize = 107 - 17;
/// Bytes of the digest in a socket's name.
const KEY_BYTES: usize = 12;

/// What a lock file says of its connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// The target's name in the run that started the master.
    pub target: String,
    /// What ssh connected to.
    pub destination: String,
    /// The ssh program that runs the master.
    pub program: PathBuf,
    /// How long the master stays once idle, in seconds.
    pub persist: u64,
}

/// One kept connection, as `ral connections` shows it.
#[derive(Debug, Clone)]
pub struct Kept {
    pub info: Info,
    pub socket: PathBuf,
    /// When its master started (its socket was made).
    pub since: Option<SystemTime>,
}

/// The private directory of the kept connections.
#[derive(Debug, Clone)]
pub struct KeptDir {
    path: PathBuf,
}

impl KeptDir {
    /// This user's directory (see the module's doc), made when missing.
    pub fn open() -> Result<KeptDir> {
        KeptDir::at(&default_path())
    }

    /// The directory at `path`, made (0700) when missing, and checked.
    pub fn at(path: &Path) -> Result<KeptDir> {
        match fs::DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(format!("making {}", path.display()), e)),
        }
        check_private(path, rustix::process::geteuid().as_raw())?;
        Ok(KeptDir {
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The socket of the connection `key`.
    pub fn socket(&self, key: &str) -> PathBuf {
        self.path.join(key)
    }

    /// Takes the lock of the connection `key`, waiting for another run
    /// that holds it.
    pub fn lock(&self, key: &str) -> Result<Entry> {
        let path = self.path.join(format!("{key}{LOCK}"));
        let error = |e| Error::io(format!("locking {}", path.display()), e);
        loop {
            let file = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .map_err(error)?;
            lock(&file, true).map_err(error)?;
            // Removed (by its lock's holder) while we waited: lock the
            // file now at the path instead.
            let held = file.metadata().map_err(error)?;
            if fs::symlink_metadata(&path)
                .is_ok_and(|now| now.ino() == held.ino() && now.dev() == held.dev())
            {
                return Ok(Entry {
                    file,
                    path,
                    socket: self.socket(key),
                });
            }
        }
    }

    /// The connections whose masters may still run, oldest first; the
    /// lock files of those whose socket is gone (their master ended) are
    /// removed on the way, unless a run holds them.
    pub fn list(&self) -> Result<Vec<Kept>> {
        let entries = fs::read_dir(&self.path)
            .map_err(|e| Error::io(format!("reading {}", self.path.display()), e))?;
        let mut kept = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(key) = name.to_str().and_then(|n| n.strip_suffix(LOCK)) else {
                continue;
            };
            if !is_key(key) {
                continue;
            }
            let socket = self.socket(key);
            let Ok(meta) = fs::symlink_metadata(&socket) else {
                self.remove_if_unused(key);
                continue;
            };
            let text = fs::read_to_string(entry.path()).unwrap_or_default();
            // A master being started has no information yet.
            let Ok(info) = serde_json::from_str::<Info>(&text) else {
                continue;
            };
            kept.push(Kept {
                info,
                socket,
                since: meta.modified().ok(),
            });
        }
        kept.sort_by(|a, b| (a.since, &a.info.target).cmp(&(b.since, &b.info.target)));
        Ok(kept)
    }

    /// Removes the lock file of `key` when no run holds it and its
    /// socket is gone.
    fn remove_if_unused(&self, key: &str) {
        let path = self.path.join(format!("{key}{LOCK}"));
        let Ok(file) = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
        else {
            return;
        };
        if lock(&file, false).unwrap_or(false) && !self.socket(key).exists() {
            let _ = fs::remove_file(&path);
        }
    }
}

impl KeptDir {
    /// Closes the master of `kept` (`ssh -O exit`) and removes its socket
    /// and lock file; whether a master was running.
    pub fn close(&self, kept: &Kept) -> Result<bool> {
        let key = kept
            .socket
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default()
            .to_owned();
        let entry = self.lock(&key)?;
        let (ran, said) = control(kept, "exit")?;
        if ran {
            // The master removes its socket as it exits.
            let until = std::time::Instant::now() + Duration::from_secs(3);
            while kept.socket.exists() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
        } else {
            log::debug!("{}: ssh -O exit: {}", kept.info.target, said.join(" / "));
        }
        entry.remove();
        Ok(ran)
    }
}

/// Runs `ssh -O COMMAND` (`exit`) on the master of `kept`, with
/// no configuration file (the socket is all it needs); whether the master
/// answered, and what ssh said.
fn control(kept: &Kept, command: &str) -> Result<(bool, Vec<String>)> {
    use crate::process::streams::{run_streams, StreamCall};
    use std::ffi::OsString;
    let args: Vec<OsString> = [
        "-F",
        "/dev/null",
        "-o",
        &format!("ControlPath={}", kept.socket.display()),
        "-O",
        command,
        "--",
        &kept.info.destination,
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let env = crate::process::ProviderEnv::inherited();
    let label = format!("{}: ssh -O {command}", kept.info.target);
    let call = StreamCall {
        label: &label,
        program: &kept.info.program,
        arg0: &OsString::from("ssh"),
        args: &args,
        env: env.vars(),
        fd3: false,
        stdin: None,
        timeout: Duration::from_secs(10),
        release: false,
        dir: None,
        user: None,
    };
    let mut said = Vec::new();
    let ended = run_streams(&call, &mut |_, line| {
        said.push(String::from_utf8_lossy(line).trim_end().to_owned());
    })?;
    Ok((ended.success(), said))
}

/// A connection's lock, held until dropped.
pub struct Entry {
    file: File,
    path: PathBuf,
    socket: PathBuf,
}

impl Entry {
    /// What the lock file says, when a master was recorded.
    pub fn info(&mut self) -> Option<Info> {
        let mut text = String::new();
        self.file.rewind().ok()?;
        self.file.read_to_string(&mut text).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Records the master just started.
    pub fn record(&mut self, info: &Info) -> Result<()> {
        let text = serde_json::to_string(info).unwrap_or_default();
        let error = |e| Error::io(format!("writing {}", self.path.display()), e);
        self.file.set_len(0).map_err(error)?;
        self.file.rewind().map_err(error)?;
        self.file.write_all(text.as_bytes()).map_err(error)
    }

    /// Removes a socket whose master is gone, so ssh can make a new one.
    pub fn remove_socket(&self) {
        match fs::remove_file(&self.socket) {
            Ok(()) => log::debug!("removed the stale socket {}", self.socket.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::debug!("removing {}: {e}", self.socket.display()),
        }
    }

    /// Removes the socket and the lock file: the connection is closed.
    pub fn remove(self) {
        self.remove_socket();
        let _ = fs::remove_file(&self.path);
    }
}

/// The name of the connection of the target `name` that ssh `program`
/// makes with `args` (its options, without the control path) to
/// `destination`. The target's name counts too: two inventory entries of
/// one machine each get a master, as without `--persist`, so that many of
/// them run at once never exceed the sessions sshd allows one connection
/// (`MaxSessions`).
pub fn key(name: &str, program: &Path, args: &[String], destination: &str) -> String {
    let mut hasher = Sha256::new();
    for word in [name.as_bytes(), program.as_os_str().as_encoded_bytes()]
        .into_iter()
        .chain(args.iter().map(|a| a.as_bytes()))
        .chain([destination.as_bytes()])
    {
        hasher.update((word.len() as u64).to_le_bytes());
        hasher.update(word);
    }
    hex(&hasher.finalize()[..KEY_BYTES])
}

fn is_key(text: &str) -> bool {
    text.len() == KEY_BYTES * 2 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The whole seconds ssh's ControlPersist takes for `persist` (at least
/// one: zero would mean for ever).
pub fn persist_seconds(persist: Duration) -> u64 {
    persist.as_secs_f64().ceil().max(1.0) as u64
}

/// `$XDG_RUNTIME_DIR/ral-connections`, else `ral-connections-UID` in the
/// temporary directory, else in `/tmp`: the first whose sockets' paths
/// fit, and that ssh reads as a plain path.
fn default_path() -> PathBuf {
    let uid = rustix::process::geteuid().as_raw();
    let fits = |dir: &PathBuf| {
        dir.is_absolute()
            && dir.as_os_str().len() + 1 + KEY_BYTES * 2 <= MAX_SOCKET
            && dir.to_str().is_some_and(|text| {
                text.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c))
            })
    };
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute() && dir.is_dir())
        .map(|dir| dir.join(NAME));
    let shared = |base: PathBuf| base.join(format!("{NAME}-{uid}"));
    [
        runtime,
        Some(shared(std::env::temp_dir())),
        Some(shared(PathBuf::from("/tmp"))),
    ]
    .into_iter()
    .flatten()
    .find(fits)
    .unwrap_or_else(|| shared(PathBuf::from("/tmp")))
}

/// Refuses `path` unless it is a directory (not a link) that user `me`
/// owns and nobody else may enter.
fn check_private(path: &Path, me: u32) -> Result<()> {
    let refuse = |why: String| {
        Err(Error::io(
            format!("using {} for ssh connections", path.display()),
            std::io::Error::other(format!(
                "{why}; ral keeps connections only in a directory of its user that no one \
                 else can enter (mode 0700): remove it, or run with --no-persist"
            )),
        ))
    };
    let meta = fs::symlink_metadata(path)
        .map_err(|e| Error::io(format!("looking at {}", path.display()), e))?;
    if meta.file_type().is_symlink() {
        return refuse("it is a symbolic link".to_owned());
    }
    if !meta.is_dir() {
        return refuse("it is not a directory".to_owned());
    }
    if meta.uid() != me {
        return refuse(format!("it belongs to user {}", meta.uid()));
    }
    if meta.mode() & 0o077 != 0 {
        return refuse(format!(
            "others can use it (mode {:04o})",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn every_setting_of_a_connection_gives_another_key() {
        let args = |extra: &[&str]| -> Vec<String> {
            ["-F", "/c", "-o", "BatchMode=yes", "-p", "22"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect()
        };
        let base = key("web", Path::new("/usr/bin/ssh"), &args(&[]), "web");
        assert!(is_key(&base), "{base}");
        assert_eq!(
            base,
            key("web", Path::new("/usr/bin/ssh"), &args(&[]), "web")
        );
        let others = [
            key("web2", Path::new("/usr/bin/ssh"), &args(&[]), "web"),
            key("web", Path::new("/opt/ssh"), &args(&[]), "web"),
            key("web", Path::new("/usr/bin/ssh"), &args(&[]), "db"),
            key(
                "web",
                Path::new("/usr/bin/ssh"),
                &args(&["-l", "root"]),
                "web",
            ),
            key(
                "web",
                Path::new("/usr/bin/ssh"),
                &args(&["-i", "/k"]),
                "web",
            ),
            key(
                "web",
                Path::new("/usr/bin/ssh"),
                &args(&["-o", "Ciphers=x"]),
                "web",
            ),
            // Words are counted, not joined: "-p" "22x" is not "-p2" "2x".
            key(
                "web",
                Path::new("/usr/bin/ssh"),
                &["-F", "/c", "-o", "BatchMode=yes", "-p2", "2"].map(String::from),
                "web",
            ),
        ];
        for (at, other) in others.iter().enumerate() {
            assert_ne!(&base, other, "setting {at}");
        }
    }

    #[test]
    fn only_a_private_directory_of_its_user_is_used() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("kept");
        let kept = KeptDir::at(&dir).unwrap();
        let mode = fs::metadata(kept.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // Again: it is there and fine.
        KeptDir::at(&dir).unwrap();

        fs::set_permissions(&dir, fs::Permissions::from_mode(0o750)).unwrap();
        let error = KeptDir::at(&dir).unwrap_err().to_string();
        assert!(error.contains(&dir.display().to_string()), "{error}");
        assert!(error.contains("mode 0750"), "{error}");
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();

        let link = base.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let error = KeptDir::at(&link).unwrap_err().to_string();
        assert!(error.contains("symbolic link"), "{error}");

        let file = base.path().join("file");
        fs::write(&file, "").unwrap();
        assert!(KeptDir::at(&file).is_err());

        // Another user's (asked as another uid: only root could chown).
        let me = rustix::process::geteuid().as_raw();
        let error = check_private(&dir, me.wrapping_add(1))
            .unwrap_err()
            .to_string();
        assert!(error.contains("belongs to user"), "{error}");
        assert!(check_private(&dir, me).is_ok());
    }

    #[test]
    fn a_lock_records_its_connection_and_goes_with_its_master() {
        let base = tempfile::tempdir().unwrap();
        let kept = KeptDir::at(&base.path().join("kept")).unwrap();
        let key = key("web", Path::new("ssh"), &[], "web");
        let info = Info {
            target: "web".into(),
            destination: "root@web".into(),
            program: "/usr/bin/ssh".into(),
            persist: 60,
        };
        {
            let mut entry = kept.lock(&key).unwrap();
            assert_eq!(entry.info(), None);
            entry.record(&info).unwrap();
            assert_eq!(entry.info(), Some(info.clone()));
            // Held: another taker would wait, a sweep leaves it.
            kept.remove_if_unused(&key);
            assert!(kept.path().join(format!("{key}.lock")).exists());
        }
        // No socket: nothing listed, and the lock file goes.
        assert!(kept.list().unwrap().is_empty());
        assert!(!kept.path().join(format!("{key}.lock")).exists());

        let mut entry = kept.lock(&key).unwrap();
        entry.record(&info).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(kept.socket(&key)).unwrap();
        drop(entry);
        let listed = kept.list().unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].info, info);
        assert_eq!(listed[0].socket, kept.socket(&key));
        kept.lock(&key).unwrap().remove();
        assert!(!kept.socket(&key).exists());
        assert!(kept.list().unwrap().is_empty());
    }

    #[test]
    fn the_default_directory_keeps_socket_paths_short_and_plain() {
        let path = default_path();
        let text = path.to_str().unwrap();
        assert!(text.len() + 1 + KEY_BYTES * 2 <= MAX_SOCKET, "{text}");
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(NAME));
    }
}
