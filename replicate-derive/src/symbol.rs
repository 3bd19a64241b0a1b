//! Every keyword `#[net(...)]` accepts, in one place.

/// The attribute path: `#[net(...)]`.
pub const NET: &str = "net";

// Field attributes.
pub const SERIALIZER: &str = "serializer";
pub const CONFIG: &str = "config";
pub const COND: &str = "cond";
pub const INIT: &str = "init";
pub const SKIP: &str = "skip";
pub const NOTIFY: &str = "notify";
pub const GROUP: &str = "group";

// Container attributes.
pub const CRATE: &str = "crate";
pub const NAME: &str = "name";
pub const DELTA: &str = "delta";
pub const REGISTER: &str = "register";

/// Config keys that may be written directly on a field (`#[net(bits = 7)]`). Each becomes
/// a field of the chosen serializer's config struct, so rustc reports a key the config
/// does not have. Other config fields go through `config = CONST`.
pub const CONFIG_KEYS: &[&str] = &[
    "bits",
    "min",
    "max",
    "precision",
    "max_len",
    "max_count",
    "scale",
    "element",
    "element_bits",
];

/// The keys that ask for quantization: a member with any of them (and no serializer)
/// gets `<T as NetQuantize>::Serializer` instead of its lossless `NetDefault`.
pub const QUANTIZE_KEYS: &[&str] = &["min", "max", "precision", "bits"];

pub const BITS: &str = "bits";
pub const MIN: &str = "min";
pub const MAX: &str = "max";
pub const PRECISION: &str = "precision";
pub const MAX_LEN: &str = "max_len";

/// Every field attribute (for "did you mean" hints).
pub const FIELD_ATTRS: &[&str] = &[
    SERIALIZER,
    CONFIG,
    COND,
    INIT,
    SKIP,
    NOTIFY,
    GROUP,
    "bits",
    "min",
    "max",
    "precision",
    "max_len",
    "max_count",
    "scale",
    "element",
    "element_bits",
];

/// Every container attribute (for "did you mean" hints).
pub const CONTAINER_ATTRS: &[&str] = &[CRATE, NAME, DELTA, REGISTER];

/// The conditions `cond = ...` accepts, spelled as `replicate::Condition`'s variants.
pub const CONDITIONS: &[&str] = &[
    "None",
    "InitialOnly",
    "OwnerOnly",
    "SkipOwner",
    "SimulatedOnly",
    "AutonomousOnly",
    "InitialOrOwner",
    "Custom",
    "Never",
];

/// Primitive integer types whose width the derive knows, for `bits` checks.
pub fn int_width(name: &str) -> Option<u32> {
    Some(match name {
        "u8" | "i8" => 8,
        "u16" | "i16" => 16,
        "u32" | "i32" => 32,
        "u64" | "i64" => 64,
        _ => return None,
    })
}

/// The closest candidate to `word` (for "did you mean" hints), if any is close enough.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (levenshtein(&lower, &c.to_ascii_lowercase()), *c))
        .filter(|(d, c)| *d <= (c.len().max(3) / 3).max(1) + 1)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
