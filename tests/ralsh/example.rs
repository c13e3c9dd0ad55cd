//! The provider shown in README.md works as the README says, and the README
//! shows it verbatim.

use crate::support::{fixtures_dir, Sandbox};

#[test]
fn readme_shows_the_tested_example_provider_verbatim() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    for file in ["example_setting.prov", "example_setting.yaml"] {
        let text = std::fs::read_to_string(fixtures_dir().join("providers").join(file)).unwrap();
        assert!(
            readme.contains(&text),
            "README.md must contain {file} verbatim"
        );
    }
}

#[test]
fn example_provider_lists_creates_changes_and_deletes() {
    let sandbox = Sandbox::new();
    sandbox.write("etc/example.conf", "");
    assert_eq!(sandbox.ralsh(&["setting"]).expect(0).stdout, "");
    let run = sandbox.ralsh(&["setting", "color", "value=dark blue"]);
    assert!(
        run.expect(0)
            .stdout
            .ends_with("ensure: 'absent' -> 'present'\nvalue: '' -> 'dark blue'\n"),
        "{}",
        run.stdout
    );
    sandbox.ralsh(&["setting", "size", "value=3"]).expect(0);
    assert_eq!(
        sandbox.read("etc/example.conf"),
        "color = dark blue\nsize = 3\n"
    );
    let run = sandbox.ralsh(&["-n", "setting", "size", "value=4"]);
    assert!(run
        .expect(0)
        .stdout
        .ends_with("value: '3' -> '4' (noop: would change)\n"));
    assert_eq!(
        sandbox.read("etc/example.conf"),
        "color = dark blue\nsize = 3\n"
    );
    sandbox
        .ralsh(&["setting", "color", "ensure=absent"])
        .expect(0);
    assert_eq!(sandbox.read("etc/example.conf"), "size = 3\n");
    let run = sandbox.ralsh(&["setting", "bad name", "value=1"]);
    assert!(run
        .expect(2)
        .stderr
        .contains("invalid setting name 'bad name'"));
}
