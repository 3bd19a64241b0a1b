//! The report over a recorded arena session (in memory, simulated clock) and over a
//! hand-made session whose numbers are known; the command line on good and bad files.

use replicate::insights::{
    MemberRange, MemberSchema, PacketBits, PacketKind, Record, ReplicationBits, ReplicationPart,
    Session, SessionSchema, TypeSchema, decode_session, encode_header, encode_record,
};
use replicate_examples::arena_recorded::RecordedArena;
use replicate_insights::{Analysis, html, text};
use std::process::Command;

const CHARTS: [&str; 6] = [
    "chart-bandwidth",
    "chart-members",
    "chart-framing",
    "chart-rtt",
    "chart-loss",
    "chart-bytes",
];

/// The rows of a table of the report, as cell texts.
fn table_rows(html: &str, id: &str) -> Vec<Vec<String>> {
    let start = html
        .find(&format!(r#"<table id="{id}">"#))
        .unwrap_or_else(|| panic!("no table {id}"));
    let end = start + html[start..].find("</table>").unwrap();
    let body = &html[start..end];
    let body = &body[body.find("<tbody>").unwrap()..];
    body.split("<tr>")
        .skip(1)
        .map(|row| {
            row.split("<td")
                .skip(1)
                .map(|cell| {
                    let cell = &cell[cell.find('>').unwrap() + 1..];
                    cell[..cell.find("</td>").unwrap()].to_string()
                })
                .collect()
        })
        .collect()
}

#[test]
fn report_of_a_recorded_arena_matches_the_server() {
    let run = RecordedArena {
        clients: 2,
        seconds: 2,
        ..Default::default()
    }
    .run()
    .unwrap();
    let session = decode_session(&run.session).unwrap();
    let a = Analysis::new(&session);
    assert_eq!(a.inexact_packets, 0);
    assert_eq!(a.clients.len(), 2);
    assert!(a.duration_s > 2.0 && a.duration_s < 4.0, "{}", a.duration_s);

    // Everything on the wire is in the bandwidth chart and in the framing share once.
    let charted: u64 = a.bandwidth.bits.iter().flatten().sum();
    assert_eq!(charted, a.wire_bits);
    let shared: u64 = a.framing_share().iter().map(|s| s.bits).sum();
    assert_eq!(shared, a.wire_bits);

    // Per client and per type, the server's own counters.
    for c in &a.clients {
        let totals = run.server.attribution(c.id).unwrap();
        assert_eq!(c.wire_bits, totals.wire_bits);
        assert_eq!(c.packets, totals.packets);
        assert!(!c.samples.is_empty() && c.connected_at.is_some());
    }
    for t in &a.types {
        let server: u64 = run
            .server
            .clients()
            .flat_map(|c| run.server.bits_per_type(c))
            .filter(|(n, _)| *n == t.name)
            .map(|(_, b)| b)
            .sum();
        assert_eq!(t.bits, server, "{}", t.name);
    }
    // Members: the arena's members, with their full widths from the descriptors.
    let pos = a
        .members
        .iter()
        .find(|m| m.label() == "arena::Projectile.position")
        .unwrap();
    assert_eq!(pos.full_width, Some(51));
    assert!(pos.change_rate() > 0.9 && pos.mean_bits() > 0.0);

    let page = html::render(&a);
    for id in CHARTS {
        let at = page
            .find(&format!(r#"<svg id="{id}""#))
            .unwrap_or_else(|| panic!("chart {id} missing"));
        assert!(page[at..].contains("</svg>"));
    }
    assert!(page.contains(&format!(r#"data-wire-bits="{}""#, a.wire_bits)));
    // Self-contained: no script, nothing fetched.
    assert!(!page.contains("<script"));
    assert!(!page.contains("src="));
    assert!(!page.contains("<link"));
    // The tables carry the session's numbers.
    let types = table_rows(&page, "table-types");
    assert_eq!(types.len(), a.types.len());
    for (row, t) in types.iter().zip(&a.types) {
        assert_eq!(row[0], t.name);
        assert_eq!(row[1], t.batches.to_string());
        assert_eq!(row[3], t.bits.to_string());
    }
    let members = table_rows(&page, "table-members");
    assert_eq!(members.len(), a.members.len());
    for (row, m) in members.iter().zip(&a.members) {
        assert_eq!(row[7], m.bits.to_string());
        assert_eq!(row[4], m.sent.to_string());
    }
    let clients = table_rows(&page, "table-clients");
    for (row, c) in clients.iter().zip(&a.clients) {
        assert_eq!(row[0], c.id.to_string());
        assert_eq!(row[2], (c.wire_bits / 8).to_string());
    }
    // One bar per member in the top chart (at most 15).
    let top = &page[page.find(r#"<svg id="chart-members""#).unwrap()..];
    let top = &top[..top.find("</svg>").unwrap()];
    assert_eq!(
        top.matches(r#"class="bar""#).count(),
        a.members.len().min(html::TOP_MEMBERS)
    );

    let summary = text::summary(&a);
    assert!(summary.starts_with("session: "));
    assert!(summary.contains("arena::Projectile"));
    assert!(summary.contains("client 1") && summary.contains("client 2"));
}

fn known_session() -> Session {
    let mut r1 = ReplicationBits::default();
    r1.add(ReplicationPart::ObjectIndex, 20);
    r1.add(ReplicationPart::FormAndSize, 8);
    r1.add(ReplicationPart::ChangeMask, 2);
    r1.add(ReplicationPart::Members, 30);
    r1.add(ReplicationPart::EndMarkers, 2);
    r1.add_type(1, 60, true);
    r1.add_member(1, 0, 30, 1);
    let mut r2 = ReplicationBits::default();
    r2.add(ReplicationPart::ObjectIndex, 20);
    r2.add(ReplicationPart::FormAndSize, 8);
    r2.add(ReplicationPart::ChangeMask, 2);
    r2.add(ReplicationPart::Members, 10);
    r2.add(ReplicationPart::EndMarkers, 2);
    r2.add_type(1, 40, false);
    r2.add_member(1, 1, 10, 1);
    let packet = |time_us, r: ReplicationBits| Record::Packet {
        time_us,
        client: 9,
        bits: PacketBits {
            kind: PacketKind::Data,
            wire_bits: 74 + 9 + r.total() + 5,
            header: 74,
            stream_framing: 9,
            streams: vec![r.total(), 0, 0, 0],
            padding: 5,
            replication: Some(r),
            huge_types: Vec::new(),
        },
    };
    let member = |name: &str, offset| MemberSchema {
        name: name.into(),
        serializer: "U8".into(),
        change_mask_offset: offset,
        change_mask_bits: 1,
        max_bits: Some(8),
        group: None,
    };
    // "count" stays within 100..=103 of 0..=255; "open" uses all of it.
    let mut narrow = MemberRange::new(1, 1, 8, 1, 100);
    let mut wide = MemberRange::new(1, 0, 8, 1, 0);
    for i in 0..30 {
        narrow.observe(100 + i % 4);
        wide.observe(i * 8);
    }
    Session {
        version: 1,
        records: vec![
            Record::Schema(SessionSchema {
                types: vec![TypeSchema {
                    protocol: 1,
                    name: "t::Door".into(),
                    members: vec![member("open", 0), member("count", 1)],
                }],
                streams: vec![
                    "replication".into(),
                    "tokens".into(),
                    "huge".into(),
                    "messages".into(),
                ],
                attribution: 2,
            }),
            Record::Connected {
                time_us: 0,
                client: 9,
            },
            Record::Tick { time_us: 0 },
            packet(100_000, r1),
            Record::Tick { time_us: 1_000_000 },
            packet(1_500_000, r2),
            Record::Ranges(vec![narrow.clone(), wide.clone()]),
            // Cumulative: the last ranges record counts.
            Record::Ranges(vec![narrow, wide]),
            Record::Stats {
                time_us: 2_000_000,
                client: 9,
                rtt_us: 50_000,
                loss: 0.25,
                bytes_in: 10,
                bytes_out: 40,
                packets_lost: 1,
                packets_delivered: 3,
            },
        ],
    }
}

#[test]
fn known_numbers_come_out_exactly() {
    let a = Analysis::new(&known_session());
    assert_eq!(a.duration_s, 2.0);
    assert_eq!(a.ticks, 2);
    assert_eq!(a.packets, 2);
    assert_eq!(a.inexact_packets, 0);
    assert_eq!(a.wire_bits, 2 * (74 + 9 + 5) + 62 + 42);
    assert_eq!(a.types.len(), 1);
    assert_eq!((a.types[0].batches, a.types[0].bits), (2, 100));
    assert_eq!(a.types[0].creations, 1);
    let open = a.members.iter().find(|m| m.member == "open").unwrap();
    assert_eq!((open.sent, open.bits, open.type_batches), (1, 30, 2));
    assert_eq!(open.change_rate(), 0.5);
    assert_eq!(open.full_width, Some(8));
    assert_eq!(a.members[0].member, "open", "most bits first");
    assert_eq!(open.hint, None);
    let count = a.members.iter().find(|m| m.member == "count").unwrap();
    let hint = count.hint.as_deref().unwrap();
    assert!(
        hint.contains("2 of 8 bits") && hint.contains("31 samples"),
        "{hint}"
    );
    assert!(hint.contains("1.6% of the range"), "{hint}");
    let page = html::render(&a);
    assert!(page.contains(hint));
    // Buckets of 0.1 s: the first packet in bucket 1, the second in bucket 15.
    assert_eq!(a.bandwidth.bucket_s, 0.1);
    let door = a
        .bandwidth
        .series
        .iter()
        .position(|s| s == "t::Door")
        .unwrap();
    assert_eq!(a.bandwidth.bits[1][door], 60);
    assert_eq!(a.bandwidth.bits[15][door], 40);
    let c = &a.clients[0];
    assert_eq!((c.id, c.mean_rtt_ms(), c.loss()), (9, 50.0, 0.25));
    assert!(!html::render(&a).contains("do not sum"));
    // A packet whose parts miss a bit is flagged.
    let mut s = known_session();
    if let Record::Packet { bits, .. } = &mut s.records[3] {
        bits.wire_bits += 8;
    }
    let a = Analysis::new(&s);
    assert_eq!(a.inexact_packets, 1);
    assert!(html::render(&a).contains("do not sum"));
}

fn write_temp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("replicate-insights-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn command_line_reports_good_files_and_refuses_bad_ones() {
    let mut good = encode_header();
    for r in known_session().records {
        encode_record(&r, &mut good);
    }
    let path = write_temp("good.session", &good);
    let out = path.with_extension("html");
    let run = Command::new(env!("CARGO_BIN_EXE_replicate-insights"))
        .args(["report"])
        .arg(&path)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stdout = String::from_utf8(run.stdout).unwrap();
    assert!(stdout.contains("t::Door"), "{stdout}");
    let page = std::fs::read_to_string(&out).unwrap();
    for id in CHARTS {
        assert!(page.contains(&format!(r#"<svg id="{id}""#)), "{id}");
    }

    let mut wrong_version = good.clone();
    wrong_version[8] = 99;
    for (name, bytes, message) in [
        ("bad.session", b"not a session at all".to_vec(), "bad magic"),
        (
            "truncated.session",
            good[..good.len() - 3].to_vec(),
            "truncated",
        ),
        ("version.session", wrong_version, "version 99"),
    ] {
        let path = write_temp(name, &bytes);
        let run = Command::new(env!("CARGO_BIN_EXE_replicate-insights"))
            .arg("report")
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(1), "{name}");
        let stderr = String::from_utf8(run.stderr).unwrap();
        assert!(stderr.contains(message), "{name}: {stderr}");
        assert!(!path.with_extension("html").exists());
    }
    let run = Command::new(env!("CARGO_BIN_EXE_replicate-insights"))
        .arg("frobnicate")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
}

#[test]
fn huge_parts_and_client_packets_come_out_exactly() {
    let mut s = known_session();
    s.records.push(Record::Packet {
        time_us: 1_800_000,
        client: 9,
        bits: PacketBits {
            kind: PacketKind::Data,
            wire_bits: 74 + 9 + 2000 + 5,
            header: 74,
            stream_framing: 9,
            streams: vec![0, 0, 2000, 0],
            padding: 5,
            replication: None,
            huge_types: vec![replicate::insights::TypeBits {
                protocol: 1,
                batches: 2,
                creations: 0,
                bits: 1900,
            }],
        },
    });
    for _ in 0..3 {
        s.records.push(Record::Received {
            time_us: 1_900_000,
            client: 9,
            bits: PacketBits {
                kind: PacketKind::Data,
                wire_bits: 120,
                header: 74,
                stream_framing: 9,
                streams: vec![0, 0, 0, 30],
                padding: 7,
                ..Default::default()
            },
        });
    }
    let a = Analysis::new(&s);
    assert_eq!(a.huge_types.len(), 1);
    let h = &a.huge_types[0];
    assert_eq!((h.name.as_str(), h.batches, h.bits), ("t::Door", 2, 1900));
    assert_eq!(a.upstream.packets, 3);
    assert_eq!(a.upstream.wire_bits, 360);
    assert_eq!(a.upstream.streams, vec![0, 0, 0, 90]);
    assert_eq!(a.upstream.inexact_packets, 0);
    assert_eq!(
        (a.clients[0].received_packets, a.clients[0].received_bits),
        (3, 360)
    );
    let page = html::render(&a);
    let huge = table_rows(&page, "table-huge");
    assert_eq!(
        huge,
        vec![vec!["t::Door".to_string(), "2".into(), "1900".into()]]
    );
    let up = table_rows(&page, "table-upstream");
    let messages = up.iter().find(|r| r[0] == "messages stream").unwrap();
    assert_eq!(messages[1], "90");
    assert!(text::summary(&a).contains("client → server: 3 packets"));
}
