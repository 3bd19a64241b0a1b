//! `ReplicationFragment`: a generated fragment (any `#[derive(Replicated)]` type) and a
//! hand-written fast-array-style fragment side by side behind `dyn ReplicationFragment`.
//! The hand-written one tracks dirty items itself (push-based), polls only those and on
//! the receiving side applies and notifies per changed item.

use replicate::internals::fragment::{
    FragmentError, FragmentOwner, FragmentTraits, Notifications, ReplicationFragment,
};
use replicate::internals::protocol::ErasedState;
use replicate::{ChangeMask, Replicated, StateDescriptor};

#[derive(Replicated, Debug, Default)]
#[net(register = false)]
struct Door {
    #[net(notify = on_open)]
    open: bool,
    hits: u16,
    #[net(skip)]
    notified: Vec<bool>,
}

impl Door {
    fn on_open(&mut self, old: &bool) {
        self.notified.push(*old);
    }
}

/// The quantized state of the inventory fragment: a count and four item slots (a
/// derived state; the *fragment* logic below is hand-written).
#[derive(Replicated, Debug, Default)]
#[net(register = false)]
struct Slots {
    #[net(bits = 3)]
    count: u8,
    s0: u32,
    s1: u32,
    s2: u32,
    s3: u32,
}

type SlotsState = <Slots as Replicated>::State;

/// A fast-array-like fragment: the game pushes changes through `set`, poll looks only at
/// dirty slots (no full compare), apply reports which slots changed.
#[derive(Default)]
struct InventoryFragment {
    items: Vec<u32>,
    dirty: Vec<usize>,
    received_changes: Vec<(usize, u32)>,
}

impl InventoryFragment {
    const CAPACITY: usize = 4;

    fn set(&mut self, index: usize, item: u32) {
        if index >= self.items.len() {
            self.items.resize(index + 1, 0);
            self.dirty.push(usize::MAX); // count changed
        }
        self.items[index] = item;
        self.dirty.push(index);
    }

    fn slot_mut(state: &mut SlotsState, i: usize) -> &mut u32 {
        match i {
            0 => &mut state.s0,
            1 => &mut state.s1,
            2 => &mut state.s2,
            _ => &mut state.s3,
        }
    }

    fn slot(state: &SlotsState, i: usize) -> u32 {
        [state.s0, state.s1, state.s2, state.s3][i]
    }
}

impl ReplicationFragment for InventoryFragment {
    fn traits(&self) -> FragmentTraits {
        FragmentTraits::CAN_REPLICATE
            | FragmentTraits::CAN_RECEIVE
            | FragmentTraits::HAS_PUSH_BASED_DIRTINESS
            | FragmentTraits::HAS_NOTIFIES
    }

    fn state_descriptor(&self) -> &'static StateDescriptor {
        Slots::descriptor()
    }

    fn new_state(&self) -> Box<dyn ErasedState> {
        Box::new(SlotsState::default())
    }

    /// Looks only at the slots the game marked dirty: cost follows changes, not size.
    fn poll_state(
        &mut self,
        state: &mut dyn ErasedState,
        mask: &mut ChangeMask,
    ) -> Result<bool, FragmentError> {
        let name = state.type_descriptor().name;
        let state = state.as_any_mut().downcast_mut::<SlotsState>().ok_or(
            FragmentError::StateTypeMismatch {
                fragment: "Slots",
                state: name,
            },
        )?;
        let mut changed = false;
        for i in self.dirty.drain(..) {
            if i == usize::MAX {
                let count = self.items.len().min(Self::CAPACITY) as u8;
                if state.count != count {
                    state.count = count;
                    mask.set(0);
                    changed = true;
                }
            } else if i < Self::CAPACITY {
                let slot = Self::slot_mut(state, i);
                if *slot != self.items[i] {
                    *slot = self.items[i];
                    mask.set(1 + i as u32);
                    changed = true;
                }
            }
        }
        Ok(changed)
    }

    fn apply_state(
        &mut self,
        state: &dyn ErasedState,
        mask: &ChangeMask,
    ) -> Result<Notifications, FragmentError> {
        let state = replicate::internals::fragment::downcast_state::<Slots>(state)?;
        if mask.get(0) {
            self.items.resize(state.count as usize, 0);
        }
        let mut changed = Vec::new();
        for i in 0..self.items.len().min(Self::CAPACITY) {
            if mask.get(1 + i as u32) && self.items[i] != Self::slot(state, i) {
                self.items[i] = Self::slot(state, i);
                changed.push((i, self.items[i]));
            }
        }
        Ok(if changed.is_empty() {
            Notifications::none()
        } else {
            Notifications::pending(changed)
        })
    }

    fn call_notifies(&mut self, notifications: Notifications) {
        if let Some(changed) = notifications.take::<Vec<(usize, u32)>>() {
            self.received_changes.extend(changed);
        }
    }

    fn collect_owner(&self, owners: &mut Vec<FragmentOwner>) {
        owners.push(FragmentOwner::of::<Self>());
    }
}

/// Sends every fragment's dirty members from `server` to `client` through the bit
/// stream, then applies all fragments before calling any notification (Iris's order).
fn replicate_tick(
    server: &mut [&mut dyn ReplicationFragment],
    server_states: &mut [Box<dyn ErasedState>],
    client: &mut [&mut dyn ReplicationFragment],
    client_states: &mut [Box<dyn ErasedState>],
) -> Vec<ChangeMask> {
    let mut masks = Vec::new();
    for (f, s) in server.iter_mut().zip(server_states.iter_mut()) {
        let mut mask = ChangeMask::new(f.state_descriptor().change_mask_bits);
        f.poll_state(s.as_mut(), &mut mask).unwrap();
        masks.push(mask);
    }
    let mut w = replicate::bits::BitWriter::with_capacity_bytes(1200);
    for (s, m) in server_states.iter().zip(&masks) {
        m.write(&mut w);
        s.serialize(m, &mut w);
    }
    let bytes = w.finish().unwrap();
    let mut r = replicate::bits::BitReader::new(&bytes);
    let mut pending = Vec::new();
    for (f, s) in client.iter_mut().zip(client_states.iter_mut()) {
        let mask = ChangeMask::read(f.state_descriptor().change_mask_bits, &mut r).unwrap();
        s.deserialize(&mask, &mut r).unwrap();
        pending.push(f.apply_state(s.as_ref(), &mask).unwrap());
    }
    for (f, p) in client.iter_mut().zip(pending) {
        f.call_notifies(p);
    }
    masks
}

#[test]
fn generated_and_hand_written_fragments_side_by_side() {
    let (mut server_door, mut server_inv) = (Door::default(), InventoryFragment::default());
    let (mut client_door, mut client_inv) = (Door::default(), InventoryFragment::default());
    let mut server_states = vec![server_door.new_state(), server_inv.new_state()];
    let mut client_states = vec![client_door.new_state(), client_inv.new_state()];

    assert!(server_door.traits().contains(FragmentTraits::HAS_NOTIFIES));
    assert!(server_door.traits().contains(FragmentTraits::NEEDS_POLL));
    assert!(!server_inv.traits().contains(FragmentTraits::NEEDS_POLL));

    // Nothing changed yet: nothing dirty.
    let masks = replicate_tick(
        &mut [&mut server_door, &mut server_inv],
        &mut server_states,
        &mut [&mut client_door, &mut client_inv],
        &mut client_states,
    );
    assert!(masks.iter().all(|m| !m.any()));

    // The game changes both objects.
    server_door.open = true;
    server_inv.set(0, 11);
    server_inv.set(1, 0);
    server_inv.set(2, 33);
    let masks = replicate_tick(
        &mut [&mut server_door, &mut server_inv],
        &mut server_states,
        &mut [&mut client_door, &mut client_inv],
        &mut client_states,
    );
    assert_eq!(masks[0].to_u64(), 0b01, "door: only `open`");
    assert_eq!(
        masks[1].to_u64(),
        0b01011,
        "count, slot 0, slot 2 (slot 1 stayed 0)"
    );
    assert!(server_inv.dirty.is_empty());

    assert_eq!(client_inv.items, vec![11, 0, 33]);
    assert_eq!(client_inv.received_changes, vec![(0, 11), (2, 33)]);
    assert!(client_door.open);
    assert_eq!(
        client_door.notified,
        vec![false],
        "notify once, with the old value"
    );

    let mut owners = Vec::new();
    client_door.collect_owner(&mut owners);
    client_inv.collect_owner(&mut owners);
    let names: Vec<_> = owners.iter().map(|o| o.type_name).collect();
    assert!(names[0].ends_with("Door") && names[1].ends_with("InventoryFragment"));
}

#[test]
fn wrong_state_type_is_an_error() {
    let mut door = Door::default();
    let mut other = Slots::default().new_state();
    let mut mask = ChangeMask::new(8);
    let err = door.poll_state(other.as_mut(), &mut mask).unwrap_err();
    assert!(err.to_string().contains("Door"), "{err}");
    assert!(door.apply_state(other.as_ref(), &mask).is_err());
}
