use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(skip = 1)]
    timer: u32,
}

fn main() {}
