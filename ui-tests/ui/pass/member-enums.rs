use replicate::serialize::{EnumSerializer, NetDefault, NetEnum};
use replicate::{NetEnum, Replicated};

// Fieldless with a `#[default]` variant: implements the library's `NetEnum` and uses
// `EnumSerializer`, through either derive.
#[derive(Replicated, Clone, Copy, Debug, PartialEq, Default)]
enum Team {
    #[default]
    Red,
    Blue,
}

#[derive(NetEnum, Clone, Copy, Debug, PartialEq, Default)]
enum Stance {
    Standing,
    #[default]
    Crouching,
    Prone,
}

// Fieldless without `Default`: a generated serializer with the same index encoding.
#[derive(NetEnum, Debug, PartialEq)]
enum Mood {
    Calm,
    Angry,
}

// With data: the polymorphic serializer.
#[derive(NetEnum, Debug, PartialEq)]
enum Weapon {
    Fists,
    Sword { sharpness: u8 },
    Bow(#[net(bits = 6)] u8, bool),
}

#[derive(Replicated)]
struct Soldier {
    team: Team,
    stance: Stance,
    mood: Mood,
    weapon: Weapon,
    #[net(min = -1.0, max = 1.0, precision = 0.01)]
    aim: f32,
    speed: f32,
}

fn main() {
    fn same<A: 'static, B: 'static>() -> bool {
        std::any::TypeId::of::<A>() == std::any::TypeId::of::<B>()
    }
    assert!(same::<<Team as NetDefault>::Serializer, EnumSerializer<Team>>());
    assert_eq!(Stance::from_index(2), Some(Stance::Prone));
    assert_eq!(Team::VARIANT_COUNT, 2);
    let d = <Soldier as Replicated>::descriptor();
    assert_eq!(d.members.len(), 6);
    let _ = (Mood::Calm, Mood::Angry, Weapon::Fists, Weapon::Sword { sharpness: 1 }, Weapon::Bow(1, true));
}
