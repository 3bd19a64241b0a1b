use replicate::Replicated;

#[derive(Replicated)]
struct Pawn {
    #[net(group = "spawn", init)]
    x: i32,
    #[net(group = "spawn")]
    y: i32,
}

fn main() {}
