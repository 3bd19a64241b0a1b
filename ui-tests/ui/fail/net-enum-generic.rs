use replicate::NetEnum;

#[derive(NetEnum)]
enum Slot<T> {
    Empty,
    Full(T),
}

fn main() {}
