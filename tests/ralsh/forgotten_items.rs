//! Dropping a resource from the manifest removes it only when ral created
//! it: the plan, the apply and `ral state list` show the user which items
//! are only forgotten, so a resource left in place is no surprise.

use crate::plans::Bench;

#[test]
fn plan_apply_and_state_list_show_what_is_only_forgotten() {
    let bench = Bench::new();
    // b9 exists before ral applies it: adopted, not created.
    bench.sandbox.write(
        "beta.json",
        "{\"b9\": {\"ensure\": \"present\", \"value\": \"old\"}}",
    );
    let both = bench.manifest(
        "both.yaml",
        "beta:\n  b1: {value: x}\n  b9: {value: new}\n  b2: {value: y}\n",
    );
    bench.ral("apply", &[&both]).expect(0);
    let mut command = bench.sandbox.ral_command("state", &["list"]);
    let listed = crate::support::run(&mut command);
    listed
        .expect(0)
        .stdout_has("beta[b1]  Applied  created  ")
        .stdout_has("beta[b9]  Applied  adopted  ");

    let fewer = bench.manifest("fewer.yaml", "beta:\n  b2: {value: y}\n");
    let planned = bench.ral("plan", &[&fewer]);
    planned
        .expect(0)
        .stdout_has(
            "= beta[b9] is only forgotten, left as it is: no manifest lists it, and ral did not \
             create it\n",
        )
        .stdout_has("- beta[b1]\n");
    assert!(!planned.stdout.contains("= beta[b1]"), "{}", planned.stdout);
    bench.ral("apply", &[&fewer]).expect(0).stdout_has(
        "= beta[b9] was only forgotten, left as it is: no manifest lists it, and ral did not \
         create it\n",
    );
    assert_eq!(
        bench.store("beta")["b9"]["value"],
        "new",
        "b9 left as it is"
    );
    assert!(bench.store("beta").get("b1").is_none(), "b1 removed");
    // Nothing left to forget: no such line any more.
    let again = bench.ral("plan", &[&fewer]);
    again.expect(0);
    assert!(!again.stdout.contains("forgotten"), "{}", again.stdout);
}
