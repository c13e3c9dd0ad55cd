//! Manifests rendered for the host they run on (`ral plan`/`ral apply`
//! on a fake root): variables from the manifest and `-e` in their order,
//! `when:`, `loop:`, `template:`/`source:` files, undefined variables
//! reported with their file and line, render errors that never remove
//! anything, and sensitive variables whose values reach no output, store
//! or saved plan.

use std::path::{Path, PathBuf};

use crate::support::{run, Sandbox};

struct Manifests {
    dir: tempfile::TempDir,
}

impl Manifests {
    fn new() -> Manifests {
        Manifests {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }
}

/// A fake root with the directories the manifests' files go in.
fn sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    for dir in ["etc/init.d", "etc/app.d"] {
        std::fs::create_dir_all(sandbox.root().join(dir)).unwrap();
    }
    sandbox
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

const SITE: &str = "\
vars:
  app_port: 8080
  admins: [ann, bo]
file:
  /etc/app.conf:
    template: files/app.conf.j2
    mode: '0644'
  /etc/init.d/app:
    source: files/init.sh
    mode: '0755'
  /etc/app.d/{{ item }}.conf:
    loop: \"{{ admins }}\"
    content: \"admin {{ item }}\\n\"
    when: item != 'bo'
  /etc/debug.conf:
    content: \"debug\\n\"
    when: extra_conf | default(false)
";

fn site(manifests: &Manifests) -> PathBuf {
    manifests.write(
        "files/app.conf.j2",
        "listen {{ app_port }}\n{% for a in admins %}admin {{ a }}\n{% endfor %}",
    );
    manifests.write("files/init.sh", "#!/bin/sh\necho {{ kept as it is }}\n");
    manifests.write("site.yaml", SITE)
}

#[test]
fn a_manifest_renders_its_files_loops_and_conditions_and_a_second_run_changes_nothing() {
    let sandbox = sandbox();
    let manifests = Manifests::new();
    let site = site(&manifests);
    let applied = run(&mut sandbox.ral_command("apply", &["--detailed-exitcodes", arg(&site)]));
    applied.expect(2);
    assert_eq!(
        sandbox.read("etc/app.conf"),
        "listen 8080\nadmin ann\nadmin bo\n"
    );
    assert_eq!(
        sandbox.read("etc/init.d/app"),
        "#!/bin/sh\necho {{ kept as it is }}\n"
    );
    assert_eq!(sandbox.read("etc/app.d/ann.conf"), "admin ann\n");
    assert!(
        !sandbox.root().join("etc/app.d/bo.conf").exists(),
        "when: was false"
    );
    assert!(!sandbox.root().join("etc/debug.conf").exists());
    run(&mut sandbox.ral_command("apply", &["--detailed-exitcodes", arg(&site)]))
        .expect(0)
        .stdout_has("Apply complete: no changes; 3 unchanged");
}

#[test]
fn extra_vars_beat_the_manifest_and_a_later_one_beats_an_earlier_one() {
    let sandbox = sandbox();
    let manifests = Manifests::new();
    let site = site(&manifests);
    let file = manifests.write("extra.yaml", "app_port: 9000\nextra_conf: true\n");
    let at_file = format!("@{}", file.display());
    run(&mut sandbox.ral_command("apply", &["-e", "app_port=1", "-e", &at_file, arg(&site)]))
        .expect(0);
    assert!(sandbox.read("etc/app.conf").starts_with("listen 9000\n"));
    assert_eq!(
        sandbox.read("etc/debug.conf"),
        "debug\n",
        "when: debug held"
    );
    let plan = run(&mut sandbox.ral_command(
        "plan",
        &["-v", "-e", &at_file, "-e", "app_port=7", arg(&site)],
    ));
    plan.expect(0)
        .stdout_has("~ file[/etc/app.conf]")
        .stdout_has("file[/etc/app.conf] content: admins from ")
        .stdout_has("app_port from -e");
}

#[test]
fn undefined_variables_are_all_reported_with_file_and_line_and_nothing_changes() {
    let sandbox = sandbox();
    let manifests = Manifests::new();
    let wrong = manifests.write(
        "wrong.yaml",
        "vars:\n  app_port: 1\nfile:\n  /etc/a:\n    content: \"{{ app_prot }}\"\n  /etc/b:\n    content: x\n    when: enabled\n",
    );
    let failed = run(&mut sandbox.ral_command("apply", &[arg(&wrong)]));
    failed
        .expect(2)
        .stderr_has(
            "wrong.yaml:5: file[/etc/a]: undefined variable 'app_prot' (did you mean 'app_port'?)",
        )
        .stderr_has("wrong.yaml:8: file[/etc/b]: undefined variable 'enabled'");
    assert!(!sandbox.root().join("etc/a").exists());
    assert!(!sandbox.root().join("etc/b").exists());
}

#[test]
fn a_manifest_that_stops_rendering_removes_nothing_ral_created() {
    let sandbox = sandbox();
    let manifests = Manifests::new();
    let site = site(&manifests);
    run(&mut sandbox.ral_command("apply", &[arg(&site)])).expect(0);
    // The template now names a variable no one gives: every file ral
    // made stays, and so does the store's record of them.
    manifests.write("files/app.conf.j2", "listen {{ app_port }} {{ missing }}\n");
    run(&mut sandbox.ral_command("apply", &["-y", arg(&site)]))
        .expect(2)
        .stderr_has("undefined variable 'missing'");
    for kept in ["etc/app.conf", "etc/init.d/app", "etc/app.d/ann.conf"] {
        assert!(sandbox.root().join(kept).exists(), "{kept} was removed");
    }
    // And a condition that drops everything for this host is no
    // "remove everything" either: it is refused as any empty manifest.
    let none = manifests.write(
        "none.yaml",
        "file:\n  /etc/app.conf:\n    content: x\n    when: false\n",
    );
    run(&mut sandbox.ral_command("apply", &["-y", arg(&none)]))
        .expect(2)
        .stderr_has("nothing is declared for localhost: every resource's when: is false there");
    assert!(sandbox.root().join("etc/init.d/app").exists());
}

#[test]
fn a_loop_that_gives_one_title_twice_names_both_elements() {
    let sandbox = sandbox();
    let manifests = Manifests::new();
    let twice = manifests.write(
        "twice.yaml",
        "file:\n  \"/etc/{{ item | lower }}\":\n    loop: [A, b, a]\n    content: x\n",
    );
    run(&mut sandbox.ral_command("plan", &[arg(&twice)]))
        .expect(2)
        .stderr_has(
            "twice.yaml:2: file[/etc/a] is declared twice: line 2 (loop element 1) and line 2 \
             (loop element 3)",
        );
}

#[test]
fn a_value_made_from_a_sensitive_variable_is_never_shown_or_stored() {
    const SECRET: &str = "hunter2-sensitive";
    let sandbox = sandbox();
    let manifests = Manifests::new();
    manifests.write("files/app.conf.j2", "dsn=pg://app:{{ db_password }}@db\n");
    let site = manifests.write(
        "site.yaml",
        "vars:\n  ral_sensitive: [db_password]\nfile:\n  /etc/app.conf:\n    template: files/app.conf.j2\n    mode: '0644'\n  /etc/motd:\n    content: \"{{ db_password | upper }}\\n\"\n",
    );
    let secret = format!("db_password={SECRET}");
    let plan_file = manifests.dir.path().join("plan.json");
    let mut outputs = Vec::new();
    for (subcommand, extra) in [
        ("plan", vec![]),
        ("plan", vec!["-j"]),
        ("plan", vec!["-o", plan_file.to_str().unwrap()]),
    ] {
        let mut args = vec!["-v", "-e", &secret];
        args.extend(extra);
        args.push(arg(&site));
        let done = run(&mut sandbox.ral_command(subcommand, &args));
        done.expect(0);
        outputs.push(done.stdout.clone() + &done.stderr);
    }
    let applied =
        run(&mut sandbox.ral_command("apply", &["-j", "-e", &secret, plan_file.to_str().unwrap()]));
    applied.expect(0);
    outputs.push(applied.stdout.clone() + &applied.stderr);
    assert_eq!(
        sandbox.read("etc/app.conf"),
        format!("dsn=pg://app:{SECRET}@db\n"),
        "the file itself gets the value"
    );
    assert_eq!(
        sandbox.read("etc/motd"),
        format!("{}\n", SECRET.to_uppercase())
    );
    for output in &outputs {
        assert!(!output.contains(SECRET), "{output}");
        assert!(!output.contains(&SECRET.to_uppercase()), "{output}");
    }
    for file in [
        plan_file.clone(),
        sandbox.root().join("var/lib/ral/state.db"),
    ] {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(SECRET), "{}", file.display());
        assert!(!text.contains(&SECRET.to_uppercase()), "{}", file.display());
    }
}

#[test]
fn a_saved_plan_applies_only_with_the_variables_it_was_made_with() {
    let sandbox = sandbox();
    let manifests = Manifests::new();
    let site = site(&manifests);
    let plan_file = manifests.dir.path().join("plan.json");
    let plan = plan_file.to_str().unwrap();
    run(&mut sandbox.ral_command("plan", &["-e", "app_port=81", "-o", plan, arg(&site)])).expect(0);
    run(&mut sandbox.ral_command("apply", &["-e", "app_port=82", plan]))
        .expect(2)
        .stderr_has("its manifests changed since it was made (or the -e variables");
    run(&mut sandbox.ral_command("apply", &[plan]))
        .expect(2)
        .stderr_has("its manifests changed since it was made");
    assert!(!sandbox.root().join("etc/app.conf").exists());
    run(&mut sandbox.ral_command("apply", &["-e", "app_port=81", plan])).expect(0);
    assert!(sandbox.read("etc/app.conf").starts_with("listen 81\n"));
}
