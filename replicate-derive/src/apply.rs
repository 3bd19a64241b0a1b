//! The game-side half: `Replicated` (quantize, apply with notifications after apply,
//! build from a state) and `ReplicationFragment`. Apply is split into "write members,
//! remember old values of members with a `notify` hook" and "call the hooks", so the
//! fragment interface can run all applies of an object before any notification.

use crate::ast::Style;
use crate::model::{Model, Slot};
use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

pub fn expand(model: &Model) -> TokenStream {
    let (impl_g, _, where_clause) = model.split();
    let self_ty = model.self_ty();
    let twin_ty = model.twin_ty();
    let quantize = quantize_stmts(model);
    let from_state = from_state(model);
    let notifying = Notifying::of(model);
    let pending_tys = notifying.members.iter().map(|i| {
        let ty = model.members[*i].field.ty;
        quote!(::core::option::Option<#ty>,)
    });
    let pending_init = notifying
        .members
        .iter()
        .map(|_| quote!(::core::option::Option::None,));
    let apply_body = apply_body(model, &notifying);
    let poll_body = poll_body(model);
    let notify_calls = notify_calls(model, &notifying);
    let has_notify = !notifying.members.is_empty();
    let trait_ident = format_ident!("__NetApply");
    // Without hooks nothing is pending: no boxing, no downcast.
    let (apply_state_tail, call_notifies) = if has_notify {
        (
            quote! {
                let __pending = <Self as #trait_ident>::__net_apply_members(self, state, mask, 0);
                ::core::result::Result::Ok(__rp::Notifications::pending(__pending))
            },
            quote! {
                if let ::core::option::Option::Some(__pending) =
                    notifications.take::<<Self as #trait_ident>::Pending>()
                {
                    <Self as #trait_ident>::__net_notify(self, __pending);
                }
            },
        )
    } else {
        (
            quote! {
                <Self as #trait_ident>::__net_apply_members(self, state, mask, 0);
                ::core::result::Result::Ok(__rp::Notifications::none())
            },
            quote!(let _ = notifications;),
        )
    };

    quote! {
        #[allow(unused_imports)]
        use __rp::{ApplyNestedMember as _, ApplyPlainMember as _};

        trait #trait_ident: __rp::Replicated {
            type Pending: ::core::marker::Send + 'static;
            fn __net_apply_members(
                &mut self,
                state: &<Self as __rp::Replicated>::State,
                mask: &__rp::ChangeMask,
                offset: u32,
            ) -> Self::Pending;
            fn __net_notify(&mut self, pending: Self::Pending);
            fn __net_poll(
                &self,
                state: &mut <Self as __rp::Replicated>::State,
                mask: &mut __rp::ChangeMask,
                offset: u32,
            ) -> bool;
        }

        impl #impl_g #trait_ident for #self_ty #where_clause {
            type Pending = (#(#pending_tys)*);

            #[inline(never)]
            fn __net_apply_members(
                &mut self,
                state: &#twin_ty,
                mask: &__rp::ChangeMask,
                offset: u32,
            ) -> Self::Pending {
                let mut __pending: Self::Pending = (#(#pending_init)*);
                let mut __off: u32 = offset;
                #apply_body
                __pending
            }

            fn __net_notify(&mut self, __pending: Self::Pending) {
                #(#notify_calls)*
            }

            #[inline(never)]
            fn __net_poll(
                &self,
                state: &mut #twin_ty,
                mask: &mut __rp::ChangeMask,
                offset: u32,
            ) -> bool {
                let mut __d = __rp::DiffMembers::new(mask, offset);
                #poll_body
                __d.finish()
            }
        }

        impl #impl_g __rp::Replicated for #self_ty #where_clause {
            type State = #twin_ty;

            #[inline(never)]
            fn quantize(&self, out: &mut #twin_ty) {
                #(#quantize)*
            }

            fn poll(&self, state: &mut #twin_ty, mask: &mut __rp::ChangeMask) -> bool {
                <Self as #trait_ident>::__net_poll(self, state, mask, 0)
            }

            fn apply(&mut self, state: &#twin_ty, mask: &__rp::ChangeMask) {
                let __pending = <Self as #trait_ident>::__net_apply_members(self, state, mask, 0);
                <Self as #trait_ident>::__net_notify(self, __pending);
            }

            #[inline(never)]
            fn from_state(state: &#twin_ty) -> Self {
                #from_state
            }
        }

        impl #impl_g __rp::ReplicationFragment for #self_ty #where_clause {
            fn traits(&self) -> __rp::FragmentTraits {
                __rp::FragmentTraits::generated::<Self>(#has_notify)
            }

            fn state_descriptor(&self) -> &'static __rp::StateDescriptor {
                <Self as __rp::Replicated>::descriptor()
            }

            fn new_state(&self) -> ::std::boxed::Box<dyn __rp::ErasedState> {
                ::std::boxed::Box::new(<#twin_ty as ::core::default::Default>::default())
            }

            fn poll_state(
                &mut self,
                state: &mut dyn __rp::ErasedState,
                mask: &mut __rp::ChangeMask,
            ) -> ::core::result::Result<bool, __rp::FragmentError> {
                let state = __rp::downcast_state_mut::<Self>(state)?;
                ::core::result::Result::Ok(<Self as #trait_ident>::__net_poll(self, state, mask, 0))
            }

            fn apply_state(
                &mut self,
                state: &dyn __rp::ErasedState,
                mask: &__rp::ChangeMask,
            ) -> ::core::result::Result<__rp::Notifications, __rp::FragmentError> {
                let state = __rp::downcast_state::<Self>(state)?;
                #apply_state_tail
            }

            fn call_notifies(&mut self, notifications: __rp::Notifications) {
                #call_notifies
            }

            fn collect_owner(&self, owners: &mut ::std::vec::Vec<__rp::FragmentOwner>) {
                owners.push(__rp::FragmentOwner::of::<Self>());
            }
        }
    }
}

/// `out.f = quantize(&self.f);` per member.
fn quantize_stmts(model: &Model) -> Vec<TokenStream> {
    model
        .members
        .iter()
        .map(|m| {
            let (f, member) = (&m.twin_field, m.member());
            let q = m.quantize(quote!(&self.#member));
            quote!(out.#f = #q;)
        })
        .collect()
}

/// `Self { .. }` from a state: replicated members dequantized, skipped ones `Default`.
fn from_state(model: &Model) -> TokenStream {
    let fields = model.fields.iter().map(|field| {
        let member = &field.member;
        match model.members.iter().find(|m| m.field.index == field.index) {
            Some(m) => {
                let f = &m.twin_field;
                let value = m.dequantize(quote!(&state.#f));
                quote!(#member: #value,)
            }
            None => {
                let ty = field.ty;
                quote_spanned!(ty.span()=> #member: <#ty as ::core::default::Default>::default(),)
            }
        }
    });
    match model.style {
        Style::Unit => quote!(Self {}),
        _ => quote!(Self { #(#fields)* }),
    }
}

/// The members with a `notify` hook, each with one slot in the pending tuple.
struct Notifying {
    members: Vec<usize>,
}

impl Notifying {
    fn of(model: &Model) -> Self {
        let members = model
            .members
            .iter()
            .filter(|m| m.field.attrs.notify.is_some())
            .map(|m| m.index)
            .collect();
        Notifying { members }
    }

    /// The pending-tuple slot of member `i`, if it notifies.
    fn slot(&self, i: usize) -> Option<syn::Index> {
        self.members
            .iter()
            .position(|n| *n == i)
            .map(syn::Index::from)
    }
}

/// Writes member `i` from `state`; a notifying member keeps its old value in its
/// pending slot when the new one differs.
fn write_member(model: &Model, notifying: &Notifying, i: usize) -> TokenStream {
    let m = &model.members[i];
    let (f, member) = (&m.twin_field, m.member());
    let value = m.dequantize(quote!(&state.#f));
    match notifying.slot(i) {
        Some(slot) => {
            let ty = m.field.ty;
            let changed = quote_spanned!(ty.span()=>
                <#ty as __rp::NotifyCompare>::notify_changed(&__v, &self.#member)
            );
            quote! {{
                let __v = #value;
                if #changed {
                    let __old = ::core::mem::replace(&mut self.#member, __v);
                    if __pending.#slot.is_none() {
                        __pending.#slot = ::core::option::Option::Some(__old);
                    }
                }
            }}
        }
        None => quote!(self.#member = #value;),
    }
}

/// The apply body: per change-mask slot, the members whose bits are set.
fn apply_body(model: &Model, notifying: &Notifying) -> TokenStream {
    let mut body = TokenStream::new();
    for slot in &model.slots {
        match slot {
            Slot::Single(i) => {
                let m = &model.members[*i];
                let cfg = &m.cfg;
                if notifying.slot(*i).is_none() && !m.generic {
                    // In place: a nested replicated struct applies only its selected
                    // members (keeping its skipped fields, running its own hooks);
                    // anything else is dequantized whole. The probe checks the mask
                    // and returns the next offset.
                    let (raw, f, member) = (&m.ser, &m.twin_field, m.member());
                    body.extend(quote! {
                        __off = (&&__rp::MemberProbe::<#raw>::new()).apply_member(
                            &#cfg, &mut self.#member, &state.#f, mask, __off,
                        );
                    });
                } else {
                    let ser = &m.s;
                    let write = write_member(model, notifying, *i);
                    body.extend(quote! {{
                        let __n = #ser::change_mask_bits(&#cfg);
                        if mask.any_in(__off, __n) {
                            #write
                        }
                        __off += __n;
                    }});
                }
            }
            Slot::Group(_, members) => {
                let writes = members.iter().map(|i| write_member(model, notifying, *i));
                body.extend(quote! {
                    if mask.get(__off) {
                        #(#writes)*
                    }
                    __off += 1;
                });
            }
        }
    }
    body
}

/// The poll body: quantize member by member into the stored state, setting changed
/// bits, one call per member to the shared `member_ops` body of its serializer.
fn poll_body(model: &Model) -> TokenStream {
    let mut body = TokenStream::new();
    for slot in &model.slots {
        match slot {
            Slot::Single(i) => {
                let m = &model.members[*i];
                let (f, member) = (&m.twin_field, m.member());
                let poll = m.poll(
                    quote!(__d.poll),
                    |cfg| quote!(#cfg, &self.#member, &mut state.#f),
                );
                body.extend(quote!(#poll;));
            }
            Slot::Group(_, members) => {
                let updates = members.iter().map(|i| {
                    let m = &model.members[*i];
                    let (f, member) = (&m.twin_field, m.member());
                    m.poll(
                        quote!(__rp::poll_group_member),
                        |cfg| quote!(#cfg, &self.#member, &mut state.#f),
                    )
                });
                body.extend(quote! {
                    __d.group(#(#updates)|*);
                });
            }
        }
    }
    body
}

/// `Self::hook(self, &old)` for every pending slot that holds an old value.
fn notify_calls(model: &Model, notifying: &Notifying) -> Vec<TokenStream> {
    notifying
        .members
        .iter()
        .enumerate()
        .filter_map(|(slot, i)| {
            let m = &model.members[*i];
            let ty = m.field.ty;
            let method = m.field.attrs.notify.as_ref()?;
            let slot = syn::Index::from(slot);
            let hook = quote_spanned!(method.span()=> Self::#method);
            Some(quote! {
                if let ::core::option::Option::Some(__old) = __pending.#slot {
                    let __hook: fn(&mut Self, &#ty) = #hook;
                    __hook(self, &__old);
                }
            })
        })
        .collect()
}
