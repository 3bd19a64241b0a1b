//! Hand-written inline SVG charts: stacked bars over time, horizontal bars, lines.

use std::fmt::Write;

/// The series colours, in order (then repeated).
pub(crate) const PALETTE: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f77b4", "#8c564b",
];

pub(crate) fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escapes text for HTML and SVG.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A round axis maximum at or above `v`.
fn nice_max(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if m * p >= v {
            return m * p;
        }
    }
    10.0 * p
}

fn num(v: f64) -> String {
    if v >= 100.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

const W: f64 = 860.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;

fn y_axis(out: &mut String, h: f64, max: f64, unit: &str) {
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        let y = TOP + h - h * i as f64 / 4.0;
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"##,
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            num(v)
        );
    }
    let _ = write!(
        out,
        r#"<text x="12" y="{:.1}" font-size="11" transform="rotate(-90 12 {:.1})" text-anchor="middle">{}</text>"#,
        TOP + h / 2.0,
        TOP + h / 2.0,
        esc(unit)
    );
}

fn legend(out: &mut String, names: &[String], y: f64) -> f64 {
    let mut x = LEFT;
    let mut y = y;
    for (i, n) in names.iter().enumerate() {
        let w = 18.0 + 7.0 * n.chars().count() as f64;
        if x + w > W - RIGHT {
            x = LEFT;
            y += 18.0;
        }
        let _ = write!(
            out,
            r#"<rect x="{x:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            y - 9.0,
            color(i),
            x + 14.0,
            y,
            esc(n)
        );
        x += w + 12.0;
    }
    y
}

/// Stacked bars over time: `values[bucket][series]`, x labels in seconds.
pub(crate) fn stacked_bars(
    id: &str,
    names: &[String],
    values: &[Vec<f64>],
    bucket_s: f64,
    unit: &str,
) -> String {
    let h = 240.0;
    let max = nice_max(
        values
            .iter()
            .map(|r| r.iter().sum::<f64>())
            .fold(0.0, f64::max),
    );
    let n = values.len().max(1);
    let plot_w = W - LEFT - RIGHT;
    let bw = plot_w / n as f64;
    let mut body = String::new();
    y_axis(&mut body, h, max, unit);
    for (b, row) in values.iter().enumerate() {
        let x = LEFT + b as f64 * bw;
        let mut y = TOP + h;
        for (s, &v) in row.iter().enumerate() {
            if v <= 0.0 {
                continue;
            }
            let bh = h * v / max;
            y -= bh;
            let _ = write!(
                body,
                r#"<rect class="bar" x="{:.1}" y="{y:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{} s: {}: {} {}</title></rect>"#,
                x + 0.5,
                (bw - 1.0).max(0.5),
                color(s),
                num(b as f64 * bucket_s),
                esc(names.get(s).map_or("", String::as_str)),
                num(v),
                esc(unit)
            );
        }
        let every = (n / 10).max(1);
        if b % every == 0 {
            let _ = write!(
                body,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}s</text>"#,
                x + bw / 2.0,
                TOP + h + 14.0,
                num(b as f64 * bucket_s)
            );
        }
    }
    let bottom = legend(&mut body, names, TOP + h + 36.0) + 10.0;
    format!(
        r#"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {bottom:.0}" width="100%" role="img">{body}</svg>"#
    )
}

/// Horizontal bars, one per row, with a value label.
pub(crate) fn hbars(id: &str, rows: &[(String, f64, String)]) -> String {
    let row_h = 20.0;
    let label_w = 300.0;
    let h = row_h * rows.len().max(1) as f64 + 8.0;
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max).max(1e-9);
    let bar_w = W - label_w - 120.0;
    let mut body = String::new();
    for (i, (name, v, text)) in rows.iter().enumerate() {
        let y = 4.0 + i as f64 * row_h;
        let w = (bar_w * v / max).max(if *v > 0.0 { 1.0 } else { 0.0 });
        let _ = write!(
            body,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="end">{}</text><rect class="bar" x="{label_w}" y="{y:.1}" width="{w:.1}" height="{:.1}" fill="{}"><title>{}: {}</title></rect><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            label_w - 6.0,
            y + 13.0,
            esc(name),
            row_h - 4.0,
            color(i),
            esc(name),
            esc(text),
            label_w + w + 6.0,
            y + 13.0,
            esc(text)
        );
    }
    format!(
        r#"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h:.0}" width="100%" role="img">{body}</svg>"#
    )
}

/// Lines over time: `(name, points (t, v))`.
pub(crate) fn lines(id: &str, series: &[(String, Vec<(f64, f64)>)], unit: &str) -> String {
    let h = 200.0;
    let t_max = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        .max(1e-9);
    let max = nice_max(
        series
            .iter()
            .flat_map(|s| s.1.iter().map(|p| p.1))
            .fold(0.0, f64::max),
    );
    let plot_w = W - LEFT - RIGHT;
    let mut body = String::new();
    y_axis(&mut body, h, max, unit);
    for i in 0..=4 {
        let t = t_max * i as f64 / 4.0;
        let _ = write!(
            body,
            r#"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle">{}s</text>"#,
            LEFT + plot_w * i as f64 / 4.0,
            TOP + h + 14.0,
            num(t)
        );
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        let mut d = String::new();
        for (k, (t, v)) in pts.iter().enumerate() {
            let x = LEFT + plot_w * t / t_max;
            let y = TOP + h - h * v / max;
            let _ = write!(d, "{}{x:.1},{y:.1}", if k == 0 { "M" } else { " L" });
        }
        let _ = write!(
            body,
            r#"<path class="line" d="{d}" fill="none" stroke="{}" stroke-width="1.5"><title>{}</title></path>"#,
            color(i),
            esc(name)
        );
    }
    let names: Vec<String> = series.iter().map(|s| s.0.clone()).collect();
    let bottom = legend(&mut body, &names, TOP + h + 36.0) + 10.0;
    format!(
        r#"<svg id="{id}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {bottom:.0}" width="100%" role="img">{body}</svg>"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_rounds_axes() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(nice_max(0.0), 1.0);
        assert_eq!(nice_max(7.3), 10.0);
        assert_eq!(nice_max(180.0), 200.0);
        assert_eq!(nice_max(f64::NAN), 1.0);
    }

    #[test]
    fn a_bar_per_positive_value() {
        let svg = stacked_bars(
            "c",
            &["a".into(), "b".into()],
            &[vec![1.0, 2.0], vec![0.0, 3.0]],
            1.0,
            "kbit/s",
        );
        assert_eq!(svg.matches(r#"class="bar""#).count(), 3);
        let h = hbars(
            "h",
            &[("x".into(), 2.0, "2".into()), ("y".into(), 0.0, "0".into())],
        );
        assert_eq!(h.matches(r#"class="bar""#).count(), 2);
    }
}
