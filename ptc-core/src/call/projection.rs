//! What a call returns when its tool has a result path, and how its pages follow one another:
//! the selection over PTC-Lisp values (for `tool/call` and `tool/pages`) and over serde (for
//! typed calls and typed pages), and the one `Pager` both page loops step with.
//!
//! The selection runs over the decoded answer, so it costs no second pass over the bytes: a
//! program pays the decode it paid before (the bench's "projection" row holds it to that), and
//! a typed call deserialises only the selected part, skipping the rest.

use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;

use ptc_lisp::Value;
use ptc_plan::{Pagination, ValuePath};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value as Json};

/// What a tool's answers are read through: its result path and pagination (both optional).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Projection {
    /// `x-ptc-result-path`: what a call returns.
    pub result_path: Option<ValuePath>,
    /// `x-ptc-pagination`: how `tool/pages` asks for the next page.
    pub pagination: Option<Pagination>,
}

impl Projection {
    /// The value at the result path in `answer` (the whole answer without one); the error says
    /// what is missing.
    pub(crate) fn select(&self, answer: Value) -> Result<Value, String> {
        match &self.result_path {
            None => Ok(answer),
            Some(path) => lisp_at(&answer, path).cloned().ok_or_else(|| missing(path)),
        }
    }
}

/// The message for an answer without a value at `path`.
pub(crate) fn missing(path: &ValuePath) -> String {
    format!(
        "the response has no value at `{path}` (its result path); the upstream's answer no \
         longer matches its schema"
    )
}

/// The value at `path` in a decoded answer (JSON object keys decode to strings).
pub(crate) fn lisp_at<'a>(v: &'a Value, path: &ValuePath) -> Option<&'a Value> {
    path.segments().iter().try_fold(v, |v, seg| match v {
        Value::Map(m) => m.get_named(seg, false),
        Value::Vector(items) => items.get(ptc_plan::projection::index(seg)?),
        _ => None,
    })
}

/// Deserialises the value at `segments` as `T`, skipping the rest of the document without
/// building it; `None` when there is no value there.
pub(crate) struct At<'p, T> {
    segments: &'p [String],
    out: PhantomData<T>,
}

impl<'p, T> At<'p, T> {
    pub(crate) fn new(path: Option<&'p ValuePath>) -> Self {
        At {
            segments: path.map_or(&[], |p| p.segments()),
            out: PhantomData,
        }
    }
}

impl<'de, T: serde::Deserialize<'de>> DeserializeSeed<'de> for At<'_, T> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<T>, D::Error> {
        match self.segments.split_first() {
            None => T::deserialize(d).map(Some),
            Some((seg, rest)) => d.deserialize_any(Walk::<T> {
                seg,
                rest,
                out: PhantomData,
            }),
        }
    }
}

/// One step of [`At`]: finds `seg` in an object or array and goes on with `rest`.
struct Walk<'p, T> {
    seg: &'p str,
    rest: &'p [String],
    out: PhantomData<T>,
}

impl<'de, T: serde::Deserialize<'de>> Visitor<'de> for Walk<'_, T> {
    type Value = Option<T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an object or array holding `{}`", self.seg)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<T>, A::Error> {
        let mut found = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if found.is_none() && key == self.seg {
                found = map.next_value_seed(At::<T> {
                    segments: self.rest,
                    out: PhantomData,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<T>, A::Error> {
        let want = ptc_plan::projection::index(self.seg);
        let mut found = None;
        let mut i = 0;
        loop {
            if Some(i) == want {
                match seq.next_element_seed(At::<T> {
                    segments: self.rest,
                    out: PhantomData,
                })? {
                    Some(v) => found = v,
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            i += 1;
        }
        Ok(found)
    }

    // Any other value has nothing at the path.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Option<T>, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
        Ok(None)
    }
}

/// The value at `path` in JSON `bytes` as `T` (the whole document without a path); `Ok(None)`
/// when there is none.
pub(crate) fn json_at<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    path: Option<&ValuePath>,
) -> Result<Option<T>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = At::<T>::new(path).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Where the next page starts, after a page.
#[derive(Debug, PartialEq)]
pub(crate) enum Step {
    /// Ask again with the position argument set to this.
    Next(Json),
    /// That was the last page.
    Done,
    /// The upstream gave a position it gave before: following it would loop.
    Loop(String),
}

/// Steps through an operation's pages: where each starts, and when to stop. One instance per
/// page loop; it remembers every cursor it was given.
pub(crate) struct Pager<'a> {
    style: &'a Pagination,
    /// The position argument's value for the page being fetched.
    position: Json,
    /// The page size the call asks for, when the style has a size argument and the call set it.
    size: Option<u64>,
    seen: HashSet<String>,
}

impl<'a> Pager<'a> {
    /// A pager for a call with `args` (default arguments applied): the first page is where the
    /// arguments say, else the style's start.
    pub(crate) fn new(style: &'a Pagination, args: &Map<String, Json>) -> Self {
        let given = args.get(style.position_arg()).cloned();
        let (position, size_arg) = match style {
            Pagination::Cursor { .. } => (given.unwrap_or(Json::Null), None),
            Pagination::Page {
                first_page,
                size_arg,
                ..
            } => (given.unwrap_or(Json::from(*first_page)), size_arg.as_ref()),
            Pagination::Offset { limit_arg, .. } => {
                (given.unwrap_or(Json::from(0)), limit_arg.as_ref())
            }
        };
        // The cursor the call starts at counts as given: coming back to it is a loop too.
        let seen = match &position {
            Json::String(_) => HashSet::from([position.to_string()]),
            _ => HashSet::new(),
        };
        Pager {
            style,
            position,
            size: size_arg.and_then(|a| args.get(a)).and_then(Json::as_u64),
            seen,
        }
    }

    /// The arguments for the page about to be fetched.
    pub(crate) fn args(&self, args: &Map<String, Json>) -> Map<String, Json> {
        let mut out = args.clone();
        if self.position.is_null() {
            out.remove(self.style.position_arg());
        } else {
            out.insert(self.style.position_arg().to_string(), self.position.clone());
        }
        out
    }

    /// After a page with `items` items (when it is a list) and, for cursor pagination, the
    /// `cursor` its answer named: where the next page starts.
    pub(crate) fn after(&mut self, items: Option<usize>, cursor: Option<Json>) -> Step {
        let step = match self.style {
            Pagination::Cursor { .. } => match cursor {
                None | Some(Json::Null) => Step::Done,
                Some(Json::String(s)) if s.is_empty() => Step::Done,
                Some(c) => {
                    let key = c.to_string();
                    if self.seen.insert(key.clone()) {
                        Step::Next(c)
                    } else {
                        Step::Loop(format!("the cursor {key} came back a second time"))
                    }
                }
            },
            Pagination::Page { .. } | Pagination::Offset { .. } => {
                let n = items.unwrap_or(0) as u64;
                let short = self.size.is_some_and(|size| n < size);
                if n == 0 || short {
                    Step::Done
                } else {
                    let at = self.position.as_i64().unwrap_or(0);
                    let step = if matches!(self.style, Pagination::Page { .. }) {
                        1
                    } else {
                        n as i64
                    };
                    Step::Next(Json::from(at.saturating_add(step)))
                }
            }
        };
        if let Step::Next(p) = &step {
            self.position = p.clone();
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(p: &str) -> ValuePath {
        ValuePath::parse(p).unwrap()
    }

    #[test]
    fn typed_selection_reads_only_the_path() {
        let doc = br#"{"total": 3, "items": [{"id": "a"}, {"id": "b"}], "next": null}"#;
        let ids: Option<Vec<Json>> = json_at(doc, Some(&path("$.items"))).unwrap();
        assert_eq!(ids.unwrap().len(), 2);
        let id: Option<String> = json_at(doc, Some(&path("/items/1/id"))).unwrap();
        assert_eq!(id.as_deref(), Some("b"));
        let whole: Option<Json> = json_at(doc, None).unwrap();
        assert_eq!(whole.unwrap()["total"], 3);
        for absent in ["$.nope", "/items/2", "/items/x", "$.total.n", "$.next.n"] {
            let v: Option<Json> = json_at(doc, Some(&path(absent))).unwrap();
            assert_eq!(v, None, "{absent}");
        }
        let next: Option<Option<String>> = json_at(doc, Some(&path("$.next"))).unwrap();
        assert_eq!(next, Some(None));
        // The rest of the document is still read: broken JSON is an error, not a silent yes.
        assert!(json_at::<Json>(br#"{"items": [], "x": tru}"#, Some(&path("$.items"))).is_err());
        assert!(json_at::<Json>(br#"{"items": []} x"#, Some(&path("$.items"))).is_err());
    }

    #[test]
    fn lisp_selection_follows_keys_and_indexes() {
        let v = ptc_lisp::Value::from_json_bytes(
            br#"{"items": [{"id": "a"}, {"id": "b"}]}"#,
            &ptc_lisp::Limits::default(),
        )
        .unwrap();
        let at = |p: &str| lisp_at(&v, &path(p)).map(|v| v.to_string());
        assert_eq!(at("/items/1/id").as_deref(), Some("\"b\""));
        assert_eq!(at("$.items.0.id").as_deref(), Some("\"a\""));
        assert_eq!(at("/items/2"), None);
        assert_eq!(at("$.nope"), None);
        assert_eq!(at("/items/0/id/x"), None);
        let projection = Projection {
            result_path: Some(path("$.nope")),
            pagination: None,
        };
        assert!(projection.select(v).unwrap_err().contains("`$.nope`"));
    }

    fn cursor() -> Pagination {
        Pagination::Cursor {
            cursor_arg: "cursor".into(),
            next_cursor_path: path("$.next"),
        }
    }

    #[test]
    fn a_cursor_pager_follows_cursors_and_stops_at_the_last_or_a_repeat() {
        let style = cursor();
        let args = json!({"org": "a"});
        let mut p = Pager::new(&style, args.as_object().unwrap());
        assert_eq!(Json::Object(p.args(args.as_object().unwrap())), args);
        assert_eq!(p.after(Some(2), Some(json!("c1"))), Step::Next(json!("c1")));
        assert_eq!(
            Json::Object(p.args(args.as_object().unwrap())),
            json!({"org": "a", "cursor": "c1"})
        );
        assert_eq!(p.after(None, Some(json!("c2"))), Step::Next(json!("c2")));
        assert_eq!(
            p.after(None, Some(json!("c1"))),
            Step::Loop("the cursor \"c1\" came back a second time".into())
        );
        for last in [None, Some(Json::Null), Some(json!(""))] {
            assert_eq!(
                Pager::new(&style, &Map::new()).after(Some(1), last),
                Step::Done
            );
        }
        // A cursor equal to the one the call started at loops too.
        let start = json!({"cursor": "c0"});
        let mut p = Pager::new(&style, start.as_object().unwrap());
        assert!(matches!(p.after(None, Some(json!("c0"))), Step::Loop(_)));
    }

    #[test]
    fn page_and_offset_pagers_count_items_and_stop_at_a_short_page() {
        let page = Pagination::Page {
            page_arg: "page".into(),
            first_page: 1,
            size_arg: Some("per_page".into()),
        };
        let args = json!({"per_page": 2});
        let mut p = Pager::new(&page, args.as_object().unwrap());
        assert_eq!(p.args(args.as_object().unwrap())["page"], 1);
        assert_eq!(p.after(Some(2), None), Step::Next(json!(2)));
        assert_eq!(p.after(Some(2), None), Step::Next(json!(3)));
        // Exactly the page size: not known to be the last.
        assert_eq!(p.after(Some(1), None), Step::Done);
        // Without a size, only an empty page ends it.
        let mut p = Pager::new(&page, &Map::new());
        assert_eq!(p.after(Some(1), None), Step::Next(json!(2)));
        assert_eq!(p.after(Some(0), None), Step::Done);
        let start = json!({"page": 5});
        let mut p = Pager::new(&page, start.as_object().unwrap());
        assert_eq!(p.after(Some(3), None), Step::Next(json!(6)));

        let offset = Pagination::Offset {
            offset_arg: "offset".into(),
            limit_arg: Some("limit".into()),
        };
        let args = json!({"limit": 3});
        let mut p = Pager::new(&offset, args.as_object().unwrap());
        assert_eq!(p.args(args.as_object().unwrap())["offset"], 0);
        assert_eq!(p.after(Some(3), None), Step::Next(json!(3)));
        assert_eq!(p.after(Some(3), None), Step::Next(json!(6)));
        assert_eq!(p.after(Some(2), None), Step::Done);
        let mut p = Pager::new(&offset, &Map::new());
        assert_eq!(p.after(Some(4), None), Step::Next(json!(4)));
        assert_eq!(p.after(None, None), Step::Done);
    }
}
