use replicate::bits::{BitReader, BitWriter};
use replicate::{ChangeMask, Replicated, ReplicatedState};

#[derive(Replicated, Debug, Default, PartialEq)]
struct Door {
    #[net(notify = on_open)]
    open: bool,
    hits: i32,
    #[net(bits = 5)]
    code: u8,
    #[net(skip)]
    opened_times: u32,
}

impl Door {
    fn on_open(&mut self, old: &bool) {
        if !*old && self.open {
            self.opened_times += 1;
        }
    }
}

#[test]
fn smoke() {
    let mut door = Door {
        code: 3,
        ..Default::default()
    };
    let before = door.to_state();
    door.open = true;
    door.code = 9;
    let after = door.to_state();
    let mut mask = ChangeMask::new(Door::descriptor().change_mask_bits);
    assert!(after.diff(&before, &mut mask, 0));
    assert_eq!(mask.to_u64(), 0b101);
    let mut w = BitWriter::with_capacity_bytes(64);
    mask.write(&mut w);
    after.serialize(&mask, 0, &mut w);
    assert_eq!(w.position(), 3 + 1 + 5);
    let bytes = w.finish().unwrap();
    let mut r = BitReader::new(&bytes);
    let rmask = ChangeMask::read(3, &mut r).unwrap();
    let mut received = before.clone();
    received.deserialize(&rmask, 0, &mut r).unwrap();
    assert_eq!(received, after);
    let mut client = Door::from_state(&before);
    client.apply(&received, &rmask);
    assert_eq!(
        (client.open, client.code, client.opened_times),
        (true, 9, 1)
    );
}
