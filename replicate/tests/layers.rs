//! The runtime's layering: every module imports only from the layers below it.
//!
//! [`LAYERS`] lists the modules of `replicate/src` from the bottom up. The test reads
//! every source file (outside its trailing `#[cfg(test)]` module and comments), finds
//! each `crate::module::…` path and each `super::submodule::…` path inside the
//! replication layer, and fails on any path that reaches a layer at or above the
//! file's own (a module may use itself). A module missing from the table fails too, so
//! a new module must be placed deliberately.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The layers, bottom first. A module may import from any module listed before it.
const LAYERS: &[&str] = &[
    "bits",
    "read_ahead",
    "insights",
    "handle",
    "serialize",
    "derive_checks",
    "state",
    "member_ops",
    "protocol",
    "fragment",
    "nested",
    "object",
    "connection",
    "link",
    "stream",
    "blob",
    "interest",
    "replication::threads",
    "replication::wire",
    "replication::record",
    "replication::group",
    "replication::baseline",
    "replication::insights",
    "replication::scheduler",
    "replication::replay",
    "replication::encode",
    "replication::interest_hooks",
    "replication::reader",
    "replication::writer",
    "replication::attachment",
    "replication::streams",
    "replication",
    "time",
    "stats",
    "transport",
    "facade",
];

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| *l == module)
}

/// The layer a source file belongs to, from its path under `src/`.
fn layer_of(relative: &Path) -> String {
    let parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    match parts.as_slice() {
        [top] => top.clone(),
        [dir, file] if dir == "replication" => match file.as_str() {
            "mod" => "replication".into(),
            // The writer's submodules (`writer::huge`, `plan`, `body`, `local`, `lifecycle`,
            // `delivery`, `follow`).
            "huge" | "plan" | "body" | "local" | "lifecycle" | "delivery" | "follow" => {
                "replication::writer".into()
            }
            other => format!("replication::{other}"),
        },
        // A layer of the replication module in a directory of its own (`baseline/`).
        [dir, sub, _] if dir == "replication" => format!("replication::{sub}"),
        [dir, ..] => dir.clone(),
        [] => String::new(),
    }
}

/// The code of a file without comments and without its trailing test module.
fn code_of(source: &str) -> String {
    let body = match source.find("#[cfg(test)]\nmod tests") {
        Some(i) => &source[..i],
        None => source,
    };
    body.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifier_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The modules a piece of code reaches: `crate::a` (or `crate::replication::b`, when
/// that is a layer of its own), `crate::{a, b::c}` groups, and for files inside the
/// replication layer `super::b::…` paths.
fn imports_of(code: &str, in_replication: bool) -> Vec<String> {
    let mut found = Vec::new();
    let push_path = |path: &str, found: &mut Vec<String>| {
        let first = identifier_at(path);
        if first.is_empty() {
            return;
        }
        if first == "replication" {
            let rest = &path[first.len()..];
            if let Some(sub) = rest.strip_prefix("::") {
                let second = identifier_at(sub);
                let candidate = format!("replication::{second}");
                if rank(&candidate).is_some() {
                    found.push(candidate);
                    return;
                }
            }
        }
        found.push(first.to_string());
    };
    for (i, _) in code.match_indices("crate::") {
        // `$crate::…` in a macro names the crate from the caller's side.
        if code[..i].ends_with('$') {
            continue;
        }
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                push_path(item.trim(), &mut found);
            }
        } else {
            push_path(rest, &mut found);
        }
    }
    if in_replication {
        for (i, _) in code.match_indices("super::") {
            let rest = &code[i + "super::".len()..];
            let name = identifier_at(rest);
            let after = &rest[name.len()..];
            // Only `super::submodule::…`: items re-exported by `replication/mod.rs`
            // (`super::Item`) belong to the layer itself.
            if after.starts_with("::") && rank(&format!("replication::{name}")).is_some() {
                found.push(format!("replication::{name}"));
            }
        }
    }
    found
}

/// Every violation in one file: `(imported module, reason)`.
fn violations(layer: &str, code: &str) -> Vec<String> {
    let Some(own) = rank(layer) else {
        return vec![format!(
            "module `{layer}` is not in the layer table of tests/layers.rs"
        )];
    };
    let mut out = BTreeSet::new();
    for import in imports_of(code, layer.starts_with("replication")) {
        if import == layer
            || import
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_uppercase())
        {
            if import != layer {
                out.insert(format!(
                    "`crate::{import}`: name the defining module, not a crate-root re-export"
                ));
            }
            continue;
        }
        // A layer's own submodules and the parent's items are the same layer.
        if layer == "replication" && import.starts_with("replication::") {
            continue;
        }
        match rank(&import) {
            Some(r) if r < own => {}
            Some(_) => {
                out.insert(format!("imports `{import}`, a layer at or above `{layer}`"));
            }
            None => {
                out.insert(format!(
                    "imports `{import}`, which is not in the layer table"
                ));
            }
        }
    }
    out.into_iter().collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable source folder") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_module_imports_only_from_below() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        if relative == Path::new("lib.rs") {
            continue;
        }
        let layer = layer_of(relative);
        let code = code_of(&std::fs::read_to_string(file).expect("readable source"));
        for v in violations(&layer, &code) {
            problems.push(format!("{}: {v}", relative.display()));
        }
        checked += 1;
    }
    assert!(
        checked > 40,
        "only {checked} source files found under {src:?}"
    );
    assert!(
        problems.is_empty(),
        "layering broken (see the table in tests/layers.rs):\n{}",
        problems.join("\n")
    );
}

#[test]
fn an_inverted_import_is_caught() {
    // The bit stream reaching up into the serializers.
    let v = violations("bits", "use crate::serialize::SerializeError;");
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("`serialize`"), "{v:?}");
    // Grouped imports, and the replication layer's own order.
    let v = violations(
        "replication::baseline",
        "use crate::{bits::BitReader, facade::Server};\nuse super::reader::ObjectReadError;",
    );
    assert_eq!(v.len(), 2, "{v:?}");
    // Root re-exports hide the real dependency.
    let v = violations("state", "use crate::NetRefHandle;");
    assert_eq!(v.len(), 1, "{v:?}");
    // What is allowed stays allowed.
    assert!(violations("facade", "use crate::{bits::BitWriter, replication::wire};").is_empty());
    assert!(violations("replication", "use super::reader::ClientWorld;").is_empty());
    // `$crate` paths in macros are the caller's view of the crate.
    assert!(violations("protocol", "$crate::__private::inventory::submit!").is_empty());
    // Unknown modules must be placed in the table.
    assert_eq!(violations("newthing", "").len(), 1);
}

#[test]
fn files_map_to_layers() {
    assert_eq!(layer_of(Path::new("bits.rs")), "bits");
    assert_eq!(layer_of(Path::new("serialize/ints.rs")), "serialize");
    assert_eq!(
        layer_of(Path::new("replication/reader.rs")),
        "replication::reader"
    );
    assert_eq!(
        layer_of(Path::new("replication/huge.rs")),
        "replication::writer"
    );
    assert_eq!(layer_of(Path::new("replication/mod.rs")), "replication");
    assert_eq!(
        code_of("use a; // crate::x\n#[cfg(test)]\nmod tests { use crate::y; }"),
        "use a; "
    );
}
