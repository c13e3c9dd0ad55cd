//! The root directory and the paths below it: each path is resolved one
//! directory at a time, each opened relative to the one before with
//! `O_NOFOLLOW`, so that nothing swapped in meanwhile can redirect the
//! walk. A symbolic link met on the way is refused (`follow` false) or
//! resolved as if the root were `/` (chroot semantics): an absolute target
//! starts again at the root and `..` never climbs above it. Whatever links
//! say, a path never leaves the root.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use super::stat::Stat;
use super::sys::{self, Mode, OFlags};
use crate::error::{strerror, CallError, CallResult, Kind};
use crate::text::quoted;

/// Symbolic links followed while resolving one path, as the kernel allows.
pub const MAX_LINKS: usize = 40;
/// Times a path's walk opens again a directory that was a link or a file
/// when first opened: another process is swapping it, and each try may
/// lose again.
pub const MAX_CHANGES: usize = 8;

/// The mode and owner of a directory a walk creates (`None`: left as
/// made); directories above it are made with mode 0755.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Create {
    pub mode: u32,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

impl Create {
    /// A directory of mode `mode`, owned by whoever makes it.
    pub fn mode(mode: u32) -> Create {
        Create {
            mode,
            uid: None,
            gid: None,
        }
    }
}

/// The root directory (`/` when the path is empty), open. Cloning shares
/// the open directory.
#[derive(Clone)]
pub struct Root {
    inner: Arc<RootInner>,
}

struct RootInner {
    path: String,
    fd: OwnedFd,
    real: bool,
}

impl std::fmt::Debug for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Root")
            .field("path", &self.inner.path)
            .finish()
    }
}

/// What a walk ends at: a directory, or an entry in one.
enum Walked {
    Dir(Dir),
    Target(Target),
}

impl Root {
    /// Opens the root directory `path` (`/` when empty).
    pub fn open(path: &Path) -> CallResult<Root> {
        let path = if path.as_os_str().is_empty() {
            Path::new("/")
        } else {
            path
        };
        let shown = path.to_string_lossy().into_owned();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let opened = sys::open_path(path.as_os_str(), flags).and_then(|fd| {
            let here = sys::fstat(fd.as_fd())?;
            let slash = sys::open_path(OsStr::new("/"), flags)?;
            let real = here.same_file(&sys::fstat(slash.as_fd())?);
            Ok((fd, real))
        });
        match opened {
            Ok((fd, real)) => Ok(Root {
                inner: Arc::new(RootInner {
                    path: shown,
                    fd,
                    real,
                }),
            }),
            Err(err) => {
                let kind = match err.kind() {
                    io::ErrorKind::PermissionDenied => Kind::Forbidden,
                    _ => Kind::Failed,
                };
                Err(CallError::of_kind(
                    kind,
                    format!(
                        "the root directory {} does not exist or is not a directory ({})",
                        quoted(&shown),
                        strerror(&err)
                    ),
                ))
            }
        }
    }

    /// The root's path as given.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// True when the root is the system's own `/`.
    pub fn is_real(&self) -> bool {
        self.inner.real
    }

    /// The path of `rel` below the root, for messages.
    pub fn show(&self, rel: &str) -> String {
        join(&self.inner.path, rel)
    }

    /// The directory `rel` (relative to the root). `create` makes it when
    /// it is missing, and missing directories above it with mode 0755.
    pub fn directory(&self, rel: &str, follow: bool, create: Option<Create>) -> CallResult<Dir> {
        match self.walk(rel, follow, false, create, false, None)? {
            Walked::Dir(dir) => Ok(dir),
            Walked::Target(_) => Err(CallError::new("internal: a directory walk ended at a file")),
        }
    }

    /// The file `rel` as a [`Target`]: its directory, opened, and its
    /// name. `follow` applies to the directories on the way, `follow_last`
    /// (default: `follow`) to a link in the last component.
    pub fn file(&self, rel: &str, follow: bool, follow_last: Option<bool>) -> CallResult<Target> {
        let last = follow_last.unwrap_or(follow);
        self.entry_walk(rel, follow, last, None)
    }

    /// The bytes and status of the regular file `rel`, or `None` when it,
    /// or a directory on the way to it, does not exist.
    pub fn read(&self, rel: &str, follow: bool) -> CallResult<Option<(Vec<u8>, Stat)>> {
        match self.file(rel, follow, None) {
            Ok(target) => target.read(None),
            Err(err) if err.missing => Ok(None),
            Err(err) => Err(err),
        }
    }

    fn entry_walk(
        &self,
        rel: &str,
        follow: bool,
        follow_last: bool,
        start: Option<&Dir>,
    ) -> CallResult<Target> {
        match self.walk(rel, follow, true, None, follow_last, start)? {
            Walked::Target(target) => Ok(target),
            // A path that names no entry ("", ".", "a/..") names a
            // directory, which is no file to read or edit.
            Walked::Dir(dir) => Err(CallError::new(format!(
                "{} is a directory, not a file",
                quoted(&self.show(&dir.inner.rel))
            ))),
        }
    }

    fn dup_root(&self, rel: &str) -> CallResult<OwnedFd> {
        self.inner
            .fd
            .try_clone()
            .map_err(|err| CallError::io(&err, &format!("open {}", quoted(&self.show(rel)))))
    }

    /// Resolves `rel` from the root, or from the open directory `start`:
    /// then the walk begins in that very directory, and only a `..` above
    /// it or an absolute link goes back by the root.
    fn walk(
        &self,
        rel: &str,
        follow: bool,
        entry: bool,
        create: Option<Create>,
        follow_last: bool,
        start: Option<&Dir>,
    ) -> CallResult<Walked> {
        let mut walk = Walk::new(self, rel, start)?;
        while let Some(part) = walk.pending.pop_front() {
            if part == ".." {
                walk.up()?;
                continue;
            }
            let at = walk.at(&part);
            let target = if entry && walk.pending.is_empty() {
                let target = match follow_last {
                    true => read_link(walk.current()?, &part),
                    false => None,
                };
                match target {
                    Some(target) => target,
                    None => return walk.into_target(&part),
                }
            } else if walk.enter(&part, &at, create)? {
                continue;
            } else {
                match walk.not_a_directory(part, &at, follow)? {
                    Some(target) => target,
                    None => continue,
                }
            };
            walk.follow(&at, &target)?;
        }
        walk.into_dir()
    }
}

/// A walk under way (see [`Root::walk`]): the directories open so far,
/// the last one where it is, their names from the root, the parts of the
/// path still to resolve, and the links followed.
struct Walk<'a> {
    root: &'a Root,
    rel: &'a str,
    pending: VecDeque<String>,
    fds: Vec<OwnedFd>,
    names: Vec<String>,
    links: usize,
    /// Entries that changed between open and readlink.
    changed: usize,
    /// The last link followed, for messages.
    via: String,
}

impl<'a> Walk<'a> {
    /// A walk of `rel` from the root, or from `start`.
    fn new(root: &'a Root, rel: &'a str, start: Option<&Dir>) -> CallResult<Walk<'a>> {
        let (fds, names) = match start {
            None => (vec![root.dup_root(rel)?], Vec::new()),
            Some(dir) => {
                let fd = dir.inner.fd.try_clone().map_err(|err| {
                    CallError::io(&err, &format!("open {}", quoted(&dir.inner.path)))
                })?;
                (vec![fd], components(&dir.inner.rel).collect())
            }
        };
        Ok(Walk {
            root,
            rel,
            pending: components(rel).collect(),
            fds,
            names,
            links: 0,
            changed: 0,
            via: String::new(),
        })
    }

    /// The directory the walk is in.
    fn current(&self) -> CallResult<BorrowedFd<'_>> {
        self.fds.last().map(AsFd::as_fd).ok_or_else(lost)
    }

    /// The path of `part` of the current directory, relative to the root.
    fn at(&self, part: &str) -> String {
        let mut shown = self.names.clone();
        shown.push(part.to_owned());
        shown.join("/")
    }

    /// Goes up to the parent directory; the root's parent is the root.
    fn up(&mut self) -> CallResult<()> {
        if self.fds.len() > 1 {
            self.fds.pop();
            self.names.pop();
        } else if !self.names.is_empty() {
            // Above the directory the walk started in: its parent, opened
            // again from the root by its resolved path, on which no link
            // is followed.
            let above = self.names[..self.names.len() - 1].join("/");
            let parent = self.root.directory(&above, false, None)?;
            self.fds.clear();
            self.fds.push(parent.into_fd(self.root)?);
            self.names.pop();
        }
        Ok(())
    }

    /// Enters the directory `part` (at `at`), made when missing if
    /// `create` says how. False when `part` is not a directory (a link,
    /// maybe).
    fn enter(&mut self, part: &str, at: &str, create: Option<Create>) -> CallResult<bool> {
        let current = self.current()?;
        let fd = match sys::open_at(current, OsStr::new(part), sys::DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
                let Some(create) = create else {
                    return Err(missing(format!(
                        "the directory {} does not exist{}",
                        quoted(&self.root.show(at)),
                        self.via
                    )));
                };
                let how = if self.pending.is_empty() {
                    create
                } else {
                    Create::mode(0o755)
                };
                make_dir(current, part, how, &self.root.show(at))?
            }
            Err(err) if !matches!(err.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) => {
                return Err(CallError::io(
                    &err,
                    &format!("open {}", quoted(&self.root.show(at))),
                ));
            }
            Err(_) => return Ok(false),
        };
        self.fds.push(fd);
        self.names.push(part.to_owned());
        Ok(true)
    }

    /// Where `part` (at `at`), not a directory when opened, leads: the
    /// target of the link it is, or `None` when it is to be opened again
    /// (it changed meanwhile).
    fn not_a_directory(
        &mut self,
        part: String,
        at: &str,
        follow: bool,
    ) -> CallResult<Option<String>> {
        match read_link(self.current()?, &part) {
            None if self.changed < MAX_CHANGES => {
                // Not a directory when opened, not a link now: either a
                // file or swapped meanwhile; open it again to tell.
                self.changed += 1;
                self.pending.push_front(part);
                Ok(None)
            }
            None => Err(CallError::new(format!(
                "{} is not a directory",
                quoted(&self.root.show(at))
            ))),
            Some(_) if !follow => Err(CallError::new(format!(
                "{} is a symbolic link, which ral does not follow here; refusing to use it",
                quoted(&self.root.show(at))
            ))),
            Some(target) => Ok(Some(target)),
        }
    }

    /// Follows the link at `at` to `target`, resolved inside the root:
    /// from the root when absolute.
    fn follow(&mut self, at: &str, target: &str) -> CallResult<()> {
        self.links += 1;
        self.via = format!(
            " (reached through the symbolic link {} -> {}, which is resolved inside the root)",
            quoted(&self.root.show(at)),
            quoted(target)
        );
        if self.links > MAX_LINKS {
            return Err(CallError::new(format!(
                "too many levels of symbolic links in {}",
                quoted(&self.root.show(self.rel))
            )));
        }
        if target.starts_with('/') {
            self.fds.clear();
            self.fds.push(self.root.dup_root(self.rel)?);
            self.names.clear();
        }
        for part in components(target).rev() {
            self.pending.push_front(part);
        }
        Ok(())
    }

    /// Ends at the entry `part` of the current directory.
    fn into_target(mut self, part: &str) -> CallResult<Walked> {
        let fd = self.fds.pop().ok_or_else(lost)?;
        let dir = Dir::new(self.root.clone(), fd, &self.names);
        Ok(Walked::Target(dir.file(part)?))
    }

    /// Ends at the current directory.
    fn into_dir(mut self) -> CallResult<Walked> {
        let fd = self.fds.pop().ok_or_else(lost)?;
        Ok(Walked::Dir(Dir::new(self.root.clone(), fd, &self.names)))
    }
}

/// The error of a walk left without a directory, which never happens.
fn lost() -> CallError {
    CallError::new("internal: the walk lost its directory")
}

/// The parts of a path, without empty ones and `.`.
fn components(path: &str) -> impl DoubleEndedIterator<Item = String> + '_ {
    path.split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::to_owned)
}

/// `os.path.join(base, name)`, as the Python toolkit shows paths.
pub(super) fn join(base: &str, name: &str) -> String {
    if name.is_empty() {
        base.to_owned()
    } else if name.starts_with('/') {
        name.to_owned()
    } else if base.is_empty() || base.ends_with('/') {
        format!("{base}{name}")
    } else {
        format!("{base}/{name}")
    }
}

fn missing(message: String) -> CallError {
    CallError {
        kind: Kind::Failed,
        message,
        missing: true,
    }
}

/// A test's swapper: called with the name before each readlink.
#[cfg(test)]
pub(super) type Swapper = Box<dyn FnMut(&str)>;

#[cfg(test)]
thread_local! {
    pub(super) static BEFORE_READ_LINK: std::cell::RefCell<Option<Swapper>> =
        std::cell::RefCell::new(None);
}

/// The target of the symbolic link `name`, or `None` when it is not one.
/// A target that is not UTF-8 text is read as its nearest text, which
/// names no entry ral made and so is not found.
fn read_link(dir: BorrowedFd<'_>, name: &str) -> Option<String> {
    #[cfg(test)]
    BEFORE_READ_LINK.with(|hook| {
        if let Some(hook) = hook.borrow_mut().as_mut() {
            hook(name);
        }
    });
    sys::read_link_at(dir, OsStr::new(name))
        .ok()
        .map(|target| String::from_utf8_lossy(&target).into_owned())
}

/// Makes the directory `name` in `parent` as `create` asks and opens it.
/// One made there meanwhile (by another process, or mounted on) is opened
/// and left as it is, as one found there is: its mode and owner are not
/// ours to set. One mounted on between the mkdir and the open is refused,
/// unchanged: what was opened is the mount's, not the directory made.
pub(super) fn make_dir(
    parent: BorrowedFd<'_>,
    name: &str,
    create: Create,
    shown: &str,
) -> CallResult<OwnedFd> {
    let made = match sys::mkdir_at(parent, OsStr::new(name), Mode::RWXU) {
        Ok(()) => true,
        Err(err) if err.raw_os_error() == Some(libc::EEXIST) => false,
        Err(err) => {
            return Err(CallError::io(
                &err,
                &format!("create the directory {}", quoted(shown)),
            ))
        }
    };
    let fd = sys::open_at(parent, OsStr::new(name), sys::DIR_FLAGS, Mode::empty())
        .map_err(|err| CallError::io(&err, &format!("open {}", quoted(shown))))?;
    if !made {
        return Ok(fd);
    }
    // Checked on the descriptor itself: a mount after this changes
    // nothing of what is open.
    let mounted = sys::on_other_mount(fd.as_fd(), parent)
        .map_err(|err| CallError::io(&err, &format!("check the directory {}", quoted(shown))))?;
    if mounted {
        return Err(CallError::new(format!(
            "cannot set up the directory {}: something was mounted on it since it was made; \
             refusing to change what is mounted there",
            quoted(shown)
        )));
    }
    let set_up = (|| {
        if (create.uid.is_some() || create.gid.is_some()) && sys::is_root() {
            sys::fchown(fd.as_fd(), create.uid, create.gid)?;
        }
        sys::fchmod(fd.as_fd(), Mode::from_raw_mode(create.mode))?;
        sys::fsync(parent)
    })();
    set_up
        .map_err(|err| CallError::io(&err, &format!("set up the directory {}", quoted(shown))))?;
    Ok(fd)
}

/// An open directory below the root. Its `rel` is its path relative to
/// the root with every link resolved. Cloning shares the open directory.
#[derive(Clone)]
pub struct Dir {
    inner: Arc<DirInner>,
}

struct DirInner {
    root: Root,
    fd: OwnedFd,
    rel: String,
    path: String,
}

impl std::fmt::Debug for Dir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dir")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.fd.as_fd()
    }
}

impl Dir {
    fn new(root: Root, fd: OwnedFd, names: &[String]) -> Dir {
        let rel = names.join("/");
        let path = root.show(&rel);
        Dir {
            inner: Arc::new(DirInner {
                root,
                fd,
                rel,
                path,
            }),
        }
    }

    /// The descriptor alone, duplicated when the directory is shared.
    fn into_fd(self, root: &Root) -> CallResult<OwnedFd> {
        match Arc::try_unwrap(self.inner) {
            Ok(inner) => Ok(inner.fd),
            Err(inner) => inner.fd.try_clone().map_err(|err| {
                CallError::io(&err, &format!("open {}", quoted(&root.show(&inner.rel))))
            }),
        }
    }

    /// The root it is below.
    pub fn root(&self) -> &Root {
        &self.inner.root
    }

    /// Its path relative to the root, links resolved ("" for the root).
    pub fn rel(&self) -> &str {
        &self.inner.rel
    }

    /// Its path, for messages.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The path of `name` in it, for messages.
    pub fn show(&self, name: &str) -> String {
        join(&self.inner.path, name)
    }

    /// The device and inode of the directory open.
    pub fn identity(&self) -> CallResult<(u64, u64)> {
        sys::fstat(self.as_fd())
            .map(|info| (info.dev(), info.ino()))
            .map_err(|err| CallError::io(&err, &format!("examine {}", quoted(&self.inner.path))))
    }

    /// The entry `name`'s status (links not followed), or `None` when
    /// there is none.
    pub fn lstat(&self, name: &str) -> CallResult<Option<Stat>> {
        self.plain(name)?;
        match sys::lstat_at(self.as_fd(), OsStr::new(name)) {
            Ok(info) => Ok(Some(info)),
            Err(err) if matches!(err.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                Ok(None)
            }
            Err(err) => Err(CallError::io(
                &err,
                &format!("examine {}", quoted(&self.show(name))),
            )),
        }
    }

    /// The bytes and status of the regular file `name`, or `None` when it
    /// does not exist; at most `limit` bytes when given. A link, a FIFO or
    /// a device is an error.
    pub fn read(&self, name: &str, limit: Option<usize>) -> CallResult<Option<(Vec<u8>, Stat)>> {
        self.plain(name)?;
        let shown = || quoted(&self.show(name));
        let fd = match sys::open_at(
            self.as_fd(),
            OsStr::new(name),
            sys::READ_FLAGS,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(err) if err.raw_os_error() == Some(libc::ELOOP) => {
                return Err(CallError::new(format!(
                    "{} is a symbolic link, not a regular file",
                    shown()
                )))
            }
            Err(err) => return Err(CallError::io(&err, &format!("read {}", shown()))),
        };
        let info = sys::fstat(fd.as_fd())
            .map_err(|err| CallError::io(&err, &format!("read {}", shown())))?;
        if info.is_dir() {
            // As Python's open says it, which the providers' messages
            // followed.
            let err = io::Error::from_raw_os_error(libc::EISDIR);
            return Err(CallError::io(&err, &format!("read {}", shown())));
        }
        if !info.is_file() {
            return Err(CallError::new(format!("{} is not a regular file", shown())));
        }
        let mut data = Vec::new();
        let file = File::from(fd);
        let read = match limit {
            Some(limit) => file.take(limit as u64).read_to_end(&mut data),
            None => (&file).read_to_end(&mut data),
        };
        read.map_err(|err| CallError::io(&err, &format!("read {}", shown())))?;
        Ok(Some((data, info)))
    }

    /// The names in it (without `.` and `..`).
    pub fn names(&self) -> CallResult<Vec<OsString>> {
        sys::list(self.as_fd())
            .map_err(|err| CallError::io(&err, &format!("list {}", quoted(&self.inner.path))))
    }

    /// The directory `name` in this one, never through a symbolic link;
    /// `create` makes it when it is missing.
    pub fn subdir(&self, name: &str, create: Option<Create>) -> CallResult<Dir> {
        self.plain(name)?;
        let shown = self.show(name);
        let mut tries = 0;
        let fd = loop {
            match sys::open_at(
                self.as_fd(),
                OsStr::new(name),
                sys::DIR_FLAGS,
                Mode::empty(),
            ) {
                Ok(fd) => break fd,
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => match create {
                    None => {
                        return Err(missing(format!(
                            "the directory {} does not exist",
                            quoted(&shown)
                        )))
                    }
                    Some(create) => break make_dir(self.as_fd(), name, create, &shown)?,
                },
                Err(err) => {
                    if read_link(self.as_fd(), name).is_some() {
                        return Err(CallError::new(format!(
                            "{} is a symbolic link, which ral does not follow here; \
                             refusing to use it",
                            quoted(&shown)
                        )));
                    }
                    if !matches!(err.raw_os_error(), Some(libc::ENOTDIR | libc::ELOOP)) {
                        return Err(CallError::io(&err, &format!("open {}", quoted(&shown))));
                    }
                    if tries == MAX_CHANGES {
                        return Err(CallError::new(format!(
                            "{} is not a directory",
                            quoted(&shown)
                        )));
                    }
                    // A file, or swapped since the open: try again to tell.
                    tries += 1;
                }
            }
        };
        let names: Vec<String> = [self.inner.rel.as_str(), name]
            .iter()
            .filter(|p| !p.is_empty())
            .map(|p| (*p).to_owned())
            .collect();
        Ok(Dir::new(self.inner.root.clone(), fd, &names))
    }

    /// Removes the directory `name` with everything in it, through
    /// descriptors, never following a symbolic link out of it (a link in
    /// it is removed, not what it points to).
    pub fn remove_tree(&self, name: &str) -> std::io::Result<()> {
        sys::remove_tree(self.as_fd(), OsStr::new(name))
    }

    /// The file `name` in this directory as a [`Target`] (never
    /// followed).
    pub fn file(&self, name: &str) -> CallResult<Target> {
        self.plain(name)?;
        Ok(Target {
            dir: self.clone(),
            name: name.to_owned(),
            path: self.show(name),
        })
    }

    /// Refuses a name that is not one entry of this directory: the system
    /// would follow links on the way to `a/b`, and `..` leads out of it.
    pub(super) fn plain(&self, name: &str) -> CallResult<()> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(CallError::new(format!(
                "{} is not the name of a file in {}",
                quoted(name),
                quoted(&self.inner.path)
            )));
        }
        Ok(())
    }

    /// The file `name` in this directory as a [`Target`], a symbolic link
    /// resolved inside the root (as [`Root::file`] does). Unlike a new
    /// walk from the root, `name` is found in this directory, the very one
    /// opened, even if its path leads elsewhere by now; so is a link's
    /// relative target, up to a `..` above this directory.
    pub fn entry(&self, name: &str) -> CallResult<Target> {
        if read_link(self.as_fd(), name).is_none() {
            return self.file(name);
        }
        self.inner.root.entry_walk(name, true, true, Some(self))
    }
}

/// A file to read or edit: its open directory and its name there.
#[derive(Debug, Clone)]
pub struct Target {
    dir: Dir,
    name: String,
    path: String,
}

impl Target {
    pub fn dir(&self) -> &Dir {
        &self.dir
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its path, for messages.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What tells it from other targets: its directory's path relative to
    /// the root, and its name.
    pub fn key(&self) -> (String, String) {
        (self.dir.rel().to_owned(), self.name.clone())
    }

    /// Its bytes and status, or `None` when it does not exist; at most
    /// `limit` bytes when given.
    pub fn read(&self, limit: Option<usize>) -> CallResult<Option<(Vec<u8>, Stat)>> {
        self.dir.read(&self.name, limit)
    }

    /// Its status (a link not followed), or `None`.
    pub fn lstat(&self) -> CallResult<Option<Stat>> {
        self.dir.lstat(&self.name)
    }
}
