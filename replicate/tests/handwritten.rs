//! A hand-written implementation of the derive's contract for a small type: the
//! reference shape of what `#[derive(Replicated)]` generates, and a check that the
//! runtime traits compose (registry, erased state, masks).

use replicate::__private::*;
use replicate::bits::{BitReader, BitWriter};
use replicate::internals::protocol::{ErasedState, ProtocolRegistry};
use replicate::serialize::{BoolSerializer, I32Serializer, IntConfig, NoConfig, U8Serializer};

#[derive(Debug, Default, PartialEq)]
struct Door {
    open: bool,
    hits: i32,
    code: u8,
    opened_times: u32,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct DoorState {
    open: bool,
    hits: u32,
    code: u8,
}

#[allow(clippy::needless_update)] // the derive writes configs this way
const CODE_CFG: IntConfig = IntConfig {
    bits: 5,
    ..IntConfig::DEFAULT
};

fn build_descriptor() -> StateDescriptor {
    fn fp<S: NetSerializer>(c: &S::Config) -> u64 {
        let mut h = StableHasher::new();
        S::fingerprint(c, &mut h);
        h.finish()
    }
    let member = |name, serializer, offset, fingerprint| MemberDescriptor {
        name,
        serializer,
        change_mask_offset: offset,
        change_mask_bits: 1,
        condition: Condition::None,
        init_only: false,
        has_notify: name == "open",
        group: None,
        has_object_references: false,
        has_dynamic_state: false,
        max_bits: None,
        fingerprint,
    };
    StateDescriptor::new(
        "Door",
        vec![
            member(
                "open",
                BoolSerializer::NAME,
                0,
                fp::<BoolSerializer>(&NoConfig),
            ),
            member(
                "hits",
                I32Serializer::NAME,
                1,
                fp::<I32Serializer>(&IntConfig::DEFAULT),
            ),
            member("code", U8Serializer::NAME, 2, fp::<U8Serializer>(&CODE_CFG)),
        ],
        true,
    )
}

impl ReplicatedState for DoorState {
    fn descriptor() -> &'static StateDescriptor {
        static D: OnceLock<StateDescriptor> = OnceLock::new();
        D.get_or_init(build_descriptor)
    }
    fn diff(&self, prev: &Self, mask: &mut ChangeMask, offset: u32) -> bool {
        let mut any = false;
        any |= BoolSerializer::diff(&NoConfig, &self.open, &prev.open, mask, offset);
        any |= I32Serializer::diff(
            &IntConfig::DEFAULT,
            &self.hits,
            &prev.hits,
            mask,
            offset + 1,
        );
        any |= U8Serializer::diff(&CODE_CFG, &self.code, &prev.code, mask, offset + 2);
        any
    }
    fn serialize(&self, mask: &ChangeMask, offset: u32, w: &mut BitWriter) {
        if mask.get(offset) {
            BoolSerializer::serialize_masked(&NoConfig, &self.open, mask, offset, w);
        }
        if mask.get(offset + 1) {
            I32Serializer::serialize_masked(&IntConfig::DEFAULT, &self.hits, mask, offset + 1, w);
        }
        if mask.get(offset + 2) {
            U8Serializer::serialize_masked(&CODE_CFG, &self.code, mask, offset + 2, w);
        }
    }
    fn deserialize(&mut self, mask: &ChangeMask, offset: u32, r: &mut BitReader) -> Result<()> {
        if mask.get(offset) {
            BoolSerializer::deserialize_masked(&NoConfig, &mut self.open, mask, offset, r)?;
        }
        if mask.get(offset + 1) {
            I32Serializer::deserialize_masked(
                &IntConfig::DEFAULT,
                &mut self.hits,
                mask,
                offset + 1,
                r,
            )?;
        }
        if mask.get(offset + 2) {
            U8Serializer::deserialize_masked(&CODE_CFG, &mut self.code, mask, offset + 2, r)?;
        }
        Ok(())
    }
    fn serialize_delta(&self, base: &Self, mask: &ChangeMask, offset: u32, w: &mut BitWriter) {
        if mask.get(offset) {
            BoolSerializer::serialize_masked_delta(
                &NoConfig, &self.open, &base.open, mask, offset, w,
            );
        }
        if mask.get(offset + 1) {
            I32Serializer::serialize_masked_delta(
                &IntConfig::DEFAULT,
                &self.hits,
                &base.hits,
                mask,
                offset + 1,
                w,
            );
        }
        if mask.get(offset + 2) {
            U8Serializer::serialize_masked_delta(
                &CODE_CFG,
                &self.code,
                &base.code,
                mask,
                offset + 2,
                w,
            );
        }
    }
    fn deserialize_delta(
        &mut self,
        base: &Self,
        mask: &ChangeMask,
        offset: u32,
        r: &mut BitReader,
    ) -> Result<()> {
        if mask.get(offset) {
            BoolSerializer::deserialize_masked_delta(
                &NoConfig,
                &mut self.open,
                &base.open,
                mask,
                offset,
                r,
            )?;
        }
        if mask.get(offset + 1) {
            I32Serializer::deserialize_masked_delta(
                &IntConfig::DEFAULT,
                &mut self.hits,
                &base.hits,
                mask,
                offset + 1,
                r,
            )?;
        }
        if mask.get(offset + 2) {
            U8Serializer::deserialize_masked_delta(
                &CODE_CFG,
                &mut self.code,
                &base.code,
                mask,
                offset + 2,
                r,
            )?;
        }
        Ok(())
    }
    fn validate(&self, _mask: &ChangeMask, _offset: u32) -> Result<()> {
        Ok(())
    }
    fn collect_references(&self, _out: &mut Vec<NetRefHandle>) {}
}

impl Door {
    fn on_open(&mut self, old: &bool) {
        if !*old && self.open {
            self.opened_times += 1;
        }
    }
}

impl Replicated for Door {
    type State = DoorState;
    fn quantize(&self, out: &mut DoorState) {
        out.open = BoolSerializer::quantize(&NoConfig, &self.open);
        out.hits = I32Serializer::quantize(&IntConfig::DEFAULT, &self.hits);
        out.code = U8Serializer::quantize(&CODE_CFG, &self.code);
    }
    fn apply(&mut self, s: &DoorState, mask: &ChangeMask) {
        let mut old_open = None;
        if mask.get(0) {
            let v = BoolSerializer::dequantize(&NoConfig, &s.open);
            if v != self.open {
                old_open = Some(std::mem::replace(&mut self.open, v));
            }
        }
        if mask.get(1) {
            self.hits = I32Serializer::dequantize(&IntConfig::DEFAULT, &s.hits);
        }
        if mask.get(2) {
            self.code = U8Serializer::dequantize(&CODE_CFG, &s.code);
        }
        if let Some(old) = old_open {
            self.on_open(&old);
        }
    }
    fn from_state(s: &DoorState) -> Self {
        Door {
            open: BoolSerializer::dequantize(&NoConfig, &s.open),
            hits: I32Serializer::dequantize(&IntConfig::DEFAULT, &s.hits),
            code: U8Serializer::dequantize(&CODE_CFG, &s.code),
            opened_times: Default::default(),
        }
    }
}

impl ValidateConfigs for Door {
    fn validate_configs() -> std::result::Result<(), String> {
        U8Serializer::validate_config(&CODE_CFG).map_err(|e| format!("member `code`: {e}"))
    }
}

inventory::submit! { Registration::of::<Door>() }

#[test]
fn poll_serialize_apply() {
    let mut door = Door {
        open: false,
        hits: 0,
        code: 3,
        opened_times: 0,
    };
    let before = Replicated::to_state(&door);
    door.open = true;
    door.code = 9;
    let after = Replicated::to_state(&door);
    let mut mask = ChangeMask::new(DoorState::descriptor().change_mask_bits);
    assert!(ReplicatedState::diff(&after, &before, &mut mask, 0));
    assert_eq!(mask.to_u64(), 0b101);

    let mut w = BitWriter::with_capacity_bytes(64);
    mask.write(&mut w);
    ReplicatedState::serialize(&after, &mask, 0, &mut w);
    assert_eq!(w.position(), 3 + 1 + 5);
    let bytes = w.finish().unwrap();

    let mut r = BitReader::new(&bytes);
    let rmask = ChangeMask::read(3, &mut r).unwrap();
    let mut received = before.clone();
    ReplicatedState::deserialize(&mut received, &rmask, 0, &mut r).unwrap();
    assert_eq!(received, after);

    let mut client = Door::from_state(&before);
    client.apply(&received, &rmask);
    assert_eq!(
        (client.open, client.code, client.opened_times),
        (true, 9, 1)
    );
}

#[test]
fn registry_collects_from_inventory() {
    let reg = ProtocolRegistry::from_inventory().unwrap();
    let idx = reg.index_of::<Door>().expect("Door registered");
    let r = reg.get(idx).unwrap();
    assert_eq!((r.descriptor)().name, "Door");
    let state: Box<dyn ErasedState> = (r.new_state)();
    let obj = (r.create)(state.as_ref()).expect("factory builds a Door");
    assert!(obj.as_any().downcast_ref::<Door>().is_some());
    let again = ProtocolRegistry::from_inventory().unwrap();
    assert_eq!(reg.hash(), again.hash());
}

#[test]
fn duplicate_names_are_rejected() {
    let r = Registration::of::<Door>();
    let mut fake = r;
    fake.type_id = std::any::TypeId::of::<u8>;
    fake.rust_type = || "other::Door";
    let err = ProtocolRegistry::from_registrations([r, fake]).unwrap_err();
    assert!(
        err.to_string().contains("both use the wire name `Door`"),
        "{err}"
    );
}
