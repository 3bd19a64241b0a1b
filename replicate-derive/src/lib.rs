//! Derive macros for [`replicate`](https://docs.rs/replicate): `#[derive(Replicated)]`
//! for structs and `#[derive(NetEnum)]` for enums used as members. Use them through the
//! `replicate` crate, which re-exports them and documents every attribute.
//!
//! The shape follows serde_derive: [`ast`] and [`attr`] parse the input into a typed
//! model, [`check`] validates all of it (collecting every error with its span in a
//! [`ctxt::Ctxt`]), [`model`] computes the per-member facts every generator reads, and
//! [`expand`] runs the generators (one piece per file), which depend on the model only.

#![forbid(unsafe_code)]

mod apply;
mod ast;
mod attr;
mod check;
mod codec;
mod ctxt;
mod descriptor;
mod enums;
mod expand;
mod fallback;
mod model;
mod registration;
mod symbol;
mod twin;

use proc_macro::TokenStream;

#[doc = include_str!("reference.md")]
#[proc_macro_derive(Replicated, attributes(net))]
pub fn derive_replicated(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive_replicated(&input).into()
}

/// Derives a serializer for an enum used as a member of a replicated struct: the
/// variant index in the fewest bits, then that variant's fields.
#[proc_macro_derive(NetEnum, attributes(net))]
pub fn derive_net_enum(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as syn::DeriveInput);
    expand::derive_net_enum(&input).into()
}

#[cfg(test)]
mod tests {
    fn door() -> syn::DeriveInput {
        syn::parse_quote! {
            struct Door {
                #[net(notify = on_open)]
                open: bool,
                #[net(bits = 5)]
                code: u8,
                #[net(group = "g")] a: u8,
                #[net(group = "g")] b: u8,
                #[net(skip)]
                n: u32,
            }
        }
    }

    #[test]
    fn expansion_is_deterministic() {
        let a = crate::expand::derive_replicated(&door()).to_string();
        let b = crate::expand::derive_replicated(&door()).to_string();
        assert_eq!(a, b);
        assert!(a.contains("inventory :: submit"));
        assert!(!a.contains("compile_error"));
    }

    #[test]
    fn errors_come_with_a_stub_impl() {
        let input: syn::DeriveInput = syn::parse_quote! {
            struct Door { #[net(bits = 0, cond = Nope)] code: u8 }
        };
        let out = crate::expand::derive_replicated(&input).to_string();
        assert_eq!(out.matches("compile_error").count(), 2, "{out}");
        assert!(out.contains("StubState"));
        assert!(!out.contains("inventory"));
    }
}
