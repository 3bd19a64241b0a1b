use replicate::Replicated;

#[derive(Replicated)]
struct Wrapper<T> {
    #[net(bits = 4)]
    value: T,
}

fn main() {}
