use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(serializer = "replicate::serialize::U16Serializer")]
    hp: u16,
}

fn main() {}
