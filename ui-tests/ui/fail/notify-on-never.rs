use replicate::Replicated;

#[derive(Replicated)]
struct Door {
    #[net(cond = Never, notify = on_secret)]
    secret: u32,
}

impl Door {
    fn on_secret(&mut self, _old: &u32) {}
}

fn main() {}
