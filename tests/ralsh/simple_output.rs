//! Parsing `# simple` output: headers, line errors, ral_error, ral_unknown,
//! undeclared and write-only attributes, escaping.

use crate::support::Sandbox;

#[test]
fn list_prints_resources_in_puppet_style() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list.out",
        "\n# simple\nname: b\n  color :  blue \ntags: x 'y z'\nenabled: true\nserial: 7\nname: a\nensure: absent\n",
    );
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(0);
    assert_eq!(
        run.stdout,
        "scripted::scripted { 'b':\n  color   => 'blue',\n  enabled => true,\n  serial  => '7',\n  tags    => ['x', 'y z'],\n}\n\
         scripted::scripted { 'a':\n  ensure => 'absent',\n}\n"
    );
    assert_eq!(run.stderr, "");
}

#[test]
fn missing_header_is_an_error_quoting_the_line() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "\nsimple output\nname: a\n");
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(2);
    run.stderr_has("scripted::scripted: list: line 2: expected '# simple' as the first line, found 'simple output'");
}

#[test]
fn empty_output_is_an_error() {
    let sandbox = Sandbox::new();
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(2);
    run.stderr_has("the output is empty");
}

#[test]
fn a_line_without_colon_names_its_line_number() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\nname: a\ncolor: red\njust words\n");
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(2);
    run.stderr_has("line 4: expected 'key: value', found 'just words'");
}

#[test]
fn an_attribute_before_any_name_is_an_error() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\ncolor: red\nname: a\n");
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(2);
    run.stderr_has("line 2: attribute 'color' comes before any 'name:' line");
}

#[test]
fn ral_error_up_to_eom_is_the_message_and_the_rest_is_ignored() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "find.out",
        "# simple\nname: a\nral_error: disk on fire\n  second line\nral_eom\nname: b\ncolor: red\n",
    );
    let run = sandbox.ralsh(&["scripted", "a"]);
    run.expect(2);
    run.stderr_has("scripted::scripted: find reported an error: disk on fire\n  second line\n");
    assert_eq!(run.stdout, "");
}

#[test]
fn ral_error_without_eom_is_still_an_error() {
    let sandbox = Sandbox::new();
    sandbox.write("update.out", "# simple\nral_error: no permission\n");
    sandbox.write("find.out", "# simple\nname: a\ncolor: red\n");
    let run = sandbox.ralsh(&["scripted", "a", "color=blue"]);
    run.expect(2);
    run.stderr_has("update reported an error: no permission");
}

#[test]
fn ral_error_in_a_listing_fails_the_listing() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list.out",
        "# simple\nname: a\nral_error: half way\nral_eom\n",
    );
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(2);
    run.stderr_has("list reported an error: half way");
}

#[test]
fn find_with_ral_unknown_is_not_found() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: ghost\nral_unknown: true\n");
    let run = sandbox.ralsh(&["scripted", "ghost"]);
    run.expect(1);
    assert_eq!(run.stdout, "");
    run.stderr_has("no resource named 'ghost'");
    let run = sandbox.ralsh(&["-j", "scripted", "ghost"]);
    run.expect(1);
    assert_eq!(run.json(), serde_json::json!({}));
}

#[test]
fn find_answering_for_another_name_is_an_error() {
    let sandbox = Sandbox::new();
    sandbox.write("find.out", "# simple\nname: other\n");
    let run = sandbox.ralsh(&["scripted", "wanted"]);
    run.expect(2);
    run.stderr_has("find for 'wanted' answered with 'other'");
}

#[test]
fn undeclared_attributes_are_kept_and_warned_about_once() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list.out",
        "# simple\nname: a\nmood: happy\nname: b\nmood: sad\n",
    );
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(0);
    run.stdout_has("mood => 'happy'");
    run.stdout_has("mood => 'sad'");
    assert_eq!(
        run.stderr.matches("attribute 'mood' (value ").count(),
        1,
        "{}",
        run.stderr
    );
}

#[test]
fn write_only_attributes_are_not_shown() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\nname: a\ntoken: s3cret\ncolor: red\n");
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(0);
    assert!(!run.stdout.contains("s3cret"), "{}", run.stdout);
    assert!(!run.stdout.contains("token"), "{}", run.stdout);
}

#[test]
fn provider_text_is_printed_with_control_characters_escaped() {
    let sandbox = Sandbox::new();
    sandbox.write(
        "list.out",
        "# simple\nname: evil\x1b[2J\ncolor: it's \x07\\\n",
    );
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(0);
    assert!(
        !run.stdout.contains('\x1b') && !run.stdout.contains('\x07'),
        "{:?}",
        run.stdout
    );
    run.stdout_has("{ 'evil\\u{1b}[2J':");
    run.stdout_has("color => 'it\\'s \\u{7}\\\\',");
}

#[test]
fn wrongly_typed_values_are_kept_with_a_warning() {
    let sandbox = Sandbox::new();
    sandbox.write("list.out", "# simple\nname: a\nenabled: yes\n");
    let run = sandbox.ralsh(&["scripted"]);
    run.expect(0);
    run.stdout_has("enabled => 'yes'");
    run.stderr_has("attribute 'enabled' has value 'yes', which is not a boolean");
}
