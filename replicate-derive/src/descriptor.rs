//! The `'static` descriptor: members in order with their change-mask layout, serializer
//! identity, condition and traits. The protocol identifier is computed from it by
//! `StateDescriptor::new`. Built once per type (per instantiation for generic types).

use crate::ast::unraw;
use crate::model::{Model, Slot};
use proc_macro2::TokenStream;
use quote::quote;

pub fn expand(model: &Model) -> TokenStream {
    let (impl_g, _, where_clause) = model.split();
    let twin_ty = model.twin_ty();
    let delta = model.cont.attrs.delta;

    let mut pushes = TokenStream::new();
    for slot in &model.slots {
        match slot {
            Slot::Single(i) => {
                let push = member(model, *i, quote!(::core::option::Option::None));
                pushes.extend(quote!(__off = #push;));
            }
            Slot::Group(name, members) => {
                for i in members {
                    let push = member(model, *i, quote!(::core::option::Option::Some(#name)));
                    pushes.extend(quote!(#push;));
                }
                pushes.extend(quote!(__off += 1;));
            }
        }
    }

    let name = model.wire_name();
    let name_expr = if model.is_generic {
        let args = model.cont.generics.params.iter().filter_map(|p| match p {
            syn::GenericParam::Type(t) => {
                let ident = &t.ident;
                Some(quote!(::std::string::String::from(::core::any::type_name::<#ident>())))
            }
            syn::GenericParam::Const(c) => {
                let ident = &c.ident;
                Some(quote!(::std::string::ToString::to_string(&#ident)))
            }
            syn::GenericParam::Lifetime(_) => None,
        });
        quote!(__rp::generic_name(#name, &[#(#args),*]))
    } else {
        quote!(#name)
    };

    let cache = if model.is_generic {
        quote!(__rp::descriptor_for::<Self>(Self::__net_build_descriptor))
    } else {
        quote! {
            static DESCRIPTOR: __rp::OnceLock<__rp::StateDescriptor> = __rp::OnceLock::new();
            __rp::cached_descriptor(&DESCRIPTOR, Self::__net_build_descriptor)
        }
    };

    let keys = member_keys(model);
    let self_ty = model.self_ty();

    quote! {
        impl #impl_g #self_ty #where_clause {
            #(#keys)*
        }

        impl #impl_g #twin_ty #where_clause {
            fn __net_build_descriptor() -> __rp::StateDescriptor {
                let mut __members = ::std::vec::Vec::new();
                let mut __off: u32 = 0;
                #pushes
                __rp::StateDescriptor::new(#name_expr, __members, #delta)
            }

            #[inline]
            fn __net_descriptor() -> &'static __rp::StateDescriptor {
                #cache
            }
        }
    }
}

/// `member_descriptor::<S>(..)`: appends member `i` at `__off`, returns the next offset.
fn member(model: &Model, i: usize, group: TokenStream) -> TokenStream {
    let m = &model.members[i];
    let name = m.name();
    let raw = &m.ser;
    let cfg = &m.cfg;
    let condition = m.condition();
    let init = m.init();
    let has_notify = m.field.attrs.notify.is_some();
    quote! {
        __rp::member_descriptor::<#raw>(
            &#cfg,
            __rp::MemberFacts {
                name: #name,
                condition: #condition,
                init_only: #init,
                has_notify: #has_notify,
                group: #group,
            },
            __off,
            &mut __members,
        )
    }
}

/// `pub const HEALTH: MemberKey<Self> = MemberKey::new(i);` per named member, `i` its
/// position in the descriptor (the order of `descriptor::expand`: slot by slot, a
/// group's members together).
fn member_keys(model: &Model) -> Vec<TokenStream> {
    let order = model.slots.iter().flat_map(|slot| match slot {
        Slot::Single(i) => vec![*i],
        Slot::Group(_, members) => members.clone(),
    });
    order
        .enumerate()
        .filter_map(|(pos, i)| {
            let m = &model.members[i];
            let syn::Member::Named(ident) = &m.field.member else {
                return None;
            };
            let name = unraw(ident);
            let key = syn::Ident::new(&name.to_uppercase(), ident.span());
            let doc = format!("Change-mask key of the replicated member `{name}`.");
            Some(quote! {
                #[doc = #doc]
                #[allow(dead_code)]
                pub const #key: __rp::MemberKey<Self> = __rp::MemberKey::new(#pos);
            })
        })
        .collect()
}
