//! Registration: `ValidateConfigs` (each member's serializer config, prefixed with the
//! member name), `NestedReplicated` and `NetDefault` (so the type can be a member of
//! another replicated type), and the `inventory` submission of non-generic types.

use crate::model::Model;
use proc_macro2::TokenStream;
use quote::quote;

pub fn expand(model: &Model) -> TokenStream {
    let (impl_g, _, where_clause) = model.split();
    let self_ty = model.self_ty();

    let validations = model.members.iter().map(|m| {
        let (ser, cfg) = (&m.ser, &m.cfg);
        let name = m.name();
        quote! {
            __c.member::<#ser>(&#cfg, #name);
        }
    });
    let dynamic = model.members.iter().map(|m| {
        let ser = &m.s;
        quote!(|| #ser::HAS_DYNAMIC_STATE)
    });
    let references = model.members.iter().map(|m| {
        let ser = &m.s;
        quote!(|| #ser::HAS_OBJECT_REFERENCES)
    });

    let submit = if !model.is_generic && model.cont.attrs.register {
        quote! {
            // The probe, not `Registration::of`: an incomplete type (reported at its
            // member) registers a placeholder instead of adding a second error.
            #[allow(unused_imports)]
            use __rp::RegistrationFallback as _;
            __rp::inventory::submit! {
                __rp::RegistrationProbe::<#self_ty>::REGISTRATION
            }
        }
    } else {
        quote!()
    };

    quote! {
        impl #impl_g __rp::ValidateConfigs for #self_ty #where_clause {
            fn validate_configs() -> ::core::result::Result<(), ::std::string::String> {
                let mut __c = __rp::CheckConfigs::new();
                #(#validations)*
                __c.finish()
            }
        }

        impl #impl_g __rp::NestedReplicated for #self_ty #where_clause {
            const HAS_DYNAMIC_STATE: bool = false #(#dynamic)*;
            const HAS_OBJECT_REFERENCES: bool = false #(#references)*;

            fn apply_at(
                &mut self,
                state: &<Self as __rp::Replicated>::State,
                mask: &__rp::ChangeMask,
                offset: u32,
            ) {
                let __pending = <Self as __NetApply>::__net_apply_members(self, state, mask, offset);
                <Self as __NetApply>::__net_notify(self, __pending);
            }
        }

        impl #impl_g __rp::NetDefault for #self_ty #where_clause {
            type Serializer = __rp::NestedSerializer<Self>;
        }

        #submit
    }
}
