//! Hand-drawn SVG charts: horizontal bars (S1 bytes per tick, S3 bits per cube) and
//! line charts with optional log axes (S2 scale curves).

use std::fmt::Write as _;

const W: f64 = 760.0;
const PALETTE: [&str; 6] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A horizontal bar chart: one bar per `(label, value)`; `None` values are drawn as
/// "pending".
pub fn bar_chart(title: &str, unit: &str, bars: &[(String, Option<f64>)]) -> String {
    let row_h = 28.0;
    let left = 300.0;
    let top = 40.0;
    let h = top + row_h * bars.len() as f64 + 30.0;
    let max = bars
        .iter()
        .filter_map(|b| b.1)
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let span = W - left - 110.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    for (i, (label, value)) in bars.iter().enumerate() {
        let y = top + row_h * i as f64;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + 17.0,
            esc(label)
        );
        match value {
            Some(v) => {
                let len = (v / max * span).max(1.0);
                let _ = writeln!(
                    s,
                    r#"<rect x="{left}" y="{}" width="{len:.1}" height="{}" fill="{}"/>"#,
                    y + 4.0,
                    row_h - 8.0,
                    PALETTE[i % PALETTE.len()]
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{:.1}" y="{}">{} {}</text>"#,
                    left + len + 6.0,
                    y + 17.0,
                    fmt_num(*v),
                    esc(unit)
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    r##"<text x="{left}" y="{}" fill="#888">pending</text>"##,
                    y + 17.0
                );
            }
        }
    }
    s.push_str("</svg>\n");
    s
}

/// One line of a [`line_chart`].
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A line chart with log-scaled axes (both axes must be positive; non-positive points
/// are skipped).
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let h = 420.0;
    let (left, right, top, bottom) = (80.0, 200.0, 40.0, 50.0);
    let pts = series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| p.0 > 0.0 && p.1 > 0.0);
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(x.log10());
        x1 = x1.max(x.log10());
        y0 = y0.min(y.log10());
        y1 = y1.max(y.log10());
    }
    if x0 > x1 {
        (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
    }
    let (x0, x1) = (x0.floor(), x1.ceil().max(x0.floor() + 1.0));
    let (y0, y1) = (y0.floor(), y1.ceil().max(y0.floor() + 1.0));
    let pw = W - left - right;
    let ph = h - top - bottom;
    let px = |x: f64| left + (x.log10() - x0) / (x1 - x0) * pw;
    let py = |y: f64| top + ph - (y.log10() - y0) / (y1 - y0) * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="10" y="22" font-size="15" font-weight="bold">{}</text>"#,
        esc(title)
    );
    // Decade grid lines.
    for d in (x0 as i32)..=(x1 as i32) {
        let x = px(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{}" stroke="#ddd"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            top + ph,
            top + ph + 16.0,
            fmt_num(10f64.powi(d))
        );
    }
    for d in (y0 as i32)..=(y1 as i32) {
        let y = py(10f64.powi(d));
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            left + pw,
            left - 6.0,
            y + 4.0,
            fmt_num(10f64.powi(d))
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{} (log)</text>"#,
        left + pw / 2.0,
        h - 10.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="16" y="{}" transform="rotate(-90 16 {})" text-anchor="middle">{} (log)</text>"#,
        top + ph / 2.0,
        top + ph / 2.0,
        esc(y_label)
    );
    for (i, ser) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let coords: Vec<String> = ser
            .points
            .iter()
            .filter(|p| p.0 > 0.0 && p.1 > 0.0)
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            coords.join(" ")
        );
        for c in &coords {
            let (cx, cy) = c.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(s, r#"<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>"#);
        }
        let ly = top + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{color}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            left + pw + 10.0,
            left + pw + 30.0,
            left + pw + 36.0,
            ly + 4.0,
            esc(&ser.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else if v.abs() >= 0.001 {
        format!("{v:.3}")
    } else {
        format!("{v:.0e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_scale_to_the_largest_value() {
        let svg = bar_chart(
            "t",
            "B",
            &[
                ("a".into(), Some(100.0)),
                ("b".into(), Some(50.0)),
                ("c".into(), None),
            ],
        );
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains(r#"width="350.0""#), "{svg}");
        assert!(svg.contains(r#"width="175.0""#), "{svg}");
        assert!(svg.contains("pending"));
    }

    #[test]
    fn lines_have_one_polyline_per_series() {
        let svg = line_chart(
            "t",
            "x",
            "y",
            &[
                Series {
                    name: "a".into(),
                    points: vec![(1.0, 1.0), (10.0, 100.0)],
                },
                Series {
                    name: "b<".into(),
                    points: vec![(1.0, 2.0), (10.0, 3.0)],
                },
            ],
        );
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("b&lt;"));
    }
}
