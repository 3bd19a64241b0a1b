
// ---- appended by run.sh for the "serde + bitcode, used" crate: encodes and decodes
// every type once through postcard (serde) and bitcode, so the code behind both derives
// is instantiated (a replicated type's code is, by its registration).

/// Encodes and decodes `value` through postcard (serde) and bitcode.
pub fn round_trip<T>(value: &T) -> Option<(T, T)>
where
    T: Serialize + for<'de> Deserialize<'de> + bitcode::Encode + for<'a> bitcode::Decode<'a>,
{
    let bytes = postcard::to_allocvec(value).ok()?;
    let from_serde = postcard::from_bytes(&bytes).ok()?;
    let from_bitcode = bitcode::decode(&bitcode::encode(value)).ok()?;
    Some((from_serde, from_bitcode))
}

/// Instantiates every type's serde and bitcode code.
pub fn instantiate_all() -> usize {
    round_trip(&Player::default()).is_some() as usize
        + round_trip(&Projectile::default()).is_some() as usize
        + round_trip(&Vehicle::default()).is_some() as usize
        + round_trip(&Avatar::default()).is_some() as usize
        + round_trip(&GameState::default()).is_some() as usize
        + round_trip(&Inventory::default()).is_some() as usize
        + round_trip(&Pickup::default()).is_some() as usize
}
