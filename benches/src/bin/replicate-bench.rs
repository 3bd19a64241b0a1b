//! The scenario harness of `BENCHMARKS.md`:
//!
//! ```text
//! cargo run --release -p replicate-bench -- s1|s2|s3|all [--quick]
//! ```
//!
//! Prints each scenario's markdown tables and writes JSON, markdown and SVG under
//! `target/bench-report/`. Exits non-zero when a sanity check fails (no traffic, a
//! client that did not converge, replicate not smaller than the postcard baseline);
//! timings are reported, never asserted.

use replicate_bench::report::{Json, write_file};
use replicate_bench::scenarios::{Outcome, SanityError, s1, s2, s3};
use std::process::ExitCode;
use std::time::Instant;

fn usage() -> ExitCode {
    eprintln!("usage: replicate-bench s1|s2|s3|all [--quick]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let which: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let scenarios: Vec<&str> = match which.as_slice() {
        ["all"] | [] => vec!["s1", "s2", "s3"],
        [one @ ("s1" | "s2" | "s3")] => vec![*one],
        _ => return usage(),
    };
    let mut all = Vec::new();
    let mut markdown = String::new();
    for name in scenarios {
        let start = Instant::now();
        let result: Result<Outcome, SanityError> = match name {
            "s1" => s1::run(if quick {
                s1::S1Params::QUICK
            } else {
                s1::S1Params::FULL
            }),
            "s2" => s2::run(&if quick {
                s2::S2Params::quick()
            } else {
                s2::S2Params::full()
            }),
            _ => s3::run(if quick {
                s3::S3Params::QUICK
            } else {
                s3::S3Params::FULL
            }),
        };
        match result {
            Ok(o) => {
                println!("{}", o.markdown);
                println!("({name} took {:.1} s)\n", start.elapsed().as_secs_f64());
                markdown.push_str(&o.markdown);
                markdown.push('\n');
                all.push((name, o.json));
            }
            Err(e) => {
                eprintln!("{name}: sanity check failed: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    let json = Json::obj(vec![
        ("quick", Json::Bool(quick)),
        (
            "scenarios",
            Json::Obj(all.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        ),
    ]);
    let _ = write_file("report.md", &markdown);
    match write_file("report.json", &json.render()) {
        Ok(path) => println!(
            "reports in {}",
            path.parent()
                .map_or(path.clone(), |p| p.to_path_buf())
                .display()
        ),
        Err(e) => eprintln!("could not write the report: {e}"),
    }
    ExitCode::SUCCESS
}
