//! Derive macros for [`replicate`](https://docs.rs/replicate). Use them through the
//! `replicate` crate, which re-exports them.

use proc_macro::TokenStream;

/// Derives `replicate::Replicated` (skeleton: the full derive lands with its own issue).
#[proc_macro_derive(Replicated, attributes(net))]
pub fn derive_replicated(_input: TokenStream) -> TokenStream {
    TokenStream::new()
}
