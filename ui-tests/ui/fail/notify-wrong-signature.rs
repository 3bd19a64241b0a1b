use replicate::Replicated;

#[derive(Replicated)]
struct Door {
    #[net(notify = on_open)]
    open: bool,
}

impl Door {
    // Must be `fn(&mut self, old: &bool)`.
    fn on_open(&mut self) {}
}

fn main() {}
