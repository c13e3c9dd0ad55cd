//! The account files as files: links, hard links, FIFOs in their place,
//! their mode, owner and ACL across a replace, and lines whose bytes
//! glibc and ral could read differently once ral changes them.

use std::ffi::CString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::provider_user::files;
use crate::support::{accounts_sandbox, GROUP, GSHADOW, PASSWD, SHADOW};

fn c_path(path: &Path) -> CString {
    CString::new(path.as_os_str().as_encoded_bytes()).unwrap()
}

fn mkfifo(path: &Path) {
    let name = c_path(path);
    // SAFETY: `name` is NUL-terminated and outlives the call.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
}

#[test]
fn an_account_file_that_is_a_link_is_edited_where_it_leads() {
    let sandbox = accounts_sandbox();
    sandbox.write("data/passwd", PASSWD);
    let passwd = sandbox.root().join("etc/passwd");
    std::fs::remove_file(&passwd).unwrap();
    // Absolute: resolved inside the root, as if it were /.
    std::os::unix::fs::symlink("/data/passwd", &passwd).unwrap();
    sandbox
        .ralsh(&["user", "alice", "shell=/bin/bash"])
        .expect(0)
        .stdout_has("shell: '/bin/sh' -> '/bin/bash'");
    assert!(std::fs::symlink_metadata(&passwd).unwrap().is_symlink());
    assert!(sandbox
        .read("data/passwd")
        .contains("alice:x:1000:1000::/home/alice:/bin/bash\n"));
}

/// A replace gives the file a new inode, as shadow-utils' does: another
/// name of the old one keeps the old content (it is not written through).
#[test]
fn a_hard_linked_account_file_is_replaced_not_written_through() {
    let sandbox = accounts_sandbox();
    let shadow = sandbox.root().join("etc/shadow");
    let other = sandbox.root().join("shadow.other");
    std::fs::hard_link(&shadow, &other).unwrap();
    sandbox.ralsh(&["user", "alice", "password=!!"]).expect(0);
    assert!(sandbox.read("etc/shadow").contains("\nalice:!!:"));
    assert_eq!(std::fs::read_to_string(&other).unwrap(), SHADOW);
    assert_eq!(std::fs::metadata(&shadow).unwrap().nlink(), 1);
}

/// A FIFO (or device) where an account file should be: an error naming
/// it, never a read that waits for a writer, and nothing written.
#[test]
fn a_fifo_in_place_of_an_account_file_is_refused_without_waiting() {
    for file in ["passwd", "shadow", "group", "gshadow"] {
        let sandbox = accounts_sandbox();
        let path = sandbox.root().join("etc").join(file);
        std::fs::remove_file(&path).unwrap();
        mkfifo(&path);
        let type_name = match file {
            "group" | "gshadow" => "group",
            _ => "user",
        };
        let name = match type_name {
            "group" => "staff",
            _ => "alice",
        };
        let attr = match type_name {
            "group" => "members=root",
            _ => "shell=/bin/zsh",
        };
        sandbox
            .ralsh(&[type_name, name, attr])
            .expect(2)
            .stderr_has(&format!("'{}' is not a regular file", path.display()));
        let others: Vec<String> = ["passwd", "shadow", "group", "gshadow"]
            .iter()
            .filter(|f| **f != file)
            .map(|f| sandbox.read(&format!("etc/{f}")))
            .collect();
        let expected: Vec<String> = [PASSWD, SHADOW, GROUP, GSHADOW]
            .iter()
            .zip(["passwd", "shadow", "group", "gshadow"])
            .filter(|(_, f)| *f != file)
            .map(|(text, _)| (*text).to_owned())
            .collect();
        assert_eq!(others, expected, "{file}");
    }
}

/// A replace keeps the file's mode and, as root, its owner, and its
/// POSIX ACL: a service that setfacl let read shadow can still read it.
#[test]
fn a_replaced_account_file_keeps_its_mode_owner_and_acl() {
    let sandbox = accounts_sandbox();
    let shadow = sandbox.root().join("etc/shadow");
    std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o640)).unwrap();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        std::os::unix::fs::chown(&shadow, Some(0), Some(42)).unwrap();
    }
    // user::rw-, user:65534:r--, group::r--, mask::r--, other::---
    let entry = |tag: u16, perm: u16, id: u32| -> Vec<u8> {
        [
            &tag.to_le_bytes()[..],
            &perm.to_le_bytes(),
            &id.to_le_bytes(),
        ]
        .concat()
    };
    let acl: Vec<u8> = [
        2u32.to_le_bytes().to_vec(),
        entry(0x01, 6, u32::MAX),
        entry(0x02, 4, 65534),
        entry(0x04, 4, u32::MAX),
        entry(0x10, 4, u32::MAX),
        entry(0x20, 0, u32::MAX),
    ]
    .concat();
    let name = c_path(&shadow);
    let attr = c"system.posix_acl_access";
    // SAFETY: the strings are NUL-terminated and `acl` holds `acl.len()`
    // bytes, all for the call.
    let set = unsafe {
        libc::setxattr(
            name.as_ptr(),
            attr.as_ptr(),
            acl.as_ptr().cast(),
            acl.len(),
            0,
        )
    };
    assert_eq!(
        set,
        0,
        "the file system of the temporary directory must take POSIX ACLs: {}",
        std::io::Error::last_os_error()
    );
    let before = std::fs::metadata(&shadow).unwrap();
    sandbox.ralsh(&["user", "alice", "password=!!"]).expect(0);
    let after = std::fs::metadata(&shadow).unwrap();
    assert_ne!(after.ino(), before.ino(), "replaced");
    assert_eq!(after.mode(), before.mode());
    if root {
        assert_eq!((after.uid(), after.gid()), (0, 42));
    }
    let mut got = vec![0u8; 256];
    // SAFETY: `got` has room for `got.len()` bytes; the strings are
    // NUL-terminated, all for the call.
    let len = unsafe {
        libc::getxattr(
            name.as_ptr(),
            attr.as_ptr(),
            got.as_mut_ptr().cast(),
            got.len(),
        )
    };
    assert!(
        len > 0,
        "the ACL is gone: {}",
        std::io::Error::last_os_error()
    );
    got.truncate(len as usize);
    assert_eq!(got, acl);
}

/// A line with a Latin-1 comment, whose shell ral sets to UTF-8 text:
/// each field reads back as written (ral decoded the whole line as
/// Latin-1, read its own value as mojibake and never converged).
#[test]
fn a_value_ral_writes_beside_latin1_reads_back_as_written() {
    let sandbox = accounts_sandbox();
    let mut passwd = PASSWD.as_bytes().to_vec();
    passwd.extend_from_slice(b"zoe:x:1003:1003:Zo\xeb:/home/zoe:/bin/sh\n");
    std::fs::write(sandbox.root().join("etc/passwd"), &passwd).unwrap();
    sandbox
        .ralsh(&["user", "zoe", "shell=/bin/b\u{e4}sh"])
        .expect(0)
        .stdout_has("shell: '/bin/sh' -> '/bin/b\u{e4}sh'");
    sandbox
        .ralsh(&["user", "zoe", "shell=/bin/b\u{e4}sh"])
        .expect(0)
        .stdout_has("no changes needed");
    let doc = sandbox.ralsh(&["-j", "user", "zoe"]).expect(0).json();
    assert_eq!(doc["resource"]["comment"], "Zo\u{eb}");
    let written = std::fs::read(sandbox.root().join("etc/passwd")).unwrap();
    let mut line = b"zoe:x:1003:1003:Zo\xeb:/home/zoe:/bin/b".to_vec();
    line.extend_from_slice("\u{e4}sh\n".as_bytes());
    assert!(written.ends_with(&line));
}

/// glibc reads a carriage return before the line feed as part of the
/// last field (the shell, the members); a line ral changes ends in a
/// bare line feed, so the shell it wrote is the one the system runs.
#[test]
fn a_crlf_line_ral_changes_ends_in_a_line_feed() {
    let sandbox = accounts_sandbox();
    sandbox.write("etc/passwd", &PASSWD.replace('\n', "\r\n"));
    sandbox.write("etc/group", &GROUP.replace('\n', "\r\n"));
    let before = files(&sandbox);
    sandbox
        .ralsh(&["user", "alice", "shell=/bin/bash"])
        .expect(0);
    assert_eq!(
        sandbox.read("etc/passwd"),
        "root:x:0:0:root:/root:/bin/bash\r\nalice:x:1000:1000::/home/alice:/bin/bash\n"
    );
    sandbox
        .ralsh(&["group", "staff", "members=alice,root"])
        .expect(0);
    assert_eq!(
        sandbox.read("etc/group"),
        "root:x:0:\r\nstaff:x:50:alice,root\nalice:x:1000:\r\n"
    );
    assert_ne!(files(&sandbox), before);
}
