//! The model every code generator reads: per member, its serializer ([`SerializerKind`]),
//! config constant, twin field and condition; the change-mask [`Slot`]s; generics.
//! Computed once from the checked [`ast`](crate::ast) so the generated pieces cannot
//! disagree. Generators depend on this module, never on each other or on `expand`.

use crate::ast::{Container, Field, Style, unraw};
use crate::check;
use crate::symbol::{BITS, MAX_LEN, QUANTIZE_KEYS, max_len_cap};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

/// How a member's serializer is chosen.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum SerializerKind {
    /// `serializer = Path`: that serializer.
    Explicit,
    /// A quantization key (`min`, `max`, `precision`, `bits`) and no serializer:
    /// `<FieldTy as NetQuantize>::Serializer`.
    Quantized,
    /// Neither: `<FieldTy as NetDefault>::Serializer` (lossless for every float type).
    Default,
}

impl SerializerKind {
    pub fn of(field: &Field) -> Self {
        if field.attrs.serializer.is_some() {
            SerializerKind::Explicit
        } else if field
            .attrs
            .config
            .iter()
            .any(|c| QUANTIZE_KEYS.iter().any(|k| c.key == k))
        {
            SerializerKind::Quantized
        } else {
            SerializerKind::Default
        }
    }
}

/// The member's serializer type, by [`SerializerKind`].
pub fn default_serializer(field: &Field) -> TokenStream {
    let ty = field.ty;
    match (SerializerKind::of(field), &field.attrs.serializer) {
        (SerializerKind::Explicit, Some(s)) => quote_spanned!(s.span()=> #s),
        (SerializerKind::Quantized, _) => {
            quote_spanned!(ty.span()=> <#ty as __rp::NetQuantize>::Serializer)
        }
        _ => quote_spanned!(ty.span()=> <#ty as __rp::NetDefault>::Serializer),
    }
}

/// One replicated (not skipped) member and how to reach its serializer and config.
pub struct Member<'a> {
    pub field: &'a Field<'a>,
    /// Position among replicated members.
    pub index: usize,
    /// The serializer type (explicit, or `<FieldTy as NetDefault>::Serializer`).
    pub ser: TokenStream,
    /// `<Serializer as NetSerializer>`, spanned at the field's type so every error about
    /// the member's serializer points there (and identical ones are reported once).
    pub s: TokenStream,
    /// An expression of the serializer's config type (a const, or an inline default).
    pub cfg: TokenStream,
    /// The field in the quantized twin.
    pub twin_field: syn::Ident,
    /// Whether its type or serializer names a generic parameter.
    pub generic: bool,
    pub kind: SerializerKind,
}

impl Member<'_> {
    /// `self.x` / `self.0` access on the game struct.
    pub fn member(&self) -> &syn::Member {
        &self.field.member
    }

    pub fn name(&self) -> String {
        self.field.display_name()
    }

    /// `__rp::Condition::X`.
    pub fn condition(&self) -> TokenStream {
        let c = match &self.field.attrs.cond {
            Some(c) => format_ident!("{}", c.name, span = c.ident.span()),
            None => format_ident!("None"),
        };
        quote!(__rp::Condition::#c)
    }

    /// `quantize(value)` through a helper bound on `Source = FieldTy`, spanned at the
    /// field's type: a serializer for another type is one error at the field.
    pub fn quantize(&self, value: TokenStream) -> TokenStream {
        let (ser, ty, cfg) = (&self.ser, self.field.ty, &self.cfg);
        quote_spanned!(ty.span()=> __rp::quantize_member::<#ser, #ty>(&#cfg, #value))
    }

    /// `dequantize(quantized)`, like [`quantize`](Self::quantize).
    pub fn dequantize(&self, quantized: TokenStream) -> TokenStream {
        let (ser, ty, cfg) = (&self.ser, self.field.ty, &self.cfg);
        quote_spanned!(ty.span()=> __rp::dequantize_member::<#ser, #ty>(&#cfg, #quantized))
    }

    /// `func::<Serializer, FieldTy>(&config, rest...)` for the `member_ops` functions that
    /// read the game value, spanned like [`quantize`](Self::quantize).
    pub fn poll(
        &self,
        func: TokenStream,
        rest: impl FnOnce(TokenStream) -> TokenStream,
    ) -> TokenStream {
        let (ser, ty, cfg) = (&self.ser, self.field.ty, &self.cfg);
        let args = rest(quote!(&#cfg));
        quote_spanned!(ty.span()=> #func::<#ser, #ty>(#args))
    }

    pub fn init(&self) -> bool {
        self.field.attrs.init.is_some()
    }
}

/// A built-in serializer the derive recognises by name (the last segment of
/// `serializer = ...`) and whose config it can check at compile time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Known {
    /// An integer serializer of this width (`IntConfig`).
    Int(u32, &'static str),
    /// `RangedF32Serializer` (`true`) or `RangedF64Serializer` (`FloatRangeConfig`).
    RangedFloat(bool),
    /// `Vec2Serializer`.. (`VectorConfig`) or `QuatSerializer` (`QuatConfig`).
    Checked,
}

fn last_ident(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => {
            let seg = p.path.segments.last()?;
            seg.arguments.is_none().then(|| unraw(&seg.ident))
        }
        syn::Type::Group(g) => last_ident(&g.elem),
        syn::Type::Paren(p) => last_ident(&p.elem),
        _ => None,
    }
}

/// What the derive knows of a member's serializer config: an explicit built-in
/// serializer by name, or the quantizing serializer of `f32` / `f64`.
fn known_serializer(field: &Field) -> Option<Known> {
    match SerializerKind::of(field) {
        SerializerKind::Explicit => {
            let name = last_ident(field.attrs.serializer.as_ref()?)?;
            Some(match name.as_str() {
                "U8Serializer" => Known::Int(8, "u8"),
                "I8Serializer" => Known::Int(8, "i8"),
                "U16Serializer" => Known::Int(16, "u16"),
                "I16Serializer" => Known::Int(16, "i16"),
                "U32Serializer" => Known::Int(32, "u32"),
                "I32Serializer" => Known::Int(32, "i32"),
                "U64Serializer" => Known::Int(64, "u64"),
                "I64Serializer" => Known::Int(64, "i64"),
                "RangedF32Serializer" => Known::RangedFloat(true),
                "RangedF64Serializer" => Known::RangedFloat(false),
                "Vec2Serializer" | "Vec3Serializer" | "Vec4Serializer" | "QuatSerializer" => {
                    Known::Checked
                }
                _ => return None,
            })
        }
        SerializerKind::Quantized => match last_ident(field.ty)?.as_str() {
            "f32" => Some(Known::RangedFloat(true)),
            "f64" => Some(Known::RangedFloat(false)),
            _ => None,
        },
        SerializerKind::Default => None,
    }
}

/// Compile-time checks of a member's config constant, for what the derive cannot read
/// from literals (`bits = SOME_CONST`): `bits` is not 0; for a quantized member, `bits`
/// is in the type's [`NetQuantize::BITS`] range and the config passes its
/// `const_check`; a built-in serializer named with `serializer = ...` gets its
/// config's `const_check` (and integers their width); a ranged `f32`/`f64` step must
/// be representable in the float type. A failure is a compile error at the key.
fn const_checks(m: &Member, konst: &syn::Ident) -> TokenStream {
    let ty = m.field.ty;
    let bits = m.field.attrs.config.iter().find(|c| c.key == BITS);
    let quantized = m.kind == SerializerKind::Quantized;
    let known = known_serializer(m.field);
    let zero = bits.map(|b| {
        let v = &b.value;
        quote_spanned! {v.span()=>
            if (#v) == 0 {
                ::core::panic!(
                    "`bits = 0` leaves no room for a value; use at least 1, or remove `bits` for the type's full width"
                );
            }
        }
    });
    let range = bits.filter(|_| quantized).map(|b| {
        let v = &b.value;
        quote_spanned! {v.span()=>
            let (lo, hi) = <#ty as __rp::NetQuantize>::BITS;
            if (#v) < lo || (#v) > hi {
                ::core::panic!(
                    "`bits` is outside what this member's type accepts: 1..=width for integers, \
                     1..=32 for floats and vectors, 4..=20 for quaternions"
                );
            }
        }
    });
    let key_span = m
        .field
        .attrs
        .config
        .first()
        .map_or_else(|| ty.span(), |c| c.key.span());
    let width = match (known, bits) {
        (Some(Known::Int(width, int)), Some(b)) => {
            let v = &b.value;
            let msg = format!(
                "`bits` does not fit in `{int}` (at most {width}); use fewer bits, or remove `bits` for the full width"
            );
            let width = proc_macro2::Literal::u32_unsuffixed(width);
            Some(quote_spanned! {v.span()=>
                if (#v) > #width {
                    ::core::panic!(#msg);
                }
            })
        }
        _ => None,
    };
    // #[net(max_len = MAX_NAME)]: what the derive checks for literals.
    let max_len = m
        .field
        .attrs
        .config
        .iter()
        .find(|c| c.key == MAX_LEN)
        .map(|c| {
            let v = &c.value;
            let attrs = &m.field.attrs;
            let cap = (attrs.serializer.is_none() && attrs.config_base.is_none())
                .then(|| max_len_cap(ty))
                .flatten()
                .map(|(cap, what)| {
                    let msg = format!("`max_len` is above the limit of {what}: at most {cap}");
                    let cap = proc_macro2::Literal::u64_unsuffixed(cap);
                    quote_spanned! {v.span()=>
                        if (#v) > #cap {
                            ::core::panic!(#msg);
                        }
                    }
                });
            quote_spanned! {v.span()=>
                if (#v) == 0 {
                    ::core::panic!("`max_len = 0` could only ever send empty values; use at least 1");
                }
                #cap
            }
        });
    let config = (quantized || known.is_some()).then(|| {
        quote_spanned! {key_span=>
            if let ::core::result::Result::Err(e) = #konst.const_check() {
                ::core::panic!("{}", e);
            }
        }
    });
    let resolution = match known {
        Some(Known::RangedFloat(is_f32)) => Some(quote_spanned! {key_span=>
            if let ::core::result::Result::Err(e) = __rp::ranged_float_resolution(&#konst, #is_f32) {
                ::core::panic!("{}", e);
            }
        }),
        _ => None,
    };
    if zero.is_none() && config.is_none() && max_len.is_none() {
        return TokenStream::new();
    }
    // One item, checks in order, so a mistake is reported once.
    quote_spanned! {key_span=>
        const _: () = {
            #zero
            #range
            #width
            #max_len
            #config
            #resolution
        };
    }
}

/// Whether the derive emits `const` assertions on the member's config (`bits = ...`,
/// or a quantized member): its config is then a free `const`.
fn has_const_checks(field: &Field) -> bool {
    SerializerKind::of(field) == SerializerKind::Quantized
        || field.attrs.config.iter().any(|c| c.key == BITS)
        || known_serializer(field).is_some()
}

/// `for<'__net> Ty: NetDefault` (or `NetQuantize`) for a concrete member type: a
/// higher-ranked bound is not checked where it is written, so a type without the
/// serializer makes the impls inapplicable instead of one error per impl; the
/// assertion in [`Model::config_items`] reports it once, at the field.
fn member_bound(m: &Member) -> TokenStream {
    let ty = m.field.ty;
    match m.kind {
        SerializerKind::Quantized => {
            quote_spanned!(ty.span()=> for<'__net> #ty: __rp::NetQuantize)
        }
        _ => quote_spanned!(ty.span()=> for<'__net> #ty: __rp::NetDefault),
    }
}

/// A change-mask slot: one member with its own bits, or a group sharing one bit.
pub enum Slot {
    Single(usize),
    Group(String, Vec<usize>),
}

/// Everything the generated pieces share.
pub struct Model<'a> {
    pub cont: &'a Container<'a>,
    pub style: Style,
    pub fields: &'a [Field<'a>],
    pub members: Vec<Member<'a>>,
    pub slots: Vec<Slot>,
    pub twin: syn::Ident,
    /// `crate = ...` path (already absolutized).
    pub rp_root: syn::Path,
    pub is_generic: bool,
}

impl<'a> Model<'a> {
    pub fn new(cont: &'a Container<'a>, style: Style, fields: &'a [Field<'a>]) -> Self {
        let is_generic = cont
            .generics
            .params
            .iter()
            .any(|p| !matches!(p, syn::GenericParam::Lifetime(_)));
        let mut members = Vec::new();
        for field in fields.iter().filter(|f| !f.is_skipped()) {
            let index = members.len();
            let generic = check::mentions_generic(field, cont);
            let ty = field.ty;
            let ser = default_serializer(field);
            let cfg = if !generic {
                let c = format_ident!("__NET_CFG_{}", index, span = field.ty.span());
                if has_const_checks(field) {
                    quote!(#c)
                } else {
                    quote!(__NetCfgs::#c)
                }
            } else if let Some(base) = &field.attrs.config_base {
                quote!((#base))
            } else {
                quote!(<<#ser as __rp::NetSerializer>::Config as __rp::NetSerializerConfig>::DEFAULT)
            };
            let twin_field = match &field.member {
                syn::Member::Named(ident) => ident.clone(),
                syn::Member::Unnamed(i) => format_ident!("_{}", i.index),
            };
            let s = quote_spanned!(ty.span()=> <#ser as __rp::NetSerializer>);
            members.push(Member {
                field,
                index,
                s,
                ser,
                cfg,
                twin_field,
                generic,
                kind: SerializerKind::of(field),
            });
        }

        let mut slots: Vec<Slot> = Vec::new();
        for m in &members {
            match &m.field.attrs.group {
                None => slots.push(Slot::Single(m.index)),
                Some(g) => {
                    let name = g.value();
                    let existing = slots.iter_mut().find_map(|s| match s {
                        Slot::Group(n, v) if *n == name => Some(v),
                        _ => None,
                    });
                    match existing {
                        Some(v) => v.push(m.index),
                        None => slots.push(Slot::Group(name, vec![m.index])),
                    }
                }
            }
        }

        Model {
            cont,
            style,
            fields,
            members,
            slots,
            twin: format_ident!("__{}State", unraw(cont.ident)),
            rp_root: cont.attrs.krate.clone(),
            is_generic,
        }
    }

    /// The stable wire name literal (non-generic types) or base name (generic ones).
    pub fn wire_name(&self) -> String {
        match &self.cont.attrs.name {
            Some(n) => n.value(),
            None => unraw(self.cont.ident),
        }
    }

    /// `type __NetCfg_i = ...; const __NET_CFG_i: __NetCfg_i = __NetCfg_i { key: value, ..base };`
    /// for every member whose config type is concrete. A key the config does not have is
    /// reported by rustc at the key.
    ///
    /// A concrete member type without a default (or quantizing) serializer is reported
    /// once, by an assertion at the field's type: the impls' bounds on it are
    /// higher-ranked (`for<'__net> Ty: NetDefault`, not checked where they are
    /// written), the configs of members without const checks are associated consts
    /// of `__NetCfgs` under the same bounds, and the registration falls back to a
    /// placeholder when the type is incomplete (`__private::RegistrationProbe`).
    pub fn config_items(&self) -> TokenStream {
        let mut out = TokenStream::new();
        let mut held = Vec::new();
        for m in self.members.iter().filter(|m| !m.generic) {
            let ty = m.field.ty;
            match m.kind {
                SerializerKind::Default => out.extend(quote_spanned! {ty.span()=>
                    const _: () = __rp::assert_net_default::<#ty>();
                }),
                SerializerKind::Quantized => out.extend(quote_spanned! {ty.span()=>
                    const _: () = __rp::assert_net_quantize::<#ty>();
                }),
                SerializerKind::Explicit => {}
            }
        }
        for m in self.members.iter().filter(|m| !m.generic) {
            let ty_alias = format_ident!("__NetCfg_{}", m.index, span = m.field.ty.span());
            let konst = format_ident!("__NET_CFG_{}", m.index, span = m.field.ty.span());
            let ser = &m.s;
            let base = match &m.field.attrs.config_base {
                Some(base) => quote!(#base),
                None => {
                    quote_spanned!(m.field.ty.span()=> <#ty_alias as __rp::NetSerializerConfig>::DEFAULT)
                }
            };
            let value = if m.field.attrs.config.is_empty() {
                base
            } else {
                let keys = m.field.attrs.config.iter().map(|c| {
                    let key = &c.key;
                    let value = &c.value;
                    quote!(#key: #value,)
                });
                quote!(#ty_alias { #(#keys)* ..#base })
            };
            let ty = m.field.ty;
            if has_const_checks(m.field) {
                out.extend(quote_spanned! {ty.span()=>
                    type #ty_alias = #ser::Config;
                    const #konst: #ty_alias = #value;
                });
                out.extend(const_checks(m, &konst));
            } else {
                out.extend(quote_spanned! {ty.span()=>
                    type #ty_alias = #ser::Config;
                });
                held.push(quote_spanned! {ty.span()=>
                    const #konst: #ty_alias = #value;
                });
                // Only checks of key values (`max_len`), never of the held constant.
                out.extend(const_checks(m, &konst));
            }
        }
        if !held.is_empty() {
            let bounds = self
                .members
                .iter()
                .filter(|m| !m.generic && m.kind != SerializerKind::Explicit)
                .map(member_bound);
            out.extend(quote! {
                struct __NetCfgs;
                impl __NetCfgs where #(#bounds,)* {
                    #(#held)*
                }
            });
        }
        out
    }

    /// Generics for `impl` blocks, with the bounds the generated code needs.
    pub fn split(&self) -> (TokenStream, TokenStream, TokenStream) {
        let generics = self.cont.generics;
        let (impl_g, ty_g, _) = generics.split_for_impl();
        let where_clause = self.where_clause();
        (quote!(#impl_g), quote!(#ty_g), where_clause)
    }

    pub fn where_clause(&self) -> TokenStream {
        let mut preds: Vec<TokenStream> = Vec::new();
        if let Some(w) = &self.cont.generics.where_clause {
            for p in &w.predicates {
                preds.push(quote!(#p));
            }
        }
        for p in &self.cont.generics.params {
            if let syn::GenericParam::Type(t) = p {
                let ident = &t.ident;
                preds.push(quote!(#ident: ::core::marker::Send + ::core::marker::Sync + 'static));
            }
        }
        // Every member's serializer requirement, spanned at the field's type. For
        // concrete types these bounds are trivially true, or trivially false and then
        // reported at the field instead of at every generated use.
        for m in &self.members {
            let ty = m.field.ty;
            let ser = &m.ser;
            preds.push(match m.kind {
                SerializerKind::Default | SerializerKind::Quantized if !m.generic => {
                    member_bound(m)
                }
                SerializerKind::Default => quote_spanned!(ty.span()=> #ty: __rp::NetDefault),
                SerializerKind::Quantized => quote_spanned!(ty.span()=> #ty: __rp::NetQuantize),
                SerializerKind::Explicit => {
                    quote_spanned!(ty.span()=> #ser: __rp::NetSerializer<Source = #ty>)
                }
            });
        }
        if preds.is_empty() {
            TokenStream::new()
        } else {
            quote!(where #(#preds,)*)
        }
    }

    /// The twin type with its generic arguments: `DoorState` / `PairState<T>`.
    pub fn twin_ty(&self) -> TokenStream {
        let twin = &self.twin;
        let (_, ty_g, _) = self.cont.generics.split_for_impl();
        quote!(#twin #ty_g)
    }

    /// The game type with its generic arguments.
    pub fn self_ty(&self) -> TokenStream {
        let ident = self.cont.ident;
        let (_, ty_g, _) = self.cont.generics.split_for_impl();
        quote!(#ident #ty_g)
    }

    /// Type parameters (for the twin's `PhantomData`).
    pub fn type_params(&self) -> Vec<&syn::Ident> {
        self.cont
            .generics
            .params
            .iter()
            .filter_map(|p| match p {
                syn::GenericParam::Type(t) => Some(&t.ident),
                _ => None,
            })
            .collect()
    }
}
