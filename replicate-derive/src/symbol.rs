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

/// The config keys a built-in field type accepts when the member names no serializer
/// and no `config = ...` (by the type as written: `u32`, `glam::Vec3`, `Vec<T>`...),
/// with a description of its serializer. `None` for types the derive does not know.
pub fn known_config_keys(ty: &syn::Type) -> Option<(String, &'static [&'static str])> {
    const QUANTIZE: &[&str] = &["min", "max", "precision", "bits"];
    let syn::Type::Path(p) = ty else {
        return match ty {
            syn::Type::Array(_) => Some((
                "an array (`ArraySerializer`)".into(),
                &["element", "element_bits"],
            )),
            syn::Type::Group(g) => known_config_keys(&g.elem),
            syn::Type::Paren(p) => known_config_keys(&p.elem),
            _ => None,
        };
    };
    if p.qself.is_some() {
        return None;
    }
    let last = p.path.segments.last()?;
    let name = last.ident.to_string();
    let keys: &'static [&'static str] = match name.as_str() {
        "u8" | "u16" | "u32" | "u64" | "i8" | "i16" | "i32" | "i64" => &["bits"],
        "bool" => &[],
        "f32" | "f64" => QUANTIZE,
        "Vec2" | "Vec3" | "Vec4" => QUANTIZE,
        "Quat" => &["bits"],
        "String" => &["max_len"],
        "Vec" | "VecDeque" => &["max_len", "element", "element_bits"],
        "BTreeMap" | "HashMap" => &["max_len"],
        "BTreeSet" | "HashSet" => &["max_len", "element"],
        "Option" => {
            let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
                return None;
            };
            let Some(syn::GenericArgument::Type(inner)) = args.args.first() else {
                return None;
            };
            let (what, keys) = known_config_keys(inner)?;
            return Some((format!("`Option` of {what}"), keys));
        }
        _ => return None,
    };
    let what = match name.as_str() {
        "f32" | "f64" | "Vec2" | "Vec3" | "Vec4" => format!(
            "`{name}` (lossless by default; `min`, `max`, `precision` and `bits` quantize it)"
        ),
        "Quat" => "`Quat` (lossless by default; `bits` selects smallest three)".into(),
        _ => format!("`{name}`"),
    };
    Some((what, keys))
}

/// The largest `max_len` the built-in serializer of a field type accepts (by the type
/// as written), for the literal check; `None` for types the derive does not know.
pub fn max_len_cap(ty: &syn::Type) -> Option<(u64, &'static str)> {
    let syn::Type::Path(p) = ty else {
        return None;
    };
    match p.path.segments.last()?.ident.to_string().as_str() {
        "String" => Some((1 << 20, "a string (`MAX_STRING_LEN`, in bytes)")),
        "Vec" | "VecDeque" | "BTreeMap" | "HashMap" | "BTreeSet" | "HashSet" => Some((
            u16::MAX as u64,
            "a container (`MAX_CONTAINER_LEN`, in elements)",
        )),
        _ => None,
    }
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
