use replicate::Replicated;

#[derive(Replicated)]
struct Car {
    #[net(min = 0.0, max = 10.0, precision = -0.01)]
    speed: f32,
}

fn main() {}
