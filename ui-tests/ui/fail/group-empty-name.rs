use replicate::Replicated;

#[derive(Replicated)]
struct Pawn {
    #[net(group = "")]
    x: i32,
}

fn main() {}
