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
    use quote::ToTokens;

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

    /// The size of the expansion of every `#[derive(Replicated)]` and `#[derive(NetEnum)]`
    /// in the Rust file named by `REPLICATE_EXPAND_FILE` (the compile-cost benchmark's
    /// types; `benches/compile-cost/run.sh` runs this), formatted by `rustfmt` when it
    /// is on the `PATH`: prints `expanded: <lines> lines, <tokens> tokens`.
    #[test]
    #[ignore = "a measurement: set REPLICATE_EXPAND_FILE and run with --ignored"]
    fn expansion_size() {
        let Ok(path) = std::env::var("REPLICATE_EXPAND_FILE") else {
            return;
        };
        let source = std::fs::read_to_string(&path).expect("readable REPLICATE_EXPAND_FILE");
        let file: syn::File = syn::parse_str(&source).expect("a Rust file");
        let mut out = proc_macro2::TokenStream::new();
        for item in file.items {
            let input: syn::DeriveInput = match item {
                syn::Item::Struct(s) => s.into(),
                syn::Item::Enum(e) => e.into(),
                _ => continue,
            };
            let derives: Vec<String> = input
                .attrs
                .iter()
                .filter(|a| a.path().is_ident("derive"))
                .map(|a| a.meta.to_token_stream().to_string())
                .collect();
            let has = |name: &str| {
                derives
                    .iter()
                    .any(|d| d.split(|c: char| !c.is_alphanumeric()).any(|w| w == name))
            };
            if has("Replicated") {
                out.extend(crate::expand::derive_replicated(&input));
            }
            if has("NetEnum") {
                out.extend(crate::expand::derive_net_enum(&input));
            }
        }
        let tokens = out.clone().into_iter().count_tokens();
        let text = out.to_string();
        let formatted = std::process::Command::new("rustfmt")
            .args(["--edition", "2024", "--emit", "stdout", "-q"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .ok()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take()?.write_all(text.as_bytes()).ok()?;
                let output = child.wait_with_output().ok()?;
                output
                    .status
                    .success()
                    .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
            });
        let lines = match &formatted {
            Some(f) => f
                .lines()
                .filter(|l| !l.trim().is_empty())
                .count()
                .to_string(),
            None => "? (rustfmt failed)".to_string(),
        };
        println!("expanded: {lines} lines, {tokens} tokens");
    }

    /// Counts tokens, groups' contents included.
    trait CountTokens {
        fn count_tokens(self) -> usize;
    }

    impl<I: Iterator<Item = proc_macro2::TokenTree>> CountTokens for I {
        fn count_tokens(self) -> usize {
            self.map(|t| match t {
                proc_macro2::TokenTree::Group(g) => 1 + g.stream().into_iter().count_tokens(),
                _ => 1,
            })
            .sum()
        }
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
