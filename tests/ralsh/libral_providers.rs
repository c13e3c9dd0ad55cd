//! Providers written the way libral's own service providers are (sysv,
//! upstart, systemd): `ensure: enum[running, stopped]`, arguments taken
//! with `eval`, `ral_unknown` for names they do not know. ralsh lists,
//! finds and updates them unchanged.

use crate::support::{fixtures_dir, Sandbox};

/// A root with the services `cron` (running, enabled) and `ntp`
/// (stopped, disabled).
fn services() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.write("init/cron", "");
    sandbox.write("init/cron.running", "");
    sandbox.write("init/cron.enabled", "");
    sandbox.write("init/ntp", "");
    sandbox
}

#[test]
fn libral_style_service_providers_load() {
    let sandbox = services();
    let run = sandbox.ralsh_in(&libral(), &["-j"]);
    let doc = run.expect(0).json();
    let names: Vec<&str> = doc["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"service::initd"), "{names:?}");
    assert!(names.contains(&"service::unitd"), "{names:?}");
    assert!(!run.stderr.contains("skipping"), "{}", run.stderr);
}

#[test]
fn libral_style_services_are_listed_and_found() {
    let sandbox = services();
    for provider in ["service::initd", "service::unitd"] {
        let doc = sandbox
            .ralsh_in(&libral(), &["-j", provider])
            .expect(0)
            .json();
        let listed: Vec<(&str, &str, &str)> = doc["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap(),
                    r["ensure"].as_str().unwrap(),
                    r["enable"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            [("cron", "running", "true"), ("ntp", "stopped", "false")]
        );
        sandbox
            .ralsh_in(&libral(), &[provider, "ntp"])
            .expect(0)
            .stdout_has("ensure => 'stopped',");
        // A service it does not know is not found (ral_unknown), never
        // "absent": its ensure has no such value.
        let run = sandbox.ralsh_in(&libral(), &["-j", provider, "nosuch"]);
        assert_eq!(run.expect(1).stdout.trim(), "{}");
    }
}

#[test]
fn libral_style_services_are_started_stopped_and_enabled() {
    let sandbox = services();
    sandbox
        .ralsh_in(
            &libral(),
            &["service::initd", "ntp", "ensure=running", "enable=true"],
        )
        .expect(0)
        .stdout_has("ensure: 'stopped' -> 'running'")
        .stdout_has("enable: 'false' -> 'true'");
    assert!(sandbox.root().join("init/ntp.running").exists());
    assert!(sandbox.root().join("init/ntp.enabled").exists());
    // Only what differs reached the provider, quoted for its eval.
    assert_eq!(
        sandbox.read("init.log"),
        "update ral_action=update name=ntp ensure=running enable=true\n"
    );

    sandbox
        .ralsh_in(&libral(), &["service::unitd", "cron", "ensure=stopped"])
        .expect(0)
        .stdout_has("ensure: 'running' -> 'stopped'");
    assert!(!sandbox.root().join("init/cron.running").exists());

    // Converged: no call at all.
    sandbox
        .ralsh_in(&libral(), &["service::unitd", "cron", "ensure=stopped"])
        .expect(0)
        .stdout_has("no changes needed");
    assert_eq!(sandbox.read("init.log").lines().count(), 2);

    // The provider's own refusal, and ensure values the type does not have.
    sandbox
        .ralsh_in(&libral(), &["service::unitd", "cron", "enable=mask"])
        .expect(2)
        .stderr_has("illegal value for enable: 'mask'");
    sandbox
        .ralsh_in(&libral(), &["service::initd", "cron", "ensure=absent"])
        .expect(2)
        .stderr_has("invalid value 'absent' for attribute 'ensure' of type enum[running, stopped]");
    // A service that does not exist cannot be created.
    sandbox
        .ralsh_in(&libral(), &["service::initd", "nosuch", "ensure=running"])
        .expect(2)
        .stderr_has("resource 'nosuch' does not exist and cannot be created");
    assert!(!sandbox.root().join("init/nosuch").exists());
}

#[test]
fn noop_on_a_libral_style_service_changes_nothing() {
    let sandbox = services();
    sandbox
        .ralsh_in(
            &libral(),
            &["-n", "service::initd", "ntp", "ensure=running"],
        )
        .expect(0)
        .stdout_has("ensure: 'stopped' -> 'running' (noop: would change)");
    assert!(!sandbox.root().join("init/ntp.running").exists());
    assert!(!sandbox.root().join("init.log").exists());
}

/// The libral fixture providers.
fn libral() -> std::path::PathBuf {
    fixtures_dir().join("libral")
}
