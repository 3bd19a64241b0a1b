use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(skip, notify = on_ammo)]
    ammo: u16,
}

impl Player {
    fn on_ammo(&mut self, _old: &u16) {}
}

fn main() {}
