use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    // U8Serializer's source type is `u8`, not `u32`.
    #[net(serializer = replicate::serialize::U8Serializer)]
    score: u32,
}

fn main() {}
