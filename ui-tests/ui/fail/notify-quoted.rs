use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(notify = "on_hp")]
    hp: u16,
}

impl Player {
    fn on_hp(&mut self, _old: &u16) {}
}

fn main() {}
