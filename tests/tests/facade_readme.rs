//! The README stays true: it quotes `examples/hello.rs` verbatim, and `.ci/run` runs
//! exactly the test and demo commands the README gives.

const README: &str = include_str!("../../README.md");
const HELLO: &str = include_str!("../../examples/hello.rs");
const CI: &str = include_str!("../../.ci/run");

#[test]
fn readme_quotes_the_hello_example_verbatim() {
    let body: Vec<&str> = HELLO.lines().filter(|l| !l.starts_with("//!")).collect();
    let body = body.join("\n");
    let body = body.trim_matches('\n');
    assert!(
        README.contains(body),
        "README.md must quote examples/hello.rs (without its //! header) verbatim"
    );
    assert!(
        body.lines().count() <= 60,
        "hello should stay about 50 lines"
    );
}

#[test]
fn ci_runs_the_readme_commands() {
    assert!(README.contains("cargo run --release --example arena\n"));
    assert!(README.contains("cargo test --workspace\n"));
    assert!(CI.lines().any(|l| l.trim() == "cargo test --workspace"));
    assert!(
        CI.lines()
            .any(|l| l.starts_with("cargo run --example arena -- --quick"))
    );
}
