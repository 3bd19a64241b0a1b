//! The netcode.io UDP transport on 127.0.0.1: connect, exchange payloads, time out a
//! silent client, and ignore unauthenticated and replayed packets.

use replicate::transport::udp::{
    ConnectTokenIssuer, UdpClientTransport, UdpServerConfig, UdpServerTransport,
};
use replicate::transport::{
    ClientTransport, ClientTransportEvent, ServerTransport, ServerTransportEvent,
    TransportDisconnect,
};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

const PROTOCOL: u64 = 0x7265_706c_6963_6174;

struct Clock(Instant);
impl Clock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }
}

fn pump(server: &mut UdpServerTransport, clients: &mut [&mut UdpClientTransport], clock: &Clock) {
    server.update(clock.now()).unwrap();
    for c in clients.iter_mut() {
        c.update(clock.now()).unwrap();
    }
    std::thread::sleep(Duration::from_millis(2));
}

fn drain_server(server: &mut UdpServerTransport) -> Vec<ServerTransportEvent> {
    std::iter::from_fn(|| server.poll_event()).collect()
}

fn connected_pair(
    timeout_seconds: i32,
) -> (
    ConnectTokenIssuer,
    UdpServerTransport,
    UdpClientTransport,
    Clock,
) {
    let issuer = ConnectTokenIssuer::with_random_key(PROTOCOL);
    let mut server =
        UdpServerTransport::bind("127.0.0.1:0", UdpServerConfig::secure(&issuer, 8)).unwrap();
    let token = issuer
        .issue(7, vec![server.local_addr()], 30, timeout_seconds)
        .unwrap();
    let mut client = UdpClientTransport::connect("127.0.0.1:0", token).unwrap();
    let clock = Clock(Instant::now());
    let deadline = Instant::now() + Duration::from_secs(5);
    while !client.is_connected() {
        assert!(Instant::now() < deadline, "client never connected");
        pump(&mut server, &mut [&mut client], &clock);
    }
    assert_eq!(client.poll_event(), Some(ClientTransportEvent::Connected));
    (issuer, server, client, clock)
}

#[test]
fn connect_and_exchange_payloads() {
    let (_issuer, mut server, mut client, clock) = connected_pair(5);
    let mut got_connect = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut from_client = Vec::new();
    let mut from_server = Vec::new();
    let mut sent = false;
    while (from_client.is_empty() || from_server.is_empty()) && Instant::now() < deadline {
        pump(&mut server, &mut [&mut client], &clock);
        for e in drain_server(&mut server) {
            match e {
                ServerTransportEvent::Connected {
                    client: id,
                    user_data,
                } => {
                    assert_eq!(id, 7);
                    assert_eq!(user_data.len(), 256);
                    got_connect = true;
                }
                ServerTransportEvent::Payload { client: 7, payload } => from_client.push(payload),
                other => panic!("unexpected {other:?}"),
            }
        }
        if got_connect && !sent {
            client.send(b"input").unwrap();
            server.send(7, b"state").unwrap();
            sent = true;
        }
        while let Some(e) = client.poll_event() {
            if let ClientTransportEvent::Payload(p) = e {
                from_server.push(p);
            }
        }
    }
    assert_eq!(from_client, vec![b"input".to_vec()]);
    assert_eq!(from_server, vec![b"state".to_vec()]);
    assert!(
        server.send(7, &[0; 1301]).is_err(),
        "payloads over 1300 bytes are refused"
    );
}

#[test]
fn silent_client_times_out() {
    let (_issuer, mut server, client, clock) = connected_pair(1);
    drop(client); // goes silent without a disconnect packet
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        assert!(Instant::now() < deadline, "no timeout");
        server.update(clock.now()).unwrap();
        let events = drain_server(&mut server);
        if events.iter().any(|e| {
            matches!(
                e,
                ServerTransportEvent::Disconnected {
                    client: 7,
                    reason: TransportDisconnect::TimedOut
                }
            )
        }) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(server.clients().is_empty());
}

#[test]
fn unauthenticated_and_replayed_packets_are_ignored() {
    let issuer = ConnectTokenIssuer::with_random_key(PROTOCOL);
    // A man in the middle forwards every client packet twice (a replay) to the server.
    // The server advertises the proxy's address, which is what the token names.
    let proxy = UdpSocket::bind("127.0.0.1:0").unwrap();
    proxy.set_nonblocking(true).unwrap();
    let mut config = UdpServerConfig::secure(&issuer, 8);
    config.public_addresses = vec![proxy.local_addr().unwrap()];
    let mut server = UdpServerTransport::bind("127.0.0.1:0", config).unwrap();
    let server_addr = server.local_addr();
    let token = issuer
        .issue(9, vec![proxy.local_addr().unwrap()], 30, 5)
        .unwrap();
    let mut client = UdpClientTransport::connect("127.0.0.1:0", token).unwrap();
    let client_addr = client.local_addr();
    let clock = Clock(Instant::now());
    let mut buf = [0u8; 1500];
    let forged = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut payloads = 0;
    let mut connected_events = 0;
    let mut sent = 0;
    let deadline = Instant::now() + Duration::from_secs(6);
    while Instant::now() < deadline && payloads < 3 {
        client.update(clock.now()).unwrap();
        while let Ok((len, from)) = proxy.recv_from(&mut buf) {
            if from == client_addr {
                proxy.send_to(&buf[..len], server_addr).unwrap();
                proxy.send_to(&buf[..len], server_addr).unwrap(); // replay
            } else {
                proxy.send_to(&buf[..len], client_addr).unwrap();
            }
        }
        // Random garbage from an unauthenticated sender.
        forged.send_to(&[0xAB; 64], server_addr).unwrap();
        forged.send_to(&[], server_addr).unwrap();
        server.update(clock.now()).unwrap();
        for e in drain_server(&mut server) {
            match e {
                ServerTransportEvent::Connected { client: 9, .. } => connected_events += 1,
                ServerTransportEvent::Payload { client: 9, payload } => {
                    assert_eq!(payload, vec![payloads as u8]);
                    payloads += 1;
                }
                other => panic!("unexpected event {other:?}"),
            }
        }
        while client.poll_event().is_some() {}
        if client.is_connected() && sent < 3 && sent == payloads {
            client.send(&[sent as u8]).unwrap();
            sent += 1;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        connected_events, 1,
        "exactly one client connected (the forger never did)"
    );
    assert_eq!(
        payloads, 3,
        "every payload delivered once despite the replays"
    );
    assert_eq!(server.clients(), vec![9]);
}
