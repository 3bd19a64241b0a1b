// The derive fails on one attribute, but the type still implements the traits (as a
// stub), so using it elsewhere adds no follow-up errors: only the real one is reported.
use replicate::{Registration, Replicated};

#[derive(Replicated)]
struct Player {
    #[net(bits = 0)]
    ammo: u16,
}

fn main() {
    let _ = Player::descriptor();
    let _ = Registration::of::<Player>();
    let p = Player { ammo: 1 };
    let _ = p.to_state();
}
