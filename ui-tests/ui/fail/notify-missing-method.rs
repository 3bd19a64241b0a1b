use replicate::Replicated;

#[derive(Replicated)]
struct Door {
    #[net(notify = on_open)]
    open: bool,
}

fn main() {}
