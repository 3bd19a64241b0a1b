//! trybuild runner: every file in `ui/fail` must fail to compile with exactly the
//! checked-in `.stderr`, every file in `ui/pass` must compile. Regenerate the expected
//! output with `TRYBUILD=overwrite cargo test -p replicate-ui-tests` and review the diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/fail/*.rs");
    t.pass("ui/pass/*.rs");
}
