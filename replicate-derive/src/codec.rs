//! `ReplicatedState` for the twin: diff (poll), serialize / deserialize with a change
//! mask, the same against a baseline, validate and reference collection. All seven
//! bodies come from ONE walk over the change-mask slots, so the bit offsets the writer
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
        refs,
    } = b;
    let (impl_g, _, where_clause) = model.split();
    let twin_ty = model.twin_ty();

    quote! {
        impl #impl_g __rp::ReplicatedState for #twin_ty #where_clause {
            #[inline]
            fn descriptor() -> &'static __rp::StateDescriptor {
                Self::__net_descriptor()
            }

            fn diff(&self, previous: &Self, mask: &mut __rp::ChangeMask, offset: u32) -> bool {
                let mut __any = false;
                let mut __off = offset;
                #diff
                __any
            }

            fn serialize(&self, mask: &__rp::ChangeMask, offset: u32, writer: &mut __rp::BitWriter) {
                let mut __off = offset;
                #serialize
            }

            fn deserialize(
                &mut self,
                mask: &__rp::ChangeMask,
                offset: u32,
                reader: &mut __rp::BitReader,
            ) -> __rp::Result<()> {
                let mut __off = offset;
                #deserialize
                ::core::result::Result::Ok(())
            }

            fn serialize_delta(
                &self,
                baseline: &Self,
                mask: &__rp::ChangeMask,
                offset: u32,
                writer: &mut __rp::BitWriter,
            ) {
                let mut __off = offset;
                #serialize_delta
            }

            fn deserialize_delta(
                &mut self,
                baseline: &Self,
                mask: &__rp::ChangeMask,
                offset: u32,
                reader: &mut __rp::BitReader,
            ) -> __rp::Result<()> {
                let mut __off = offset;
                #deserialize_delta
                ::core::result::Result::Ok(())
            }

            fn validate(&self, mask: &__rp::ChangeMask, offset: u32) -> __rp::Result<()> {
                let mut __off = offset;
                #validate
                ::core::result::Result::Ok(())
            }

            fn collect_references(&self, out: &mut ::std::vec::Vec<__rp::NetRefHandle>) {
                #refs
            }
        }
    }
}

/// A member with its own change-mask bits: everything goes through the serializer's
/// masked hooks, so arrays and nested structs track their parts.
fn single(b: &mut Bodies, m: &Member) {
    let (ser, cfg, f) = (&m.s, &m.cfg, &m.twin_field);
    let s = ser.clone();
    let n = quote!(let __n = #s::change_mask_bits(&#cfg););
    b.diff.extend(quote! {
        __any |= #s::diff(&#cfg, &self.#f, &previous.#f, mask, __off);
        __off += #s::change_mask_bits(&#cfg);
    });
    b.serialize.extend(quote! {{
        #n
        if mask.any_in(__off, __n) {
            #s::serialize_masked(&#cfg, &self.#f, mask, __off, writer);
        }
        __off += __n;
    }});
    b.deserialize.extend(quote! {{
        #n
        if mask.any_in(__off, __n) {
            #s::deserialize_masked(&#cfg, &mut self.#f, mask, __off, reader)?;
        }
        __off += __n;
    }});
    b.serialize_delta.extend(quote! {{
        #n
        if mask.any_in(__off, __n) {
            #s::serialize_masked_delta(&#cfg, &self.#f, &baseline.#f, mask, __off, writer);
        }
        __off += __n;
    }});
    b.deserialize_delta.extend(quote! {{
        #n
        if mask.any_in(__off, __n) {
            #s::deserialize_masked_delta(&#cfg, &mut self.#f, &baseline.#f, mask, __off, reader)?;
        }
        __off += __n;
    }});
    b.validate.extend(quote! {{
        #n
        if mask.any_in(__off, __n) {
            #s::validate(&#cfg, &self.#f)?;
        }
        __off += __n;
    }});
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
    for m in ms {
        let (ser, cfg, f) = (&m.s, &m.cfg, &m.twin_field);
        let s = ser.clone();
        differs.push(quote!(!#s::is_equal(&#cfg, &self.#f, &previous.#f)));
        ser_all.extend(quote!(#s::serialize(&#cfg, &self.#f, writer);));
        de_all.extend(quote!(self.#f = #s::deserialize(&#cfg, reader)?;));
        ser_delta.extend(quote!(#s::serialize_delta(&#cfg, &self.#f, &baseline.#f, writer);));
        de_delta.extend(quote!(self.#f = #s::deserialize_delta(&#cfg, &baseline.#f, reader)?;));
        val.extend(quote!(#s::validate(&#cfg, &self.#f)?;));
    }
    b.diff.extend(quote! {
        if #(#differs)||* {
            mask.set(__off);
            __any = true;
        }
        __off += 1;
    });
    for (body, inner) in [
        (&mut b.serialize, ser_all),
        (&mut b.deserialize, de_all),
        (&mut b.serialize_delta, ser_delta),
        (&mut b.deserialize_delta, de_delta),
        (&mut b.validate, val),
    ] {
        body.extend(quote! {
            if mask.get(__off) {
                #inner
            }
            __off += 1;
        });
    }
}
