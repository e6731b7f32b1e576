//! JSON Schema → Rust types: the narrow generator (see `docs/codegen.md` for why not typify).
//!
//! Objects become structs (unknown fields tolerated), arrays `Vec`, string enums Rust enums,
//! `additionalProperties` maps, nullable shapes `Option`, named definitions (`$ref` to
//! `#/$defs/<Name>`, whether kept by the plan or carried by an inlined schema) named types
//! generated once. Anything richer falls back to `serde_json::Value` with a doc note saying why.

use std::collections::{BTreeMap, HashMap, HashSet};

use proc_macro2::TokenStream;
use ptc_plan::schema::{Origin, Reference, Scope};
use quote::quote;
use serde_json::{Map, Value};

use crate::idents::{Names, ident, pascal, serde_snake, snake};

/// Deeper schemas than this are typed as `serde_json::Value` (the plan's own budget is larger;
/// this keeps generation shallow and readable).
const MAX_DEPTH: usize = 48;

/// Names the prelude and `std` give meaning to; generated types never take them.
const RESERVED: [&str; 16] = [
    "Option",
    "Some",
    "None",
    "Result",
    "Ok",
    "Err",
    "String",
    "Vec",
    "Box",
    "Default",
    "Clone",
    "Debug",
    "Serialize",
    "Deserialize",
    "Decode",
    "Encode",
];

/// A generated Rust type for one schema.
#[derive(Clone)]
pub struct Ty {
    /// The type as tokens.
    pub tokens: TokenStream,
    /// The schema admits `null`.
    pub nullable: bool,
    /// The type is this generated named item (struct, enum or alias).
    pub named: Option<String>,
    /// Why the type is less precise than the schema, for the doc comment.
    pub note: Option<String>,
}

impl Ty {
    fn plain(tokens: TokenStream) -> Self {
        Ty {
            tokens,
            nullable: false,
            named: None,
            note: None,
        }
    }

    fn value(note: impl Into<String>) -> Self {
        Ty {
            note: Some(note.into()),
            ..Ty::plain(crate::paths::json_value())
        }
    }
}

/// How to name a type made for a schema: tried in order.
pub struct Hint {
    /// Candidates for a struct (and the last resort for an enum).
    pub structs: Vec<String>,
    /// Extra, shorter candidates tried first for an enum (the field's own name).
    pub enums: Vec<String>,
    /// The one name this type must get (a named definition, an operation's response).
    pub fixed: Option<String>,
}

impl Hint {
    /// A type that must be called `name`.
    pub fn fixed(name: &str) -> Self {
        Hint {
            structs: vec![name.to_string()],
            enums: Vec::new(),
            fixed: Some(name.to_string()),
        }
    }

    /// The type of field `wire` inside type `parent`.
    pub fn field(parent: &str, wire: &str) -> Self {
        let field = pascal(wire);
        Hint {
            structs: vec![format!("{parent}{field}")],
            enums: vec![field],
            fixed: None,
        }
    }

    fn item(&self) -> Hint {
        let base = self.structs.first().map_or("Item", String::as_str);
        Hint {
            structs: vec![format!("{base}Item")],
            enums: self.enums.iter().map(|e| format!("{e}Item")).collect(),
            fixed: None,
        }
    }
}

/// The root schema a nested schema belongs to: its own `$defs` (inlined recursive schemas carry
/// them) are resolved before the plan's definitions.
#[derive(Clone, Copy)]
pub struct Root<'v> {
    local: Option<&'v Map<String, Value>>,
    id: usize,
}

/// Generates the types of one upstream module.
pub struct TypeGen<'v> {
    definitions: &'v BTreeMap<String, Value>,
    /// Type names used in the module.
    pub names: Names,
    items: Vec<TokenStream>,
    shapes: HashMap<String, String>,
    named: HashMap<String, String>,
    in_progress: HashSet<String>,
    aliases: HashMap<String, String>,
    pending: HashSet<String>,
    definition_shapes: HashMap<String, String>,
    roots: Vec<String>,
}

impl<'v> TypeGen<'v> {
    /// A generator resolving `#/$defs/<Name>` against `definitions` (the plan's named schemas).
    pub fn new(definitions: &'v BTreeMap<String, Value>) -> Self {
        let mut names = Names::default();
        for r in RESERVED {
            names.reserve(r);
        }
        TypeGen {
            definitions,
            names,
            items: Vec::new(),
            shapes: HashMap::new(),
            named: HashMap::new(),
            in_progress: HashSet::new(),
            aliases: HashMap::new(),
            pending: HashSet::new(),
            definition_shapes: HashMap::new(),
            roots: Vec::new(),
        }
    }

    /// Claims a name for each of the plan's definitions before anything else is named, so a
    /// component keeps its own name (`TraceStatus`) even when an inline schema is met first.
    /// Each is generated when first referred to: only reachable ones are emitted.
    pub fn declare_definitions(&mut self) {
        for name in self.definitions.keys() {
            let key = format!("plan:{name}");
            let type_name = self.names.claim(&[pascal(name)]);
            self.named.insert(key.clone(), type_name);
            self.pending.insert(key);
        }
        // A shape's type is the first definition with it, one that does not admit null first:
        // `nullable-simple-user` becomes `Option<SimpleUser>`, not a second struct.
        let admits_null = |s: &Value| s.as_object().is_some_and(|o| type_set(o).1);
        for nullable in [false, true] {
            for (name, schema) in self.definitions {
                if admits_null(schema) != nullable {
                    continue;
                }
                let shape = match schema.as_object().and_then(string_enum) {
                    Some(values) => enum_shape(&values),
                    None => object_shape(schema, Root { local: None, id: 0 }),
                };
                self.definition_shapes
                    .entry(shape)
                    .or_insert_with(|| format!("plan:{name}"));
            }
        }
    }

    /// The not yet generated definition with this shape, generated now: an inline schema that
    /// repeats a component gets the component's type.
    fn pending_definition(&mut self, shape: &str, depth: usize) -> Option<Ty> {
        let key = self.definition_shapes.get(shape)?.clone();
        if !self.pending.remove(&key) {
            return None;
        }
        let schema = self.definitions.get(key.strip_prefix("plan:")?)?;
        let type_name = self.named.get(&key)?.clone();
        Some(self.define(type_name, schema, Root { local: None, id: 0 }, depth))
    }

    /// The generated items so far, in generation order.
    pub fn take_items(&mut self) -> Vec<TokenStream> {
        std::mem::take(&mut self.items)
    }

    /// The context for a tool's input or output schema.
    pub fn root(&mut self, schema: &'v Value) -> Root<'v> {
        let local = schema.get("$defs").and_then(Value::as_object);
        let key = local.map(|l| canonical(&Value::Object(l.clone())));
        let id = match key {
            None => 0,
            Some(k) => match self.roots.iter().position(|r| *r == k) {
                Some(i) => i + 1,
                None => {
                    self.roots.push(k);
                    self.roots.len()
                }
            },
        };
        Root { local, id }
    }

    /// The type for `schema`.
    pub fn ty(&mut self, schema: &'v Value, hint: &Hint, root: Root<'v>, depth: usize) -> Ty {
        if depth > MAX_DEPTH {
            return Ty::value(format!(
                "nests deeper than {MAX_DEPTH} levels: not typed by ptc-codegen"
            ));
        }
        let Some(obj) = schema.as_object() else {
            return Ty::value("any value (the schema does not constrain it)");
        };
        if let Some(reference) = obj.get("$ref") {
            return self.reference(reference, root, depth);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(members) = obj.get(key).and_then(Value::as_array) {
                return self.union(key, members, hint, root, depth);
            }
        }
        if let Some(members) = obj.get("allOf").and_then(Value::as_array) {
            return match members.as_slice() {
                [only] => self.ty(only, hint, root, depth + 1),
                _ => Ty::value("`allOf` of several schemas: not typed by ptc-codegen"),
            };
        }
        let (types, nullable) = type_set(obj);
        if types.is_empty() && nullable && !obj.contains_key("properties") {
            return Ty::plain(quote!(()));
        }
        let mut ty = if let Some(values) = string_enum(obj) {
            self.enumeration(obj, &values, hint)
        } else {
            match types.as_slice() {
                [] if obj.contains_key("properties") => self.object(obj, hint, root, depth),
                [] => Ty::value("any value (the schema names no type)"),
                ["string"] => Ty::plain(quote!(String)),
                ["integer"] => Ty::plain(quote!(i64)),
                ["number"] => Ty::plain(quote!(f64)),
                ["boolean"] => Ty::plain(quote!(bool)),
                ["array"] => match obj.get("items") {
                    Some(items) => {
                        let item = self.ty(items, &hint.item(), root, depth + 1);
                        let inner = optional(&item);
                        Ty {
                            note: item.note,
                            ..Ty::plain(quote!(Vec<#inner>))
                        }
                    }
                    None => {
                        let value = crate::paths::json_value();
                        Ty::plain(quote!(Vec<#value>))
                    }
                },
                ["object"] => self.object(obj, hint, root, depth),
                _ => Ty::value(format!(
                    "one of several types ({}): not typed by ptc-codegen",
                    types.join(", ")
                )),
            }
        };
        ty.nullable |= nullable;
        ty
    }

    fn reference(&mut self, reference: &'v Value, root: Root<'v>, depth: usize) -> Ty {
        let Some(parsed) = reference.as_str().and_then(Reference::parse) else {
            return Ty::value(format!(
                "reference {reference} outside the plan's definitions: not typed by ptc-codegen"
            ));
        };
        let name = parsed.name.as_ref();
        // One step only: a definition that is itself a reference becomes an alias of the type
        // its target gets.
        let (key, schema) = match self.scope(root).lookup(&parsed) {
            Some((Origin::Own, s)) => (format!("{}:{name}", root.id), s),
            Some((Origin::Plan, s)) => (format!("plan:{name}"), s),
            None => {
                return Ty::value(format!(
                    "reference to the missing definition `{name}`: not typed by ptc-codegen"
                ));
            }
        };
        if self.pending.remove(&key)
            && let Some(type_name) = self.named.get(&key).cloned()
        {
            return self.define(type_name, schema, root, depth);
        }
        if let Some(existing) = self.named.get(&key) {
            if self.in_progress.contains(existing) && !is_nominal(schema) {
                return Ty::value(format!(
                    "definition `{name}` refers to itself without an object in between: not typed"
                ));
            }
            return named(existing);
        }
        let type_name = self.names.claim(&[pascal(name)]);
        self.named.insert(key, type_name.clone());
        self.define(type_name, schema, root, depth)
    }

    /// Generates definition `schema` under `type_name` (an alias when its shape already has a type).
    fn define(&mut self, type_name: String, schema: &'v Value, root: Root<'v>, depth: usize) -> Ty {
        self.in_progress.insert(type_name.clone());
        let ty = self.ty(schema, &Hint::fixed(&type_name), root, depth + 1);
        self.in_progress.remove(&type_name);
        if ty.named.as_deref() != Some(type_name.as_str()) {
            if let Some(target) = &ty.named {
                self.aliases.insert(type_name.clone(), target.clone());
            }
            let ident = ident(&type_name);
            let target = optional(&ty);
            let doc = doc_lines(&[description(schema), ty.note.clone()]);
            self.items.push(quote! {
                #doc
                pub type #ident = #target;
            });
        }
        named(&type_name)
    }

    fn union(
        &mut self,
        key: &str,
        members: &'v [Value],
        hint: &Hint,
        root: Root<'v>,
        depth: usize,
    ) -> Ty {
        let is_null = |m: &Value| m.get("type").and_then(Value::as_str) == Some("null");
        let non_null: Vec<&'v Value> = members.iter().filter(|m| !is_null(m)).collect();
        let nullable = non_null.len() < members.len();
        match non_null.as_slice() {
            [only] => {
                let mut ty = self.ty(only, hint, root, depth + 1);
                ty.nullable |= nullable;
                ty
            }
            several if several.iter().all(|m| self.is_struct(m, root)) => {
                let mut ty = self.untagged(key, several, hint, root, depth);
                ty.nullable |= nullable;
                ty
            }
            _ => Ty {
                nullable,
                ..Ty::value(format!(
                    "`{key}` of {} schemas: not typed by ptc-codegen",
                    non_null.len()
                ))
            },
        }
    }

    /// The named type `name` (through aliases) is being generated: a field of it needs a `Box`.
    fn contains_itself(&self, name: &str) -> bool {
        let mut name = name;
        for _ in 0..=self.aliases.len() {
            if self.in_progress.contains(name) {
                return true;
            }
            match self.aliases.get(name) {
                Some(target) => name = target,
                None => return false,
            }
        }
        false
    }

    /// Where the `$ref`s of a schema under `root` are looked up: ptc-plan's one rule, over the
    /// root's own `$defs` (what an inlined schema carries) and the plan's definitions.
    fn scope(&self, root: Root<'v>) -> Scope<'v> {
        Scope {
            own_defs: root.local,
            own_definitions: None,
            plan: Some(self.definitions),
        }
    }

    /// The schema, after following its `$ref`s, is an object with properties.
    fn is_struct(&self, schema: &Value, root: Root<'v>) -> bool {
        self.scope(root)
            .target(schema)
            .is_ok_and(|target| is_nominal(target) && string_enum_of(target).is_none())
    }

    /// `oneOf`/`anyOf` of objects: an untagged enum, the variant with the most required fields
    /// tried first (serde takes the first that decodes; our structs ignore unknown fields).
    fn untagged(
        &mut self,
        key: &str,
        members: &[&'v Value],
        hint: &Hint,
        root: Root<'v>,
        depth: usize,
    ) -> Ty {
        let shape = format!(
            "untagged|{}|{}",
            members
                .iter()
                .map(|m| canonical(m))
                .collect::<Vec<_>>()
                .join("|"),
            root.id
        );
        if let Some(existing) = self.shapes.get(&shape) {
            return named(existing);
        }
        let name = match &hint.fixed {
            Some(fixed) => fixed.clone(),
            None => self.names.claim(&hint.structs),
        };
        self.shapes.insert(shape, name.clone());
        let mut variants = Vec::with_capacity(members.len());
        let mut variant_names = Names::default();
        for (i, member) in members.iter().enumerate() {
            let member_hint = Hint {
                structs: vec![format!("{name}Variant{}", i + 1)],
                enums: Vec::new(),
                fixed: None,
            };
            let ty = self.ty(member, &member_hint, root, depth + 1);
            let variant = match member.get("$ref").and(ty.named.as_ref()) {
                Some(type_name) => variant_names.claim(std::slice::from_ref(type_name)),
                None => variant_names.claim(&[format!("Variant{}", i + 1)]),
            };
            let required = self.required_count(member, root);
            variants.push((required, variant, optional(&ty)));
        }
        variants.sort_by_key(|v| std::cmp::Reverse(v.0));
        let arms = variants.iter().map(|(_, v, t)| {
            let v = ident(v);
            quote!(#v(#t),)
        });
        let doc = doc_lines(&[Some(format!(
            "One of several shapes (`{key}`): the first variant that decodes is taken, the one with the most required fields first."
        ))]);
        let id = ident(&name);
        let serde_crate = crate::paths::serde_crate();
        self.items.push(quote! {
            #doc
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
            #serde_crate
            #[serde(untagged)]
            #[allow(clippy::large_enum_variant)]
            pub enum #id { #(#arms)* }
        });
        named(&name)
    }

    fn required_count(&self, schema: &Value, root: Root<'v>) -> usize {
        self.scope(root)
            .target(schema)
            .ok()
            .and_then(|t| t.get("required"))
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    }

    fn object(
        &mut self,
        obj: &'v Map<String, Value>,
        hint: &Hint,
        root: Root<'v>,
        depth: usize,
    ) -> Ty {
        let props = obj.get("properties").and_then(Value::as_object);
        let Some(props) = props.filter(|p| !p.is_empty()) else {
            return match obj.get("additionalProperties") {
                Some(extra @ Value::Object(_)) => {
                    let value = self.ty(extra, &hint.item(), root, depth + 1);
                    let inner = optional(&value);
                    Ty {
                        note: value.note,
                        ..Ty::plain(quote!(::std::collections::BTreeMap<String, #inner>))
                    }
                }
                _ => Ty::plain(crate::paths::json_map()),
            };
        };
        let shape = object_shape(&Value::Object(obj.clone()), root);
        if let Some(ty) = self.pending_definition(&shape, depth) {
            return ty;
        }
        if let Some(existing) = self.shapes.get(&shape) {
            return named(existing);
        }
        let name = match &hint.fixed {
            Some(fixed) => fixed.clone(),
            None => {
                let mut candidates = title(obj);
                candidates.extend(hint.structs.iter().cloned());
                self.names.claim(&candidates)
            }
        };
        self.shapes.insert(shape, name.clone());
        self.in_progress.insert(name.clone());
        let required = required_set(obj);
        let mut fields = Vec::with_capacity(props.len());
        for (wire, schema) in props {
            let ty = self.ty(schema, &Hint::field(&name, wire), root, depth + 1);
            fields.push(Field {
                wire: wire.clone(),
                doc: doc_lines(&[description(schema), ty.note.clone()]),
                optional: ty.nullable || !required.contains(wire.as_str()),
                boxed: ty.named.as_ref().is_some_and(|n| self.contains_itself(n)),
                ty,
            });
        }
        self.in_progress.remove(&name);
        let doc = type_doc(obj, hint);
        self.items
            .push(struct_item(&name, doc, &fields, FieldStyle::Response));
        named(&name)
    }

    fn enumeration(&mut self, obj: &'v Map<String, Value>, values: &[String], hint: &Hint) -> Ty {
        let shape = enum_shape(values);
        let nullable = obj
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|all| all.iter().any(Value::is_null));
        if let Some(ty) = self.pending_definition(&shape, 0) {
            return Ty { nullable, ..ty };
        }
        if let Some(existing) = self.shapes.get(&shape) {
            return Ty {
                nullable,
                ..named(existing)
            };
        }
        let name = match &hint.fixed {
            Some(fixed) => fixed.clone(),
            None => {
                let mut candidates = title(obj);
                candidates.extend(hint.enums.iter().cloned());
                candidates.extend(hint.structs.iter().cloned());
                self.names.claim(&candidates)
            }
        };
        self.shapes.insert(shape, name.clone());
        let mut variant_names = Names::default();
        let variants: Vec<(String, String)> = values
            .iter()
            .map(|v| (variant_names.claim(&[pascal(v)]), v.clone()))
            .collect();
        let snake_case = variants.iter().any(|(id, wire)| serde_snake(id) == *wire);
        let arms = variants.iter().map(|(id, wire)| {
            let spelled = if snake_case {
                serde_snake(id)
            } else {
                id.clone()
            };
            let rename = (spelled != *wire).then(|| quote!(#[serde(rename = #wire)]));
            let id = ident(id);
            quote!(#rename #id,)
        });
        let rename_all = snake_case.then(|| quote!(#[serde(rename_all = "snake_case")]));
        let doc = type_doc(obj, hint);
        let id = ident(&name);
        self.items.push(quote! {
            #doc
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Encode, Decode)]
            #rename_all
            pub enum #id { #(#arms)* }
        });
        Ty {
            nullable,
            ..named(&name)
        }
    }
}

/// One field of a generated struct.
pub struct Field {
    /// Name on the wire.
    pub wire: String,
    /// Doc attributes.
    pub doc: TokenStream,
    /// The field is an `Option`.
    pub optional: bool,
    /// The field's type is boxed (it refers back to a type that contains it).
    pub boxed: bool,
    /// The field's type.
    pub ty: Ty,
}

/// Whether a struct is sent (arguments) or received (responses).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum FieldStyle {
    /// Arguments: serialized (the executor leaves a `None` out, as it does a Lisp `nil`);
    /// `Default` when every field is optional.
    Args {
        /// Every field is optional: derive `Default`.
        default: bool,
    },
    /// Responses: deserialized, unknown fields ignored.
    Response,
}

/// A struct with `fields`, renamed to their wire names, with ptc's `Encode` (and, for a
/// response, `Decode`) instead of serde's derives (`ptc_core::call::typed_serde`).
pub fn struct_item(
    name: &str,
    doc: TokenStream,
    fields: &[Field],
    style: FieldStyle,
) -> TokenStream {
    let mut field_names = Names::default();
    let fields = fields.iter().map(|f| {
        let id = ident(&field_names.claim(&[snake(&f.wire)]));
        let wire = &f.wire;
        let rename = (crate::idents::serde_field_name(&id) != *wire)
            .then(|| quote!(#[serde(rename = #wire)]));
        let inner = &f.ty.tokens;
        let inner = if f.boxed {
            quote!(Box<#inner>)
        } else {
            quote!(#inner)
        };
        let ty = if f.optional {
            quote!(Option<#inner>)
        } else {
            inner
        };
        let doc = &f.doc;
        quote!(#doc #rename pub #id: #ty,)
    });
    let id = ident(name);
    let derives = match style {
        FieldStyle::Args { default: false } => quote!(#[derive(Debug, Clone, PartialEq, Encode)]),
        FieldStyle::Args { default: true } => {
            quote!(#[derive(Debug, Clone, Default, PartialEq, Encode)])
        }
        FieldStyle::Response => quote!(#[derive(Debug, Clone, PartialEq, Encode, Decode)]),
    };
    quote! {
        #doc
        #derives
        pub struct #id { #(#fields)* }
    }
}

/// `Option<T>` when the type admits null, `T` otherwise.
pub fn optional(ty: &Ty) -> TokenStream {
    let t = &ty.tokens;
    if ty.nullable {
        quote!(Option<#t>)
    } else {
        quote!(#t)
    }
}

/// One `#[doc]` paragraph of the non-empty texts, as sentences on one line (rustdoc joins
/// consecutive lines into one paragraph anyway); nothing when all are empty.
pub fn doc_lines(texts: &[Option<String>]) -> TokenStream {
    doc_paragraphs(&[Some(sentences(texts))])
}

/// `#[doc]` paragraphs, one line each, separated by empty doc lines.
pub fn doc_paragraphs(paragraphs: &[Option<String>]) -> TokenStream {
    let mut lines = Vec::new();
    for p in paragraphs.iter().flatten().filter(|p| !p.trim().is_empty()) {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        lines.push(format!(" {}", p.trim()));
    }
    quote!(#(#[doc = #lines])*)
}

/// The non-empty texts as one line of sentences: each ends with a full stop unless it already
/// ends with punctuation.
pub fn sentences(texts: &[Option<String>]) -> String {
    let mut out = String::new();
    for t in texts
        .iter()
        .flatten()
        .map(|t| t.split_whitespace().collect::<Vec<_>>().join(" "))
    {
        if t.is_empty() {
            continue;
        }
        if !out.is_empty() {
            if !out.ends_with(['.', '!', '?', ':', ';']) {
                out.push('.');
            }
            out.push(' ');
        }
        out.push_str(&t);
    }
    out
}

/// A struct's or enum's doc: the description of a named schema (a component, an operation's
/// response). An inline schema's description says what its field is for, and the field carries
/// it; on the type (which other fields of the same shape share) it would mislead.
fn type_doc(obj: &Map<String, Value>, hint: &Hint) -> TokenStream {
    match hint.fixed {
        Some(_) => doc_lines(&[description(&Value::Object(obj.clone()))]),
        None => TokenStream::new(),
    }
}

/// The schema's description, first paragraph only, on one line (generated docs stay short).
pub fn description(schema: &Value) -> Option<String> {
    first_paragraph(schema.get("description")?.as_str()?)
}

/// The first paragraph of `text` on one line, if there is one.
pub fn first_paragraph(text: &str) -> Option<String> {
    let first = text.trim().split("\n\n").next().unwrap_or_default();
    let line = first.split_whitespace().collect::<Vec<_>>().join(" ");
    (!line.is_empty()).then_some(line)
}

fn named(name: &str) -> Ty {
    let id = ident(name);
    Ty {
        named: Some(name.to_string()),
        ..Ty::plain(quote!(#id))
    }
}

fn title(obj: &Map<String, Value>) -> Vec<String> {
    obj.get("title")
        .and_then(Value::as_str)
        .map(pascal)
        .into_iter()
        .collect()
}

fn required_set(obj: &Map<String, Value>) -> HashSet<&str> {
    obj.get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// The non-null types the schema names, and whether `null` is allowed.
fn type_set(obj: &Map<String, Value>) -> (Vec<&str>, bool) {
    let mut types: Vec<&str> = match obj.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let nullable =
        types.contains(&"null") || obj.get("nullable").and_then(Value::as_bool) == Some(true);
    types.retain(|t| *t != "null");
    (types, nullable)
}

/// The values of a string enum (nulls aside), when the schema is one.
fn string_enum(obj: &Map<String, Value>) -> Option<Vec<String>> {
    let all = obj.get("enum")?.as_array()?;
    let values: Vec<String> = all
        .iter()
        .filter(|v| !v.is_null())
        .map(|v| v.as_str().map(str::to_string))
        .collect::<Option<_>>()?;
    (!values.is_empty()).then_some(values)
}

fn string_enum_of(schema: &Value) -> Option<Vec<String>> {
    string_enum(schema.as_object()?)
}

/// A schema that becomes a struct or enum (a nominal type), so referring to it from inside itself
/// is fine.
fn is_nominal(schema: &Value) -> bool {
    let Some(obj) = schema.as_object() else {
        return false;
    };
    string_enum(obj).is_some()
        || obj
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
}

fn enum_shape(values: &[String]) -> String {
    format!("enum|{}", values.join("\u{0}"))
}

/// A shape key: a schema that refers to definitions means something only within its root.
fn scoped(key: String, root: Root) -> String {
    if key.contains("\"$ref\"") {
        format!("{key}|{}", root.id)
    } else {
        key
    }
}

/// An object schema's shape key, null aside: a nullable copy of an object gets the same struct
/// (the caller's `Ty` carries the nullability).
fn object_shape(schema: &Value, root: Root) -> String {
    let mut schema = schema.clone();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("nullable");
        if let Some(Value::Array(types)) = obj.get_mut("type") {
            types.retain(|t| t != "null");
            if let [only] = types.as_slice() {
                let only = only.clone();
                obj.insert("type".into(), only);
            }
        }
    }
    scoped(canonical(&schema), root)
}

/// The schema without its annotations (and without the `$defs` it carries), as text: two schemas with the same key get one type.
fn canonical(schema: &Value) -> String {
    const ANNOTATIONS: [&str; 6] = [
        "description",
        "example",
        "examples",
        "default",
        "title",
        "$defs",
    ];
    fn strip(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !ANNOTATIONS.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), keyed(k, v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    // Under `properties` and `$defs` the keys are names, not keywords: keep them all.
    fn keyed(key: &str, v: &Value) -> Value {
        match (key, v) {
            ("properties" | "$defs" | "patternProperties", Value::Object(m)) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), strip(v))).collect())
            }
            _ => strip(v),
        }
    }
    strip(schema).to_string()
}
