//! Rendering manifests as written into one host's resources.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;
use crate::converge::manifest::{self, Reading};
use crate::types::Written;

fn reading(text: &str, file: &Path) -> Reading {
    let (found, problems, whole) = manifest::parse_document(text, file);
    assert!(whole && problems.is_empty(), "{problems:?}");
    Reading {
        declared: found.declared,
        vars: found.vars,
        complete: true,
        ..Reading::default()
    }
}

fn scope(vars: serde_json::Value) -> Scope {
    Scope {
        facts: Some(
            json!({"os": {"family": "Debian"}, "hostname": "web1"})
                .as_object()
                .unwrap()
                .clone(),
        ),
        layers: vec![Layer {
            command_line: false,
            source: "group_vars/web.yaml".to_owned(),
            file: PathBuf::from("group_vars/web.yaml"),
            vars: vars
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), 2))
                .collect(),
        }],
        host: "web1".to_owned(),
        groups: vec!["web".to_owned()],
    }
}

fn rendered(text: &str, vars: serde_json::Value) -> Result<Rendered, Vec<Problem>> {
    let reading = reading(text, Path::new("site.yaml"));
    render(&reading, &scope(vars)).map_err(|e| match e {
        Error::Manifest { problems } => problems,
        other => panic!("{other}"),
    })
}

fn attr<'d>(declared: &'d Declared, name: &str) -> &'d Written {
    &declared
        .attrs
        .iter()
        .find(|a| a.name == name)
        .unwrap()
        .value
}

fn text(value: &str) -> Written {
    Written::Text(value.to_owned())
}

#[test]
fn values_render_with_facts_and_variables_and_the_inventory_beats_the_manifest() {
    let done = rendered(
        "vars:\n  port: 80\n  name: app\nfile:\n  /etc/{{ name }}.conf:\n    content: \"port={{ port }} on {{ facts.os.family }} ({{ inventory_hostname }})\\n\"\n    mode: '0644'\n",
        json!({"port": 8080}),
    )
    .unwrap();
    assert_eq!(done.declared.len(), 1);
    let file = &done.declared[0];
    assert_eq!(file.name, "/etc/app.conf");
    assert_eq!(attr(file, "content"), &text("port=8080 on Debian (web1)\n"));
    assert_eq!(attr(file, "mode"), &text("0644"));
    assert_eq!(
        done.provenance,
        ["file[/etc/app.conf] content: port from group_vars/web.yaml"]
    );
}

#[test]
fn when_keeps_or_drops_and_a_sole_expression_keeps_its_list() {
    let done = rendered(
        "group:\n  ops:\n    members: \"{{ admins }}\"\n  redhat_only:\n    when: facts.os.family == 'RedHat'\n  web_only:\n    when: \"'web' in group_names\"\n  both:\n    when: [\"'web' in group_names\", \"admins | length > 2\"]\n",
        json!({"admins": ["ann", "bo"]}),
    )
    .unwrap();
    let names: Vec<&str> = done.declared.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["ops", "web_only"]);
    assert_eq!(
        attr(&done.declared[0], "members"),
        &Written::List(vec![text("ann"), text("bo")])
    );
}

#[test]
fn loops_stamp_one_resource_per_element_of_a_list_or_mapping() {
    let done = rendered(
        "host:\n  \"{{ item.key }}\":\n    loop: \"{{ peers }}\"\n    ip: \"{{ item.value }}\"\n    when: item.key != 'skip'\nuser:\n  \"{{ item }}\":\n    loop: [ann, \"{{ extra }}\"]\n    comment: \"user {{ item }}\"\n",
        json!({"peers": {"db": "10.0.0.5", "skip": "10.0.0.9", "cache": "10.0.0.6"}, "extra": "cy"}),
    )
    .unwrap();
    let names: Vec<&str> = done.declared.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["db", "cache", "ann", "cy"]);
    assert_eq!(attr(&done.declared[1], "ip"), &text("10.0.0.6"));
    assert_eq!(attr(&done.declared[3], "comment"), &text("user cy"));
    assert!(
        done.provenance.contains(
            &"user[cy] comment: item from loop element 2 (extra from group_vars/web.yaml)"
                .to_owned()
        ),
        "{:?}",
        done.provenance
    );
    assert!(
        done.provenance.contains(
            &"host[cache] ip: item from loop element 3 (peers from group_vars/web.yaml)".to_owned()
        ),
        "{:?}",
        done.provenance
    );
}

#[test]
fn a_loop_giving_one_title_twice_names_both_elements() {
    let problems = rendered(
        "user:\n  \"{{ item | lower }}\":\n    loop: [Ann, bo, ANN]\n",
        json!({}),
    )
    .err()
    .unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0].message,
        "user[ann] is declared twice: line 2 (loop element 1) and line 2 (loop element 3)"
    );
}

#[test]
fn a_loop_giving_the_title_of_a_plain_declaration_names_both() {
    let problems = rendered(
        "user:\n  ann: {}\n  \"{{ item }}\":\n    loop: [bo, ann]\n",
        json!({}),
    )
    .err()
    .unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(
        problems[0].message,
        "user[ann] is declared twice: line 2 and line 3 (loop element 2)"
    );
    // Two plain ones are the catalog's to report (it knows the types).
    let done = rendered(
        "user:\n  ann: {}\nuser::etc_passwd:\n  ann: {}\n",
        json!({}),
    );
    assert!(done.is_ok());
}

#[test]
fn every_undefined_variable_of_the_run_is_reported_with_its_line() {
    let problems = rendered(
        "vars:\n  port: 1\nfile:\n  /a:\n    content: \"{{ prot }}\"\n  /b:\n    mode: |\n      x\n      {{ facts.os.familly }}\nuser:\n  u:\n    when: nope\n",
        json!({}),
    )
    .err()
    .unwrap();
    let shown: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(
        shown,
        [
            "site.yaml:5: file[/a]: undefined variable 'prot' (did you mean 'port'?)",
            "site.yaml:8: file[/b]: 'facts.os.familly' is undefined: facts.os has no 'familly' (did you mean 'family'?)",
            "site.yaml:12: user[u]: undefined variable 'nope'",
        ]
    );
}

#[test]
fn ansible_and_legacy_facter_names_point_to_the_fact() {
    let problems = rendered(
        "file:\n  /a:\n    content: \"{{ ansible_os_family }}\"\n  /b:\n    content: \"{{ facts.osfamily }}\"\n  /c:\n    content: \"{{ facts.hostnme }}\"\n",
        json!({}),
    )
    .err()
    .unwrap();
    let shown: Vec<&str> = problems.iter().map(|p| p.message.as_str()).collect();
    assert_eq!(
        shown,
        [
            "file[/a]: undefined variable 'ansible_os_family' (did you mean 'facts.os.family'?)",
            "file[/b]: 'facts.osfamily' is undefined: facts has no 'osfamily' (did you mean 'facts.os.family'?)",
            "file[/c]: 'facts.hostnme' is undefined: facts has no 'hostnme' (did you mean 'hostname'?)",
        ]
    );
}

#[test]
fn template_and_source_files_become_content_relative_to_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("files")).unwrap();
    std::fs::write(
        dir.path().join("files/app.conf.j2"),
        "listen {{ port }}\n{% for a in admins %}admin {{ a }}\n{% endfor %}",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("files/init.sh"),
        "#!/bin/sh\necho {{ not rendered }}\n",
    )
    .unwrap();
    let manifest = dir.path().join("site.yaml");
    let reading = reading(
        "file:\n  /etc/app.conf:\n    template: files/app.conf.j2\n  /etc/init.d/app:\n    source: files/init.sh\n",
        &manifest,
    );
    let done = render(&reading, &scope(json!({"port": 81, "admins": ["ann"]}))).unwrap();
    assert_eq!(
        attr(&done.declared[0], "content"),
        &text("listen 81\nadmin ann\n")
    );
    assert_eq!(
        attr(&done.declared[1], "content"),
        &text("#!/bin/sh\necho {{ not rendered }}\n")
    );
    assert!(done.declared[0].attrs.iter().all(|a| a.name != "template"));
    std::fs::write(dir.path().join("files/app.conf.j2"), "a\nb {{ missing }}\n").unwrap();
    let Err(Error::Manifest { problems }) = render(&reading, &scope(json!({}))) else {
        panic!("a template with an undefined variable renders");
    };
    assert_eq!(problems[0].file, dir.path().join("files/app.conf.j2"));
    assert_eq!(problems[0].line, 2);
}

#[test]
fn a_value_computed_from_a_sensitive_variable_marks_its_attribute() {
    let done = rendered(
        "vars:\n  ral_sensitive: [db_password]\nfile:\n  /etc/app.conf:\n    content: \"dsn=pg://app:{{ db_password }}@db\\n\"\n    mode: '0600'\n",
        json!({"db_password": "hunter2"}),
    )
    .unwrap();
    assert_eq!(done.sensitive, [("file".to_owned(), "content".to_owned())]);
    let problems = rendered(
        "user:\n  \"{{ secret_name }}\": {}\n",
        json!({"secret_name": "x", "ral_sensitive": ["secret_name"]}),
    )
    .err()
    .unwrap();
    assert!(problems[0]
        .message
        .contains("cannot come from a sensitive value"));
    for leaky in [
        "file:\n  /a:\n    content: x\n    require: \"file[{{ secret }}]\"\n",
        "file:\n  /a:\n    source: \"/nonexistent/{{ secret }}\"\n",
    ] {
        let problems = rendered(leaky, json!({"secret": "s3", "ral_sensitive": ["secret"]}))
            .err()
            .unwrap();
        assert!(
            problems[0]
                .message
                .contains("cannot come from a sensitive value"),
            "{problems:?}"
        );
        assert!(!problems[0].message.contains("s3"), "{problems:?}");
    }
}

#[test]
fn references_render_and_only_a_file_reads_template_and_source() {
    let done = rendered(
        "user:\n  ann:\n    source: not/a/file\n    require: \"group[{{ team }}]\"\n",
        json!({"team": "ops"}),
    )
    .unwrap();
    let ann = &done.declared[0];
    assert_eq!(attr(ann, "source"), &text("not/a/file"));
    assert_eq!(ann.require[0].name, "ops");
    assert_eq!(ann.require[0].type_query, "group");
}

#[test]
fn a_loop_over_a_sensitive_list_marks_only_what_uses_its_item() {
    let done = rendered(
        "host:\n  \"h{{ loop_index }}\":\n    loop: \"{{ secrets }}\"\n    loop_index: x\n    ip: \"{{ item }}\"\n    comment: \"{{ note }}\"\n",
        json!({"secrets": ["10.0.0.1"], "note": "plain", "loop_index": 1, "ral_sensitive": ["secrets"]}),
    )
    .unwrap();
    assert_eq!(done.sensitive, [("host".to_owned(), "ip".to_owned())]);
}

#[test]
fn a_title_that_renders_empty_and_errors_in_a_loop_say_so() {
    let problems = rendered("user:\n  \"{{ nobody }}\": {}\n", json!({"nobody": ""}))
        .err()
        .unwrap();
    assert!(
        problems[0].message.contains("the title renders empty"),
        "{problems:?}"
    );
    let problems = rendered(
        "user:\n  \"{{ item }}\":\n    loop: [a, b]\n    comment: \"{{ missing if item == 'b' else 'x' }}\"\n",
        json!({}),
    )
    .err()
    .unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].message.ends_with("(loop element 2)"),
        "{problems:?}"
    );
    let problems = rendered("user:\n  u:\n    loop: abc\n", json!({}))
        .err()
        .unwrap();
    assert!(
        problems[0]
            .message
            .contains("loop: expected a list, a mapping or an expression giving one"),
        "{problems:?}"
    );
}

#[test]
fn a_host_past_its_deadline_stops_with_a_problem() {
    let reading = reading("user:\n  ann: {}\n", Path::new("site.yaml"));
    let env = engine::environment();
    let mut vars = scope::Variables::resolve(&env, &[], &scope(json!({}))).unwrap();
    vars.expire();
    let stamped = stamp::stamp(&env, &reading.declared[0], &vars);
    assert!(stamped.declared.is_empty());
    assert!(
        stamped.problems[0].message.contains("rendering stopped"),
        "{:?}",
        stamped.problems
    );
}

#[test]
fn plain_manifests_need_no_rendering() {
    let plain = reading("user:\n  ann: {uid: 1500}\n", Path::new("m.yaml"));
    assert!(!uses_templates(&plain));
    for templated in [
        "user:\n  ann: {comment: '{{ x }}'}\n",
        "vars: {x: 1}\n",
        "user:\n  ann: {when: x}\n",
        "file:\n  /a: {source: a}\n",
    ] {
        assert!(
            uses_templates(&reading(templated, Path::new("m.yaml"))),
            "{templated}"
        );
    }
}
