use replicate::NetEnum;

#[derive(NetEnum)]
enum Weapon {
    #[net(skip)]
    Sword,
    Bow,
}

fn main() {}
