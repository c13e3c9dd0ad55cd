//! The system's name services (NSS: the user and host databases behind
//! `/etc/nsswitch.conf`), asked in the way that works for the program at
//! hand.
//!
//! Linked dynamically (the host, `ralsh`, a `ral-provider` built here),
//! ral calls glibc's functions. The copy of `ral-provider` that travels
//! to older machines is linked statically, and a static glibc loads the
//! machine's NSS modules (`libnss_systemd`, `libnss_sss`...) only when
//! they were built from the same glibc version as itself: on any other
//! machine the answer would be wrong or the process would crash. There
//! the machine's own `getent` is asked instead. The native providers read
//! the root's files themselves; these are the two places where the
//! system's databases, not the files, are the question.

use std::ffi::{CStr, CString};
use std::time::Duration;

use super::command::{Commands, Direct};

/// How long `getent` may take.
const GETENT_LIMIT: Duration = Duration::from_secs(10);

/// How the databases are asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// glibc's functions, in this process.
    Library,
    /// The machine's `getent`.
    Getent,
}

impl Via {
    /// The way for this process.
    fn here() -> Via {
        if statically_linked() {
            Via::Getent
        } else {
            Via::Library
        }
    }
}

/// Whether this process was started without a dynamic loader: a
/// statically linked program.
pub fn statically_linked() -> bool {
    // SAFETY: getauxval only reads the auxiliary vector the kernel gave
    // the process; AT_BASE is the loader's address, 0 without one.
    unsafe { libc::getauxval(libc::AT_BASE) == 0 }
}

/// Whether the system's user database knows `name`.
pub fn user_exists(name: &str) -> bool {
    user_known(name, Via::here())
}

fn user_known(name: &str, via: Via) -> bool {
    if via == Via::Getent {
        // getent takes a number for a uid: only an entry of that name
        // answers the question, as getpwnam's does.
        return getent(&["passwd", name]).is_some_and(|out| {
            out.split(|&b| b == b'\n')
                .any(|line| line.split(|&b| b == b':').next() == Some(name.as_bytes()))
        });
    }
    let Ok(name) = CString::new(name) else {
        return false;
    };
    // SAFETY: libc::passwd is plain data (integers and pointers), for
    // which all zeroes is a valid value; getpwnam_r fills it in.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buffer = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call: `name` is
    // NUL-terminated, `entry` and `buffer` are owned here with the length
    // given, and `found` is written by the call.
    let status = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut entry,
            buffer.as_mut_ptr(),
            buffer.len(),
            &mut found,
        )
    };
    status == 0 && !found.is_null()
}

/// The canonical name the system's host database gives `host`
/// (getaddrinfo with `AI_CANONNAME`), unless it is only an address.
pub fn canonical_name(host: &str) -> Option<String> {
    canonical(host, Via::here())
}

fn canonical(host: &str, via: Via) -> Option<String> {
    let name = if via == Via::Getent {
        // `getent ahosts` asks getaddrinfo for the canonical name and
        // prints it on its first line: `ADDRESS STREAM NAME`.
        let out = getent(&["ahosts", host])?;
        let first = String::from_utf8_lossy(&out).lines().next()?.to_owned();
        first.split_whitespace().nth(2)?.to_owned()
    } else {
        getaddrinfo_canonical(&CString::new(host).ok()?)?
    };
    Some(name).filter(|name| name.parse::<std::net::IpAddr>().is_err())
}

/// What `getent ARGS` printed when it found something (its status 0);
/// `None` when it found nothing or could not run.
fn getent(args: &[&str]) -> Option<Vec<u8>> {
    if args
        .iter()
        .any(|arg| arg.starts_with('-') || arg.contains('\0'))
    {
        return None;
    }
    let mut argv = vec!["getent".to_owned()];
    argv.extend(args.iter().map(|arg| (*arg).to_owned()));
    let env = [(
        "PATH".to_owned(),
        "/usr/bin:/bin:/usr/sbin:/sbin".to_owned(),
    )];
    let ran = Direct.run(&argv, &env, GETENT_LIMIT);
    if let Some(problem) = &ran.problem {
        log::debug!("getent {}: {problem}", args.join(" "));
    }
    (ran.status == Some(0)).then_some(ran.stdout)
}

/// getaddrinfo(host, AI_CANONNAME)'s canonical name.
fn getaddrinfo_canonical(host: &CStr) -> Option<String> {
    let mut result: *mut libc::addrinfo = std::ptr::null_mut();
    // SAFETY: hints is a valid zeroed addrinfo with the fields set;
    // getaddrinfo reads it and the NUL-terminated name, and on success
    // hands back a list freed below, read only before that.
    unsafe {
        let mut hints: libc::addrinfo = std::mem::zeroed();
        hints.ai_family = libc::AF_UNSPEC;
        hints.ai_socktype = libc::SOCK_STREAM;
        hints.ai_flags = libc::AI_CANONNAME;
        let status = libc::getaddrinfo(host.as_ptr(), std::ptr::null(), &hints, &mut result);
        if status != 0 || result.is_null() {
            log::debug!(
                "facts: getaddrinfo {}: status {status}",
                host.to_string_lossy()
            );
            return None;
        }
        let canonical = (*result).ai_canonname;
        let name = (!canonical.is_null())
            .then(|| CStr::from_ptr(canonical).to_string_lossy().into_owned());
        libc::freeaddrinfo(result);
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tests_run_dynamically_linked() {
        // The tests take the library path; the static copy is checked
        // on an old target (tests/needs/old_target.rs).
        assert!(!statically_linked());
    }

    #[test]
    fn the_system_user_database_is_asked_both_ways() {
        for via in [Via::Library, Via::Getent] {
            assert!(user_known("root", via), "{via:?}");
            assert!(!user_known("no-such-user-here-x9", via), "{via:?}");
            assert!(!user_known("nul\0byte", via), "{via:?}");
            assert!(!user_known("--help", via), "{via:?}");
            // A uid is not a user name, whatever getent takes.
            assert!(!user_known("0", via), "{via:?}");
        }
        assert!(user_exists("root"));
    }

    #[test]
    fn the_canonical_name_is_the_same_both_ways() {
        for name in ["localhost", "127.0.0.1", "no-such-host.invalid"] {
            assert_eq!(
                canonical(name, Via::Getent),
                canonical(name, Via::Library),
                "{name}"
            );
        }
        assert_eq!(canonical("127.0.0.1", Via::Getent), None);
    }

    #[test]
    fn getent_answers_as_the_library_does() {
        assert!(getent(&["passwd", "root"]).is_some_and(|out| out.starts_with(b"root:")));
        assert_eq!(getent(&["passwd", "no-such-user-here-x9"]), None);
        // Never an option, whatever the name.
        assert_eq!(getent(&["passwd", "--help"]), None);
        let name = "localhost";
        let through_getent = getent(&["ahosts", name]).map(|out| {
            String::from_utf8_lossy(&out)
                .lines()
                .next()
                .and_then(|line| line.split_whitespace().nth(2).map(str::to_owned))
        });
        assert_eq!(
            through_getent.flatten(),
            getaddrinfo_canonical(&CString::new(name).unwrap())
        );
    }
}
