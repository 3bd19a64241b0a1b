//! The HTML report: one self-contained file (inline CSS and SVG, no script, nothing
//! fetched), in the order one tunes replication: how much goes out over time and for
//! which type, which members cost the most, how much is framing, how each connection
//! fares, then the full per-type and per-member tables.
//!
//! Every chart is an `<svg class="chart">` with a stable id: `chart-bandwidth`,
//! `chart-members`, `chart-framing`, `chart-rtt`, `chart-loss`, `chart-bytes`; the
//! tables are `table-types`, `table-members` and `table-clients`.

use crate::svg::{self, esc};
use crate::{Analysis, Share, fmt_bytes, pct};
use std::fmt::Write;

/// Members (or types) shown in the "top members" chart.
pub const TOP_MEMBERS: usize = 15;

const STYLE: &str = "
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:960px;color:#222;padding:0 12px}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:32px;border-bottom:1px solid #ddd;padding-bottom:4px}
.sub{color:#666;margin-top:0}.kpis{display:flex;flex-wrap:wrap;gap:12px;margin:16px 0}
.kpi{background:#f5f7fa;border-radius:6px;padding:8px 12px;min-width:120px}.kpi b{display:block;font-size:18px}
.kpi span{color:#666;font-size:12px}table{border-collapse:collapse;width:100%;font-size:12px;margin-top:8px}
th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:right}th{background:#f5f7fa;position:sticky;top:0}
td:first-child,th:first-child,td.l,th.l{text-align:left}.hint{color:#b35c00}.note{color:#666;font-size:12px}
svg.chart{display:block;margin-top:8px;font-family:inherit}.bad{color:#c00;font-weight:bold}
";

fn kpi(out: &mut String, value: &str, label: &str) {
    let _ = write!(
        out,
        r#"<div class="kpi"><b>{}</b><span>{}</span></div>"#,
        esc(value),
        esc(label)
    );
}

/// Renders the report.
pub fn render(a: &Analysis) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>replicate network insights</title><style>{STYLE}</style></head><body data-wire-bits="{}" data-packets="{}" data-clients="{}">"#,
        a.wire_bits,
        a.packets,
        a.clients.len()
    );
    let level = match a.level {
        2 => "per member",
        1 => "framing and types",
        _ => "off",
    };
    let _ = write!(
        o,
        r#"<h1>replicate network insights</h1><p class="sub">A recorded server session: every packet sent, split into where its bits went (attribution: {level}).</p><div class="kpis">"#
    );
    kpi(&mut o, &format!("{:.1} s", a.duration_s), "session");
    kpi(&mut o, &a.clients.len().to_string(), "clients");
    kpi(&mut o, &a.packets.to_string(), "packets sent");
    kpi(&mut o, &fmt_bytes(a.wire_bits), "sent on the wire");
    kpi(
        &mut o,
        &format!("{:.1} kbit/s", a.mean_kbps()),
        "mean, all clients",
    );
    let object_bits: u64 = a.types.iter().map(|t| t.bits).sum();
    kpi(&mut o, &pct(object_bits, a.wire_bits), "object batches");
    o.push_str("</div>");
    if a.inexact_packets > 0 {
        let _ = write!(
            o,
            r#"<p class="bad">{} packets' parts do not sum to their size on the wire: the recording is inconsistent.</p>"#,
            a.inexact_packets
        );
    }

    // Bandwidth over time.
    o.push_str(r#"<h2 id="bandwidth">Bandwidth over time, by type</h2>"#);
    let bw = &a.bandwidth;
    let values: Vec<Vec<f64>> = bw
        .bits
        .iter()
        .map(|row| {
            row.iter()
                .map(|&b| b as f64 / bw.bucket_s.max(1e-9) / 1000.0)
                .collect()
        })
        .collect();
    o.push_str(&svg::stacked_bars(
        "chart-bandwidth",
        &bw.series,
        &values,
        bw.bucket_s,
        "kbit/s",
    ));
    let _ = write!(
        o,
        r#"<p class="note">All clients together, {} s per bar. Object types are whole batches (object index, form, head, mask, members); everything else is framing or another stream.</p>"#,
        bw.bucket_s
    );

    // Top members.
    let (title, rows): (&str, Vec<(String, f64, String)>) = if a.members.is_empty() {
        (
            "Top types by bits (record with per-member attribution for members)",
            a.types
                .iter()
                .take(TOP_MEMBERS)
                .map(|t| {
                    (
                        t.name.clone(),
                        t.bits as f64,
                        format!("{} ({})", fmt_bytes(t.bits), pct(t.bits, a.wire_bits)),
                    )
                })
                .collect(),
        )
    } else {
        (
            "Top members by bits",
            a.members
                .iter()
                .take(TOP_MEMBERS)
                .map(|m| {
                    (
                        m.label(),
                        m.bits as f64,
                        format!("{} ({})", fmt_bytes(m.bits), pct(m.bits, a.wire_bits)),
                    )
                })
                .collect(),
        )
    };
    let _ = write!(o, r#"<h2 id="members">{}</h2>"#, esc(title));
    o.push_str(&svg::hbars("chart-members", &rows));

    // Framing share.
    o.push_str(r#"<h2 id="framing">Framing share</h2>"#);
    let shares: Vec<(String, f64, String)> = a
        .framing_share()
        .into_iter()
        .filter(|s| s.bits > 0)
        .map(|s| {
            (
                s.name,
                s.bits as f64,
                format!("{} ({})", fmt_bytes(s.bits), pct(s.bits, a.wire_bits)),
            )
        })
        .collect();
    o.push_str(&svg::hbars("chart-framing", &shares));
    o.push_str(r#"<p class="note">Shares of all bits on the wire (parts with no bits left out). "replication: members" is member values; everything else is what it costs to frame them. Handshake control frames are not attributed.</p>"#);

    // Connections.
    o.push_str(r#"<h2 id="connections">Connections</h2>"#);
    let rtt: Vec<(String, Vec<(f64, f64)>)> = a
        .clients
        .iter()
        .map(|c| {
            (
                format!("client {}", c.id),
                c.samples.iter().map(|s| (s.t, s.rtt_ms)).collect(),
            )
        })
        .collect();
    o.push_str("<h3>RTT</h3>");
    o.push_str(&svg::lines("chart-rtt", &rtt, "ms"));
    let loss: Vec<(String, Vec<(f64, f64)>)> = a
        .clients
        .iter()
        .map(|c| {
            (
                format!("client {}", c.id),
                c.samples.iter().map(|s| (s.t, s.loss * 100.0)).collect(),
            )
        })
        .collect();
    o.push_str("<h3>Loss estimate</h3>");
    o.push_str(&svg::lines("chart-loss", &loss, "%"));
    o.push_str("<h3>Bytes sent per client</h3>");
    let bytes: Vec<(String, f64, String)> = a
        .clients
        .iter()
        .map(|c| {
            (
                format!("client {}", c.id),
                c.wire_bits as f64,
                fmt_bytes(c.wire_bits),
            )
        })
        .collect();
    o.push_str(&svg::hbars("chart-bytes", &bytes));
    o.push_str(r#"<table id="table-clients"><thead><tr><th>client</th><th>packets</th><th>bytes sent (attributed)</th><th>bytes out (all)</th><th>bytes received (attributed)</th><th>bytes in</th><th>mean RTT</th><th>lost / delivered</th><th>loss</th><th>connected</th></tr></thead><tbody>"#);
    for c in &a.clients {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1} ms</td><td>{} / {}</td><td>{}</td><td>{}</td></tr>",
            c.id,
            c.packets,
            c.wire_bits / 8,
            c.bytes_out,
            c.received_bits / 8,
            c.bytes_in,
            c.mean_rtt_ms(),
            c.packets_lost,
            c.packets_delivered,
            format_args!("{:.1}%", c.loss() * 100.0),
            match (c.connected_at, c.disconnected_at) {
                (Some(a), Some(b)) => format!("{a:.1} s – {b:.1} s"),
                (Some(a), None) => format!("from {a:.1} s"),
                _ => "–".into(),
            }
        );
    }
    o.push_str("</tbody></table>");

    // Huge objects, by type.
    if !a.huge_types.is_empty() {
        o.push_str(r#"<h2 id="huge">Huge objects, by type</h2><table id="table-huge"><thead><tr><th>type</th><th>parts</th><th>bits (without the channel's framing)</th></tr></thead><tbody>"#);
        for t in &a.huge_types {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&t.name),
                t.batches,
                t.bits
            );
        }
        o.push_str("</tbody></table>");
    }

    // What the clients sent.
    let u = &a.upstream;
    if u.packets > 0 {
        let mut parts = vec![
            Share {
                name: "connection headers".into(),
                bits: u.header,
            },
            Share {
                name: "stream framing".into(),
                bits: u.stream_framing,
            },
        ];
        for (i, &b) in u.streams.iter().enumerate() {
            let name = a.streams.get(i).cloned().unwrap_or(format!("stream {i}"));
            parts.push(Share {
                name: format!("{name} stream"),
                bits: b,
            });
        }
        parts.push(Share {
            name: "padding".into(),
            bits: u.padding,
        });
        let _ = write!(
            o,
            r#"<h2 id="upstream">Client → server</h2><p class="note">{} packets, {} on the wire, every client together.</p><table id="table-upstream"><thead><tr><th>part</th><th>bits</th><th>share</th></tr></thead><tbody>"#,
            u.packets,
            fmt_bytes(u.wire_bits)
        );
        for p in &parts {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
                esc(&p.name),
                p.bits,
                p.bits as f64 * 100.0 / u.wire_bits.max(1) as f64
            );
        }
        o.push_str("</tbody></table>");
    }

    // Types.
    o.push_str(r#"<h2 id="types">Types</h2><table id="table-types"><thead><tr><th>type</th><th>batches</th><th>creations</th><th>bits</th><th>mean bits / batch</th><th>share of wire</th></tr></thead><tbody>"#);
    for t in &a.types {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{}</td></tr>",
            esc(&t.name),
            t.batches,
            t.creations,
            t.bits,
            t.bits as f64 / t.batches.max(1) as f64,
            pct(t.bits, a.wire_bits)
        );
    }
    o.push_str("</tbody></table>");

    // Members.
    o.push_str(r#"<h2 id="member-table">Members</h2>"#);
    if a.members.is_empty() {
        o.push_str(r#"<p class="note">No per-member attribution in this session (record at the Members level).</p>"#);
    }
    o.push_str(r#"<table id="table-members"><thead><tr><th>type</th><th class="l">member</th><th class="l">serializer</th><th>full width</th><th>sent</th><th>mean bits</th><th>change rate</th><th>bits</th><th>share</th><th class="l">hint</th></tr></thead><tbody>"#);
    for m in &a.members {
        let _ = write!(
            o,
            r#"<tr><td>{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}%</td><td>{}</td><td>{}</td><td class="l hint">{}</td></tr>"#,
            esc(&m.type_name),
            esc(&m.member),
            esc(&m.serializer),
            m.full_width.map_or("–".into(), |w| w.to_string()),
            m.sent,
            m.mean_bits(),
            m.change_rate() * 100.0,
            m.bits,
            pct(m.bits, a.wire_bits),
            esc(m.hint.as_deref().unwrap_or(""))
        );
    }
    o.push_str("</tbody></table>");
    o.push_str(r#"<p class="note">Full width: the most bits a full value takes. Mean bits: per batch that carried the member (delta-coded values take fewer). Change rate: the share of its type's batches that carried it.</p>"#);
    o.push_str("</body></html>\n");
    o
}
