use replicate::Replicated;

#[derive(Replicated)]
struct Car {
    #[net(min = 1.0, max = -1.0, bits = 8)]
    steering: f32,
}

fn main() {}
