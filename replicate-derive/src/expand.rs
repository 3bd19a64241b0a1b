//! Orchestration: parse → check → build the [`Model`] → generate, the
//! `const _: () = { ... };` wrapper and the fallback on errors.

use crate::ast::{Container, Data};
use crate::check::{self, Derive};
use crate::ctxt::Ctxt;
use crate::model::Model;
use crate::{apply, codec, descriptor, enums, fallback, registration, twin};
use proc_macro2::TokenStream;
use quote::quote;

/// `#[derive(Replicated)]`.
pub fn derive_replicated(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let cont = Container::from_ast(&cx, input);
    check::check(&cx, &cont, Derive::Replicated);
    let krate = cont.attrs.krate.clone();
    if let Err(err) = cx.check() {
        return fallback::replicated(&err, input, &krate);
    }
    let (style, fields) = match &cont.data {
        Data::Struct(style, fields) => (style, fields),
        // check() let only fieldless enums through: they are member enums.
        Data::Enum(variants) => return derive_enum(&cont, variants),
        Data::Union(_) => return TokenStream::new(),
    };
    let model = Model::new(&cont, *style, fields);
    wrap(&model.rp_root, {
        let configs = model.config_items();
        let twin = twin::expand(&model);
        let descriptor = descriptor::expand(&model);
        let codec = codec::expand(&model);
        let apply = apply::expand(&model);
        let registration = registration::expand(&model);
        quote! {
            #configs
            #twin
            #descriptor
            #codec
            #apply
            #registration
        }
    })
}

/// `#[derive(NetEnum)]`.
pub fn derive_net_enum(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let cont = Container::from_ast(&cx, input);
    check::check(&cx, &cont, Derive::NetEnum);
    let krate = cont.attrs.krate.clone();
    if let Err(err) = cx.check() {
        return fallback::net_enum(&err, input, &krate);
    }
    let Data::Enum(variants) = &cont.data else {
        return TokenStream::new();
    };
    derive_enum(&cont, variants)
}

fn derive_enum(cont: &Container, variants: &[crate::ast::Variant]) -> TokenStream {
    let body = if enums::is_default_fieldless(variants) {
        enums::expand_net_enum(cont, variants)
    } else {
        enums::expand(cont, variants)
    };
    wrap(&cont.attrs.krate, body)
}

fn wrap(krate: &syn::Path, body: TokenStream) -> TokenStream {
    quote! {
        #[automatically_derived]
        #[allow(
            non_camel_case_types,
            non_snake_case,
            non_upper_case_globals,
            unused_mut,
            unused_variables,
            unused_assignments,
            unused_qualifications,
            unused_parens,
            missing_docs,
            clippy::needless_update,
            clippy::all,
            clippy::pedantic,
            clippy::nursery,
        )]
        const _: () = {
            use #krate::__private as __rp;
            #body
        };
    }
}
