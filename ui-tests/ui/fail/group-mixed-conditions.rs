use replicate::Replicated;

#[derive(Replicated)]
struct Pawn {
    #[net(group = "movement")]
    x: i32,
    #[net(group = "movement", cond = OwnerOnly)]
    y: i32,
}

fn main() {}
