//! Derived types (`#[derive(Replicated)]`, registered through `inventory`) through the
//! replication core: spawn, change, conditions, init-only members, notifications,
//! strings, vectors, arrays and object references, packet by packet with losses.

use replicate::bits::{BitReader, BitWriter};
use replicate::internals::connection::{DeliveryStatus, PacketSequence};
use replicate::internals::object::ConnectionId;
use replicate::internals::replication::{
    ReplicationClient, ReplicationConfig, ReplicationEvent, ReplicationServer,
};
use replicate::{NetRefHandle, ProtocolRegistry, Replicated};
use std::sync::Arc;
use std::time::Duration;

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
struct Ship {
    position: glam::Vec3,
    #[net(notify = on_hull)]
    hull: u16,
    name: String,
    cargo: Vec<u8>,
    #[net(cond = OwnerOnly)]
    fuel: u16,
    #[net(init)]
    class: u8,
    target: NetRefHandle,
    #[net(skip)]
    hull_notifies: Vec<u16>,
}

impl Ship {
    fn on_hull(&mut self, old: &u16) {
        self.hull_notifies.push(*old);
    }
}

#[derive(Replicated, Debug, Default, Clone, PartialEq)]
struct Station {
    docked: [u8; 4],
    open: bool,
}

struct Pair {
    server: ReplicationServer,
    clients: Vec<(ConnectionId, ReplicationClient, u16)>,
    now: Duration,
}

impl Pair {
    fn new(clients: usize) -> Self {
        let registry = Arc::new(ProtocolRegistry::from_inventory().expect("registry"));
        let mut server = ReplicationServer::new(registry.clone(), ReplicationConfig::default());
        let clients = (0..clients)
            .map(|_| {
                (
                    server.add_connection(),
                    ReplicationClient::new(registry.clone(), ReplicationConfig::default()),
                    0,
                )
            })
            .collect();
        Self {
            server,
            clients,
            now: Duration::ZERO,
        }
    }

    /// One tick; each client's packet is delivered unless `lose` says otherwise.
    fn tick(&mut self, lose: impl Fn(usize) -> bool) {
        self.now += Duration::from_millis(16);
        self.server.tick(self.now);
        for (k, (conn, client, seq)) in self.clients.iter_mut().enumerate() {
            let s = PacketSequence(*seq);
            *seq = seq.wrapping_add(1);
            let mut w = BitWriter::with_capacity_bytes(1200);
            self.server.write_packet(*conn, s, &mut w);
            let bytes = w.finish().unwrap();
            if lose(k) {
                self.server.process_delivery(*conn, s, DeliveryStatus::Lost);
            } else {
                client
                    .read_packet(self.now, s, &mut BitReader::new(&bytes))
                    .unwrap();
                self.server
                    .process_delivery(*conn, s, DeliveryStatus::Delivered);
            }
        }
    }
}

#[test]
fn derived_types_replicate_with_conditions_and_notifications() {
    let mut p = Pair::new(2);
    let owner = p.clients[0].0;
    let station = p.server.objects_mut().spawn(Station::default()).unwrap();
    let ship = p
        .server
        .objects_mut()
        .spawn(Ship {
            position: glam::Vec3::new(1.0, 2.0, 3.0),
            hull: 100,
            name: "Rocinante".into(),
            cargo: vec![1, 2, 3],
            fuel: 50,
            class: 7,
            target: station,
            ..Default::default()
        })
        .unwrap();
    p.server
        .objects_mut()
        .set_owner_connection(ship, Some(owner))
        .unwrap();
    p.tick(|k| k == 1); // the second client loses the creation
    p.tick(|_| false);

    for (k, (_, client, _)) in p.clients.iter().enumerate() {
        let s = client.get::<Ship>(ship).expect("ship replicated");
        assert_eq!(s.name, "Rocinante");
        assert_eq!(s.cargo, vec![1, 2, 3]);
        assert_eq!(s.hull, 100);
        assert_eq!(s.class, 7);
        assert!((s.position - glam::Vec3::new(1.0, 2.0, 3.0)).length() < 0.1);
        assert_eq!(s.target, station, "reference resolved");
        assert_eq!(s.fuel, if k == 0 { 50 } else { 0 }, "fuel is owner-only");
        assert!(s.hull_notifies.is_empty());
    }

    {
        let s = p.server.objects_mut().get_mut::<Ship>(ship).unwrap();
        s.hull = 80;
        s.class = 9; // init-only: never sent again
        s.cargo.push(4);
        s.name = "Roci".into();
    }
    p.server
        .objects_mut()
        .get_mut::<Station>(station)
        .unwrap()
        .docked[2] = 5;
    p.tick(|k| k == 0); // the owner loses this one: state-based resend follows
    p.tick(|_| false);
    for (_, client, _) in &mut p.clients {
        let s = client.get::<Ship>(ship).unwrap();
        assert_eq!((s.hull, s.class, s.name.as_str()), (80, 7, "Roci"));
        assert_eq!(s.cargo, vec![1, 2, 3, 4]);
        assert_eq!(
            s.hull_notifies,
            vec![100],
            "one notification with the old value"
        );
        assert_eq!(client.get::<Station>(station).unwrap().docked, [0, 0, 5, 0]);
        let ev = client.drain_events();
        assert!(
            ev.iter()
                .all(|e| !matches!(e, ReplicationEvent::ObjectError { .. }))
        );
    }

    p.server.objects_mut().destroy(ship).unwrap();
    p.tick(|_| false);
    for (_, client, _) in &p.clients {
        assert!(!client.contains(ship));
        assert!(client.contains(station));
    }
}
