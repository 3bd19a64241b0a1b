//! `#[net(...)]` parsing into typed attribute structs. Every accepted keyword has a
//! `// #[net(...)]` comment above its branch and a const in [`crate::symbol`].
//! Parsing records errors in the [`Ctxt`] and keeps going, so every mistake in a type is
//! reported at once.

use crate::ctxt::Ctxt;
use crate::symbol::*;
use proc_macro2::Span;
use quote::ToTokens;
use syn::meta::ParseNestedMeta;
use syn::spanned::Spanned;

/// A value set at most once; the second `set` records ``duplicate net attribute `x` ``.
pub struct Attr<'c, T> {
    cx: &'c Ctxt,
    name: &'static str,
    value: Option<T>,
}

impl<'c, T> Attr<'c, T> {
    fn none(cx: &'c Ctxt, name: &'static str) -> Self {
        Attr {
            cx,
            name,
            value: None,
        }
    }

    fn set<A: ToTokens>(&mut self, obj: A, value: T) {
        let tokens = obj.into_token_stream();
        if self.value.is_some() {
            self.cx
                .error_spanned_by(tokens, format!("duplicate net attribute `{}`", self.name));
        } else {
            self.value = Some(value);
        }
    }

    fn get(self) -> Option<T> {
        self.value
    }
}

fn unknown(cx: &Ctxt, meta: &ParseNestedMeta, candidates: &[&str]) {
    let path = meta.path.to_token_stream().to_string().replace(' ', "");
    let hint = match closest(&path, candidates) {
        Some(c) => format!("; did you mean `{c}`?"),
        None => String::new(),
    };
    cx.error_spanned_by(&meta.path, format!("unknown net attribute `{path}`{hint}"));
}

/// Skips whatever follows an attribute we rejected (`= value` or `(...)`), so parsing
/// resumes at the next comma.
fn skip_rest(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(syn::Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        let _content;
        syn::parenthesized!(_content in meta.input);
    }
    Ok(())
}

/// `meta.value()`, with an error in our voice when the `= value` part is missing.
fn value<'a>(meta: &'a ParseNestedMeta) -> syn::Result<syn::parse::ParseStream<'a>> {
    if !meta.input.peek(syn::Token![=]) {
        let name = meta.path.to_token_stream().to_string();
        return Err(syn::Error::new_spanned(
            &meta.path,
            format!("`{name}` needs a value: `#[net({name} = ...)]`"),
        ));
    }
    meta.value()
}

/// `Err` with "write it without quotes" when the value is a string literal where a path
/// or identifier belongs (`cond = "OwnerOnly"`).
fn reject_quoted(meta: &ParseNestedMeta, what: &str, example: &str) -> syn::Result<()> {
    if meta.input.peek(syn::LitStr) {
        let s: syn::LitStr = meta.input.fork().parse()?;
        let name = meta.path.to_token_stream().to_string();
        let value = s.value();
        let shown = if value.is_empty() {
            example.to_owned()
        } else {
            value
        };
        return Err(syn::Error::new_spanned(
            &s,
            format!(
                "`{name}` takes {what}, not a string: write it without quotes, `{name} = {shown}`"
            ),
        ));
    }
    Ok(())
}

/// A flag (`skip`, `init`): bare, or `= true` / `= false`. Returns whether it is set.
fn parse_flag(meta: &ParseNestedMeta) -> syn::Result<bool> {
    if !meta.input.peek(syn::Token![=]) {
        return Ok(true);
    }
    let name = meta.path.to_token_stream().to_string();
    let expr: syn::Expr = meta.value()?.parse()?;
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Bool(b),
            ..
        }) => Ok(b.value),
        other => Err(syn::Error::new_spanned(
            other,
            format!(
                "`{name}` is a flag: write `#[net({name})]` (or `{name} = true` / `{name} = false`)"
            ),
        )),
    }
}

fn parse_lit_str(meta: &ParseNestedMeta) -> syn::Result<syn::LitStr> {
    let expr: syn::Expr = value(meta)?.parse()?;
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) => Ok(s),
        other => Err(syn::Error::new_spanned(
            other,
            format!(
                "expected a string literal: `{} = \"...\"`",
                meta.path.to_token_stream()
            ),
        )),
    }
}

fn parse_lit_bool(meta: &ParseNestedMeta) -> syn::Result<syn::LitBool> {
    let expr: syn::Expr = value(meta)?.parse()?;
    match expr {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Bool(b),
            ..
        }) => Ok(b),
        other => Err(syn::Error::new_spanned(
            other,
            format!(
                "expected `true` or `false`: `{} = false`",
                meta.path.to_token_stream()
            ),
        )),
    }
}

fn net_attrs(attrs: &[syn::Attribute]) -> impl Iterator<Item = &syn::Attribute> {
    attrs.iter().filter(|a| a.path().is_ident(NET))
}

// ---------------------------------------------------------------------------------------
// Container

/// Container attributes (`#[net(...)]` on the struct or enum).
pub struct Container {
    /// `crate = "..."`, absolutized.
    pub krate: syn::Path,
    /// `name = "..."`.
    pub name: Option<syn::LitStr>,
    /// `delta = false`.
    pub delta: bool,
    /// `register = false`.
    pub register: bool,
    /// The `register` token when written (for errors on generic types).
    pub register_token: Option<syn::Path>,
}

impl Container {
    pub fn from_ast(cx: &Ctxt, input: &syn::DeriveInput) -> Self {
        let mut krate = Attr::none(cx, CRATE);
        let mut name = Attr::none(cx, NAME);
        let mut delta = Attr::none(cx, DELTA);
        let mut register = Attr::none(cx, REGISTER);
        let mut register_token = None;

        for attr in net_attrs(&input.attrs) {
            let result = attr.parse_nested_meta(|meta| {
                if meta.path.is_ident(CRATE) || meta.path.is_ident("r#crate") {
                    // #[net(crate = "my_replicate")]
                    let s = parse_lit_str(&meta)?;
                    match s.parse::<syn::Path>() {
                        Ok(path) => krate.set(&meta.path, absolutize(path, s.span())),
                        Err(_) => cx.error_spanned_by(
                            &s,
                            format!("`crate = {:?}` is not a path", s.value()),
                        ),
                    }
                } else if meta.path.is_ident(NAME) {
                    // #[net(name = "game::Player")]
                    let s = parse_lit_str(&meta)?;
                    if s.value().is_empty() {
                        cx.error_spanned_by(&s, "the wire name must not be empty");
                    }
                    name.set(&meta.path, s);
                } else if meta.path.is_ident(DELTA) {
                    // #[net(delta = false)]
                    let b = parse_lit_bool(&meta)?;
                    delta.set(&meta.path, b.value);
                } else if meta.path.is_ident(REGISTER) {
                    // #[net(register = false)]
                    let b = parse_lit_bool(&meta)?;
                    register_token = Some(meta.path.clone());
                    register.set(&meta.path, b.value);
                } else if FIELD_ATTRS.iter().any(|a| meta.path.is_ident(a)) {
                    let path = meta.path.to_token_stream().to_string();
                    cx.error_spanned_by(
                        &meta.path,
                        format!(
                            "`{path}` is a field attribute; put `#[net({path} ...)]` on a field"
                        ),
                    );
                    skip_rest(&meta)?;
                } else {
                    unknown(cx, &meta, CONTAINER_ATTRS);
                    skip_rest(&meta)?;
                }
                Ok(())
            });
            if let Err(err) = result {
                cx.syn_error(err);
            }
        }

        Container {
            krate: krate
                .get()
                .unwrap_or_else(|| syn::parse_quote!(::replicate)),
            name: name.get(),
            delta: delta.get().unwrap_or(true),
            register: register.get().unwrap_or(true),
            register_token,
        }
    }
}

/// `replicate` → `::replicate`; `crate::x`, `self::x`, `super::x` and `::x` stay.
fn absolutize(mut path: syn::Path, span: Span) -> syn::Path {
    let first = path.segments.first().map(|s| s.ident.to_string());
    let relative = matches!(first.as_deref(), Some("crate" | "self" | "super"));
    if path.leading_colon.is_none() && !relative {
        path.leading_colon = Some(syn::Token![::](span));
    }
    path
}

// ---------------------------------------------------------------------------------------
// Field

/// A config key written on a field: `bits = 7`.
pub struct ConfigKey {
    pub key: syn::Ident,
    pub value: syn::Expr,
}

/// `cond = OwnerOnly`.
#[derive(Clone)]
pub struct Cond {
    pub ident: syn::Ident,
    pub name: String,
}

/// Field attributes (`#[net(...)]` on a field).
pub struct Field {
    pub serializer: Option<syn::Type>,
    pub config_base: Option<syn::Expr>,
    pub config: Vec<ConfigKey>,
    pub cond: Option<Cond>,
    /// The `init` token.
    pub init: Option<syn::Path>,
    /// The `skip` token.
    pub skip: Option<syn::Path>,
    pub notify: Option<syn::Ident>,
    pub group: Option<syn::LitStr>,
    /// Every attribute token seen, for "cannot combine with skip" errors.
    pub all: Vec<syn::Path>,
}

impl Field {
    pub fn from_ast(cx: &Ctxt, field: &syn::Field) -> Self {
        let mut serializer = Attr::none(cx, SERIALIZER);
        let mut config_base = Attr::none(cx, CONFIG);
        let mut cond = Attr::none(cx, COND);
        let mut init = Attr::none(cx, INIT);
        let mut skip = Attr::none(cx, SKIP);
        let mut notify = Attr::none(cx, NOTIFY);
        let mut group = Attr::none(cx, GROUP);
        let mut config: Vec<ConfigKey> = Vec::new();
        let mut all = Vec::new();

        for attr in net_attrs(&field.attrs) {
            let result = attr.parse_nested_meta(|meta| {
                all.push(meta.path.clone());
                if meta.path.is_ident(SERIALIZER) {
                    // #[net(serializer = replicate::serialize::U8Serializer)]
                    let input = value(&meta)?;
                    reject_quoted(&meta, "a serializer type", "U8Serializer")?;
                    let ty: syn::Type = input.parse().map_err(|e| {
                        syn::Error::new(
                            e.span(),
                            "expected a serializer type after `serializer =`, for example \
                             `serializer = replicate::serialize::U8Serializer`",
                        )
                    })?;
                    serializer.set(&meta.path, ty);
                } else if meta.path.is_ident(CONFIG) {
                    // #[net(config = AMMO_7_BITS)]
                    let expr: syn::Expr = value(&meta)?.parse()?;
                    config_base.set(&meta.path, expr);
                } else if meta.path.is_ident(COND) {
                    // #[net(cond = OwnerOnly)]
                    let input = value(&meta)?;
                    reject_quoted(&meta, "a condition", "OwnerOnly")?;
                    let path: syn::Path = input.parse().map_err(|e| {
                        syn::Error::new(
                            e.span(),
                            format!("expected a condition after `cond =`: one of {}", CONDITIONS.join(", ")),
                        )
                    })?;
                    let Some(last) = path.segments.last() else {
                        return Ok(());
                    };
                    let ident = last.ident.clone();
                    let name = ident.to_string();
                    if CONDITIONS.contains(&name.as_str()) {
                        cond.set(&meta.path, Cond { ident, name });
                    } else {
                        let hint = match closest(&name, CONDITIONS) {
                            Some(c) => format!("; did you mean `{c}`?"),
                            None => format!("; expected one of {}", CONDITIONS.join(", ")),
                        };
                        cx.error_spanned_by(&path, format!("unknown condition `{name}`{hint}"));
                    }
                } else if meta.path.is_ident(INIT) {
                    // #[net(init)], #[net(init = true)]
                    if parse_flag(&meta)? {
                        init.set(&meta.path, meta.path.clone());
                    }
                } else if meta.path.is_ident(SKIP) {
                    // #[net(skip)], #[net(skip = true)]
                    if parse_flag(&meta)? {
                        skip.set(&meta.path, meta.path.clone());
                    }
                } else if meta.path.is_ident(NOTIFY) {
                    // #[net(notify = on_health_changed)]
                    let input = value(&meta)?;
                    reject_quoted(&meta, "a method name", "on_change")?;
                    let ident: syn::Ident = input.parse().map_err(|e| {
                        syn::Error::new(
                            e.span(),
                            "expected a method name after `notify =`, for example `notify = on_health_changed`",
                        )
                    })?;
                    notify.set(&meta.path, ident);
                } else if meta.path.is_ident(GROUP) {
                    // #[net(group = "movement")]
                    let s = parse_lit_str(&meta)?;
                    if s.value().is_empty() {
                        cx.error_spanned_by(&s, "a group name must not be empty");
                    }
                    group.set(&meta.path, s);
                } else if let Some(key) = CONFIG_KEYS.iter().find(|k| meta.path.is_ident(k)) {
                    // #[net(bits = 7)], #[net(min = -10.0, max = 10.0)], ...
                    let value: syn::Expr = value(&meta)?.parse()?;
                    let ident = meta.path.get_ident().cloned().unwrap_or_else(|| {
                        syn::Ident::new(key, meta.path.span())
                    });
                    if config.iter().any(|c| c.key == ident) {
                        cx.error_spanned_by(&meta.path, format!("duplicate net attribute `{key}`"));
                    } else {
                        config.push(ConfigKey { key: ident, value });
                    }
                } else if CONTAINER_ATTRS.iter().any(|a| meta.path.is_ident(a)) {
                    let path = meta.path.to_token_stream().to_string();
                    cx.error_spanned_by(
                        &meta.path,
                        format!("`{path}` is a container attribute; put `#[net({path} = ...)]` on the type"),
                    );
                    skip_rest(&meta)?;
                } else {
                    unknown(cx, &meta, FIELD_ATTRS);
                    skip_rest(&meta)?;
                }
                Ok(())
            });
            if let Err(err) = result {
                cx.syn_error(err);
            }
        }

        Field {
            serializer: serializer.get(),
            config_base: config_base.get(),
            config,
            cond: cond.get(),
            init: init.get(),
            skip: skip.get(),
            notify: notify.get(),
            group: group.get(),
            all,
        }
    }
}

/// Records an error for each `#[net]` attribute on an item that takes none (variants).
pub fn reject_net_attrs(cx: &Ctxt, attrs: &[syn::Attribute], what: &str) {
    for attr in net_attrs(attrs) {
        cx.error_spanned_by(attr, format!("`#[net(...)]` is not supported on {what}"));
    }
}
