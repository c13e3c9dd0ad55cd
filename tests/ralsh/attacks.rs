//! Findings of an attack on the state store, saved plans and sensitive
//! values: each test shows one way in that is now closed (or, marked
//! ignored, one that is still open).

use crate::sensitive_env::run_with_stdin;
use crate::support::Sandbox;

/// `ralsh --attrs-stdin` with a JSON object naming one attribute twice:
/// refused as the command line refuses `comment=a comment=b`, not read as
/// its last value (a reader that keeps the first would set another).
#[test]
fn attrs_stdin_refuses_an_attribute_given_twice() {
    for input in [
        r#"{"comment": "a", "comment": "b"}"#,
        r#"{"password": "a", "password": "b"}"#,
    ] {
        let sandbox = Sandbox::new();
        let run = run_with_stdin(
            &mut sandbox.fixture_command(&["--attrs-stdin", "envsecret", "d"]),
            input,
        );
        run.expect(2).stderr_has("is given twice");
        assert!(!sandbox.root().join("made.d").exists(), "{input}: it ran");
    }
}
