use replicate::Replicated;

#[derive(Replicated)]
struct Car {
    #[net(precision = 0.0)]
    speed: f32,
}

fn main() {}
