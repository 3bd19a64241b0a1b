use replicate::{ProtocolRegistry, Replicated};

#[derive(Replicated, Default)]
struct Tagged<T: Send + 'static> {
    #[net(bits = 4)]
    tag: u8,
    value: T,
}

replicate::register!(Tagged<u32>);
replicate::register!(Tagged<String>, Tagged<glam::Vec3>);

fn main() {
    let registry = ProtocolRegistry::from_inventory().unwrap();
    assert!(registry.index_of::<Tagged<u32>>().is_some());
    assert!(registry.index_of::<Tagged<String>>().is_some());
    assert!(registry.index_of::<Tagged<glam::Vec3>>().is_some());
    assert!(registry.index_of::<Tagged<u8>>().is_none());
}
