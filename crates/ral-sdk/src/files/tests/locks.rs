//! Locks: excluded between two threads of one process and between two
//! processes (the Python toolkit's and lckpwdf's locks among them), not
//! kept by a child process, a wait bounded (by the lock timeout or the
//! call's deadline) and saying who holds the lock.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use super::{hold_lock_fixture, python_command, Sandbox};
use crate::files::Lock;

/// A process of the fixture holding a lock on `path`; it lets go when
/// dropped (its stdin closed).
struct Holder {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl Holder {
    fn start(path: &Path, kind: &str, mode: &str) -> Holder {
        let mut child = Command::new("python3")
            .args(["-I", "-S"])
            .arg(hold_lock_fixture())
            .arg(path)
            .args([kind, mode])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        let mut holder = Holder { child, out };
        assert_eq!(holder.line(), "locked\n");
        holder
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        // A test that failed before the holder was waited for must fail,
        // not wait for it forever.
        if std::thread::panicking() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn short(sandbox: &mut Sandbox, timeout: Duration) {
    sandbox.call.lock_timeout = timeout;
}

#[test]
fn the_accounts_lock_excludes_another_thread_of_this_process() {
    let mut sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    short(&mut sandbox, Duration::from_millis(200));
    let root = sandbox.open();
    let mut first = Lock::accounts(&root).unwrap();
    first.acquire(&sandbox.call).unwrap();
    let call = &sandbox.call;
    let second = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut lock = Lock::accounts(&root).unwrap();
                lock.acquire(call).map(|()| lock.is_held())
            })
            .join()
            .unwrap()
    });
    let err = second.unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "timed out after 0.2s waiting for the lock '{}', held by another process; \
             nothing was changed",
            sandbox.path("etc/.pwd.lock").display()
        )
    );
    first.release();
    let again = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut lock = Lock::accounts(&root).unwrap();
                lock.acquire(call).map(|()| lock.is_held())
            })
            .join()
            .unwrap()
    });
    assert_eq!(again, Ok(true));
}

#[test]
fn file_and_directory_locks_exclude_another_lock_of_this_process() {
    let mut sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"");
    short(&mut sandbox, Duration::ZERO);
    let root = sandbox.open();
    let target = root.file("etc/hosts", true, None).unwrap();
    let mut first = Lock::beside(&target);
    first.acquire(&sandbox.call).unwrap();
    let err = Lock::beside(&target).acquire(&sandbox.call).unwrap_err();
    assert!(
        err.message.starts_with("timed out after 0s"),
        "{}",
        err.message
    );
    // Two locks on one open directory (shared by its clones) still
    // exclude each other.
    let dir = target.dir().clone();
    let mut on_dir = Lock::of_directory(&dir);
    on_dir.acquire(&sandbox.call).unwrap();
    let err = Lock::of_directory(&dir).acquire(&sandbox.call).unwrap_err();
    assert!(
        err.message.contains("waiting for the lock"),
        "{}",
        err.message
    );
    drop(on_dir);
    Lock::of_directory(&dir).acquire(&sandbox.call).unwrap();
    assert!(sandbox.log().contains("waiting up to 0s for the lock"));
}

#[test]
fn a_lock_held_by_another_process_is_waited_for_until_let_go() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    let mut holder = Holder::start(&sandbox.path("etc/.pwd.lock"), "posix", "until-waited-for");
    let mut lock = Lock::accounts(&sandbox.open()).unwrap();
    assert!(!lock.is_held());
    // The holder lets go once it sees this process blocked on the lock.
    lock.acquire(&sandbox.call).unwrap();
    assert!(lock.is_held());
    assert_eq!(holder.line(), "released\n");
    let log = sandbox.log();
    assert!(
        log.contains("info: waiting up to 15s for the lock '"),
        "{log}"
    );
    assert!(
        log.contains(&format!("held by process {} (python3)", holder.pid())),
        "{log}"
    );
    assert!(log.contains("debug: got the lock '"), "{log}");
}

#[test]
fn the_wait_is_bounded_and_says_who_holds_the_lock() {
    let mut sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    short(&mut sandbox, Duration::from_millis(300));
    let holder = Holder::start(&sandbox.path("etc/.pwd.lock"), "posix", "forever");
    let err = Lock::accounts(&sandbox.open())
        .unwrap()
        .acquire(&sandbox.call)
        .unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "timed out after 0.3s waiting for the lock '{}', held by process {} (python3); \
             nothing was changed",
            sandbox.path("etc/.pwd.lock").display(),
            holder.pid()
        )
    );
    // An flock another process holds is waited for the same way.
    sandbox.write("etc/hosts", b"");
    let _flock = Holder::start(&sandbox.path("etc/.hosts.ral-lock"), "flock", "forever");
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let err = Lock::beside(&target).acquire(&sandbox.call).unwrap_err();
    assert!(
        err.message.contains("timed out after 0.3s"),
        "{}",
        err.message
    );
}

#[test]
fn the_accounts_lock_held_here_excludes_lckpwdf_style_locks_elsewhere() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    let mut lock = Lock::accounts(&sandbox.open()).unwrap();
    lock.acquire(&sandbox.call).unwrap();
    // What lckpwdf and the Python toolkit take: a POSIX record lock.
    let probe = "import fcntl\n\
                 fd = os.open(os.path.join(os.environ['RALSH_ROOT_DIR'], 'etc/.pwd.lock'), os.O_RDWR)\n\
                 try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    print('got it')\n\
                 except OSError:\n    print('busy')\n";
    assert_eq!(sandbox.python(probe).stdout, b"busy\n");
    lock.release();
    assert_eq!(sandbox.python(probe).stdout, b"got it\n");
}

#[test]
fn a_lock_file_that_is_a_link_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    sandbox.write("victim", b"keep\n");
    sandbox.symlink(
        sandbox.path("victim").to_str().unwrap(),
        "etc/.hosts.ral-lock",
    );
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let err = Lock::beside(&target).acquire(&sandbox.call).unwrap_err();
    assert!(
        err.message.starts_with("cannot open the lock file '"),
        "{}",
        err.message
    );
    assert_eq!(sandbox.read("victim"), b"keep\n");
}

#[test]
fn python_and_rust_lock_files_are_the_same_lock() {
    let mut sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"");
    short(&mut sandbox, Duration::from_millis(100));
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut lock = Lock::beside(&target);
    lock.acquire(&sandbox.call).unwrap();
    let out = python_command(
        "os.environ['RALSH_LOCK_TIMEOUT'] = '0.1'\n\
         target = ral.Root().file('etc/hosts')\n\
         try:\n    ral.Lock.beside(target).acquire()\n    print('got it')\n\
         except ral.CallError as err:\n    print(err)\n",
    )
    .env("RALSH_ROOT_DIR", &sandbox.root)
    .output()
    .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("timed out after 0.1s"), "{said}");
}

#[test]
fn the_python_toolkit_waits_for_the_accounts_lock_held_here_and_names_no_false_process() {
    let sandbox = Sandbox::new();
    sandbox.mkdir("etc");
    let mut lock = Lock::accounts(&sandbox.open()).unwrap();
    lock.acquire(&sandbox.call).unwrap();
    let out = python_command(
        "os.environ['RALSH_LOCK_TIMEOUT'] = '0.1'\n\
         try:\n    ral.Lock.accounts(ral.Root()).acquire()\n    print('got it')\n\
         except ral.CallError as err:\n    print(err)\n",
    )
    .env("RALSH_ROOT_DIR", &sandbox.root)
    .output()
    .unwrap();
    // An OFD lock's holder reads as pid -1 in /proc/locks: no process.
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!(
            "timed out after 0.1s waiting for the lock '{}', held by another process; \
             nothing was changed\n",
            sandbox.path("etc/.pwd.lock").display()
        )
    );
}

#[test]
fn a_wait_for_a_lock_ends_at_the_calls_deadline() {
    let mut sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"");
    // Less of the call's time is left than the lock timeout allows.
    let late = std::sync::Arc::default();
    sandbox.call.deadline = Some(crate::testing::deadline(Duration::from_millis(300), &late));
    let _flock = Holder::start(&sandbox.path("etc/.hosts.ral-lock"), "flock", "forever");
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let err = Lock::beside(&target).acquire(&sandbox.call).unwrap_err();
    assert_eq!(
        err.message,
        "the call ran past its time limit of 0.3s (--timeout); this was not done"
    );
    assert!(sandbox.log().contains("waiting up to 0.3s for the lock"));
}

/// A child process that lives until dropped (its stdin closed), as a
/// provider's script run while a lock is held.
struct Bystander(Child);

impl Bystander {
    /// Started, and seen running its program: the descriptors not to be
    /// inherited are closed by then.
    fn start() -> Bystander {
        let child = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut bystander = Bystander(child);
        let stdin = bystander.0.stdin.as_mut().unwrap();
        stdin.write_all(b"running\n").unwrap();
        let mut line = String::new();
        BufReader::new(bystander.0.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "running\n");
        bystander
    }
}

impl Drop for Bystander {
    fn drop(&mut self) {
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

#[test]
fn a_lock_let_go_is_not_kept_by_a_child_process() {
    let mut sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"");
    // Time enough for a child that another test is starting, which holds
    // a copy of every descriptor until it runs its program.
    short(&mut sandbox, Duration::from_secs(2));
    let root = sandbox.open();
    let target = root.file("etc/hosts", true, None).unwrap();
    let kinds: [&dyn Fn() -> Lock; 3] = [
        &|| Lock::beside(&target),
        &|| Lock::accounts(&root).unwrap(),
        &|| Lock::of_directory(target.dir()),
    ];
    for make in kinds {
        let mut lock = make();
        lock.acquire(&sandbox.call).unwrap();
        // A child started under the lock gets no descriptor of it, so
        // letting go here lets go.
        let _child = Bystander::start();
        lock.release();
        let mut again = make();
        let got = again.acquire(&sandbox.call);
        assert_eq!(got, Ok(()), "{}", again.show());
    }
}

#[test]
fn a_deadline_no_sooner_than_the_lock_timeout_leaves_the_lock_timeouts_message() {
    let mut sandbox = Sandbox::new();
    sandbox.write("etc/hosts", b"");
    short(&mut sandbox, Duration::from_millis(100));
    // As much of the call's time is left as the lock timeout allows: the
    // deadline cuts the wait only when it comes first.
    let late = std::sync::Arc::default();
    sandbox.call.deadline = Some(crate::testing::deadline(Duration::from_millis(100), &late));
    let target = sandbox.open().file("etc/hosts", true, None).unwrap();
    let mut held = Lock::beside(&target);
    held.acquire(&sandbox.call).unwrap();
    let err = Lock::beside(&target).acquire(&sandbox.call).unwrap_err();
    let lock_timeout = format!(
        "timed out after 0.1s waiting for the lock '{}', held by ",
        sandbox.path("etc/.hosts.ral-lock").display()
    );
    assert!(err.message.starts_with(&lock_timeout), "{}", err.message);
}

#[test]
fn seconds_are_written_as_pythons_g_format_writes_them() {
    // What Python's '%g' % value writes, as the Python toolkit's
    // messages do.
    let cases = [
        (Duration::from_secs(15), "15"),
        (Duration::from_millis(500), "0.5"),
        (Duration::from_micros(12_500), "0.0125"),
        (Duration::from_micros(1_234), "0.001234"),
        (Duration::from_millis(123_456_700), "123457"),
        // At the powers of ten the digits before the point change.
        (Duration::from_secs(1), "1"),
        (Duration::from_millis(100), "0.1"),
        (Duration::from_millis(1), "0.001"),
        (Duration::from_micros(99_999_999), "100"),
        (Duration::from_micros(1_000_001), "1"),
        (Duration::from_micros(100_000_050), "100"),
        (Duration::from_micros(999_999), "0.999999"),
        // Rounding to six digits may reach the next power of ten.
        (Duration::from_micros(9_999_999), "10"),
        // Below 1e-4 and from 1e6 on, the exponent form.
        (Duration::from_micros(100), "0.0001"),
        (Duration::from_micros(50), "5e-05"),
        (Duration::from_nanos(1), "1e-09"),
        (Duration::from_nanos(12_345_678), "0.0123457"),
        (Duration::from_micros(999_999_700_000), "1e+06"),
        (Duration::from_secs(86_400 * 30), "2.592e+06"),
        (Duration::from_secs(u64::MAX), "1.84467e+19"),
    ];
    for (duration, text) in cases {
        assert_eq!(crate::files::lock::seconds(duration), text);
    }
}
