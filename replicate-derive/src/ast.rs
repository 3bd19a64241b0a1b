//! The typed model of the derive input: a [`Container`] with its fields or variants,
//! each carrying its parsed attributes and borrowing the syn input, so every later pass
//! can still point an error at the user's token.

use crate::attr;
use crate::ctxt::Ctxt;

pub struct Container<'a> {
    pub ident: &'a syn::Ident,
    pub attrs: attr::Container,
    pub data: Data<'a>,
    pub generics: &'a syn::Generics,
    pub original: &'a syn::DeriveInput,
}

pub enum Data<'a> {
    Struct(Style, Vec<Field<'a>>),
    Enum(Vec<Variant<'a>>),
    Union(&'a syn::DataUnion),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Named,
    Tuple,
    Unit,
}

pub struct Variant<'a> {
    pub ident: &'a syn::Ident,
    /// Marked `#[default]` (for `#[derive(Default)]`).
    pub has_default: bool,
    pub style: Style,
    pub fields: Vec<Field<'a>>,
}

pub struct Field<'a> {
    /// `name` or `0`.
    pub member: syn::Member,
    /// Position among the struct's fields.
    pub index: usize,
    pub attrs: attr::Field,
    pub ty: &'a syn::Type,
}

impl Field<'_> {
    /// The name as written (raw identifiers without `r#`, tuple fields as `0`, `1`...).
    pub fn display_name(&self) -> String {
        match &self.member {
            syn::Member::Named(ident) => unraw(ident),
            syn::Member::Unnamed(index) => index.index.to_string(),
        }
    }

    pub fn is_skipped(&self) -> bool {
        self.attrs.skip.is_some()
    }
}

pub fn unraw(ident: &syn::Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
}

impl<'a> Container<'a> {
    pub fn from_ast(cx: &Ctxt, input: &'a syn::DeriveInput) -> Container<'a> {
        let attrs = attr::Container::from_ast(cx, input);
        let data = match &input.data {
            syn::Data::Struct(data) => {
                let (style, fields) = fields_from_ast(cx, &data.fields);
                Data::Struct(style, fields)
            }
            syn::Data::Enum(data) => Data::Enum(
                data.variants
                    .iter()
                    .map(|v| {
                        attr::reject_net_attrs(cx, &v.attrs, "enum variants");
                        let (style, fields) = fields_from_ast(cx, &v.fields);
                        Variant {
                            ident: &v.ident,
                            has_default: v.attrs.iter().any(|a| a.path().is_ident("default")),
                            style,
                            fields,
                        }
                    })
                    .collect(),
            ),
            syn::Data::Union(data) => Data::Union(data),
        };
        Container {
            ident: &input.ident,
            attrs,
            data,
            generics: &input.generics,
            original: input,
        }
    }
}

fn fields_from_ast<'a>(cx: &Ctxt, fields: &'a syn::Fields) -> (Style, Vec<Field<'a>>) {
    let style = match fields {
        syn::Fields::Named(_) => Style::Named,
        syn::Fields::Unnamed(_) => Style::Tuple,
        syn::Fields::Unit => Style::Unit,
    };
    let fields = fields
        .iter()
        .enumerate()
        .map(|(i, f)| Field {
            member: match &f.ident {
                Some(ident) => syn::Member::Named(ident.clone()),
                None => syn::Member::Unnamed(syn::Index {
                    index: i as u32,
                    span: proc_macro2::Span::call_site(),
                }),
            },
            index: i,
            attrs: attr::Field::from_ast(cx, f),
            ty: &f.ty,
        })
        .collect();
    (style, fields)
}
