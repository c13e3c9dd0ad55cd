//! Processes a plugin leaves behind holding its output: `ral holo` kills
//! them once the plugin has exited and they had their linger, says so
//! with a `>>` warning, and the apply still counts.

use crate::pids::{assert_gone, pid_in, KillOnDrop};
use crate::processes::{cache_dirs_left, ral, root_with_plugin};

#[test]
fn a_plugins_leftover_holding_its_output_is_killed_with_a_warning() {
    let work = tempfile::tempdir().unwrap();
    // The leftover holds stdout, stderr and fd 3, and would sleep for ten
    // minutes. Holo would wait for it; ral kills it 2 s after the plugin
    // exited. The time limit (10 s) only keeps a broken ral from waiting
    // long.
    root_with_plugin(
        work.path(),
        "apply) ( exec -a holo-t-leftover sleep 600 ) &\n  \
         echo $! > target/leftover.pid; echo plugin-says-hi; echo 'not changed' >&3 ;;",
    );
    let output = ral(work.path(), &["apply", "--timeout", "10", "--strict"])
        .output()
        .unwrap();
    let leftover = pid_in(&work.path().join("target/leftover.pid"));
    let _leftover = KillOnDrop::new(&[leftover]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(
            ">> plugin t: processes started by 'apply' kept its output open after it exited; \
             they were killed\n"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("did not finish"), "{stderr}");
    assert!(
        stdout.contains("plugin-says-hi"),
        "the plugin's output is shown: {stdout}"
    );
    assert_gone(leftover, "holo-t-leftover");
    assert!(!work.path().join("target/run/holo.pid").exists());
    assert_eq!(cache_dirs_left(work.path()), 0);
}
