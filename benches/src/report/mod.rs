//! Output of the scenario harness: markdown tables, a tiny JSON writer and hand-drawn
//! SVG charts, all written under `target/bench-report/`.
//!
//! No plotting or JSON dependency: the charts are a few rectangles and polylines, and
//! the JSON is built from [`Json`] values.

pub mod svg;

use std::fmt::Write as _;
use std::path::PathBuf;

/// A markdown table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Column headers.
    pub headers: Vec<String>,
    /// Rows, each as many cells as there are headers.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with the given headers.
    pub fn new(headers: &[&str]) -> Self {
        Self {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table as GitHub markdown.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "| {} |", self.headers.join(" | "));
        let _ = writeln!(
            s,
            "|{}",
            self.headers.iter().map(|_| "---|").collect::<String>()
        );
        for r in &self.rows {
            let _ = writeln!(s, "| {} |", r.join(" | "));
        }
        s
    }
}

/// A JSON value (enough for the reports).
#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    /// `null` (also used for pending results).
    Null,
    /// A boolean.
    Bool(bool),
    /// A number (non-finite values are written as `null`).
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in insertion order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// An object from `(key, value)` pairs.
    pub fn obj(pairs: Vec<(&str, Json)>) -> Json {
        Json::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Json {
        Json::Str(s.into())
    }

    /// A number, or `null` for `None`.
    pub fn opt(v: Option<f64>) -> Json {
        v.map_or(Json::Null, Json::Num)
    }

    /// The value as pretty-printed JSON text (non-finite numbers become `null`).
    pub fn render(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.to_value())
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        text.push('\n');
        text
    }

    fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Num(n) => serde_json::Number::from_f64(*n).map_or(Value::Null, Value::Number),
            Json::Str(t) => Value::String(t.clone()),
            Json::Arr(items) => Value::Array(items.iter().map(Json::to_value).collect()),
            Json::Obj(pairs) => Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value()))
                    .collect(),
            ),
        }
    }
}

static REPORT_DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Sets the report directory (the harness's `--out`); the first call wins.
pub fn set_report_dir(dir: PathBuf) {
    let _ = REPORT_DIR.set(dir);
}

/// The report directory: the one set with [`set_report_dir`], else
/// `bench-report/` in `CARGO_TARGET_DIR` when set, else in the `target/` folder of the
/// workspace the harness is run from (the nearest folder up from the current one with
/// a `Cargo.lock`), else `./target/bench-report`.
pub fn report_dir() -> PathBuf {
    if let Some(dir) = REPORT_DIR.get() {
        return dir.clone();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            let cwd = std::env::current_dir().ok()?;
            cwd.ancestors()
                .find(|d| d.join("Cargo.lock").is_file())
                .map(|d| d.join("target"))
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("bench-report")
}

/// Writes `name` (for example `s1.json`) into the report directory.
pub fn write_file(name: &str, contents: &str) -> std::io::Result<PathBuf> {
    let dir = report_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(name);
    std::fs::write(&path, contents)?;
    Ok(path)
}

/// Formats a number with `digits` decimals.
pub fn f(v: f64, digits: usize) -> String {
    format!("{v:.digits$}")
}

/// Returns freed heap memory to the system (glibc's `malloc_trim`), then resets the
/// process's peak resident set size to its current one (writes `5` to
/// `/proc/self/clear_refs`), so the next [`peak_rss_bytes`] measures what runs from
/// here rather than what ran before. Returns whether the platform allowed the reset.
#[allow(unsafe_code)] // FFI to glibc's malloc_trim
pub fn reset_peak_rss() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: malloc_trim only releases free heap pages; it takes no pointers.
        unsafe {
            malloc_trim(0);
        }
    }
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's peak resident set size in bytes (`VmHWM` of `/proc/self/status`), if
/// the platform has it.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_table_has_header_rule_and_rows() {
        let mut t = Table::new(&["a", "b"]);
        t.row(vec!["1".into(), "2".into()]);
        assert_eq!(t.markdown(), "| a | b |\n|---|---|\n| 1 | 2 |\n");
    }

    #[test]
    fn json_escapes_and_nests() {
        let j = Json::obj(vec![
            ("name", Json::str("a\"b")),
            ("xs", Json::Arr(vec![Json::Num(1.5), Json::Null])),
            ("nan", Json::Num(f64::NAN)),
        ]);
        let text = j.render();
        assert!(text.contains(r#""name": "a\"b""#), "{text}");
        assert!(text.contains("1.5,\n"), "{text}");
        assert!(text.contains(r#""nan": null"#), "{text}");
    }
}
