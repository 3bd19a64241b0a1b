use replicate::Replicated;

#[derive(Replicated, Default)]
struct Player {
    #[net(init = true)]
    name_hash: u32,
    #[net(init = false)]
    hp: u16,
    #[net(skip = true)]
    timer: u32,
    #[net(skip = false)]
    ammo: u8,
}

fn main() {
    let d = <Player as replicate::Replicated>::descriptor();
    assert_eq!(d.members.len(), 3);
    assert!(d.members[0].init_only && !d.members[1].init_only);
}
