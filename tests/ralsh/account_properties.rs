//! What the user and group providers write, glibc reads the same: the
//! property test of tests/common/account_cases.rs, without the shadow
//! tools (tests/needs runs it with them, as root).

use crate::account_cases::run_cases;

#[test]
fn what_ral_writes_to_the_account_files_glibc_reads_the_same() {
    let counts = run_cases(24, false);
    // Shown with --nocapture: what the property covered.
    eprintln!("user and group, {counts}");
    assert!(counts.accepted > 0 && counts.refused > 0, "{counts}");
}
