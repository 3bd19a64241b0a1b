use replicate::Replicated;
use replicate::serialize::NetDefault;

#[derive(Replicated)]
struct Wrapper<T: Clone, const N: usize>
where
    T: NetDefault,
{
    value: T,
    #[net(bits = 4)]
    small: u8,
    #[net(skip)]
    cache: Option<[u8; N]>,
}

fn main() {
    let a = <Wrapper<u16, 2> as Replicated>::descriptor();
    let b = <Wrapper<u32, 2> as Replicated>::descriptor();
    assert_ne!(a.name, b.name);
    assert_ne!(a.protocol_id, b.protocol_id);
}
