//! Protocol identifiers (stable golden value, sensitive to every structural change)
//! and registration (inventory, wire ids, duplicates, factory, generic types).

use replicate::internals::protocol::{ErasedState, ProtocolError, ProtocolRegistry};
use replicate::{Registration, Replicated};

mod v1 {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        pub health: u16,
        #[net(bits = 7)]
        pub ammo: u8,
        #[net(cond = OwnerOnly)]
        pub secret: i32,
        pub alive: bool,
    }
}

mod added {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        pub health: u16,
        #[net(bits = 7)]
        pub ammo: u8,
        #[net(cond = OwnerOnly)]
        pub secret: i32,
        pub alive: bool,
        pub armor: u8,
    }
}

mod renamed {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        pub hp: u16,
        #[net(bits = 7)]
        pub ammo: u8,
        #[net(cond = OwnerOnly)]
        pub secret: i32,
        pub alive: bool,
    }
}

mod reconfigured {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        pub health: u16,
        #[net(bits = 6)]
        pub ammo: u8,
        #[net(cond = OwnerOnly)]
        pub secret: i32,
        pub alive: bool,
    }
}

mod reordered {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        #[net(bits = 7)]
        pub ammo: u8,
        pub health: u16,
        #[net(cond = OwnerOnly)]
        pub secret: i32,
        pub alive: bool,
    }
}

mod removed {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        pub health: u16,
        #[net(bits = 7)]
        pub ammo: u8,
        pub alive: bool,
    }
}

mod recondition {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        pub health: u16,
        #[net(bits = 7)]
        pub ammo: u8,
        #[net(cond = SkipOwner)]
        pub secret: i32,
        pub alive: bool,
    }
}

mod skipped_field_added {
    use replicate::Replicated;

    #[derive(Replicated)]
    #[net(name = "Golden", register = false)]
    pub struct Golden {
        pub health: u16,
        #[net(bits = 7)]
        pub ammo: u8,
        #[net(cond = OwnerOnly)]
        pub secret: i32,
        pub alive: bool,
        #[net(skip)]
        #[allow(dead_code)]
        pub local_only: Vec<String>,
    }
}

/// The golden protocol id of `v1::Golden`. It must not change between builds,
/// platforms or compiler versions; if a deliberate wire-format change moves it, update
/// it together with the change (and say so in the commit).
const GOLDEN_PROTOCOL_ID: u64 = 0xe13f_ebb2_b4a1_f60c;

#[test]
fn protocol_id_is_the_golden_value() {
    let id = v1::Golden::descriptor().protocol_id;
    assert_eq!(id, GOLDEN_PROTOCOL_ID, "got {id:#018x}");
}

#[test]
fn protocol_id_changes_with_every_structural_change() {
    let base = v1::Golden::descriptor().protocol_id;
    let others = [
        ("member added", added::Golden::descriptor().protocol_id),
        ("member renamed", renamed::Golden::descriptor().protocol_id),
        (
            "bits changed",
            reconfigured::Golden::descriptor().protocol_id,
        ),
        (
            "members reordered",
            reordered::Golden::descriptor().protocol_id,
        ),
        ("member removed", removed::Golden::descriptor().protocol_id),
        (
            "condition changed",
            recondition::Golden::descriptor().protocol_id,
        ),
    ];
    for (what, id) in others {
        assert_ne!(id, base, "{what} must change the protocol id");
    }
    assert_eq!(
        skipped_field_added::Golden::descriptor().protocol_id,
        base,
        "a skipped field is not part of the protocol"
    );
}

// Auto-registered through inventory.
#[derive(Replicated, Debug, PartialEq)]
struct Crate {
    #[net(bits = 4)]
    contents: u8,
    #[net(skip)]
    opened: bool,
}

#[derive(Replicated)]
struct Barrel {
    fill: u16,
}

#[derive(Replicated)]
#[net(register = false)]
struct NotRegistered {
    x: u8,
}

#[derive(Replicated, Debug)]
#[net(register = false)]
struct Generic<T> {
    value: T,
    tag: u8,
}

#[test]
fn registry_collects_sorts_and_builds_instances() {
    let reg = ProtocolRegistry::from_inventory().unwrap();
    let barrel = reg.index_of::<Barrel>().expect("Barrel registered");
    let krate = reg.index_of::<Crate>().expect("Crate registered");
    assert!(barrel < krate, "wire ids follow the sorted stable names");
    assert!(reg.index_of::<NotRegistered>().is_none());
    assert!(reg.index_of::<Generic<u8>>().is_none());

    // The factory builds an instance on the receiving side from a received state.
    let r = reg.get(krate).unwrap();
    let state: Box<dyn ErasedState> = Box::new(
        Crate {
            contents: 9,
            opened: true,
        }
        .to_state(),
    );
    let obj = (r.create)(state.as_ref()).expect("factory");
    let built = obj.as_any().downcast_ref::<Crate>().unwrap();
    assert_eq!(
        built,
        &Crate {
            contents: 9,
            opened: false
        }
    );
    assert_eq!(
        ProtocolRegistry::from_inventory().unwrap().hash(),
        reg.hash()
    );
}

#[test]
fn generic_types_register_explicitly_per_instantiation() {
    let mut reg = ProtocolRegistry::from_registrations([Registration::of::<Barrel>()]).unwrap();
    let before = reg.hash();
    reg.register(Registration::of::<Generic<u8>>()).unwrap();
    reg.register(Registration::of::<Generic<i32>>()).unwrap();
    assert_eq!(reg.len(), 3);
    assert_ne!(reg.hash(), before);
    let a = Generic::<u8>::descriptor();
    let b = Generic::<i32>::descriptor();
    assert_ne!(a.name, b.name);
    assert!(a.name.starts_with("Generic<"), "{}", a.name);
    assert_ne!(a.protocol_id, b.protocol_id);
    // Cached: the same descriptor every time.
    assert!(std::ptr::eq(a, Generic::<u8>::descriptor()));
    // And the generated code works per instantiation.
    let g = Generic::<i32> { value: -5, tag: 7 };
    let back = Generic::<i32>::from_state(&g.to_state());
    assert_eq!((back.value, back.tag), (-5, 7));
}

mod dup_a {
    #[derive(replicate::Replicated)]
    #[net(name = "Shared", register = false)]
    pub struct Thing {
        pub a: u8,
    }
}

mod dup_b {
    #[derive(replicate::Replicated)]
    #[net(name = "Shared", register = false)]
    pub struct Thing {
        pub b: u16,
    }
}

#[test]
fn duplicate_wire_names_are_rejected_naming_both_types() {
    let err = ProtocolRegistry::from_registrations([
        Registration::of::<dup_a::Thing>(),
        Registration::of::<dup_b::Thing>(),
    ])
    .unwrap_err();
    match &err {
        ProtocolError::DuplicateName {
            name,
            first,
            second,
        } => {
            assert_eq!(name, "Shared");
            assert!(first.ends_with("dup_a::Thing"), "{first}");
            assert!(second.ends_with("dup_b::Thing"), "{second}");
        }
        other => panic!("unexpected {other:?}"),
    }
}

mod bad_config {
    use replicate::serialize::{IntConfig, U8Serializer};

    // `bits` hidden behind a const: only the registration-time check can see it.
    pub const TOO_WIDE: IntConfig = IntConfig { bits: 12 };

    #[derive(replicate::Replicated)]
    #[net(register = false)]
    pub struct BadConfig {
        #[net(serializer = U8Serializer, config = TOO_WIDE)]
        pub level: u8,
    }
}

#[test]
fn invalid_configs_fail_at_registration_naming_the_member() {
    let err = ProtocolRegistry::from_registrations([Registration::of::<bad_config::BadConfig>()])
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("member `level`"), "{msg}");
    assert!(msg.contains("bits = 12"), "{msg}");
}
