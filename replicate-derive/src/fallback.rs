//! What is emitted when the input has errors: the errors, plus a minimal stub of the
//! traits so the rest of the user's crate type-checks and they see only the real
//! mistakes, not a cascade of "trait not implemented" follow-ups (thiserror's shape).

use proc_macro2::TokenStream;
use quote::quote;

pub fn replicated(err: &syn::Error, input: &syn::DeriveInput, krate: &syn::Path) -> TokenStream {
    let errors = err.to_compile_error();
    if !matches!(input.data, syn::Data::Struct(_)) || input.generics.lifetimes().next().is_some() {
        return errors;
    }
    let ident = &input.ident;
    let (impl_g, ty_g, where_clause) = input.generics.split_for_impl();
    let mut preds: Vec<TokenStream> = where_clause
        .map(|w| w.predicates.iter().map(|p| quote!(#p)).collect())
        .unwrap_or_default();
    for t in input.generics.type_params() {
        let ident = &t.ident;
        preds.push(quote!(#ident: ::core::marker::Send + ::core::marker::Sync + 'static));
    }
    let where_clause = if preds.is_empty() {
        quote!()
    } else {
        quote!(where #(#preds,)*)
    };
    quote! {
        #errors
        #[automatically_derived]
        #[allow(unused_variables, unreachable_code, clippy::all)]
        const _: () = {
            use #krate::__private as __rp;
            impl #impl_g __rp::Replicated for #ident #ty_g #where_clause {
                type State = __rp::StubState;
                fn quantize(&self, _: &mut __rp::StubState) {}
                fn apply(&mut self, _: &__rp::StubState, _: &__rp::ChangeMask) {}
                fn from_state(_: &__rp::StubState) -> Self {
                    ::core::panic!("#[derive(Replicated)] failed to compile")
                }
            }
            impl #impl_g __rp::ValidateConfigs for #ident #ty_g #where_clause {
                fn validate_configs() -> ::core::result::Result<(), ::std::string::String> {
                    ::core::result::Result::Ok(())
                }
            }
        };
    }
}

pub fn net_enum(err: &syn::Error, input: &syn::DeriveInput, krate: &syn::Path) -> TokenStream {
    let errors = err.to_compile_error();
    if !matches!(input.data, syn::Data::Enum(_)) || !input.generics.params.is_empty() {
        return errors;
    }
    let ident = &input.ident;
    quote! {
        #errors
        #[automatically_derived]
        const _: () = {
            use #krate::__private as __rp;
            impl __rp::NetDefault for #ident {
                type Serializer = __rp::StubSerializer<#ident>;
            }
        };
    }
}
