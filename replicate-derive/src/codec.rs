//! `ReplicatedState` for the twin: diff (poll), serialize / deserialize with a change
//! mask, the same against a baseline, validate, a prediction's step and reference
//! collection. All eight bodies come from ONE walk over the change-mask slots, so the bit offsets the writer
//! and the reader use can never drift apart.

use crate::model::{Member, Model, Slot};
use proc_macro2::TokenStream;
use quote::quote;

#[derive(Default)]
struct Bodies {
    diff: TokenStream,
    serialize: TokenStream,
    deserialize: TokenStream,
    serialize_delta: TokenStream,
    deserialize_delta: TokenStream,
    validate: TokenStream,
    shift: TokenStream,
    refs: TokenStream,
}

pub fn expand(model: &Model) -> TokenStream {
    let mut b = Bodies::default();
    for slot in &model.slots {
        match slot {
            Slot::Single(i) => single(&mut b, &model.members[*i]),
            Slot::Group(_, members) => {
                let ms: Vec<&Member> = members.iter().map(|i| &model.members[*i]).collect();
                group(&mut b, &ms);
            }
        }
    }
    for m in &model.members {
        let (ser, cfg, f) = (&m.s, &m.cfg, &m.twin_field);
        b.refs.extend(quote! {
            #ser::collect_references(&#cfg, &self.#f, out);
        });
    }

    let Bodies {
        diff,
        serialize,
        deserialize,
        serialize_delta,
        deserialize_delta,
        validate,
        shift,
        refs,
    } = b;
    let (impl_g, _, where_clause) = model.split();
    let twin_ty = model.twin_ty();

    // `inline(never)`: the erased wrappers call these; inlined there, each body would
    // be compiled twice.
    quote! {
        impl #impl_g __rp::ReplicatedState for #twin_ty #where_clause {
            #[inline]
            fn descriptor() -> &'static __rp::StateDescriptor {
                Self::__net_descriptor()
            }

            #[inline(never)]
            fn diff(&self, previous: &Self, mask: &mut __rp::ChangeMask, offset: u32) -> bool {
                let mut __d = __rp::DiffMembers::new(mask, offset);
                #diff
                __d.finish()
            }

            #[inline(never)]
            fn serialize(&self, mask: &__rp::ChangeMask, offset: u32, writer: &mut __rp::BitWriter) {
                let mut __w = __rp::WriteMembers::new(mask, offset, writer);
                #serialize
            }

            #[inline(never)]
            fn deserialize(
                &mut self,
                mask: &__rp::ChangeMask,
                offset: u32,
                reader: &mut __rp::BitReader,
            ) -> __rp::Result<()> {
                let mut __r = __rp::ReadMembers::new(mask, offset, reader);
                #deserialize
                __r.finish()
            }

            #[inline(never)]
            fn serialize_delta(
                &self,
                baseline: &Self,
                mask: &__rp::ChangeMask,
                offset: u32,
                writer: &mut __rp::BitWriter,
            ) {
                let mut __w = __rp::WriteMembers::new(mask, offset, writer);
                #serialize_delta
            }

            #[inline(never)]
            fn deserialize_delta(
                &mut self,
                baseline: &Self,
                mask: &__rp::ChangeMask,
                offset: u32,
                reader: &mut __rp::BitReader,
            ) -> __rp::Result<()> {
                let mut __r = __rp::ReadMembers::new(mask, offset, reader);
                #deserialize_delta
                __r.finish()
            }

            #[inline(never)]
            fn validate(&self, mask: &__rp::ChangeMask, offset: u32) -> __rp::Result<()> {
                let mut __v = __rp::ValidateMembers::new(mask, offset);
                #validate
                __v.finish()
            }

            #[inline(never)]
            fn shift(
                &mut self,
                [x, y, z]: [&Self; 3],
                mask: &__rp::ChangeMask,
                offset: u32,
            ) -> __rp::Result<()> {
                let mut __s = __rp::ShiftMembers::new(mask, offset);
                #shift
                __s.finish()
            }

            fn collect_references(&self, out: &mut ::std::vec::Vec<__rp::NetRefHandle>) {
                #refs
            }
        }
    }
}

/// A member with its own change-mask bits: one call per operation to the walker's
/// shared body for its serializer, which goes through the serializer's masked hooks
/// (so arrays and nested structs track their parts).
fn single(b: &mut Bodies, m: &Member) {
    let (ser, cfg, f) = (&m.ser, &m.cfg, &m.twin_field);
    b.diff.extend(quote! {
        __d.member::<#ser>(&#cfg, &self.#f, &previous.#f);
    });
    b.serialize.extend(quote! {
        __w.member::<#ser>(&#cfg, &self.#f);
    });
    b.deserialize.extend(quote! {
        __r.member::<#ser>(&#cfg, &mut self.#f);
    });
    b.serialize_delta.extend(quote! {
        __w.member_delta::<#ser>(&#cfg, &self.#f, &baseline.#f);
    });
    b.deserialize_delta.extend(quote! {
        __r.member_delta::<#ser>(&#cfg, &mut self.#f, &baseline.#f);
    });
    b.validate.extend(quote! {
        __v.member::<#ser>(&#cfg, &self.#f);
    });
    b.shift.extend(quote! {
        __s.member::<#ser>(&#cfg, &mut self.#f, [&x.#f, &y.#f, &z.#f]);
    });
}

/// Members sharing one change bit (`group = "..."`): compared with `is_equal`, sent
/// whole and together.
fn group(b: &mut Bodies, ms: &[&Member]) {
    let mut differs = Vec::new();
    let mut ser_all = TokenStream::new();
    let mut de_all = TokenStream::new();
    let mut ser_delta = TokenStream::new();
    let mut de_delta = TokenStream::new();
    let mut val = TokenStream::new();
    let mut shift = TokenStream::new();
    for m in ms {
        let (s, ser, cfg, f) = (&m.s, &m.ser, &m.cfg, &m.twin_field);
        differs.push(quote!(!#s::is_equal(&#cfg, &self.#f, &previous.#f)));
        ser_all.extend(quote!(__w.whole::<#ser>(&#cfg, &self.#f);));
        de_all.extend(quote!(__r.whole::<#ser>(&#cfg, &mut self.#f);));
        ser_delta.extend(quote!(__w.whole_delta::<#ser>(&#cfg, &self.#f, &baseline.#f);));
        de_delta.extend(quote!(__r.whole_delta::<#ser>(&#cfg, &mut self.#f, &baseline.#f);));
        val.extend(quote!(__v.whole::<#ser>(&#cfg, &self.#f);));
        shift.extend(quote!(__s.whole::<#ser>(&#cfg, &mut self.#f, [&x.#f, &y.#f, &z.#f]);));
    }
    b.diff.extend(quote! {
        __d.group(#(#differs)||*);
    });
    for (body, walker, inner) in [
        (&mut b.serialize, quote!(__w), ser_all),
        (&mut b.deserialize, quote!(__r), de_all),
        (&mut b.serialize_delta, quote!(__w), ser_delta),
        (&mut b.deserialize_delta, quote!(__r), de_delta),
        (&mut b.validate, quote!(__v), val),
        (&mut b.shift, quote!(__s), shift),
    ] {
        body.extend(quote! {
            if #walker.group() {
                #inner
            }
        });
    }
}
