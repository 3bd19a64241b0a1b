use replicate::serialize::{IntConfig, U8Serializer};
use replicate::{NetEnum, Replicated};

const AMMO_BITS: IntConfig = IntConfig { bits: 7 };

#[derive(Replicated)]
#[net(name = "game::Hero", delta = false, register = false)]
struct Hero {
    #[net(serializer = U8Serializer, bits = 7)]
    level: u8,
    #[net(config = AMMO_BITS)]
    ammo: u8,
    #[net(cond = OwnerOnly)]
    secret: u32,
    #[net(cond = SkipOwner)]
    a: u8,
    #[net(cond = SimulatedOnly)]
    b: u8,
    #[net(cond = AutonomousOnly)]
    c: u8,
    #[net(cond = InitialOrOwner)]
    d: u8,
    #[net(cond = Custom)]
    e: u8,
    #[net(cond = Never)]
    f: u8,
    #[net(cond = InitialOnly)]
    g: u8,
    #[net(init)]
    team: u8,
    #[net(notify = on_hp)]
    hp: u16,
    #[net(group = "pos")]
    x: i32,
    #[net(group = "pos")]
    y: i32,
    #[net(skip)]
    timer: u64,
    stance: Stance,
}

impl Hero {
    fn on_hp(&mut self, _old: &u16) {}
}

#[derive(NetEnum, PartialEq)]
enum Stance {
    Standing,
    Crouching { depth: u8 },
}

fn main() {
    let d = <Hero as Replicated>::descriptor();
    assert_eq!(d.name, "game::Hero");
    assert!(!d.delta_compression);
    let _ = Stance::Standing;
    let _ = Stance::Crouching { depth: 1 };
}
