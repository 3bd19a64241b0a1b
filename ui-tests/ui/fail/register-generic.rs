use replicate::Replicated;

#[derive(Replicated)]
#[net(register = true)]
struct Tagged<T: Send + 'static> {
    tag: u8,
    value: T,
}

fn main() {}
