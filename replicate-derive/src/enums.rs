//! `#[derive(NetEnum)]`: the seed's polymorphic serializer in Rust form. An enum used as
//! a member gets a quantized twin enum and a serializer that writes the variant index in
//! the fewest bits (`ceil(log2(variants))`, zero for a single variant), then that
//! variant's fields in order. A delta against a baseline of the same variant writes
//! `[1]` and each field's delta; a variant change writes `[0]` and the whole new variant.

use crate::ast::{Container, Field, Style, Variant, unraw};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

struct EnumField<'a> {
    field: &'a Field<'a>,
    ser: TokenStream,
    cfg: syn::Ident,
    bind: syn::Ident,
}

pub fn expand(cont: &Container, variants: &[Variant]) -> TokenStream {
    let ident = cont.ident;
    let vis = &cont.original.vis;
    let name = match &cont.attrs.name {
        Some(n) => n.value(),
        None => unraw(ident),
    };
    let qty = format_ident!("__{}Quantized", unraw(ident));
    let ser_ty = format_ident!("__{}NetSerializer", unraw(ident));
    let count = variants.len() as u64;
    let index_bits: u32 = if count <= 1 {
        0
    } else {
        64 - (count - 1).leading_zeros()
    };

    let mut configs = TokenStream::new();
    let vf: Vec<Vec<EnumField>> = variants
        .iter()
        .enumerate()
        .map(|(vi, v)| {
            v.fields
                .iter()
                .enumerate()
                .map(|(fi, field)| {
                    let ser = crate::model::default_serializer(field);
                    let alias = format_ident!("__NetCfg_{}_{}", vi, fi);
                    let cfg = format_ident!("__NET_CFG_{}_{}", vi, fi);
                    let base = match &field.attrs.config_base {
                        Some(b) => quote!(#b),
                        None => quote!(<#alias as __rp::NetSerializerConfig>::DEFAULT),
                    };
                    let value = if field.attrs.config.is_empty() {
                        base
                    } else {
                        let keys = field.attrs.config.iter().map(|c| {
                            let (k, v) = (&c.key, &c.value);
                            quote!(#k: #v,)
                        });
                        quote!(#alias { #(#keys)* ..#base })
                    };
                    configs.extend(quote! {
                        type #alias = <#ser as __rp::NetSerializer>::Config;
                        const #cfg: #alias = #value;
                    });
                    EnumField {
                        field,
                        ser,
                        cfg,
                        bind: format_ident!("__f{}", fi),
                    }
                })
                .collect()
        })
        .collect();

    // Patterns binding every field of variant `v` of type `path` to `prefix{i}`.
    let pattern = |path: TokenStream, v: &Variant, fields: &[EnumField], prefix: &str| {
        let vid = v.ident;
        let binds: Vec<_> = fields
            .iter()
            .map(|f| format_ident!("{}{}", prefix, f.bind))
            .collect();
        match v.style {
            Style::Unit => quote!(#path::#vid),
            Style::Tuple => quote!(#path::#vid(#(#binds),*)),
            Style::Named => {
                let names = fields.iter().map(|f| &f.field.member);
                quote!(#path::#vid { #(#names: #binds),* })
            }
        }
    };
    // A constructor of variant `v` of type `path` from per-field expressions.
    let construct = |path: TokenStream, v: &Variant, values: Vec<TokenStream>| {
        let vid = v.ident;
        match v.style {
            Style::Unit => quote!(#path::#vid),
            Style::Tuple => quote!(#path::#vid(#(#values),*)),
            Style::Named => {
                let names = v.fields.iter().map(|f| &f.member);
                quote!(#path::#vid { #(#names: #values),* })
            }
        }
    };

    let mut q_variants = Vec::new();
    let mut quantize = Vec::new();
    let mut dequantize = Vec::new();
    let mut serialize = Vec::new();
    let mut deserialize = Vec::new();
    let mut delta_same = Vec::new();
    let mut delta_read = Vec::new();
    let mut validate = Vec::new();
    let mut refs = Vec::new();
    let mut clone = Vec::new();
    let mut eq = Vec::new();
    let mut debug = Vec::new();
    let mut max_bits = Vec::new();
    let mut fingerprint = Vec::new();
    let mut validate_config = Vec::new();
    let mut dynamic = Vec::new();
    let mut references = Vec::new();

    for (vi, (v, fields)) in variants.iter().zip(&vf).enumerate() {
        let vid = v.ident;
        let index = vi as u64;
        let qfield_tys = fields.iter().map(|f| {
            let ser = &f.ser;
            quote!(<#ser as __rp::NetSerializer>::Quantized)
        });
        q_variants.push(match v.style {
            Style::Unit => quote!(#vid),
            Style::Tuple => quote!(#vid(#(#qfield_tys),*)),
            Style::Named => {
                let names = fields.iter().map(|f| &f.field.member);
                quote!(#vid { #(#names: #qfield_tys),* })
            }
        });
        let src = pattern(quote!(#ident), v, fields, "");
        let q = pattern(quote!(#qty), v, fields, "");
        let q_a = pattern(quote!(#qty), v, fields, "a");
        let q_b = pattern(quote!(#qty), v, fields, "b");

        let per =
            |f: &EnumField,
             body: &dyn Fn(&TokenStream, &syn::Ident, &syn::Ident) -> TokenStream| {
                body(&f.ser, &f.cfg, &f.bind)
            };
        let map_fields = |body: &dyn Fn(&TokenStream, &syn::Ident, &syn::Ident) -> TokenStream| {
            fields.iter().map(|f| per(f, body)).collect::<Vec<_>>()
        };

        quantize.push({
            let values =
                map_fields(&|s, c, b| quote!(<#s as __rp::NetSerializer>::quantize(&#c, #b)));
            let built = construct(quote!(#qty), v, values);
            quote!(#src => #built,)
        });
        dequantize.push({
            let values =
                map_fields(&|s, c, b| quote!(<#s as __rp::NetSerializer>::dequantize(&#c, #b)));
            let built = construct(quote!(#ident), v, values);
            quote!(#q => #built,)
        });
        serialize.push({
            let writes = map_fields(
                &|s, c, b| quote!(<#s as __rp::NetSerializer>::serialize(&#c, #b, writer);),
            );
            quote!(#q => { writer.write_bits(#index, #index_bits); #(#writes)* })
        });
        deserialize.push({
            let values = map_fields(
                &|s, c, _| quote!(<#s as __rp::NetSerializer>::deserialize(&#c, reader)?),
            );
            let built = construct(quote!(#qty), v, values);
            quote!(#index => ::core::result::Result::Ok(#built),)
        });
        delta_same.push({
            let writes = fields.iter().map(|f| {
                let (s, c) = (&f.ser, &f.cfg);
                let a = format_ident!("a{}", f.bind);
                let b = format_ident!("b{}", f.bind);
                quote!(<#s as __rp::NetSerializer>::serialize_delta(&#c, #a, #b, writer);)
            });
            quote!((#q_a, #q_b) => { writer.write_bool(true); #(#writes)* })
        });
        delta_read.push({
            let values = fields.iter().map(|f| {
                let (s, c) = (&f.ser, &f.cfg);
                let b = format_ident!("b{}", f.bind);
                quote!(<#s as __rp::NetSerializer>::deserialize_delta(&#c, #b, reader)?)
            });
            let built = construct(quote!(#qty), v, values.collect());
            quote!(#q_b => ::core::result::Result::Ok(#built),)
        });
        validate.push({
            let checks =
                map_fields(&|s, c, b| quote!(<#s as __rp::NetSerializer>::validate(&#c, #b)?;));
            quote!(#q => { #(#checks)* })
        });
        refs.push({
            let calls = map_fields(
                &|s, c, b| quote!(<#s as __rp::NetSerializer>::collect_references(&#c, #b, out);),
            );
            quote!(#q => { #(#calls)* })
        });
        clone.push({
            let values = map_fields(&|_, _, b| quote!(::core::clone::Clone::clone(#b)));
            let built = construct(quote!(#qty), v, values);
            quote!(#q => #built,)
        });
        eq.push({
            let cmps = fields.iter().map(|f| {
                let a = format_ident!("a{}", f.bind);
                let b = format_ident!("b{}", f.bind);
                quote!(&& ::core::cmp::PartialEq::eq(#a, #b))
            });
            quote!((#q_a, #q_b) => true #(#cmps)*,)
        });
        debug.push({
            let vname = unraw(vid);
            let entries = fields.iter().map(|f| {
                let b = &f.bind;
                let n = f.field.display_name();
                quote!(d.field(#n, #b);)
            });
            quote!(#q => { let mut d = f.debug_struct(#vname); #(#entries)* d.finish() })
        });
        max_bits.push({
            let parts = fields.iter().map(|f| {
                let (s, c) = (&f.ser, &f.cfg);
                quote! {
                    v = match (v, <#s as __rp::NetSerializer>::max_bits(&#c)) {
                        (::core::option::Option::Some(a), ::core::option::Option::Some(b)) => a.checked_add(b),
                        _ => ::core::option::Option::None,
                    };
                }
            });
            quote! {{
                let mut v: ::core::option::Option<u32> = ::core::option::Option::Some(0);
                #(#parts)*
                best = match (best, v) {
                    (::core::option::Option::Some(a), ::core::option::Option::Some(b)) => ::core::option::Option::Some(if a > b { a } else { b }),
                    _ => ::core::option::Option::None,
                };
            }}
        });
        fingerprint.push({
            let vname = unraw(vid);
            let nfields = fields.len() as u32;
            let parts = fields.iter().map(|f| {
                let (s, c) = (&f.ser, &f.cfg);
                let n = f.field.display_name();
                quote!(hasher.write_str(#n); <#s as __rp::NetSerializer>::fingerprint(&#c, hasher);)
            });
            quote!(hasher.write_str(#vname); hasher.write_u32(#nfields); #(#parts)*)
        });
        for f in fields {
            let (s, c) = (&f.ser, &f.cfg);
            let prefix = format!(
                "variant `{}` field `{}`: ",
                unraw(vid),
                f.field.display_name()
            );
            validate_config.push(quote! {
                if let ::core::result::Result::Err(e) = <#s as __rp::NetSerializer>::validate_config(&#c) {
                    return ::core::result::Result::Err(__rp::prefix_error(#prefix, e));
                }
            });
            dynamic.push(quote!(|| <#s as __rp::NetSerializer>::HAS_DYNAMIC_STATE));
            references.push(quote!(|| <#s as __rp::NetSerializer>::HAS_OBJECT_REFERENCES));
        }
    }

    let (Some(first), Some(first_fields)) = (variants.first(), vf.first()) else {
        // check() rejects enums without variants.
        return TokenStream::new();
    };
    let default_values = first_fields
        .iter()
        .map(|_| quote!(::core::default::Default::default()))
        .collect();
    let default = construct(quote!(#qty), first, default_values);
    let count_u32 = count as u32;
    let doc_q = format!(
        "The quantized form of [`{}`], generated by `#[derive(NetEnum)]`.",
        unraw(ident)
    );
    let doc_s = format!(
        "The serializer of [`{}`], generated by `#[derive(NetEnum)]`.",
        unraw(ident)
    );

    quote! {
        #configs

        #[doc = #doc_q]
        #vis enum #qty {
            #(#q_variants,)*
        }

        impl ::core::clone::Clone for #qty {
            fn clone(&self) -> Self {
                match self { #(#clone)* }
            }
        }

        impl ::core::cmp::PartialEq for #qty {
            fn eq(&self, other: &Self) -> bool {
                match (self, other) {
                    #(#eq)*
                    _ => false,
                }
            }
        }

        impl ::core::default::Default for #qty {
            fn default() -> Self {
                #default
            }
        }

        impl ::core::fmt::Debug for #qty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                match self { #(#debug)* }
            }
        }

        #[doc = #doc_s]
        #vis struct #ser_ty;

        impl __rp::NetSerializer for #ser_ty {
            type Source = #ident;
            type Quantized = #qty;
            type Config = __rp::NoConfig;
            const NAME: &'static str = #name;
            const HAS_DYNAMIC_STATE: bool = false #(#dynamic)*;
            const HAS_OBJECT_REFERENCES: bool = false #(#references)*;

            fn quantize(_: &__rp::NoConfig, source: &#ident) -> #qty {
                match source { #(#quantize)* }
            }

            fn dequantize(_: &__rp::NoConfig, quantized: &#qty) -> #ident {
                match quantized { #(#dequantize)* }
            }

            fn serialize(_: &__rp::NoConfig, quantized: &#qty, writer: &mut __rp::BitWriter) {
                match quantized { #(#serialize)* }
            }

            fn deserialize(_: &__rp::NoConfig, reader: &mut __rp::BitReader) -> __rp::Result<#qty> {
                let index = reader.read_bits(#index_bits);
                reader.check()?;
                match index {
                    #(#deserialize)*
                    _ => ::core::result::Result::Err(__rp::SerializeError::invalid(#name, "variant index out of range")),
                }
            }

            fn serialize_delta(config: &__rp::NoConfig, quantized: &#qty, prev: &#qty, writer: &mut __rp::BitWriter) {
                match (quantized, prev) {
                    #(#delta_same)*
                    _ => {
                        writer.write_bool(false);
                        <Self as __rp::NetSerializer>::serialize(config, quantized, writer);
                    }
                }
            }

            fn deserialize_delta(config: &__rp::NoConfig, prev: &#qty, reader: &mut __rp::BitReader) -> __rp::Result<#qty> {
                let same_variant = reader.read_bool();
                reader.check()?;
                if !same_variant {
                    return <Self as __rp::NetSerializer>::deserialize(config, reader);
                }
                match prev { #(#delta_read)* }
            }

            fn validate(_: &__rp::NoConfig, quantized: &#qty) -> __rp::Result<()> {
                match quantized { #(#validate)* }
                ::core::result::Result::Ok(())
            }

            fn validate_config(_: &__rp::NoConfig) -> ::core::result::Result<(), ::std::string::String> {
                #(#validate_config)*
                ::core::result::Result::Ok(())
            }

            fn max_bits(_: &__rp::NoConfig) -> ::core::option::Option<u32> {
                let mut best: ::core::option::Option<u32> = ::core::option::Option::Some(0);
                #(#max_bits)*
                match best {
                    ::core::option::Option::Some(b) => b.checked_add(#index_bits),
                    ::core::option::Option::None => ::core::option::Option::None,
                }
            }

            fn collect_references(_: &__rp::NoConfig, quantized: &#qty, out: &mut ::std::vec::Vec<__rp::NetRefHandle>) {
                match quantized { #(#refs)* }
            }

            fn fingerprint(_: &__rp::NoConfig, hasher: &mut __rp::StableHasher) {
                hasher.write_str(<Self as __rp::NetSerializer>::NAME);
                hasher.write_u32(<Self as __rp::NetSerializer>::VERSION);
                hasher.write_u32(#count_u32);
                #(#fingerprint)*
            }
        }

        impl __rp::NetDefault for #ident {
            type Serializer = #ser_ty;
        }
    }
}

/// A fieldless enum with a `#[default]` variant (so it is `Default`): implements the
/// serializer library's `NetEnum` and uses its `EnumSerializer` (the same index
/// encoding as [`expand`] writes).
pub fn expand_net_enum(cont: &Container, variants: &[Variant]) -> TokenStream {
    let ident = cont.ident;
    let count = variants.len() as u32;
    let to_index = variants.iter().enumerate().map(|(i, v)| {
        let vid = v.ident;
        let i = i as u32;
        quote!(#ident::#vid => #i,)
    });
    let from_index = variants.iter().enumerate().map(|(i, v)| {
        let vid = v.ident;
        let i = i as u32;
        quote!(#i => ::core::option::Option::Some(#ident::#vid),)
    });
    quote! {
        impl __rp::NetEnum for #ident {
            const VARIANT_COUNT: u32 = #count;
            fn to_index(&self) -> u32 {
                match self { #(#to_index)* }
            }
            fn from_index(index: u32) -> ::core::option::Option<Self> {
                match index {
                    #(#from_index)*
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl __rp::NetDefault for #ident {
            type Serializer = __rp::EnumSerializer<#ident>;
        }
    }
}

/// Whether the enum is fieldless and marks a `#[default]` variant.
pub fn is_default_fieldless(variants: &[Variant]) -> bool {
    variants.iter().all(|v| v.fields.is_empty()) && variants.iter().any(|v| v.has_default)
}
