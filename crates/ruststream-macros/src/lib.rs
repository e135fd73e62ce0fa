//! ruststream's attribute macros (re-exported by `ruststream`; see `debug_handler`).

use proc_macro::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, ItemFn, ReturnType, Type, parse_macro_input};

/// Checks a handler where it is written, one rule at a time: each error points at the
/// argument or the return type that breaks a rule and says which.
///
/// A function that is not a handler otherwise fails at `mount` as a whole ("is not a
/// ruststream handler"), because the compiler cannot tell which of the handler shapes
/// was meant. With the attribute, a borrowed argument (`&str`), an argument before the
/// last that is no extractor, a last argument that is neither an extractor nor an owned
/// payload, a return type that is no outcome and a function that is not `async` are
/// each named. The function itself is left as it is: the attribute costs nothing at run
/// time, and can stay.
#[proc_macro_attribute]
pub fn debug_handler(attribute: TokenStream, item: TokenStream) -> TokenStream {
    if !attribute.is_empty() {
        let error = syn::Error::new(
            proc_macro2::TokenStream::from(attribute).span(),
            "#[debug_handler] takes no arguments",
        );
        return error.to_compile_error().into();
    }
    let function = parse_macro_input!(item as ItemFn);
    let checks = checks(&function);
    quote!(#function #checks).into()
}

/// The compile-time checks of `function`, each spanned at what it checks.
fn checks(function: &ItemFn) -> proc_macro2::TokenStream {
    let signature = &function.sig;
    let mut out = proc_macro2::TokenStream::new();
    if signature.asyncness.is_none() {
        out.extend(
            syn::Error::new(
                signature.fn_token.span,
                "a ruststream handler is an `async fn`: add `async`",
            )
            .to_compile_error(),
        );
    }
    let arguments: Vec<&FnArg> = signature.inputs.iter().collect();
    let last = arguments.len().checked_sub(1);
    let mut assertions = proc_macro2::TokenStream::new();
    for (index, argument) in arguments.iter().enumerate() {
        let FnArg::Typed(typed) = argument else {
            out.extend(
                syn::Error::new(
                    argument.span(),
                    "a ruststream handler is a free function: no `self`",
                )
                .to_compile_error(),
            );
            continue;
        };
        let ty = &typed.ty;
        if let Type::Reference(reference) = &**ty {
            out.extend(borrowed(reference, &reference.elem));
            continue;
        }
        let span = ty.span();
        assertions.extend(if Some(index) == last {
            quote_spanned! {span=> ::ruststream::__private::last_argument::<#ty, _>(); }
        } else {
            quote_spanned! {span=> ::ruststream::__private::extractor::<#ty>(); }
        });
    }
    let output = match &signature.output {
        ReturnType::Default => quote!(()),
        ReturnType::Type(_, ty) => quote!(#ty),
    };
    let output_span = signature.output.span();
    if signature.asyncness.is_some() {
        assertions
            .extend(quote_spanned! {output_span=> ::ruststream::__private::outcome::<#output>(); });
    }
    let generics = &signature.generics;
    let where_clause = &generics.where_clause;
    out.extend(quote! {
        #[allow(dead_code, non_snake_case, clippy::all)]
        const _: () = {
            fn __ruststream_debug_handler #generics () #where_clause { #assertions }
        };
    });
    out
}

/// The error for a borrowed argument `&elem`, with the owned type to take instead.
fn borrowed(reference: &syn::TypeReference, elem: &Type) -> proc_macro2::TokenStream {
    let owned = match elem {
        Type::Path(path) if path.path.is_ident("str") => "`String`".to_owned(),
        Type::Slice(slice) if quote!(#slice).to_string().replace(' ', "") == "[u8]" => {
            "`Vec<u8>` or `bytes::Bytes` (or the `Raw` extractor)".to_owned()
        }
        other => format!("`{}`", quote!(#other).to_string().replace(' ', "")),
    };
    syn::Error::new_spanned(
        reference,
        format!(
            "a ruststream handler takes its arguments owned (its future outlives the \
             delivery): take {owned} instead of a reference"
        ),
    )
    .to_compile_error()
}
