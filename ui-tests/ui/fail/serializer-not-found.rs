use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(serializer = replicate::serialize::NoSuchSerializer)]
    ammo: u16,
}

fn main() {}
