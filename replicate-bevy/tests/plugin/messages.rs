//! Messages and RPCs both ways, in order, with the server-side validator.

use crate::common::*;
use bevy_app::App;
use bevy_ecs::prelude::*;
use replicate::transport::LinkConditioner;
use replicate_bevy::*;

fn seqs(messages: &[FromServer<Ping>]) -> Vec<u32> {
    messages.iter().map(|m| m.message.seq).collect()
}

#[test]
fn server_messages_arrive_in_order_at_their_recipients() {
    let mut h = Harness::new(2, LinkConditioner::perfect());
    for c in &mut h.clients {
        collect::<FromServer<Ping>>(c);
    }
    h.connect();
    let first = h.client_id(0);
    // Several per frame, over several frames, to one client then to all.
    for frame in 0..4u32 {
        for k in 0..3 {
            h.server_send(Recipients::Client(first), frame * 3 + k, None);
        }
        h.step();
    }
    h.server_send(Recipients::All, 100, None);
    h.steps(3);
    assert_eq!(
        seqs(&collected::<FromServer<Ping>>(&h.clients[0])),
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 100]
    );
    assert_eq!(seqs(&collected::<FromServer<Ping>>(&h.clients[1])), [100]);
}

#[test]
fn reliable_messages_stay_ordered_over_a_lossy_link() {
    let link = LinkConditioner {
        loss: 0.3,
        latency: std::time::Duration::from_millis(40),
        jitter: std::time::Duration::from_millis(30),
        duplicate: 0.1,
        ..LinkConditioner::perfect()
    };
    let mut h = Harness::new(1, link);
    collect::<FromServer<Ping>>(&mut h.clients[0]);
    collect::<FromClient<Ping>>(&mut h.server);
    h.connect();
    for seq in 0..40 {
        h.server_send(Recipients::All, seq, None);
        h.client_send(0, 1000 + seq);
        h.step();
    }
    h.network.set_conditioner(LinkConditioner::perfect());
    h.steps(120);
    let down = seqs(&collected::<FromServer<Ping>>(&h.clients[0]));
    assert_eq!(down, (0..40).collect::<Vec<_>>());
    let up: Vec<u32> = collected::<FromClient<Ping>>(&h.server)
        .iter()
        .map(|m| m.message.seq)
        .collect();
    assert_eq!(up, (1000..1040).collect::<Vec<_>>());
}

#[test]
fn rpc_targets_map_to_entities_on_both_sides() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    collect::<FromServer<Ping>>(&mut h.clients[0]);
    collect::<FromClient<Ping>>(&mut h.server);
    h.connect();
    let door = h.spawn((Replicate, Health { hp: 1 }));
    // Sent in the frame the entity is spawned: held until the client has it.
    h.server_send(Recipients::All, 7, Some(door));
    h.steps(3);
    let got = collected::<FromServer<Ping>>(&h.clients[0]);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].target, h.client_entity(0, door));
    assert!(got[0].target.is_some());

    let client_door = h.client_entity(0, door).unwrap();
    h.clients[0].world_mut().write_message(ToServer {
        message: Ping { seq: 8 },
        mode: replicate::DeliveryMode::ReliableOrdered,
        target: Some(client_door),
    });
    h.steps(4);
    let up = collected::<FromClient<Ping>>(&h.server);
    assert_eq!(up.len(), 1);
    assert_eq!(up[0].message.seq, 8);
    assert_eq!(up[0].client, h.client_id(0));
    assert_eq!(up[0].target, Some(door));
}

#[test]
fn validator_drops_rejected_client_messages() {
    let mut h = Harness::new(1, LinkConditioner::perfect());
    h.server
        .validate_net_message::<Ping>(|_client, ping: &Ping, _target| ping.seq.is_multiple_of(2));
    collect::<FromClient<Ping>>(&mut h.server);
    h.connect();
    for seq in 0..10 {
        h.client_send(0, seq);
    }
    h.steps(4);
    let up: Vec<u32> = collected::<FromClient<Ping>>(&h.server)
        .iter()
        .map(|m| m.message.seq)
        .collect();
    assert_eq!(up, [0, 2, 4, 6, 8]);
    assert_eq!(
        h.server.world().resource::<ServerStats>().messages_rejected,
        5
    );
}

#[test]
fn game_systems_read_and_answer_messages() {
    // An echo server as a plain Bevy system.
    fn echo(
        mut inbox: MessageReader<FromClient<Ping>>,
        mut outbox: MessageWriter<ToClients<Ping>>,
    ) {
        for m in inbox.read() {
            outbox.write(ToClients {
                to: Recipients::Client(m.client),
                message: Ping {
                    seq: m.message.seq * 10,
                },
                mode: replicate::DeliveryMode::ReliableOrdered,
                target: None,
            });
        }
    }
    let mut h = Harness::new(2, LinkConditioner::perfect());
    h.server.add_systems(bevy_app::Update, echo);
    for c in &mut h.clients {
        collect::<FromServer<Ping>>(c);
    }
    h.connect();
    h.client_send(0, 1);
    h.client_send(1, 2);
    h.steps(4);
    let got = |app: &App| seqs(&collected::<FromServer<Ping>>(app));
    assert_eq!(got(&h.clients[0]), [10]);
    assert_eq!(got(&h.clients[1]), [20]);
}
