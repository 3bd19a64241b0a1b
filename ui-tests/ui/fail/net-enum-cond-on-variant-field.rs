use replicate::NetEnum;

#[derive(NetEnum)]
enum Weapon {
    Sword,
    Bow {
        #[net(cond = OwnerOnly)]
        arrows: u8,
    },
}

fn main() {}
