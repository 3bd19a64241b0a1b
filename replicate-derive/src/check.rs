//! Validation of the whole model before any code is generated: shape of the input,
//! combinations of attributes, literal config values and groups. Every problem is
//! recorded with the span of the offending token; nothing stops at the first one.

use crate::ast::{Container, Data, Field};
use crate::ctxt::Ctxt;
use crate::symbol::*;
use quote::ToTokens;
use std::collections::BTreeMap;

/// Which derive is checking.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Derive {
    Replicated,
    NetEnum,
}

pub fn check(cx: &Ctxt, cont: &Container, derive: Derive) {
    check_shape(cx, cont, derive);
    check_generics(cx, cont);
    match (&cont.data, derive) {
        (Data::Struct(_, fields), Derive::Replicated) => {
            for field in fields {
                check_field(cx, field, cont);
            }
            check_groups(cx, fields);
        }
        (Data::Enum(variants), _) => {
            for v in variants {
                for field in &v.fields {
                    check_enum_field(cx, field);
                    check_config_values(cx, field);
                }
            }
        }
        _ => {}
    }
}

fn check_shape(cx: &Ctxt, cont: &Container, derive: Derive) {
    match (&cont.data, derive) {
        (Data::Union(u), _) => cx.error_spanned_by(
            u.union_token,
            "unions cannot be replicated: the receiver could not know which field is live; \
             use an enum with `#[derive(NetEnum)]`",
        ),
        (Data::Enum(variants), Derive::Replicated) => {
            // A fieldless enum is accepted as a member enum (same as `NetEnum`); an enum
            // with data cannot be a top-level replicated object.
            if let Some(v) = variants.iter().find(|v| !v.fields.is_empty()) {
                cx.error_spanned_by(
                    v.ident,
                    format!(
                        "`#[derive(Replicated)]` on an enum only supports fieldless enums (member \
                         enums sent as an index), but variant `{}` has fields; derive `NetEnum` \
                         to replicate it as a member of a replicated struct",
                        v.ident
                    ),
                );
            } else {
                check_enum_container(cx, cont, variants);
            }
        }
        (Data::Struct(..), Derive::NetEnum) => {
            let token = match &cont.original.data {
                syn::Data::Struct(s) => s.struct_token.to_token_stream(),
                _ => cont.ident.to_token_stream(),
            };
            cx.error_spanned_by(
                token,
                "`#[derive(NetEnum)]` is for enums; use `#[derive(Replicated)]` on a struct",
            )
        }
        (Data::Enum(variants), Derive::NetEnum) => check_enum_container(cx, cont, variants),
        (Data::Struct(..), Derive::Replicated) => {}
    }
}

fn check_enum_container(cx: &Ctxt, cont: &Container, variants: &[crate::ast::Variant]) {
    {
        {
            if variants.is_empty() {
                cx.error_spanned_by(
                    cont.ident,
                    "an enum without variants has no value to replicate",
                );
            }
            if !cont.attrs.delta || !cont.attrs.register {
                cx.error_spanned_by(
                    cont.ident,
                    "`delta` and `register` apply to `#[derive(Replicated)]` structs only",
                );
            }
        }
    }
}

fn check_generics(cx: &Ctxt, cont: &Container) {
    let is_enum = matches!(cont.data, Data::Enum(_));
    let generic = cont
        .generics
        .params
        .iter()
        .any(|p| !matches!(p, syn::GenericParam::Lifetime(_)));
    if let (true, false, true, Some(token)) = (
        generic,
        is_enum,
        cont.attrs.register,
        &cont.attrs.register_token,
    ) {
        cx.error_spanned_by(
            token,
            format!(
                "a generic type cannot register itself: the derive does not know its type \
                 arguments; remove `register = true` and register each instantiation with \
                 `replicate::register!({}<...>);`",
                cont.ident
            ),
        );
    }
    for param in &cont.generics.params {
        match param {
            syn::GenericParam::Lifetime(l) => cx.error_spanned_by(
                &l.lifetime,
                "replicated types cannot borrow: remove the lifetime parameter",
            ),
            syn::GenericParam::Type(t) if is_enum => cx.error_spanned_by(
                &t.ident,
                "`#[derive(NetEnum)]` does not support generic enums; write the serializer by hand",
            ),
            syn::GenericParam::Const(c) if is_enum => cx.error_spanned_by(
                &c.ident,
                "`#[derive(NetEnum)]` does not support generic enums; write the serializer by hand",
            ),
            _ => {}
        }
    }
}

fn check_field(cx: &Ctxt, field: &Field, cont: &Container) {
    let a = &field.attrs;
    if a.skip.is_some() {
        for path in &a.all {
            if !path.is_ident(SKIP) {
                let name = path.to_token_stream().to_string();
                cx.error_spanned_by(
                    path,
                    format!("`{name}` has no effect on a `skip` field; remove one of them"),
                );
            }
        }
        return;
    }

    if let (Some(_), Some(cond)) = (&a.init, &a.cond) {
        let why = match cond.name.as_str() {
            "InitialOnly" => Some("`init` already means `InitialOnly`; remove one of them"),
            "Never" => {
                Some("an `init` member is sent at creation, but `cond = Never` never sends it")
            }
            "InitialOrOwner" => Some(
                "`cond = InitialOrOwner` keeps sending updates to the owner, but `init` sends only at creation",
            ),
            _ => None,
        };
        if let Some(why) = why {
            cx.error_spanned_by(
                &cond.ident,
                format!("`init` contradicts `cond = {}`: {why}", cond.name),
            );
        }
    }

    if let (Some(notify), Some(cond)) = (&a.notify, &a.cond) {
        if cond.name == "Never" {
            cx.error_spanned_by(
                notify,
                "`notify` on a `cond = Never` member would never be called",
            );
        }
    }

    check_config_values(cx, field);

    if let (Some(first), true) = (a.config.first(), mentions_generic(field, cont)) {
        let key = &first.key;
        cx.error_spanned_by(
            key,
            "config keys need a concrete config type, but this member's serializer depends on a \
             generic parameter; pass a whole config with `config = CONST` instead",
        );
    }
}

fn check_enum_field(cx: &Ctxt, field: &Field) {
    let a = &field.attrs;
    for (present, name) in [
        (a.cond.as_ref().map(|c| c.ident.to_token_stream()), COND),
        (a.init.as_ref().map(ToTokens::to_token_stream), INIT),
        (a.skip.as_ref().map(ToTokens::to_token_stream), SKIP),
        (a.notify.as_ref().map(ToTokens::to_token_stream), NOTIFY),
        (a.group.as_ref().map(ToTokens::to_token_stream), GROUP),
    ] {
        if let Some(tokens) = present {
            cx.error_spanned_by(
                tokens,
                format!(
                    "`{name}` applies to members of a `#[derive(Replicated)]` struct, not to enum \
                     variant fields (a variant is sent whole)"
                ),
            );
        }
    }
}

/// A literal number (`7`, `-1.5`, `(3)`), if the expression is one.
fn literal_number(expr: &syn::Expr) -> Option<f64> {
    match expr {
        syn::Expr::Lit(syn::ExprLit { lit, .. }) => match lit {
            syn::Lit::Int(i) => i.base10_parse::<f64>().ok(),
            syn::Lit::Float(f) => f.base10_parse::<f64>().ok(),
            _ => None,
        },
        syn::Expr::Unary(syn::ExprUnary {
            op: syn::UnOp::Neg(_),
            expr,
            ..
        }) => literal_number(expr).map(|v| -v),
        syn::Expr::Paren(p) => literal_number(&p.expr),
        syn::Expr::Group(g) => literal_number(&g.expr),
        _ => None,
    }
}

pub fn primitive_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) if p.qself.is_none() => p.path.get_ident().map(|i| i.to_string()),
        syn::Type::Group(g) => primitive_name(&g.elem),
        syn::Type::Paren(p) => primitive_name(&p.elem),
        _ => None,
    }
}

fn check_config_values(cx: &Ctxt, field: &Field) {
    let a = &field.attrs;
    let get = |name: &str| a.config.iter().find(|c| c.key == name);

    for c in &a.config {
        if let syn::Expr::Lit(syn::ExprLit {
            lit: lit @ (syn::Lit::Str(_) | syn::Lit::Bool(_)),
            ..
        }) = &c.value
        {
            let kind = if matches!(lit, syn::Lit::Str(_)) {
                "a string"
            } else {
                "a bool"
            };
            cx.error_spanned_by(
                &c.value,
                format!("`{}` takes a number, not {kind}: write it without quotes, for example `{} = 7`", c.key, c.key),
            );
        }
    }

    if let Some(bits) = get(BITS) {
        if let Some(v) = literal_number(&bits.value) {
            if v < 0.0 {
                cx.error_spanned_by(
                    &bits.value,
                    format!(
                        "`bits = {v}` is negative; `bits` counts the bits on the wire, so write a whole number of at least 1"
                    ),
                );
            } else if v == 0.0 {
                cx.error_spanned_by(
                    &bits.value,
                    "`bits = 0` leaves no room for a value; use at least 1, or remove `bits` for the type's full width",
                );
            } else if v.fract() != 0.0 {
                cx.error_spanned_by(&bits.value, "`bits` must be a whole number");
            } else if a.serializer.is_none() {
                if let Some(ty) = primitive_name(field.ty) {
                    if let Some(width) = int_width(&ty) {
                        if v > width as f64 {
                            cx.error_spanned_by(
                                &bits.value,
                                format!("`bits = {v}` does not fit in `{ty}` (at most {width})"),
                            );
                        }
                    }
                }
            }
        }
    }

    check_known_keys(cx, field);
    check_ranged_float(cx, field);

    if let (Some(min), Some(max)) = (get(MIN), get(MAX)) {
        if let (Some(lo), Some(hi)) = (literal_number(&min.value), literal_number(&max.value)) {
            if lo >= hi {
                cx.error_spanned_by(
                    &max.value,
                    format!(
                        "`min` must be less than `max`, but `min = {}` and `max = {}`",
                        min.value.to_token_stream().to_string().replace(' ', ""),
                        max.value.to_token_stream().to_string().replace(' ', "")
                    ),
                );
            }
        }
    }

    if let Some(precision) = get(PRECISION) {
        if let Some(v) = literal_number(&precision.value) {
            if v <= 0.0 {
                cx.error_spanned_by(
                    &precision.value,
                    "`precision` is the largest allowed quantization error and must be greater than zero",
                );
            }
        }
    }

    if let Some(max_len) = get(MAX_LEN) {
        if let Some(v) = literal_number(&max_len.value) {
            let cap = (a.serializer.is_none() && a.config_base.is_none())
                .then(|| max_len_cap(field.ty))
                .flatten();
            if let Some((cap, what)) = cap.filter(|(cap, _)| v > *cap as f64) {
                cx.error_spanned_by(
                    &max_len.value,
                    format!("`max_len = {v}` is above the limit of {what}: at most {cap}"),
                );
            }
            if v <= 0.0 {
                cx.error_spanned_by(
                    &max_len.value,
                    "`max_len = 0` could only ever send empty values; use at least 1",
                );
            }
        }
    }
}

/// A config key the field type's built-in serializer does not have, reported with the
/// keys it does have (for types the derive knows; rustc reports the rest at the key).
fn check_known_keys(cx: &Ctxt, field: &Field) {
    let a = &field.attrs;
    if a.serializer.is_some() || a.config_base.is_some() {
        return;
    }
    let Some((what, keys)) = known_config_keys(field.ty) else {
        return;
    };
    for c in &a.config {
        let key = c.key.to_string();
        if keys.contains(&key.as_str()) {
            continue;
        }
        let valid = if keys.is_empty() {
            "it takes no config keys".to_owned()
        } else {
            let list: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
            format!("its keys are {}", list.join(", "))
        };
        cx.error_spanned_by(
            &c.key,
            format!(
                "`{key}` is not a config key of {what}: {valid}; for other keys name a serializer with `serializer = ...`"
            ),
        );
    }
}

/// `f32`/`f64` with quantization keys use the ranged float serializer, whose range and
/// resolution must both be written: `min` and `max`, and exactly one of `precision`
/// (the largest acceptable error) or `bits` (`1..=32`).
fn check_ranged_float(cx: &Ctxt, field: &Field) {
    let a = &field.attrs;
    if a.serializer.is_some() || a.config_base.is_some() {
        return;
    }
    let ty = match primitive_name(field.ty).as_deref() {
        Some("f32") => "f32",
        Some("f64") => "f64",
        _ => return,
    };
    let get = |name: &str| a.config.iter().find(|c| c.key == name);
    let (min, max, precision, bits) = (get(MIN), get(MAX), get(PRECISION), get(BITS));
    let Some(first) = [min, max, precision, bits].into_iter().flatten().next() else {
        return;
    };
    if precision.is_none() && bits.is_none() {
        cx.error_spanned_by(
            &first.key,
            format!(
                "a quantized `{ty}` needs a resolution: add `precision = X` (the largest acceptable \
                 error) or `bits = N` (1..=32), or remove the quantization keys to send it losslessly"
            ),
        );
    }
    if min.is_none() || max.is_none() {
        let missing = if min.is_none() { MIN } else { MAX };
        cx.error_spanned_by(
            &first.key,
            format!(
                "a quantized `{ty}` needs a range: add `{missing} = ...` (both `min` and `max` are \
                 required), or remove the quantization keys to send it losslessly"
            ),
        );
    }
    if let (Some(_), Some(b)) = (precision, bits) {
        cx.error_spanned_by(
            &b.key,
            format!(
                "a quantized `{ty}` takes either `precision` or `bits`, not both: `precision` is \
                 the largest acceptable error and picks the bits itself"
            ),
        );
    }
    if let Some(b) = bits.filter(|b| literal_number(&b.value).is_some_and(|v| v > 32.0)) {
        let v = literal_number(&b.value).unwrap_or_default();
        {
            cx.error_spanned_by(
                &b.value,
                format!(
                    "`bits = {v}` is too wide for a quantized `{ty}` (at most 32); remove the \
                     quantization keys to send it losslessly"
                ),
            );
        }
    }
}

/// Members sharing a `group` share one change bit, so they must be sent to the same
/// connections at the same times.
fn check_groups(cx: &Ctxt, fields: &[Field]) {
    let mut first: BTreeMap<String, &Field> = BTreeMap::new();
    for field in fields.iter().filter(|f| !f.is_skipped()) {
        let Some(group) = &field.attrs.group else {
            continue;
        };
        let name = group.value();
        match first.get(&name) {
            None => {
                first.insert(name, field);
            }
            Some(leader) => {
                let cond_of = |f: &Field| {
                    f.attrs
                        .cond
                        .as_ref()
                        .map_or("None".to_owned(), |c| c.name.clone())
                };
                if cond_of(leader) != cond_of(field) {
                    cx.error_spanned_by(
                        group,
                        format!(
                            "group `{name}` mixes conditions: `{}` has `cond = {}` but `{}` has `cond = {}`; members sharing a change bit must share a condition",
                            leader.display_name(),
                            cond_of(leader),
                            field.display_name(),
                            cond_of(field),
                        ),
                    );
                } else if leader.attrs.init.is_some() != field.attrs.init.is_some() {
                    cx.error_spanned_by(
                        group,
                        format!(
                            "group `{name}` mixes `init` and regular members (`{}` and `{}`); members sharing a change bit must share `init`",
                            leader.display_name(),
                            field.display_name(),
                        ),
                    );
                }
            }
        }
    }
}

/// Whether a member's type or serializer names one of the container's generic parameters.
pub fn mentions_generic(field: &Field, cont: &Container) -> bool {
    let names: Vec<String> = cont
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            syn::GenericParam::Const(c) => Some(c.ident.to_string()),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect();
    if names.is_empty() {
        return false;
    }
    let mut tokens = field.ty.to_token_stream();
    if let Some(s) = &field.attrs.serializer {
        tokens.extend(s.to_token_stream());
    }
    mentions(tokens, &names)
}

fn mentions(tokens: proc_macro2::TokenStream, names: &[String]) -> bool {
    tokens.into_iter().any(|tt| match tt {
        proc_macro2::TokenTree::Ident(i) => names.iter().any(|n| i == n),
        proc_macro2::TokenTree::Group(g) => mentions(g.stream(), names),
        _ => false,
    })
}
