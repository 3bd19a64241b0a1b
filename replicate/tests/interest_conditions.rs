//! Per-member conditions evaluated per connection, checked on the wire: every packet is
//! decoded independently of the client (which members each batch carried, to the last
//! bit), so a member leaking to a connection that must not receive it fails the test
//! even if the client would ignore it.

#![allow(clippy::needless_range_loop)]

mod common;

use common::interest_suite::*;
use replicate::Replicated;

type HeroState = <Hero as Replicated>::State;

fn batches_of(
    net: &Net,
    client: usize,
    from_packet: usize,
) -> impl Iterator<Item = &WireBatch> + '_ {
    net.clients[client].wire[from_packet..]
        .iter()
        .flat_map(|p| p.batches.iter())
}

fn state(b: &WireBatch) -> &HeroState {
    b.state.as_any().downcast_ref::<HeroState>().expect("hero")
}

#[test]
fn owner_only_member_never_reaches_a_non_owner_and_follows_owner_changes() {
    let mut net = Net::new(2);
    let (a, b) = (net.clients[0].conn, net.clients[1].conn);
    let h = net
        .server
        .objects_mut()
        .spawn(Hero {
            hp: 100,
            ammo: 0xDEAD_BEEF,
            ..Default::default()
        })
        .unwrap();
    net.server.set_owner(h, Some(a), true).unwrap();
    for i in 0..10u32 {
        let hero = net.server.objects_mut().get_mut::<Hero>(h).unwrap();
        hero.ammo = 1000 + i;
        hero.hp = 90 - i as u8;
        net.tick();
    }
    let ammo = bit_of::<Hero>("ammo");
    let hp = bit_of::<Hero>("hp");
    assert!(
        batches_of(&net, 1, 0).all(|bt| !bt.has(ammo)),
        "an OwnerOnly member went to a non-owner"
    );
    assert!(batches_of(&net, 1, 0).filter(|bt| bt.has(hp)).count() >= 10);
    let to_a: Vec<u32> = batches_of(&net, 0, 0)
        .filter(|bt| bt.has(ammo))
        .map(|bt| state(bt).ammo)
        .collect();
    assert_eq!(to_a.len(), 10, "the owner gets every change: {to_a:?}");
    assert_eq!(to_a.last(), Some(&1009));
    assert_eq!(net.client(0).get::<Hero>(h).unwrap().ammo, 1009);
    assert_eq!(net.client(1).get::<Hero>(h).unwrap().ammo, 0);

    // Owner change: B newly qualifies and gets the current value at once, without any
    // change of the member; A stops receiving it.
    net.server.set_owner(h, Some(b), true).unwrap();
    let mark_a = net.clients[0].wire.len();
    let mark_b = net.clients[1].wire.len();
    let sent = net.tick();
    let first: Vec<&WireBatch> = sent[1].iter().flat_map(|p| p.batches.iter()).collect();
    assert!(
        first
            .iter()
            .any(|bt| bt.has(ammo) && state(bt).ammo == 1009),
        "the new owner gets the current value in the next tick"
    );
    assert_eq!(net.client(1).get::<Hero>(h).unwrap().ammo, 1009);
    for i in 0..5u32 {
        net.server.objects_mut().get_mut::<Hero>(h).unwrap().ammo = 2000 + i;
        net.tick();
    }
    assert!(
        batches_of(&net, 0, mark_a).all(|bt| !bt.has(ammo)),
        "the old owner still receives an OwnerOnly member"
    );
    assert_eq!(net.client(0).get::<Hero>(h).unwrap().ammo, 1009);
    assert_eq!(net.client(1).get::<Hero>(h).unwrap().ammo, 2004);
    assert!(
        batches_of(&net, 1, mark_b)
            .filter(|bt| bt.has(ammo))
            .count()
            >= 6
    );
}

#[test]
fn skip_owner_autonomous_and_simulated_roles() {
    let mut net = Net::new(2);
    let a = net.clients[0].conn;
    let h = net.server.objects_mut().spawn(Hero::default()).unwrap();
    net.server.set_owner(h, Some(a), true).unwrap();
    let set = |net: &mut Net, v: u16| {
        let hero = net.server.objects_mut().get_mut::<Hero>(h).unwrap();
        hero.disguise = v as u8;
        hero.input_seq = v;
        hero.smoothed = v;
    };
    set(&mut net, 7);
    net.tick();
    set(&mut net, 8);
    net.tick();
    let (disguise, input, smoothed) = (
        bit_of::<Hero>("disguise"),
        bit_of::<Hero>("input_seq"),
        bit_of::<Hero>("smoothed"),
    );
    // Owner controlling its object: autonomous.
    assert!(batches_of(&net, 0, 0).all(|bt| !bt.has(disguise) && !bt.has(smoothed)));
    assert!(batches_of(&net, 0, 0).any(|bt| bt.has(input)));
    // Everyone else: simulated.
    assert!(batches_of(&net, 1, 0).all(|bt| !bt.has(input)));
    assert!(batches_of(&net, 1, 0).any(|bt| bt.has(disguise) && bt.has(smoothed)));
    let c0 = net.client(0).get::<Hero>(h).unwrap().clone();
    let c1 = net.client(1).get::<Hero>(h).unwrap().clone();
    assert_eq!((c0.input_seq, c0.smoothed, c0.disguise), (8, 0, 0));
    assert_eq!((c1.input_seq, c1.smoothed, c1.disguise), (0, 8, 8));

    // The owner stops controlling it: it sees the object simulated, at once.
    net.server.set_owner(h, Some(a), false).unwrap();
    let mark = net.clients[0].wire.len();
    net.tick();
    assert_eq!(net.client(0).get::<Hero>(h).unwrap().smoothed, 8);
    set(&mut net, 9);
    net.tick();
    assert!(batches_of(&net, 0, mark).all(|bt| !bt.has(input) && !bt.has(disguise)));
    let c0 = net.client(0).get::<Hero>(h).unwrap();
    assert_eq!((c0.input_seq, c0.smoothed), (8, 9));
}

#[test]
fn custom_switch_takes_effect_at_once_for_every_connection() {
    let mut net = Net::new(2);
    let h = net
        .server
        .objects_mut()
        .spawn(Hero {
            secret: 1,
            ..Default::default()
        })
        .unwrap();
    net.tick();
    let secret = bit_of::<Hero>("secret");
    for c in 0..2 {
        assert_eq!(net.client(c).get::<Hero>(h).unwrap().secret, 1);
    }
    assert!(net.server.set_custom_condition(h, "secret", false).unwrap());
    assert!(!net.server.set_custom_condition(h, "secret", false).unwrap());
    assert!(net.server.set_custom_condition(h, "hp", false).is_err());
    let marks: Vec<usize> = net.clients.iter().map(|c| c.wire.len()).collect();
    for v in 2..6 {
        let hero = net.server.objects_mut().get_mut::<Hero>(h).unwrap();
        hero.secret = v;
        hero.hp = v as u8;
        net.tick();
    }
    for c in 0..2 {
        assert!(batches_of(&net, c, marks[c]).all(|bt| !bt.has(secret)));
        assert!(batches_of(&net, c, marks[c]).any(|bt| bt.hp_bit()));
        assert_eq!(net.client(c).get::<Hero>(h).unwrap().secret, 1);
    }
    // Back on: the current value goes to every connection in the next tick, although
    // the member did not change since.
    assert!(net.server.set_custom_condition(h, "secret", true).unwrap());
    let sent = net.tick();
    for c in 0..2 {
        assert!(
            sent[c]
                .iter()
                .flat_map(|p| p.batches.iter())
                .any(|bt| bt.has(secret) && state(bt).secret == 5)
        );
        assert_eq!(net.client(c).get::<Hero>(h).unwrap().secret, 5);
    }
}

trait HpBit {
    fn hp_bit(&self) -> bool;
}
impl HpBit for WireBatch {
    fn hp_bit(&self) -> bool {
        self.has(bit_of::<Hero>("hp"))
    }
}

#[test]
fn init_only_values_arrive_once_and_are_never_sent_again() {
    let mut net = Net::new(2);
    let a = net.clients[0].conn;
    let h = net
        .server
        .objects_mut()
        .spawn(Hero {
            team: 3,
            seed: 77,
            spawn_point: 5,
            server_only: 9,
            ..Default::default()
        })
        .unwrap();
    net.server.set_owner(h, Some(a), true).unwrap();
    let (team, seed, spawn, never) = (
        bit_of::<Hero>("team"),
        bit_of::<Hero>("seed"),
        bit_of::<Hero>("spawn_point"),
        bit_of::<Hero>("server_only"),
    );
    // The creation to client 1 is lost: it is written again, with the init members.
    let sent = net.tick_with(|c, _| c == 1);
    let creation = |p: &Vec<WirePacket>| {
        p.iter()
            .flat_map(|p| p.batches.iter())
            .find(|bt| bt.creation)
            .map(|bt| (bt.has(team), bt.has(seed), bt.has(spawn), bt.has(never)))
    };
    assert_eq!(creation(&sent[0]), Some((true, true, true, false)));
    assert_eq!(creation(&sent[1]), Some((true, true, true, false)));
    assert!(!net.client(1).contains(h));
    let sent = net.tick();
    assert_eq!(creation(&sent[1]), Some((true, true, true, false)));
    assert_eq!(net.client(1).get::<Hero>(h).unwrap().team, 3);
    let marks: Vec<usize> = net.clients.iter().map(|c| c.wire.len()).collect();
    for v in 0..8u8 {
        let hero = net.server.objects_mut().get_mut::<Hero>(h).unwrap();
        hero.team = 10 + v;
        hero.seed = 100 + v as u32;
        hero.spawn_point = 50 + v as u16;
        hero.server_only = v;
        hero.hp = v;
        net.tick();
    }
    for c in 0..2 {
        assert!(
            batches_of(&net, c, marks[c])
                .all(|bt| !bt.has(team) && !bt.has(seed) && !bt.has(never)),
            "an init-only member was sent again to client {c}"
        );
        assert!(
            batches_of(&net, c, marks[c])
                .filter(|bt| bt.hp_bit())
                .count()
                >= 7
        );
        let hero = net.client(c).get::<Hero>(h).unwrap();
        assert_eq!((hero.team, hero.seed, hero.server_only), (3, 77, 0));
    }
    // InitialOrOwner: the owner keeps getting it, the others only had the creation's.
    assert_eq!(net.client(0).get::<Hero>(h).unwrap().spawn_point, 57);
    assert_eq!(net.client(1).get::<Hero>(h).unwrap().spawn_point, 5);
    assert!(batches_of(&net, 1, marks[1]).all(|bt| !bt.has(spawn)));
}

#[test]
fn condition_change_while_the_creation_awaits_its_ack_is_not_lost() {
    use replicate::bits::{BitReader, BitWriter};
    use replicate::internals::connection::{DeliveryStatus, PacketSequence};
    use std::time::Duration;
    let mut net = Net::new(1);
    let conn = net.clients[0].conn;
    let h = net
        .server
        .objects_mut()
        .spawn(Hero {
            secret: 5,
            ..Default::default()
        })
        .unwrap();
    net.server.set_custom_condition(h, "secret", false).unwrap();
    let write = |net: &mut Net, seq: u16, t: u64| {
        let now = Duration::from_millis(t);
        net.server.tick(now);
        let mut w = BitWriter::with_capacity_bytes(1200);
        net.server.write_packet(conn, PacketSequence(seq), &mut w);
        let bytes = w.finish().unwrap();
        net.clients[0]
            .client
            .read_packet(now, PacketSequence(seq), &mut BitReader::new(&bytes))
            .unwrap();
    };
    // The creation goes out without the switched-off member; before its ack arrives
    // the switch turns on.
    write(&mut net, 0, 33);
    assert_eq!(net.client(0).get::<Hero>(h).unwrap().secret, 0);
    net.server.set_custom_condition(h, "secret", true).unwrap();
    write(&mut net, 1, 66);
    net.server
        .process_delivery(conn, PacketSequence(0), DeliveryStatus::Delivered);
    net.server
        .process_delivery(conn, PacketSequence(1), DeliveryStatus::Delivered);
    write(&mut net, 2, 99);
    net.server
        .process_delivery(conn, PacketSequence(2), DeliveryStatus::Delivered);
    assert_eq!(net.client(0).get::<Hero>(h).unwrap().secret, 5);
}
