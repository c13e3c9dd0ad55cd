//! The Python toolkit of the providers (providers/ral_provider/): its own
//! unit tests (tests/python), run with the interpreter the providers use.

use std::process::Command;

#[test]
fn python_unit_tests_pass() {
    python_tests_pass("tests/python/test_ral_provider.py", 20);
}

#[test]
fn python_plugin_toolkit_and_webapp_tests_pass() {
    python_tests_pass("tests/python/test_ral_plugin.py", 30);
}

/// Runs a Python unit test file, which must pass with at least `least`
/// tests run.
fn python_tests_pass(file: &str, least: usize) {
    let dir = env!("CARGO_MANIFEST_DIR");
    let output = Command::new("python3")
        .args(["-I", "-S", file])
        // For the bundled providers that are native code, which the tests
        // run as programs: their scripts run this build's ral-provider.
        .env("RALSH_NATIVE_PROGRAM", env!("CARGO_BIN_EXE_ral-provider"))
        .current_dir(dir)
        // The native providers' program, for the bundled providers the
        // tests run as programs (as ral names it to providers).
        .env("RALSH_NATIVE_PROGRAM", env!("CARGO_BIN_EXE_ral-provider"))
        .output()
        .expect("python3 runs");
    let report = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{report}");
    // unittest reports "Ran N tests"; none found would also exit 0.
    let ran: usize = report
        .lines()
        .find_map(|line| line.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .expect("unittest says how many tests ran");
    assert!(ran >= least, "only {ran} tests ran:\n{report}");
}
