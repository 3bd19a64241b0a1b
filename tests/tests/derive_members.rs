//! Member kinds: nested replicated structs (their own descriptor, per-member change
//! tracking inside the outer mask), enums with data (variant index then fields; a
//! variant change sends the whole variant), fieldless enums, groups sharing one change
//! bit, conditions and `init` in the descriptor, tuple structs.

use replicate::bits::{BitReader, BitWriter};
use replicate::serialize::{EnumSerializer, NetDefault, NetSerializer, NoConfig};
use replicate::{ChangeMask, Condition, NetEnum, Replicated, ReplicatedState};

#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
struct Stats {
    hp: u16,
    #[net(bits = 4)]
    level: u8,
    alive: bool,
}

#[derive(Replicated, Debug, Default, PartialEq)]
#[net(register = false)]
struct Hero {
    #[net(bits = 3)]
    class: u8,
    #[net(notify = on_stats)]
    stats: Stats,
    gold: u32,
    #[net(skip)]
    stats_notified: u32,
}

impl Hero {
    fn on_stats(&mut self, old: &Stats) {
        assert_ne!(old, &self.stats);
        self.stats_notified += 1;
    }
}

fn write(state: &impl ReplicatedState, mask: &ChangeMask) -> (Vec<u8>, usize) {
    let mut w = BitWriter::with_capacity_bytes(256);
    state.serialize(mask, 0, &mut w);
    (w.finish().unwrap(), w.position())
}

#[test]
fn nested_struct_occupies_its_own_bits_and_sends_only_changed_inner_members() {
    let d = Hero::descriptor();
    let layout: Vec<(&str, u32, u32)> = d
        .members
        .iter()
        .map(|m| (m.name, m.change_mask_offset, m.change_mask_bits))
        .collect();
    assert_eq!(
        layout,
        vec![("class", 0, 1), ("stats", 1, 3), ("gold", 4, 1)]
    );
    assert_eq!(d.change_mask_bits, 5);
    assert_eq!(d.members[1].serializer, "Nested");

    let mut hero = Hero::default();
    let before = hero.to_state();
    hero.stats.level = 9;
    let after = hero.to_state();
    let mut mask = ChangeMask::new(5);
    assert!(after.diff(&before, &mut mask, 0));
    assert_eq!(mask.to_u64(), 0b00100, "only stats.level (bit 1 + 1)");
    let (bytes, bits) = write(&after, &mask);
    assert_eq!(bits, 4, "just the 4-bit level");

    let mut got = before.clone();
    got.deserialize(&mask, 0, &mut BitReader::with_bit_len(&bytes, bits))
        .unwrap();
    assert_eq!(got, after);

    let mut client = Hero::from_state(&before);
    client.apply(&got, &mask);
    assert_eq!(client.stats.level, 9);
    assert_eq!(client.stats_notified, 1);
}

#[test]
fn nested_identity_is_part_of_the_outer_protocol() {
    type S = <Stats as NetDefault>::Serializer;
    assert_eq!(S::change_mask_bits(&NoConfig), 3);
    assert_eq!(S::max_bits(&NoConfig), Some(17 + 4 + 1));
    let mut h1 = replicate::serialize::StableHasher::new();
    S::fingerprint(&NoConfig, &mut h1);
    let mut h2 = replicate::serialize::StableHasher::new();
    h2.write_str("Nested");
    h2.write_u32(0);
    h2.write_u64(Stats::descriptor().protocol_id);
    assert_eq!(h1.finish(), h2.finish());
}

#[derive(NetEnum, Debug, Clone, PartialEq)]
enum Weapon {
    Fists,
    Sword { sharpness: u8, cursed: bool },
    Bow(#[net(bits = 6)] u8),
}

#[derive(Replicated, Clone, Copy, Debug, PartialEq, Default)]
enum Team {
    #[default]
    Red,
    Blue,
    Green,
}

#[derive(NetEnum, Debug, PartialEq, Clone, Copy)]
enum Mood {
    Calm,
    Angry,
}

type W = <Weapon as NetDefault>::Serializer;

fn bits_of(q: &<W as NetSerializer>::Quantized) -> usize {
    let mut w = BitWriter::with_capacity_bytes(64);
    W::serialize(&NoConfig, q, &mut w);
    w.position()
}

#[test]
fn data_enum_writes_index_then_variant_fields() {
    let fists = W::quantize(&NoConfig, &Weapon::Fists);
    let sword = W::quantize(
        &NoConfig,
        &Weapon::Sword {
            sharpness: 200,
            cursed: true,
        },
    );
    let bow = W::quantize(&NoConfig, &Weapon::Bow(63));
    assert_eq!(bits_of(&fists), 2, "3 variants: 2 index bits");
    assert_eq!(bits_of(&sword), 2 + 8 + 1);
    assert_eq!(bits_of(&bow), 2 + 6);
    assert_eq!(W::max_bits(&NoConfig), Some(11));
    for (q, v) in [
        (fists, Weapon::Fists),
        (
            sword,
            Weapon::Sword {
                sharpness: 200,
                cursed: true,
            },
        ),
        (bow, Weapon::Bow(63)),
    ] {
        let (n, back) = replicate::serialize::roundtrip::<W>(&NoConfig, &v).unwrap();
        assert_eq!((n, &back), (bits_of(&q), &v));
    }
}

#[test]
fn data_enum_delta_sends_fields_for_same_variant_and_whole_variant_on_change() {
    let a = W::quantize(
        &NoConfig,
        &Weapon::Sword {
            sharpness: 10,
            cursed: false,
        },
    );
    let b = W::quantize(
        &NoConfig,
        &Weapon::Sword {
            sharpness: 10,
            cursed: true,
        },
    );
    let c = W::quantize(&NoConfig, &Weapon::Bow(5));
    let delta = |q: &_, prev: &_| {
        let mut w = BitWriter::with_capacity_bytes(64);
        W::serialize_delta(&NoConfig, q, prev, &mut w);
        let n = w.position();
        let bytes = w.finish().unwrap();
        let back =
            W::deserialize_delta(&NoConfig, prev, &mut BitReader::with_bit_len(&bytes, n)).unwrap();
        assert_eq!(&back, q);
        n
    };
    // Same variant: [1] + each field's own delta (u8 unchanged, bool changed).
    let field_delta = {
        use replicate::serialize::{BoolSerializer, IntConfig, U8Serializer};
        let mut w = BitWriter::with_capacity_bytes(8);
        U8Serializer::serialize_delta(&IntConfig::DEFAULT, &10, &10, &mut w);
        BoolSerializer::serialize_delta(&NoConfig, &true, &false, &mut w);
        w.position()
    };
    assert_eq!(delta(&b, &a), 1 + field_delta);
    assert!(
        delta(&b, &a) < 1 + bits_of(&b),
        "cheaper than resending the variant"
    );
    // Variant change: [0] + the whole new variant.
    assert_eq!(delta(&c, &a), 1 + bits_of(&c));
}

#[test]
fn bad_variant_index_is_an_error() {
    let mut w = BitWriter::with_capacity_bytes(8);
    w.write_bits(3, 2); // only 0..3 exist
    let bytes = w.finish().unwrap();
    assert!(W::deserialize(&NoConfig, &mut BitReader::new(&bytes)).is_err());
}

#[test]
fn fieldless_enums() {
    use replicate::serialize::NetEnum as _;
    // With `#[default]`: the library's NetEnum + EnumSerializer.
    assert_eq!(Team::VARIANT_COUNT, 3);
    assert_eq!(Team::Green.to_index(), 2);
    assert_eq!(Team::from_index(1), Some(Team::Blue));
    assert_eq!(Team::from_index(3), None);
    assert_eq!(
        std::any::TypeId::of::<<Team as NetDefault>::Serializer>(),
        std::any::TypeId::of::<EnumSerializer<Team>>()
    );
    // Without: the generated serializer, 1 bit for 2 variants.
    type M = <Mood as NetDefault>::Serializer;
    assert_eq!(
        replicate::serialize::roundtrip::<M>(&NoConfig, &Mood::Angry).unwrap(),
        (1, Mood::Angry)
    );
}

#[derive(Replicated, Debug, PartialEq)]
#[net(register = false)]
struct Pawn {
    #[net(group = "pos")]
    x: i16,
    weapon: Weapon,
    #[net(group = "pos")]
    y: i16,
    team: Team,
    #[net(init)]
    skin: u8,
    #[net(cond = OwnerOnly)]
    ammo: u16,
    #[net(cond = InitialOrOwner, group = "secret")]
    code: u8,
    #[net(cond = InitialOrOwner, group = "secret")]
    pin: u8,
}

#[test]
fn groups_share_one_bit_and_descriptor_records_conditions() {
    let d = Pawn::descriptor();
    let layout: Vec<(&str, u32, u32, Option<&str>)> = d
        .members
        .iter()
        .map(|m| (m.name, m.change_mask_offset, m.change_mask_bits, m.group))
        .collect();
    assert_eq!(
        layout,
        vec![
            ("x", 0, 1, Some("pos")),
            ("y", 0, 1, Some("pos")),
            ("weapon", 1, 1, None),
            ("team", 2, 1, None),
            ("skin", 3, 1, None),
            ("ammo", 4, 1, None),
            ("code", 5, 1, Some("secret")),
            ("pin", 5, 1, Some("secret")),
        ]
    );
    assert_eq!(d.change_mask_bits, 6);
    assert_eq!(d.init_mask.to_u64(), 0b001000);
    assert_eq!(d.condition_mask(Condition::OwnerOnly).to_u64(), 0b010000);
    assert_eq!(
        d.condition_mask(Condition::InitialOrOwner).to_u64(),
        0b100000
    );

    let mut p = Pawn {
        x: 1,
        weapon: Weapon::Fists,
        y: 2,
        team: Team::Red,
        skin: 0,
        ammo: 0,
        code: 0,
        pin: 0,
    };
    let before = p.to_state();
    p.y = 7; // only y changes: the group bit sends x and y together
    let after = p.to_state();
    let mut mask = ChangeMask::new(6);
    after.diff(&before, &mut mask, 0);
    assert_eq!(mask.to_u64(), 0b000001);
    let (bytes, bits) = write(&after, &mask);
    assert_eq!(bits, 2 * 17, "x and y, each a zero flag + 16 bits");
    let mut got = <Pawn as Replicated>::State::default();
    got.deserialize(&mask, 0, &mut BitReader::with_bit_len(&bytes, bits))
        .unwrap();
    let mut client = Pawn::from_state(&<Pawn as Replicated>::State::default());
    client.apply(&got, &mask);
    assert_eq!((client.x, client.y), (1, 7));
}

#[derive(Replicated, Debug, PartialEq)]
#[net(register = false)]
struct Pair(#[net(bits = 10)] u16, #[net(skip)] String, bool);

#[test]
fn tuple_structs() {
    let d = Pair::descriptor();
    assert_eq!(
        d.members.iter().map(|m| m.name).collect::<Vec<_>>(),
        ["0", "2"]
    );
    let p = Pair(1000, "local".into(), true);
    let back = Pair::from_state(&p.to_state());
    assert_eq!(back, Pair(1000, String::new(), true));
    assert_eq!(
        format!("{:?}", p.to_state()),
        "PairState { 0: 1000, 2: true }"
    );
}

#[derive(Replicated, Debug, Clone, Default, PartialEq)]
#[net(register = false)]
struct Item {
    id: u16,
    #[net(bits = 7)]
    count: u8,
}

#[derive(Replicated, Debug, Default, PartialEq)]
#[net(register = false)]
struct Bag {
    #[net(max_len = 16, element_bits = 4)]
    items: Vec<Item>,
    gold: u32,
}

#[test]
fn vec_of_replicated_structs_tracks_changed_elements() {
    let d = Bag::descriptor();
    let layout: Vec<(&str, u32, u32)> = d
        .members
        .iter()
        .map(|m| (m.name, m.change_mask_offset, m.change_mask_bits))
        .collect();
    assert_eq!(layout, vec![("items", 0, 5), ("gold", 5, 1)]);

    let mut bag = Bag {
        items: (0..6).map(|i| Item { id: i, count: 1 }).collect(),
        gold: 10,
    };
    let before = bag.to_state();
    bag.items[2].count = 50;
    let after = bag.to_state();
    let mut mask = ChangeMask::new(6);
    assert!(after.diff(&before, &mut mask, 0));
    // Bit 0: "the array changed"; element 2 maps to bit 1 + 2 % 4 = 3.
    assert_eq!(mask.to_u64(), 0b001001);

    let (partial, partial_bits) = write(&after, &mask);
    let (_, full_bits) = write(&after, &ChangeMask::all(6));
    assert!(
        partial_bits < full_bits / 2,
        "only element 2 is sent: {partial_bits} vs {full_bits}"
    );

    let mut got = before.clone();
    got.deserialize(
        &mask,
        0,
        &mut BitReader::with_bit_len(&partial, partial_bits),
    )
    .unwrap();
    assert_eq!(got, after);
    let mut client = Bag::from_state(&before);
    client.apply(&got, &mask);
    assert_eq!(client, bag);
}

#[derive(Replicated, Debug, Default, PartialEq, Clone)]
#[net(register = false)]
struct Engine {
    #[net(notify = on_rpm)]
    rpm: u16,
    temp: u8,
    #[net(skip)]
    rpm_changes: u32,
}

impl Engine {
    fn on_rpm(&mut self, _old: &u16) {
        self.rpm_changes += 1;
    }
}

#[derive(Replicated, Debug, Default)]
#[net(register = false)]
struct Car {
    engine: Engine,
    speed: u16,
}

#[test]
fn nested_members_apply_in_place_keeping_skipped_fields_and_running_inner_hooks() {
    let mut server = Car::default();
    let before = server.to_state();
    server.engine.rpm = 3000;
    let after = server.to_state();
    let mut mask = ChangeMask::new(Car::descriptor().change_mask_bits);
    after.diff(&before, &mut mask, 0);
    assert_eq!(mask.to_u64(), 0b001, "engine.rpm only");

    let mut client = Car::from_state(&before);
    client.engine.rpm_changes = 5; // client-local state of the nested struct
    client.engine.temp = 42; // not in the mask: must not be overwritten
    client.apply(&after, &mask);
    assert_eq!(client.engine.rpm, 3000);
    assert_eq!(client.engine.temp, 42);
    assert_eq!(
        client.engine.rpm_changes, 6,
        "kept, and the inner hook ran once"
    );
}
