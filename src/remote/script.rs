//! The command lines ral sends to a target: each is one string that the
//! target's login shell parses exactly once (`exec /bin/sh -c SCRIPT ral
//! ARG...`), with every argument quoted by [`quote_word`], so no value can
//! run anything there. The scripts themselves need only a POSIX `sh` and
//! the standard utilities (`find`, `id`, `mkdir`, `mv`, `rm`, `sleep`,
//! `kill`, `env`, `cat`, `cmp`, `sed`, `sort`, `sha256sum`, `uname`, `getconf`; GNU `find -printf`
//! where there is one, see [`LISTING`]).
//!
//! - [`session`]: the command of the connection's master: makes sure the
//!   private cache directory (`~/.cache/ral`, 0700, ours, not a link)
//!   exists, says the machine (`ral-machine SYSTEM ARCH [glibc VERSION]`: which
//!   copy of ral's native providers' program can run there) and whether
//!   an intact copy of the bundle of a digest is there (`ral-bundle have
//!   DIR` or `ral-bundle need DIR`; each file's SHA-256 checked, no link
//!   anywhere), then stays until the controller is gone.
//! - [`probe`]: the same question about another bundle, for a machine
//!   that needs another copy of the program.
//! - [`upload`]: the same checks, then runs the payload read on stdin (see
//!   `bundle.rs`) in a fresh directory that is renamed into place only when
//!   the payload reached its end, so a cut upload is never used; a copy
//!   there that is not intact is replaced.
//! - [`provider`]: runs one provider call the way the local runner does:
//!   in `/`, with exactly the environment given (`env -i`), under a
//!   watchdog that ends the whole process group (SIGTERM, then SIGKILL
//!   after two seconds) at the time limit or when the connection is gone,
//!   and with what the provider left running ended when it exits, unless
//!   its calls start daemons.

use crate::quoting::quote_word;

/// The exit status of a provider call that the watchdog ended.
pub const TIMED_OUT: i32 = 124;

/// Checks shared by [`session`] and [`upload`]: `$1` is the bundle's digest;
/// `r` is left naming the private cache directory.
const PRIVATE_DIR: &str = r#"set -u
umask 077
fail() { echo "error: $*" >&2; exit 3; }
u=$(id -u)
mine() {
  [ -n "$(find "$1" -prune -user "$u" ! -perm -g+w ! -perm -o+w -print 2>/dev/null)" ]
}
[ -n "${HOME:-}" ] && [ -d "$HOME/" ] || fail "no home directory to keep providers in"
c=$HOME/.cache
r=$c/ral
case $1 in *[!0-9a-f]*|'') fail "bad bundle digest";; esac
b=$r/$1
# The usual case, in one find: both there, ours and written by us alone,
# the second exactly 0700 (a path printed twice is also 0700).
private=
if [ -d "$c/" ] && [ ! -L "$r" ] && [ -d "$r" ]; then
  case $(find "$c/" "$r" -prune -user "$u" ! -perm -g+w ! -perm -o+w -print -perm 700 -print 2>/dev/null) in
  "$c/
$r
$r" | "$c/
$c/
$r
$r") private=1 ;;
  esac
fi
if [ -z "$private" ]; then
  # mkdir first, then look: another run may make them at the same time.
  mkdir -m 700 "$c" 2>/dev/null
  [ -d "$c/" ] || fail "cannot make $c"
  mine "$c/" || fail "$c is owned by another user or writable by others"
  mkdir -m 700 "$r" 2>/dev/null
  [ -L "$r" ] && fail "$r is a symbolic link"
  [ -d "$r" ] || fail "cannot make $r"
  mine "$r" || fail "$r is owned by another user or writable by others"
  chmod 700 "$r" || fail "cannot make $r private"
fi
"#;

/// Whether the copy in `$b` is the one sent, `$2` listing its files as
/// `sha256sum -c` reads them (`DIGEST  dN/NAME` lines): no link anywhere,
/// everything ours and written by us alone, exactly those files, each
/// with its content. Sets `why` when a copy is there but not intact.
/// (`.upload-*` is another upload's copy, briefly inside: see [`UPLOAD`].
/// `__pycache__` holds the bytecode Python writes beside its modules,
/// which a provider started with `python3 -I` cannot send elsewhere: not
/// part of the copy, but no link either, nor writable by others; Python
/// takes a file there only while its source's size and time match.)
const INTACT: &str = r#"command -v sha256sum >/dev/null || fail "sha256sum is missing: the copy of the providers cannot be checked"
intact() {
  why=
  if [ -L "$b" ]; then why="$b is a symbolic link"; return 1; fi
  [ -d "$b" ] && [ -f "$b/.complete" ] || return 1
  odd=$(cd "$b" && find . -path './.upload-*' -prune -o \( -type l -o ! -type f ! -type d -o -perm -g+w -o -perm -o+w -o ! -user "$(id -u)" ! -name __pycache__ ! -path '*/__pycache__/*' \) -print | head -n 1)
  if [ -n "$odd" ]; then why="$b/${odd#./} is a link, not a plain file of ours, or writable by others"; return 1; fi
  have=$(cd "$b" && find . \( -path './.upload-*' -o -name __pycache__ \) -prune -o -type f ! -name .complete ! -path ./.checked -print | sed 's|^\./||' | LC_ALL=C sort)
  want=$(printf '%s\n' "$2" | sed 's/^[0-9a-f]*  //' | LC_ALL=C sort)
  if [ "$have" != "$want" ]; then why="$b does not hold the files copied"; return 1; fi
  if [ -n "$2" ]; then
    bad=$(cd "$b" && printf '%s\n' "$2" | sha256sum -c 2>/dev/null | sed -n 's/: FAILED.*$//p' | head -n 1)
    if [ -n "$bad" ]; then why="$b/$bad differs from the file sent"; return 1; fi
  fi
}
"#;

/// What a copy looks like, for [`CHECK`]'s record of a copy found
/// intact: every entry's type, owner, mode and inode, and every file's
/// size, modification and change times (GNU find's `-printf`; elsewhere
/// nothing, and every run checks the whole copy). An entry written,
/// replaced, moved, chmod-ed or added since gets a new change time, which
/// no one but the clock sets, so an unchanged listing is an unchanged
/// copy. The directory's own times are left out (the record is written in
/// it); `__pycache__` (see [`INTACT`]) only shows what would make the copy
/// unusable.
const LISTING: &str = r#"listing() {
  [ ! -L "$b" ] && cd "$b" 2>/dev/null && find . -name . -printf '%y %U %m %i %p\n' -o -path ./.checked -o -path './.upload-*' -prune -o \( -name __pycache__ -o -path '*/__pycache__/*' \) \( \( -type l -o ! -type f ! -type d -o -perm -g+w -o -perm -o+w \) -printf 'odd %p\n' -o -true \) -o -printf '%y %U %m %i %s %T@ %C@ %p\n' 2>/dev/null
}
# Records the copy as intact, with the listing taken before the check.
record() {
  [ -n "$now" ] || return 0
  printf '%s\n%s\n' "$1" "$now" >"$r/.checked-$1-$$" &&
    mv -f "$r/.checked-$1-$$" "$b/.checked" 2>/dev/null || rm -f "$r/.checked-$1-$$"
}
"#;

/// The session's script: says its own process ID, the system and machine
/// (`uname -sm`: `Linux x86_64`) and its C library (`glibc 2.31`, or nothing where there is no
/// glibc), and whether an intact copy of the bundle is there (see
/// [`CHECK`]), then waits for the end of its stdin: the controller's end,
/// however it ends. Provider calls watch it (see [`PROVIDER`]).
///
/// The machine is asked once per boot and C library: the answer is kept
/// in `~/.cache/ral.machine` with the boot's ID, and taken from there (by
/// the shell's own `read`: no process started) while the boot is the same
/// and the file is newer than `/etc/ld.so.cache`, which every change of
/// the system's libraries (a glibc upgrade among them) writes anew.
const SESSION: &str = r#"echo "ral-session $$"
m= boot=
if [ -f "$c/ral.machine" ] && [ "$c/ral.machine" -nt /etc/ld.so.cache ] &&
  read -r boot </proc/sys/kernel/random/boot_id; then
  { read -r was && read -r m; } <"$c/ral.machine" || m=
  [ "$was" = "$boot" ] || m=
fi 2>/dev/null
if [ -z "$m" ]; then
  m="$(uname -sm 2>/dev/null) $(getconf GNU_LIBC_VERSION 2>/dev/null)"
  if [ -n "$boot" ] || read -r boot </proc/sys/kernel/random/boot_id 2>/dev/null; then
    printf '%s\n%s\n' "$boot" "$m" >"$c/ral.machine-$$" 2>/dev/null &&
      mv -f "$c/ral.machine-$$" "$c/ral.machine" 2>/dev/null || rm -f "$c/ral.machine-$$"
  fi
fi
echo "ral-machine $m"
"#;

/// Whether an intact copy of the bundle is there (`ral-bundle damaged
/// WHY` first when one is there but changed).
///
/// A copy found intact (here or by [`UPLOAD`]) is recorded in
/// `$b/.checked` with its [`LISTING`] taken before the check; while the
/// listing stays the same, later sessions take the copy as intact without
/// reading its files again.
const CHECK: &str = r#"now=$(listing) || now=
# cmp stops at the first difference: a record of any size costs no more
# than the listing.
if [ -n "$now" ] && [ -f "$b/.checked" ] && [ ! -L "$b/.checked" ] &&
  printf '%s\n%s\n' "$1" "$now" | cmp -s - "$b/.checked"; then
  echo "ral-bundle have $b"
elif intact "$@"; then
  record "$1"
  echo "ral-bundle have $b"
else
  [ -z "$why" ] || echo "ral-bundle damaged $why"
  echo "ral-bundle need $b"
fi
"#;

/// The end of [`SESSION`]: until the controller's end (the shell's own
/// read: nothing to start).
const WAIT: &str = r#"while read -r _; do :; done
"#;

/// The upload: the payload on stdin, written in a directory of its own.
const UPLOAD: &str = r#"t=$r/.upload-$1-$$
rm -rf "$t" && mkdir -m 700 "$t" && cd "$t" || fail "cannot make $t"
if ! sh -s || [ ! -f .complete ]; then
  cd / && rm -rf "$t"
  fail "the upload to $b was cut short"
fi
cd /
# An intact copy is never replaced: runs may be using it. Anything else
# there (a cut removal, a changed copy, a link) is moved aside first. Of
# two uploads at once, the second one's mv may land inside the first's
# copy: removed.
if { [ -e "$b" ] || [ -L "$b" ]; } && ! intact "$@"; then
  mv "$b" "$r/.stale-$1-$$" && rm -rf "$r/.stale-$1-$$"
fi
[ -e "$b" ] || [ -L "$b" ] || mv "$t" "$b" 2>/dev/null
rm -rf "$t" "$b/${t##*/}"
[ -f "$b/.complete" ] || fail "cannot move the upload to $b"
now=$(listing) || now=
intact "$@" || fail "the copy in $b is not the one sent: ${why:-it is incomplete}"
record "$1"
echo "ral-bundle have $b"
"#;

/// The provider call: `$1` the ssh session's process (the login shell's
/// parent), `$2` the session script's (see [`SESSION`]), `$3` the time
/// limit in whole seconds, `$4` `sweep` or `keep` (what the provider
/// leaves running), then `VAR=VALUE` words and the program with its
/// arguments, for `env -i`.
///
/// The provider's process group is the wrapper's (sshd made it), so a
/// SIGTERM the provider sends its own group must not end the wrapper or
/// the watchdog: both catch TERM and go on. The watchdog (no descriptor of
/// the session, so it never holds a call open) tells the wrapper of a
/// timeout with USR1, then ends the group: SIGTERM, two seconds, SIGKILL.
/// It also ends the group as soon as the session's process is gone (ral
/// closed the connection or was interrupted), or the session script is
/// (ral ended, even by SIGKILL: the master, which shares the connection
/// with the call, outlives it until the call ends): nothing is left
/// running for nobody. (Where such a process is another user's, as with
/// Dropbear or under sudo, `kill -0` may fail though it runs: `/proc` says
/// so where there is one.) When the provider exits, what it left in the
/// group gets
/// SIGTERM, and SIGKILL two seconds later from a background killer that
/// holds nothing of the session either; unless its calls start daemons.
const PROVIDER: &str = r#"o=$1 l=$2 t=$3 m=$4
shift 4
cd / || exit 125
w=$$ fired=
trap : TERM
trap 'fired=1' USR1
(
  trap : TERM
  n=0
  while [ "$n" -lt "$t" ] && { kill -0 "$o" || [ -d "/proc/$o" ]; } 2>/dev/null &&
    { kill -0 "$l" || [ -d "/proc/$l" ]; } 2>/dev/null; do
    sleep 1
    n=$((n + 1))
  done
  [ "$n" -lt "$t" ] || kill -USR1 "$w" 2>/dev/null
  kill -TERM 0
  sleep 2
  kill -KILL 0
) </dev/null >/dev/null 2>&1 &
d=$!
exec 3<&0
env -i HOME="$HOME" "$@" <&3 3<&- &
p=$!
exec 3<&-
while :; do
  wait "$p"
  rc=$?
  [ -n "$fired" ] && break
  kill -0 "$p" 2>/dev/null || break
done
if [ -n "$fired" ]; then
  echo "error: ran longer than $t s on the target; its processes were ended" >&2
  exit 124
fi
kill -KILL "$d" 2>/dev/null
if [ "$m" = sweep ]; then
  trap '' TERM
  kill -TERM 0 2>/dev/null
  (sleep 2; kill -KILL 0) </dev/null >/dev/null 2>&1 &
fi
exit "$rc"
"#;

/// `exec /bin/sh -c SCRIPT ral ["$PPID"] ARGS...`, through `sudo -n` when
/// asked. `$PPID` is the one word the login shell expands: its parent, the
/// ssh session's process.
fn command(script: &str, session: bool, args: &[&str], sudo: bool) -> String {
    let mut line = String::from("exec ");
    if sudo {
        line.push_str("sudo -n -- ");
    }
    line.push_str("/bin/sh -c ");
    line.push_str(&quote_word(script));
    line.push_str(" ral");
    if session {
        line.push_str(" \"$PPID\"");
    }
    for arg in args {
        line.push(' ');
        line.push_str(&quote_word(arg));
    }
    line
}

/// The session's command for the bundle `digest` whose files `manifest`
/// lists (see `INTACT`).
pub fn session(digest: &str, manifest: &str) -> String {
    command(
        &format!("{PRIVATE_DIR}{INTACT}{LISTING}{SESSION}{CHECK}{WAIT}"),
        false,
        &[digest, manifest],
        false,
    )
}

/// Whether an intact copy of the bundle `digest` is there, as the
/// session's command says it: for a target that needs another bundle
/// than the one its session asked about (another machine's program).
pub fn probe(digest: &str, manifest: &str) -> String {
    command(
        &format!("{PRIVATE_DIR}{INTACT}{LISTING}{CHECK}"),
        false,
        &[digest, manifest],
        false,
    )
}

/// The machine a session's script said it runs on: `uname -sm`, and the
/// glibc version where there is one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Machine {
    /// The system, `uname -s` (`Linux`; empty when it printed nothing).
    pub os: String,
    /// The machine, `uname -m` (empty when it printed nothing).
    pub arch: String,
    /// `getconf GNU_LIBC_VERSION`'s version: `None` without glibc.
    pub glibc: Option<String>,
}

/// The most characters of a machine's name or glibc version kept.
const MACHINE_WORD: usize = 64;

/// The machine of a `ral-machine SYSTEM ARCH [glibc VERSION]` line.
/// (A target says at most [`MACHINE_WORD`] characters of each: no
/// machine's name or version is longer, and a hostile target's would
/// otherwise travel into every error.)
pub fn parse_machine(line: &str) -> Option<Machine> {
    let rest = line.strip_prefix("ral-machine ")?;
    let mut words = rest.split_whitespace();
    let word = |text: &str| text.chars().take(MACHINE_WORD).collect::<String>();
    let os = word(words.next().unwrap_or_default());
    let arch = word(words.next().unwrap_or_default());
    let glibc = match (words.next(), words.next()) {
        (Some("glibc"), Some(version)) => Some(word(version)),
        _ => None,
    };
    Some(Machine { os, arch, glibc })
}

/// The upload of the bundle `digest` whose files `manifest` lists; the
/// payload follows on stdin.
pub fn upload(digest: &str, manifest: &str) -> String {
    command(
        &format!("{PRIVATE_DIR}{INTACT}{LISTING}{UPLOAD}"),
        false,
        &[digest, manifest],
        false,
    )
}

/// One provider call in the session whose script runs as `session` (see
/// `SESSION`): `env` as `VAR=VALUE` words (the wrapper adds the
/// target's HOME), then `program` and `args`.
pub fn provider(
    session: u32,
    timeout_secs: u64,
    keep_leftovers: bool,
    env: &[String],
    program: &str,
    args: &[String],
    sudo: bool,
) -> String {
    let limit = timeout_secs.max(1).to_string();
    let mode = if keep_leftovers { "keep" } else { "sweep" };
    let session = session.to_string();
    let mut words: Vec<&str> = vec![&session, &limit, mode];
    words.extend(env.iter().map(String::as_str));
    words.push(program);
    words.extend(args.iter().map(String::as_str));
    command(PROVIDER, true, &words, sudo)
}

/// The shell that runs a provider with variables read on its stdin (see
/// [`exports`]) exported: values that must not be on any command line.
/// The provider's stdin is then at its end, as the simple convention has
/// it.
const WITH_EXPORTS: &str = r#"eval "$(cat)" || exit 125
exec "$@"
"#;

/// `program` with `args`, run through `WITH_EXPORTS`: the program and
/// arguments to give [`provider`] instead.
pub fn with_exports(program: &str, args: &[String]) -> (String, Vec<String>) {
    let mut words = vec!["-c".to_owned(), WITH_EXPORTS.to_owned(), "ral".to_owned()];
    words.push(program.to_owned());
    words.extend(args.iter().cloned());
    ("/bin/sh".to_owned(), words)
}

/// The stdin of [`with_exports`]: `NAME=VALUE` and `export NAME` lines,
/// each value one quoted word. Names are shell variable names (metadata
/// checks them) and values hold no NUL (the convention checks them).
pub fn exports(vars: &[(String, String)]) -> Vec<u8> {
    let mut text = String::new();
    for (name, value) in vars {
        text.push_str(&format!("{name}={}\nexport {name}\n", quote_word(value)));
    }
    text.into_bytes()
}

/// The directory a probe or upload answered with (`ral-bundle have DIR`),
/// and whether the bundle is there.
pub fn parse_answer(line: &str) -> Option<(bool, &str)> {
    let rest = line.strip_prefix("ral-bundle ")?;
    let (state, dir) = rest.split_once(' ')?;
    match state {
        "have" => Some((true, dir)),
        "need" => Some((false, dir)),
        _ => None,
    }
    .filter(|(_, dir)| dir.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_passes_its_arguments_through_one_shell_unchanged() {
        let hostile = ["a b", "'", "$(id)", "`id`", "x\ny", "$HOME", "-n", ""];
        let env: Vec<String> = vec!["RALSH_ROOT_DIR=/r o".into()];
        let args: Vec<String> = hostile.iter().map(|s| s.to_string()).collect();
        let line = provider(42, 5, false, &env, "/p/x.prov", &args, false);
        let words = shell_words::split(&line).unwrap();
        assert_eq!(words[..3], ["exec", "/bin/sh", "-c"]);
        assert_eq!(words[3], PROVIDER);
        let mut expected = vec![
            "ral",
            "$PPID",
            "42",
            "5",
            "sweep",
            "RALSH_ROOT_DIR=/r o",
            "/p/x.prov",
        ];
        expected.extend(hostile);
        assert_eq!(words[4..], expected);
    }

    /// The session script's process ID for calls run here: this process,
    /// which outlives them.
    fn me() -> u32 {
        std::process::id()
    }

    /// Runs a provider command line as the target's login shell would,
    /// leading a process group of its own as sshd makes it.
    fn run_here(line: &str) -> std::process::Output {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("sh")
            .arg("-c")
            .arg(line)
            .process_group(0)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    #[test]
    fn a_quick_provider_ends_its_call_at_once_with_its_status_and_output() {
        let env = vec!["A=1".to_owned()];
        // The watchdog of a call that ends at once must never outlive it
        // (it would hold the session open up to the limit, then report a
        // timeout): many quick calls, each ending clean.
        for round in 0..40 {
            let args = vec!["-c".to_owned(), "echo \"$A $HOME\"; exit 3".to_owned()];
            let out = run_here(&provider(
                me(),
                30,
                round % 2 == 0,
                &env,
                "/bin/sh",
                &args,
                false,
            ));
            assert_eq!(out.status.code(), Some(3), "round {round}");
            let home = std::env::var("HOME").unwrap_or_default();
            assert_eq!(String::from_utf8_lossy(&out.stdout), format!("1 {home}\n"));
            assert_eq!(String::from_utf8_lossy(&out.stderr), "", "round {round}");
        }
    }

    #[test]
    fn exported_values_reach_the_provider_on_stdin_and_no_command_line() {
        use std::io::Write;
        let secret = "s3cr'et $(id) `id`\nline two";
        let vars = vec![
            ("password".to_owned(), secret.to_owned()),
            ("RALSH_SENSITIVE".to_owned(), "password".to_owned()),
        ];
        // The provider prints its variable, and its own command line.
        let args = vec![
            "-c".to_owned(),
            "printf '%s|%s|' \"$password\" \"$RALSH_SENSITIVE\"; tr '\\0' ' ' </proc/$$/cmdline"
                .to_owned(),
        ];
        let (program, args) = with_exports("/bin/sh", &args);
        let line = provider(me(), 30, false, &[], &program, &args, false);
        assert!(!line.contains("s3cr"), "{line}");
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&line)
            .process_group(0)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(&exports(&vars))
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (shown, cmdline) = stdout.split_at(secret.len() + "|password|".len());
        assert_eq!(shown, format!("{secret}|password|"));
        assert!(!cmdline.contains("s3cr"), "{cmdline}");
    }

    #[test]
    fn a_provider_that_signals_its_own_group_is_not_taken_for_a_timeout() {
        let args = vec![
            "-c".to_owned(),
            "trap '' TERM; kill -TERM 0; echo done".to_owned(),
        ];
        let out = run_here(&provider(me(), 30, false, &[], "/bin/sh", &args, false));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "done\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    }

    #[test]
    fn what_a_provider_leaves_is_ended_even_when_it_ignores_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!(
            "(trap '' TERM; exec sleep 60) </dev/null >/dev/null 2>&1 & echo $! > {}",
            pid_file.display()
        );
        let args = vec!["-c".to_owned(), script];
        let out = run_here(&provider(me(), 30, false, &[], "/bin/sh", &args, false));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SIGKILL comes two seconds after the sweep's SIGTERM.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
        };
        while alive(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(!alive(pid), "the leftover {pid} still runs");
    }

    #[test]
    fn the_watchdog_ends_the_provider_group_once_the_session_script_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        // The session's script stands in: a process that ends when the
        // test closes its stdin, as the real one does.
        let mut script = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let session = script.id();
        let provider_script = format!(
            "(trap '' TERM; exec sleep 60) & echo $! > {}; exec sleep 60",
            pid_file.display()
        );
        let args = vec!["-c".to_owned(), provider_script];
        let line = provider(session, 300, false, &[], "/bin/sh", &args, false);
        let call = std::thread::spawn(move || run_here(&line));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !pid_file.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let started = std::time::Instant::now();
        drop(script.stdin.take());
        script.wait().unwrap();
        let out = call.join().unwrap();
        let took = started.elapsed();
        assert!(
            took < std::time::Duration::from_secs(10),
            "the call ended {took:?} after the session script, {out:?}"
        );
        let leftover: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let alive = |pid: i32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
        };
        while alive(leftover) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            !alive(leftover),
            "the provider's child {leftover} still runs"
        );
    }

    #[test]
    fn the_watchdog_ends_a_provider_at_the_limit() {
        let args = vec!["-c".to_owned(), "trap '' TERM; sleep 60".to_owned()];
        let out = run_here(&provider(me(), 1, false, &[], "/bin/sh", &args, false));
        assert_eq!(out.status.code(), Some(TIMED_OUT));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("ran longer than 1 s on the target"),
            "{stderr}"
        );
    }

    #[test]
    fn sudo_goes_before_the_shell() {
        let line = session("ab12", "");
        assert!(line.starts_with("exec /bin/sh -c '"), "{line}");
        let sudo = provider(1, 1, true, &[], "/p", &[], true);
        assert!(sudo.starts_with("exec sudo -n -- /bin/sh -c '"), "{sudo}");
        assert!(shell_words::split(&sudo)
            .unwrap()
            .contains(&"keep".to_owned()));
    }

    #[test]
    fn the_machine_line_says_the_architecture_and_glibc() {
        let machine = |arch: &str, glibc: Option<&str>| Machine {
            os: if arch.is_empty() { "" } else { "Linux" }.to_owned(),
            arch: arch.to_owned(),
            glibc: glibc.map(str::to_owned),
        };
        assert_eq!(
            parse_machine("ral-machine Linux x86_64 glibc 2.31"),
            Some(machine("x86_64", Some("2.31")))
        );
        // musl has no GNU_LIBC_VERSION; a target without uname says nothing.
        assert_eq!(
            parse_machine("ral-machine Linux aarch64 "),
            Some(machine("aarch64", None))
        );
        assert_eq!(parse_machine("ral-machine  "), Some(machine("", None)));
        assert_eq!(parse_machine("ral-session 12"), None);
        let long = parse_machine(&format!(
            "ral-machine Linux {} glibc 2.{}",
            "x".repeat(10_000),
            "9".repeat(500)
        ))
        .unwrap();
        assert_eq!(long.arch.len(), 64);
        assert_eq!(long.glibc.unwrap().len(), 64);
    }

    #[test]
    fn the_machine_is_asked_once_per_boot_and_c_library() {
        // The session's lines up to its machine, run here with a uname
        // that notes each call.
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let calls = dir.path().join("calls");
        std::fs::write(
            bin.join("uname"),
            format!(
                "#!/bin/sh\necho >> {}\nexec /usr/bin/uname \"$@\"\n",
                calls.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(bin.join("uname"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let cache = dir.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let session = |_: ()| {
            let script = format!("c={}\n{SESSION}", quote_word(&cache.to_string_lossy()));
            let out = std::process::Command::new("sh")
                .args(["-c", &script])
                .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let line = text
                .lines()
                .find(|l| l.starts_with("ral-machine "))
                .unwrap()
                .to_owned();
            parse_machine(&line).unwrap()
        };
        let asked = || std::fs::read_to_string(&calls).map_or(0, |text| text.lines().count());
        let said = session(());
        assert_eq!(said.os, "Linux");
        assert_eq!(said.arch, std::env::consts::ARCH);
        assert!(said.glibc.clone().is_some_and(|v| v.starts_with("2.")));
        assert_eq!(asked(), 1);
        // Kept: the next session starts nothing to know it.
        assert_eq!(session(()), said);
        assert_eq!(asked(), 1);
        // Another boot, or a file older than the libraries' cache: asked
        // again.
        let kept = cache.join("ral.machine");
        let text = std::fs::read_to_string(&kept).unwrap();
        let (_, line) = text.split_once('\n').unwrap();
        std::fs::write(&kept, format!("another-boot\n{line}")).unwrap();
        assert_eq!(session(()), said);
        assert_eq!(asked(), 2);
        let old = std::process::Command::new("touch")
            .args(["-d", "@0"])
            .arg(&kept)
            .status()
            .unwrap();
        assert!(old.success());
        assert_eq!(session(()), said);
        assert_eq!(asked(), 3);
        assert_eq!(session(()), said);
        assert_eq!(asked(), 3);
    }

    #[test]
    fn answers_name_an_absolute_directory() {
        assert_eq!(
            parse_answer("ral-bundle have /h/.cache/ral/ab"),
            Some((true, "/h/.cache/ral/ab"))
        );
        assert_eq!(parse_answer("ral-bundle need /x"), Some((false, "/x")));
        assert_eq!(parse_answer("ral-bundle have x"), None);
        assert_eq!(parse_answer("ral-bundle maybe /x"), None);
        assert_eq!(parse_answer("Welcome!"), None);
    }
}
