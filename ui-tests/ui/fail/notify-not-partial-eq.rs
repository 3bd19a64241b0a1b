use replicate::Replicated;

#[derive(Debug, Default, Clone)]
struct Loadout {
    slots: [u8; 4],
}

#[derive(Replicated)]
struct Player {
    #[net(notify = on_loadout)]
    loadout: Loadout,
}

impl Player {
    fn on_loadout(&mut self, _old: &Loadout) {}
}

// So the field type has a serializer and only `notify` is wrong.
impl replicate::serialize::NetDefault for Loadout {
    type Serializer = LoadoutSerializer;
}
struct LoadoutSerializer;
impl replicate::serialize::NetSerializer for LoadoutSerializer {
    type Source = Loadout;
    type Quantized = [u8; 4];
    type Config = replicate::serialize::NoConfig;
    const NAME: &'static str = "Loadout";
    fn quantize(_: &Self::Config, s: &Loadout) -> [u8; 4] { s.slots }
    fn dequantize(_: &Self::Config, q: &[u8; 4]) -> Loadout { Loadout { slots: *q } }
    fn serialize(_: &Self::Config, q: &[u8; 4], w: &mut replicate::bits::BitWriter) {
        for b in q { w.write_bits(*b as u64, 8); }
    }
    fn deserialize(_: &Self::Config, r: &mut replicate::bits::BitReader) -> replicate::serialize::Result<[u8; 4]> {
        let mut q = [0; 4];
        for b in &mut q { *b = r.read_bits(8) as u8; }
        r.check()?;
        Ok(q)
    }
}

fn main() {}
