use replicate::Replicated;

#[derive(Replicated)]
struct Player {
    #[net(skip, cond = OwnerOnly)]
    local_timer: u32,
}

fn main() {}
