use replicate::Replicated;

#[derive(Replicated)]
struct Car {
    #[net(precision = -0.01)]
    speed: f32,
}

fn main() {}
