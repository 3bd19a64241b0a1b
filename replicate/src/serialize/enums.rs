//! Fieldless enums: the [`NetEnum`] trait (variant ⇄ index) and [`EnumSerializer`],
//! which sends the index in the fewest bits that hold every variant (Iris's
//! `EnumNetSerializer`, "bit count configured automatically").
//!
//! This module owns the enum index encoding only. `#[derive(Replicated)]` implements
//! [`NetEnum`] (and `NetDefault`) for fieldless enums; [`net_enum!`](crate::net_enum)
//! does the same for hand-written code.
//!
//! # Encoding
//!
//! The variant's index (its position in declaration order, `0..VARIANT_COUNT`, **not**
//! its discriminant) in `bits_for_count(VARIANT_COUNT)` bits: 2 variants → 1 bit,
//! 3–4 → 2 bits, 5–8 → 3 bits, 1 variant → 0 bits. An index `>= VARIANT_COUNT` on read
//! is an [`SerializeError::InvalidValue`], never a panic.
//!
//! Delta: for enums of 1 bit or less the value itself (never more than the full
//! encoding); otherwise the default `[0]` unchanged / `[1][index]`.
//!
//! # `NetDefault`
//!
//! There is **no** blanket `impl<E: NetEnum> NetDefault for E`: it would turn every
//! "`Foo` has no default net serializer" error into a confusing "`Foo: NetEnum` is not
//! satisfied", and would collide with generic impls on `#[fundamental]` types
//! (`Box<T>`, `&T`). Instead each enum gets its own
//! `impl NetDefault for MyEnum { type Serializer = EnumSerializer<MyEnum>; }`, emitted by
//! the derive and by [`net_enum!`](crate::net_enum).

use std::marker::PhantomData;

use super::{NetSerializer, NoConfig, Result, SerializeError, StableHasher};
use crate::bits::{BitReader, BitWriter, bits_for_count};

/// A fieldless enum that maps its variants to the indices `0..VARIANT_COUNT`.
///
/// Contract (checked by [`EnumSerializer`]'s tests for the macro-generated impls):
/// - `to_index` returns the variant's position in declaration order, always
///   `< VARIANT_COUNT`;
/// - `from_index(i)` returns `Some(variant)` exactly for `i < VARIANT_COUNT`, and
///   `from_index(v.to_index()) == Some(v)`;
/// - `Default` gives the variant a fresh quantized state stands for (usually the first;
///   mark another with `#[default]`).
///
/// The index is the ordinal, not the discriminant: `enum E { A = 10, B = 20 }` has
/// indices 0 and 1. Adding or reordering variants changes the wire format (and the
/// protocol id, through `VARIANT_COUNT` when it changes).
///
/// Implement it with [`net_enum!`](crate::net_enum), with `#[derive(Replicated)]` on a
/// fieldless enum, or by hand:
///
/// ```
/// use replicate::serialize::{EnumSerializer, NetDefault, NetEnum};
///
/// #[derive(Debug, Clone, Copy, PartialEq, Default)]
/// enum Stance { #[default] Standing, Crouching, Prone }
///
/// impl NetEnum for Stance {
///     const VARIANT_COUNT: u32 = 3;
///     fn to_index(&self) -> u32 {
///         match self { Stance::Standing => 0, Stance::Crouching => 1, Stance::Prone => 2 }
///     }
///     fn from_index(index: u32) -> Option<Self> {
///         match index {
///             0 => Some(Stance::Standing),
///             1 => Some(Stance::Crouching),
///             2 => Some(Stance::Prone),
///             _ => None,
///         }
///     }
/// }
///
/// impl NetDefault for Stance {
///     type Serializer = EnumSerializer<Stance>;
/// }
///
/// let (bits, v) = replicate::serialize::roundtrip::<EnumSerializer<Stance>>(
///     &replicate::serialize::NoConfig, &Stance::Prone).unwrap();
/// assert_eq!((bits, v), (2, Stance::Prone));
/// ```
pub trait NetEnum: Default {
    /// The number of variants.
    const VARIANT_COUNT: u32;

    /// The variant's position in declaration order (`0..VARIANT_COUNT`).
    fn to_index(&self) -> u32;

    /// The variant at `index`, or `None` when `index >= VARIANT_COUNT`.
    fn from_index(index: u32) -> Option<Self>;
}

/// Sends a [`NetEnum`] as its index in `bits_for_count(VARIANT_COUNT)` bits; see the
/// [module docs](self). The quantized value is the index (`u32`).
///
/// ```
/// use replicate::serialize::*;
/// replicate::net_enum! {
///     #[derive(Debug, Clone, Copy, PartialEq, Default)]
///     pub enum Weapon { #[default] Knife, Pistol, Rifle, Shotgun, Sniper }
/// }
/// assert_eq!(EnumSerializer::<Weapon>::bits(), 3);
/// assert_eq!(roundtrip::<EnumSerializer<Weapon>>(&NoConfig, &Weapon::Sniper).unwrap(), (3, Weapon::Sniper));
/// ```
pub struct EnumSerializer<E>(PhantomData<fn() -> E>);

impl<E> std::fmt::Debug for EnumSerializer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnumSerializer")
    }
}

impl<E: NetEnum> EnumSerializer<E> {
    /// Bits one value takes on the wire: `bits_for_count(VARIANT_COUNT)`.
    pub const fn bits() -> u32 {
        bits_for_count(E::VARIANT_COUNT as u64)
    }

    fn check(index: u32) -> Result<u32> {
        if index < E::VARIANT_COUNT {
            Ok(index)
        } else {
            Err(SerializeError::invalid(
                "enum",
                "variant index out of range for this enum",
            ))
        }
    }
}

impl<E: NetEnum + 'static> NetSerializer for EnumSerializer<E> {
    type Source = E;
    type Quantized = u32;
    type Config = NoConfig;
    const NAME: &'static str = "enum";

    /// The variant's index. A `to_index` that breaks the contract (returns an index
    /// `>= VARIANT_COUNT`) is replaced by the default variant's index (or 0), so the
    /// quantized state is always sendable.
    fn quantize(_: &NoConfig, source: &E) -> u32 {
        let index = source.to_index();
        if index < E::VARIANT_COUNT {
            return index;
        }
        let fallback = E::default().to_index();
        if fallback < E::VARIANT_COUNT {
            fallback
        } else {
            0
        }
    }

    /// The variant at `q`, or `E::default()` for an out-of-range index (which
    /// `deserialize` never produces).
    fn dequantize(_: &NoConfig, q: &u32) -> E {
        E::from_index(*q).unwrap_or_default()
    }

    fn serialize(_: &NoConfig, q: &u32, w: &mut BitWriter) {
        w.write_bits(*q as u64, Self::bits());
    }

    fn deserialize(_: &NoConfig, r: &mut BitReader) -> Result<u32> {
        let index = r.read_bits(Self::bits());
        r.check()?;
        // Bits are at most 32, so the read value fits in u32.
        Self::check(index as u32)
    }

    fn serialize_delta(c: &NoConfig, q: &u32, prev: &u32, w: &mut BitWriter) {
        // A 0- or 1-bit enum is cheaper sent whole than behind a "changed" flag.
        if Self::bits() <= 1 || w.write_bool(q != prev) {
            Self::serialize(c, q, w);
        }
    }

    fn deserialize_delta(c: &NoConfig, prev: &u32, r: &mut BitReader) -> Result<u32> {
        if Self::bits() <= 1 || r.read_bool() {
            Self::deserialize(c, r)
        } else {
            r.check()?;
            Ok(*prev)
        }
    }

    fn validate(_: &NoConfig, q: &u32) -> Result<()> {
        Self::check(*q).map(|_| ())
    }

    fn max_bits(_: &NoConfig) -> Option<u32> {
        Some(Self::bits())
    }

    /// Name, version and `VARIANT_COUNT`, so adding a variant changes the protocol id.
    fn fingerprint(config: &NoConfig, hasher: &mut StableHasher) {
        hasher.write_str(Self::NAME);
        hasher.write_u32(Self::VERSION);
        hasher.write_u32(E::VARIANT_COUNT);
        let _ = config;
    }
}

/// Declares a fieldless enum and implements [`NetEnum`](crate::serialize::NetEnum) and
/// [`NetDefault`](crate::serialize::NetDefault) (with
/// [`EnumSerializer`](crate::serialize::EnumSerializer)) for it.
///
/// Variants take their index from declaration order. Explicit discriminants
/// (`A = 5`) and variants with fields are not accepted; write the impl by hand for those
/// (see [`NetEnum`](crate::serialize::NetEnum)). The enum must implement `Default`
/// (derive it and mark a variant `#[default]`).
///
/// ```
/// replicate::net_enum! {
///     /// Movement mode.
///     #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
///     pub enum MoveMode { #[default] Walking, Falling, Swimming }
/// }
/// use replicate::serialize::NetEnum;
/// assert_eq!(MoveMode::VARIANT_COUNT, 3);
/// assert_eq!(MoveMode::Swimming.to_index(), 2);
/// assert_eq!(MoveMode::from_index(1), Some(MoveMode::Falling));
/// assert_eq!(MoveMode::from_index(3), None);
/// ```
#[macro_export]
macro_rules! net_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),*
        }

        impl $crate::serialize::NetEnum for $name {
            const VARIANT_COUNT: u32 = [$(::core::stringify!($variant)),*].len() as u32;

            fn to_index(&self) -> u32 {
                match self {
                    $( Self::$variant => Self::$variant as u32, )*
                }
            }

            fn from_index(index: u32) -> ::core::option::Option<Self> {
                $(
                    if index == Self::$variant as u32 {
                        return ::core::option::Option::Some(Self::$variant);
                    }
                )*
                ::core::option::Option::None
            }
        }

        impl $crate::serialize::NetDefault for $name {
            type Serializer = $crate::serialize::EnumSerializer<$name>;
        }
    };
}

#[cfg(test)]
mod tests {
    use super::super::roundtrip;
    use super::*;

    crate::net_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Default)]
        enum Two { #[default] A, B }
    }
    crate::net_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Default)]
        enum Five { A, B, #[default] C, D, E, }
    }
    crate::net_enum! {
        #[derive(Debug, Clone, Copy, PartialEq, Default)]
        enum One { #[default] Only }
    }

    /// Breaks the contract on purpose: `to_index` returns an out-of-range index.
    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    struct Liar;
    impl NetEnum for Liar {
        const VARIANT_COUNT: u32 = 3;
        fn to_index(&self) -> u32 {
            7
        }
        fn from_index(_: u32) -> Option<Self> {
            None
        }
    }

    #[test]
    fn bit_counts_follow_variant_count() {
        assert_eq!(EnumSerializer::<One>::bits(), 0);
        assert_eq!(EnumSerializer::<Two>::bits(), 1);
        assert_eq!(EnumSerializer::<Five>::bits(), 3);
        assert_eq!(
            roundtrip::<EnumSerializer<One>>(&NoConfig, &One::Only).unwrap(),
            (0, One::Only)
        );
        assert_eq!(
            roundtrip::<EnumSerializer<Two>>(&NoConfig, &Two::B).unwrap(),
            (1, Two::B)
        );
        assert_eq!(
            roundtrip::<EnumSerializer<Five>>(&NoConfig, &Five::E).unwrap(),
            (3, Five::E)
        );
    }

    #[test]
    fn macro_impl_keeps_the_contract() {
        assert_eq!(Five::VARIANT_COUNT, 5);
        for i in 0..8 {
            match Five::from_index(i) {
                Some(v) => {
                    assert!(i < 5);
                    assert_eq!(v.to_index(), i);
                }
                None => assert!(i >= 5),
            }
        }
        assert_eq!(Five::default().to_index(), 2);
    }

    #[test]
    fn out_of_range_index_is_an_error() {
        for index in 5..8u64 {
            let mut w = BitWriter::with_capacity_bits(8);
            w.write_bits(index, 3);
            let bytes = w.finish().unwrap();
            let err = EnumSerializer::<Five>::deserialize(&NoConfig, &mut BitReader::new(&bytes));
            assert!(
                matches!(err, Err(SerializeError::InvalidValue { .. })),
                "{index}"
            );
            let mut w = BitWriter::with_capacity_bits(8);
            w.write_bool(true);
            w.write_bits(index, 3);
            let bytes = w.finish().unwrap();
            assert!(
                EnumSerializer::<Five>::deserialize_delta(
                    &NoConfig,
                    &0,
                    &mut BitReader::new(&bytes)
                )
                .is_err()
            );
        }
        assert!(EnumSerializer::<Five>::validate(&NoConfig, &5).is_err());
        assert!(EnumSerializer::<Five>::validate(&NoConfig, &4).is_ok());
        assert!(EnumSerializer::<Five>::deserialize(&NoConfig, &mut BitReader::new(&[])).is_err());
    }

    #[test]
    fn contract_breaking_to_index_is_contained() {
        assert_eq!(EnumSerializer::<Liar>::quantize(&NoConfig, &Liar), 0);
        assert_eq!(EnumSerializer::<Five>::dequantize(&NoConfig, &99), Five::C);
    }

    #[test]
    fn delta_costs() {
        let cost = |q: u32, prev: u32| {
            let mut w = BitWriter::with_capacity_bits(16);
            EnumSerializer::<Five>::serialize_delta(&NoConfig, &q, &prev, &mut w);
            let bytes = w.finish().unwrap();
            let got = EnumSerializer::<Five>::deserialize_delta(
                &NoConfig,
                &prev,
                &mut BitReader::new(&bytes),
            )
            .unwrap();
            assert_eq!(got, q);
            w.position()
        };
        assert_eq!(cost(3, 3), 1);
        assert_eq!(cost(4, 3), 4);
        let mut w = BitWriter::with_capacity_bits(16);
        EnumSerializer::<Two>::serialize_delta(&NoConfig, &1, &1, &mut w);
        assert_eq!(w.position(), 1);
    }

    #[test]
    fn variant_count_is_part_of_the_fingerprint() {
        let fp = |f: fn(&NoConfig, &mut StableHasher)| {
            let mut h = StableHasher::new();
            f(&NoConfig, &mut h);
            h.finish()
        };
        assert_ne!(
            fp(EnumSerializer::<Two>::fingerprint),
            fp(EnumSerializer::<Five>::fingerprint)
        );
    }
}
