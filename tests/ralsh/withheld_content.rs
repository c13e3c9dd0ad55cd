//! Values shown only as their digest, end to end: a file's content too
//! large to show converges through its checksum (and refreshes what
//! subscribes to it), a private file's content never reaches a plan, a
//! report, a saved plan or the state store in clear.

use crate::plans::Bench;

/// `sha256:HEX` of `text`.
fn sha256(text: &str) -> String {
    use sha2::Digest;
    format!("sha256:{}", ral::text::hex(&sha2::Sha256::digest(text)))
}

/// Every byte of the files below `dir`, for a search.
fn bytes_below(dir: &std::path::Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all.extend(bytes_below(&path));
        } else if path.is_file() {
            all.extend(std::fs::read(&path).unwrap());
        }
    }
    all
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// The refreshes the svc fixture logged.
fn refreshed(bench: &Bench) -> usize {
    let path = bench.sandbox.root().join("refreshed.log");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .count()
}

/// A manifest of a 70 KB file, a 1.1 MB file and a service subscribed
/// to both, the files' content made of `fill`.
fn large_files(fill: char) -> String {
    let big = fill.to_string().repeat(70_000);
    let huge = fill.to_string().repeat(1_100_000);
    format!(
        "file:\n  /etc/big.conf: {{content: '{big}'}}\n  /etc/huge.conf: {{content: '{huge}'}}\n\
         svc:\n  web:\n    value: v\n    subscribe: ['file[/etc/big.conf]', 'file[/etc/huge.conf]']\n"
    )
}

#[test]
fn large_files_converge_through_their_checksum_and_refresh_what_subscribes() {
    let bench = Bench::new();
    bench.sandbox.write("etc/.keep", "");
    let m = bench.manifest("m.yaml", &large_files('x'));
    let first = bench.ral("apply", &[&m]);
    first
        .expect(0)
        .stdout_has(&format!(
            "content: {} (as checksums",
            sha256(&"x".repeat(70_000))
        ))
        .stdout_has(&format!(
            "content: {} (as checksums",
            sha256(&"x".repeat(1_100_000))
        ));
    assert!(
        first.stdout.len() < 4_000,
        "shown whole: {} bytes",
        first.stdout.len()
    );
    assert_eq!(bench.sandbox.read("etc/huge.conf").len(), 1_100_000);
    // Nothing left to do: compared through the checksum.
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_has("Plan: 0 to create, 0 to change, 0 to remove; 3 unchanged.");
    assert_eq!(refreshed(&bench), 0);
    // A change of each is shown as checksums and refreshes the service.
    let m = bench.manifest("m2.yaml", &large_files('y'));
    let plan = bench.ral("plan", &[&m]);
    plan.expect(0).stdout_has(&format!(
        "content: {} -> {} (as checksums: too large or private to show)",
        sha256(&"x".repeat(70_000)),
        sha256(&"y".repeat(70_000))
    ));
    assert!(
        plan.stdout.len() < 4_000,
        "shown whole: {} bytes",
        plan.stdout.len()
    );
    bench
        .ral("apply", &[&m])
        .expect(0)
        .stdout_has("Success ^ svc[web]");
    assert_eq!(refreshed(&bench), 1);
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_has("0 to change");
}

#[test]
fn a_private_file_s_content_is_never_shown_saved_or_kept_in_clear() {
    let bench = Bench::new();
    bench.sandbox.write("etc/.keep", "");
    let secret = "hunter2-private-content";
    let text =
        |n: u32| format!("file:\n  /etc/app.key: {{content: '{secret}-{n}', mode: '0600'}}\n");
    let m = bench.manifest("m.yaml", &text(1));
    let plan = bench.ral("plan", &[&m]);
    plan.expect(0).stdout_has(&format!(
        "content: {} (as checksums",
        sha256(&format!("{secret}-1"))
    ));
    let json = bench.ral("plan", &["-j", &m]);
    json.expect(0);
    let report = bench.manifests.path().join("run.html");
    let report = report.to_str().unwrap();
    let applied = bench.ral("apply", &["--report", report, &m]);
    applied.expect(0);
    assert_eq!(bench.sandbox.read("etc/app.key"), format!("{secret}-1"));
    // Changed again through a saved plan.
    let m = bench.manifest("m2.yaml", &text(2));
    let saved = bench.manifests.path().join("plan.json");
    let saved = saved.to_str().unwrap();
    bench.ral("plan", &["-o", saved, &m]).expect(0);
    let again = bench.ral("apply", &[saved]);
    again.expect(0).stdout_has(&format!(
        "content: {} -> {} (as checksums: too large or private to show)",
        sha256(&format!("{secret}-1")),
        sha256(&format!("{secret}-2"))
    ));
    assert_eq!(bench.sandbox.read("etc/app.key"), format!("{secret}-2"));
    // A manifest of it cannot hold what is not shown, and says so.
    bench
        .sandbox
        .ralsh(&["--yaml", "file", "/etc/app.key"])
        .expect(0)
        .stderr_has("left out of the manifest (only their digest is known): content");
    let shown = bench.sandbox.ralsh(&["file", "/etc/app.key"]);
    shown
        .expect(0)
        .stdout_has(&format!("checksum => '{}'", sha256(&format!("{secret}-2"))));
    for (what, out) in [
        ("plan", &plan.stdout),
        ("plan -j", &json.stdout),
        ("apply", &applied.stdout),
        ("apply of the saved plan", &again.stdout),
        ("ralsh", &shown.stdout),
    ] {
        assert!(!out.contains(secret), "{what} shows the content: {out}");
    }
    for file in [report, saved] {
        let bytes = std::fs::read(file).unwrap();
        assert!(!holds(&bytes, secret), "{file} holds the content");
    }
    let store = bytes_below(&bench.sandbox.root().join("var/lib/ral"));
    assert!(!store.is_empty());
    assert!(!holds(&store, secret), "the state store holds the content");
    bench
        .ral("plan", &["--detailed-exitcodes", &m])
        .expect(0)
        .stdout_has("1 unchanged");
}

/// A provider that echoes a private value it was given, on stderr, in
/// its error, escaped or not: what ral shows and keeps is redacted of it.
#[test]
fn a_private_value_a_provider_echoes_is_redacted() {
    let bench = Bench::new();
    let data = crate::support::fixtures_dir().join("private");
    let data = data.to_str().unwrap();
    let secret = "Pr1vate-Kéy-material";
    let run = bench.sandbox.ralsh(&[
        "-I",
        data,
        "privfile",
        "/k",
        &format!("content={secret}\nsecond-line"),
        "mode=0600",
    ]);
    run.expect(2);
    assert!(
        run.stderr.contains("disk full while writing"),
        "{}",
        run.stderr
    );
    for shown in [&run.stdout, &run.stderr] {
        for piece in ["Pr1vate", "second-line", "K\\u00e9y"] {
            assert!(!shown.contains(piece), "{piece} shown: {shown}");
        }
    }
    let m = bench.manifest(
        "m.yaml",
        &format!("privfile:\n  /k: {{content: \"{secret}\", mode: '0600'}}\n"),
    );
    let report = bench.manifests.path().join("r.html");
    let applied = bench.ral(
        "apply",
        &["-I", data, "--report", report.to_str().unwrap(), &m],
    );
    applied.expect(1);
    assert!(!applied.stdout.contains("Pr1vate"), "{}", applied.stdout);
    assert!(!applied.stderr.contains("Pr1vate"), "{}", applied.stderr);
    assert!(!holds(&std::fs::read(&report).unwrap(), "Pr1vate"));
    let store = bytes_below(&bench.sandbox.root().join("var/lib/ral"));
    assert!(!holds(&store, "Pr1vate"), "the state store holds it");
}
