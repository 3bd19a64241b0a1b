use replicate::Replicated;

#[derive(Replicated)]
struct Door {
    #[net(notfiy = on_open)]
    open: bool,
}

fn main() {}
