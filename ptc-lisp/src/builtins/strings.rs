//! Strings and `clojure.string`. Indexes count Unicode scalar values (chars); a char is a
//! one-character string. Bad data signals (`parse-long` of junk is nil, `subs` clamps).

use super::{Builtin, VARIADIC, b, int_arg, into_items, str_arg, take, type_err};
use crate::error::{R, Reason, err};
use crate::eval::Ctx;
use crate::footprint;
use crate::printer::Style;
use crate::value::{Text, Value};

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "str",
        0,
        VARIADIC,
        str_fn,
        "(str & xs): concatenation; nil is empty"
    ),
    b!(
        "subs",
        2,
        3,
        subs,
        "(subs s start [end]): substring; out-of-range indexes clamp"
    ),
    b!(
        "name",
        1,
        1,
        name,
        "(name x): the name of a keyword, symbol or string"
    ),
    b!(
        "namespace",
        1,
        1,
        namespace,
        "(namespace x): the namespace of a keyword or symbol"
    ),
    b!("keyword", 1, 2, keyword, "(keyword [ns] name)"),
    b!("symbol", 1, 2, symbol, "(symbol [ns] name)"),
    b!("clojure.string/join", 1, 2, join, "(join [sep] coll)"),
    b!("join", 1, 2, join, "(join [sep] coll)"),
    b!(
        "clojure.string/split",
        2,
        3,
        split,
        "(split s re-or-char [limit])"
    ),
    b!("split", 2, 3, split, "(split s re-or-char [limit])"),
    b!(
        "clojure.string/split-lines",
        1,
        1,
        split_lines,
        "(split-lines s)"
    ),
    b!("split-lines", 1, 1, split_lines, "(split-lines s)"),
    b!(
        "clojure.string/trim",
        1,
        1,
        |c, a| c.string(str_arg("trim", &a[0])?.trim()),
        "(trim s)"
    ),
    b!(
        "trim",
        1,
        1,
        |c, a| c.string(str_arg("trim", &a[0])?.trim()),
        "(trim s)"
    ),
    b!(
        "clojure.string/triml",
        1,
        1,
        |c, a| c.string(str_arg("triml", &a[0])?.trim_start()),
        "(triml s)"
    ),
    b!(
        "triml",
        1,
        1,
        |c, a| c.string(str_arg("triml", &a[0])?.trim_start()),
        "(triml s)"
    ),
    b!(
        "clojure.string/trimr",
        1,
        1,
        |c, a| c.string(str_arg("trimr", &a[0])?.trim_end()),
        "(trimr s)"
    ),
    b!(
        "trimr",
        1,
        1,
        |c, a| c.string(str_arg("trimr", &a[0])?.trim_end()),
        "(trimr s)"
    ),
    b!(
        "clojure.string/trim-newline",
        1,
        1,
        |c, a| c.string(str_arg("trim-newline", &a[0])?.trim_end_matches(['\n', '\r'])),
        "(trim-newline s)"
    ),
    b!(
        "trim-newline",
        1,
        1,
        |c, a| c.string(str_arg("trim-newline", &a[0])?.trim_end_matches(['\n', '\r'])),
        "(trim-newline s)"
    ),
    b!("clojure.string/upper-case", 1, 1, upper, "(upper-case s)"),
    b!("upper-case", 1, 1, upper, "(upper-case s)"),
    b!("upcase", 1, 1, upper, "(upcase s)"),
    b!(".toUpperCase", 1, 1, upper, "(.toUpperCase s)"),
    b!("clojure.string/lower-case", 1, 1, lower, "(lower-case s)"),
    b!("lower-case", 1, 1, lower, "(lower-case s)"),
    b!("downcase", 1, 1, lower, "(downcase s)"),
    b!(".toLowerCase", 1, 1, lower, "(.toLowerCase s)"),
    b!(
        "clojure.string/capitalize",
        1,
        1,
        capitalize,
        "(capitalize s): first char upper, rest lower"
    ),
    b!("capitalize", 1, 1, capitalize, "(capitalize s)"),
    b!(
        "clojure.string/reverse",
        1,
        1,
        |c, a| c.string(&str_arg("reverse", &a[0])?.chars().rev().collect::<String>()),
        "(clojure.string/reverse s)"
    ),
    b!(
        "clojure.string/starts-with?",
        2,
        2,
        |_, a| Ok(Value::Bool(
            str_arg("starts-with?", &a[0])?.starts_with(str_arg("starts-with?", &a[1])?)
        )),
        "(starts-with? s prefix)"
    ),
    b!(
        "starts-with?",
        2,
        2,
        |_, a| Ok(Value::Bool(
            str_arg("starts-with?", &a[0])?.starts_with(str_arg("starts-with?", &a[1])?)
        )),
        "(starts-with? s prefix)"
    ),
    b!(
        ".startsWith",
        2,
        2,
        |_, a| Ok(Value::Bool(
            str_arg(".startsWith", &a[0])?.starts_with(str_arg(".startsWith", &a[1])?)
        )),
        "(.startsWith s prefix)"
    ),
    b!(
        "clojure.string/ends-with?",
        2,
        2,
        |_, a| Ok(Value::Bool(
            str_arg("ends-with?", &a[0])?.ends_with(str_arg("ends-with?", &a[1])?)
        )),
        "(ends-with? s suffix)"
    ),
    b!(
        "ends-with?",
        2,
        2,
        |_, a| Ok(Value::Bool(
            str_arg("ends-with?", &a[0])?.ends_with(str_arg("ends-with?", &a[1])?)
        )),
        "(ends-with? s suffix)"
    ),
    b!(
        ".endsWith",
        2,
        2,
        |_, a| Ok(Value::Bool(
            str_arg(".endsWith", &a[0])?.ends_with(str_arg(".endsWith", &a[1])?)
        )),
        "(.endsWith s suffix)"
    ),
    b!(
        "clojure.string/includes?",
        2,
        2,
        includes,
        "(includes? s sub)"
    ),
    b!("includes?", 2, 2, includes, "(includes? s sub)"),
    b!(".contains", 2, 2, includes, "(.contains s sub)"),
    b!(
        "clojure.string/blank?",
        1,
        1,
        blank,
        "(blank? s): nil, empty or whitespace only"
    ),
    b!("blank?", 1, 1, blank, "(blank? s)"),
    b!(
        "clojure.string/index-of",
        2,
        3,
        index_of,
        "(index-of s sub [from]): char index or nil"
    ),
    b!("index-of", 2, 3, index_of, "(index-of s sub [from])"),
    b!(
        ".indexOf",
        2,
        2,
        |c, a| {
            let r = index_of(c, a)?;
            Ok(if r.is_nil() { Value::Int(-1) } else { r })
        },
        "(.indexOf s sub): -1 when absent"
    ),
    b!(
        "clojure.string/last-index-of",
        2,
        3,
        last_index_of,
        "(last-index-of s sub [from])"
    ),
    b!(
        "last-index-of",
        2,
        3,
        last_index_of,
        "(last-index-of s sub [from])"
    ),
    b!(
        ".lastIndexOf",
        2,
        2,
        |c, a| {
            let r = last_index_of(c, a)?;
            Ok(if r.is_nil() { Value::Int(-1) } else { r })
        },
        "(.lastIndexOf s sub)"
    ),
    b!(
        ".length",
        1,
        1,
        |_, a| Ok(Value::Int(str_arg(".length", &a[0])?.chars().count() as i64)),
        "(.length s)"
    ),
    b!(".substring", 2, 3, subs, "(.substring s start [end])"),
    b!(
        "clojure.string/replace",
        3,
        3,
        replace,
        "(replace s match replacement): all matches (string or regex; replacement may be a fn)"
    ),
    b!(
        "replace",
        2,
        3,
        replace_any,
        "(replace s match replacement), or (replace smap coll)"
    ),
    b!(
        "clojure.string/replace-first",
        3,
        3,
        replace_first,
        "(replace-first s match replacement)"
    ),
    b!(
        "replace-first",
        3,
        3,
        replace_first,
        "(replace-first s match replacement)"
    ),
    b!(
        "format",
        1,
        VARIADIC,
        format,
        "(format fmt & args): %s %d %f %.Nf %e %x %o %%"
    ),
    b!(
        "parse-long",
        1,
        1,
        parse_long,
        "(parse-long s): integer or nil"
    ),
    b!(
        "parse-int",
        1,
        1,
        parse_long,
        "(parse-int s): integer or nil"
    ),
    b!(
        "java/parseInt",
        1,
        1,
        parse_long,
        "(Integer/parseInt s): integer or nil"
    ),
    b!(
        "java/parseLong",
        1,
        1,
        parse_long,
        "(Long/parseLong s): integer or nil"
    ),
    b!(
        "parse-double",
        1,
        1,
        parse_double,
        "(parse-double s): float or nil"
    ),
    b!(
        "java/parseDouble",
        1,
        1,
        parse_double,
        "(Double/parseDouble s): float or nil"
    ),
    b!(
        "parse-boolean",
        1,
        1,
        parse_boolean,
        "(parse-boolean s): true, false or nil"
    ),
    b!(
        "java/parseBoolean",
        1,
        1,
        |c, a| Ok(Value::Bool(parse_boolean(c, a)?.truthy())),
        "(Boolean/parseBoolean s)"
    ),
    b!(
        "java/valueOf",
        1,
        1,
        |ctx, a| {
            let mut s = String::new();
            ctx.render(&a[0], &mut s, Style::Str)?;
            ctx.string(&s)
        },
        "(String/valueOf x)"
    ),
    b!(
        "java/currentTimeMillis",
        0,
        0,
        |_, _| Ok(Value::Int(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)
        )),
        "(System/currentTimeMillis)"
    ),
    b!(
        "char",
        1,
        1,
        |_, a| {
            let i = int_arg("char", &a[0])?;
            match char::from_u32(i as u32) {
                Some(c) => Ok(Value::Str(c.into())),
                None => type_err("char", "a code point", &a[0]),
            }
        },
        "(char n): the one-character string for code point n"
    ),
];

/// Fails with `memory_exceeded` if a text of `len` bytes would not fit the memory budget.
fn check_text(ctx: &Ctx<'_>, len: usize) -> R<()> {
    if len > ctx.text_limit() {
        return err(
            Reason::MemoryExceeded,
            format!(
                "a string of {len} bytes would exceed the memory budget (at most 256 MiB per string)"
            ),
        );
    }
    Ok(())
}

fn str_fn(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 1
        && let Value::Str(_) = &a[0]
    {
        return Ok(take(a, 0));
    }
    // Text joined from strings is charged before it is built, at its full size.
    if a.iter().all(|v| matches!(v, Value::Str(_))) {
        let len = a.iter().map(|v| match v {
            Value::Str(s) => s.len(),
            _ => 0,
        });
        let len = len.fold(0usize, usize::saturating_add);
        check_text(ctx, len)?;
        // The buffer and the string made from it are both charged before either is allocated;
        // the buffer's charge comes back when it is freed.
        let buffer = ctx.owned(ctx.charge(len as u64)?);
        let text = ctx.charge(footprint::string(len))?;
        let mut s = String::with_capacity(len);
        for v in a.iter() {
            if let Value::Str(part) = v {
                s.push_str(part);
            }
        }
        let joined = Value::Str(Text::charged(&s, ctx.owned(text)));
        drop(buffer);
        return Ok(joined);
    }
    let mut s = String::new();
    for v in a.iter() {
        ctx.render(v, &mut s, Style::Str)?;
        if s.len() as u64 > ctx.limits().max_memory_bytes {
            return err(
                Reason::MemoryExceeded,
                "string larger than the memory budget",
            );
        }
    }
    ctx.string(&s)
}

fn char_range(s: &str, start: i64, end: i64) -> String {
    let n = s.chars().count() as i64;
    let st = start.clamp(0, n);
    let en = end.clamp(st, n);
    s.chars()
        .skip(st as usize)
        .take((en - st) as usize)
        .collect()
}

fn subs(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("subs", &a[0])?;
    let start = int_arg("subs", &a[1])?;
    let end = if a.len() == 3 {
        int_arg("subs", &a[2])?
    } else {
        i64::MAX
    };
    ctx.string(&char_range(s, start, end))
}

fn name(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Keyword(k) | Value::Symbol(k) => {
            ctx.string(k.rsplit_once('/').map(|(_, n)| n).unwrap_or(k))
        }
        Value::Str(_) => Ok(take(a, 0)),
        other => type_err("name", "a keyword, symbol or string", other),
    }
}

fn namespace(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Keyword(k) | Value::Symbol(k) => match k.rsplit_once('/') {
            Some((ns, _)) => ctx.string(ns),
            None => Ok(Value::Nil),
        },
        other => type_err("namespace", "a keyword or symbol", other),
    }
}

fn keyword(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 2 {
        let ns = match &a[0] {
            Value::Nil => None,
            v => Some(str_arg("keyword", v)?.to_string()),
        };
        let n = str_arg("keyword", &a[1])?;
        return Ok(Value::keyword(&match ns {
            Some(ns) => format!("{ns}/{n}"),
            None => n.to_string(),
        }));
    }
    match &a[0] {
        Value::Keyword(_) => Ok(take(a, 0)),
        Value::Str(s) => Ok(if s.is_empty() {
            Value::Nil
        } else {
            Value::Keyword(s.clone())
        }),
        Value::Symbol(s) => Ok(Value::Keyword(s.clone())),
        _ => Ok(Value::Nil),
    }
}

fn symbol(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 2 {
        let ns = str_arg("symbol", &a[0])?;
        let n = str_arg("symbol", &a[1])?;
        return Ok(Value::symbol(&format!("{ns}/{n}")));
    }
    match &a[0] {
        Value::Symbol(_) => Ok(take(a, 0)),
        Value::Str(s) | Value::Keyword(s) => Ok(Value::Symbol(s.clone())),
        other => type_err("symbol", "a string", other),
    }
}

fn join(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let (sep, coll) = if a.len() == 2 {
        let mut sep = String::new();
        ctx.render(&a[0], &mut sep, Style::Str)?;
        (sep, take(a, 1))
    } else {
        (String::new(), take(a, 0))
    };
    let items = into_items(ctx, coll)?;
    let mut s = String::new();
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            s.push_str(&sep);
            check_text(ctx, s.len())?;
        }
        ctx.render(x, &mut s, Style::Str)?;
    }
    ctx.string(&s)
}

fn split(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("split", &a[0])?;
    let limit = if a.len() == 3 {
        int_arg("split", &a[2])?
    } else {
        0
    };
    let mut parts: Vec<String> = match &a[1] {
        Value::Regex(re) => {
            if limit > 0 {
                re.splitn(s, limit as usize).map(str::to_string).collect()
            } else {
                re.split(s).map(str::to_string).collect()
            }
        }
        Value::Str(d) => {
            if d.chars().count() != 1 {
                return err(
                    Reason::TypeError,
                    format!(
                        "split expects a regex or a one-character string delimiter, got \"{d}\"; use #\"...\""
                    ),
                );
            }
            if limit > 0 {
                s.splitn(limit as usize, &**d).map(str::to_string).collect()
            } else {
                s.split(&**d).map(str::to_string).collect()
            }
        }
        other => return type_err("split", "a regex", other),
    };
    // Like Java's String.split: a leading empty match from a zero-width regex is dropped, and
    // trailing empty strings are removed when no limit is given.
    if matches!(&a[1], Value::Regex(_)) && parts.len() > 1 && parts[0].is_empty() && s.is_empty() {
        parts.remove(0);
    }
    if limit == 0 {
        while parts.len() > 1 && parts.last().is_some_and(String::is_empty) {
            parts.pop();
        }
    }
    if let Value::Regex(re) = &a[1]
        && re.as_str().is_empty()
        && parts.first().is_some_and(String::is_empty)
    {
        parts.remove(0);
    }
    let parts = parts.iter().map(|p| ctx.string(p)).collect::<R<Vec<_>>>()?;
    ctx.vector(parts)
}

fn split_lines(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("split-lines", &a[0])?;
    let mut parts: Vec<&str> = s
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    while parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    let parts = parts
        .into_iter()
        .map(|p| ctx.string(p))
        .collect::<R<Vec<_>>>()?;
    ctx.vector(parts)
}

fn upper(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("upper-case", &a[0])?.to_uppercase();
    ctx.string(&s)
}

fn lower(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("lower-case", &a[0])?.to_lowercase();
    ctx.string(&s)
}

fn capitalize(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("capitalize", &a[0])?;
    let mut chars = s.chars();
    ctx.string(&match chars.next() {
        Some(c) => c.to_uppercase().collect::<String>() + &chars.as_str().to_lowercase(),
        None => String::new(),
    })
}

fn includes(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("includes?", &a[0])?;
    let sub = match &a[1] {
        Value::Str(x) => x.to_string(),
        other => {
            let mut t = String::new();
            ctx.render(other, &mut t, Style::Str)?;
            t
        }
    };
    Ok(Value::Bool(s.contains(&sub)))
}

fn blank(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Nil => Ok(Value::Bool(true)),
        Value::Str(s) => Ok(Value::Bool(s.trim().is_empty())),
        other => type_err("blank?", "a string", other),
    }
}

fn char_index(s: &str, byte: usize) -> i64 {
    s[..byte].chars().count() as i64
}

fn byte_index(s: &str, chars: i64) -> usize {
    s.char_indices()
        .nth(chars.max(0) as usize)
        .map(|(b, _)| b)
        .unwrap_or(s.len())
}

fn index_of(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("index-of", &a[0])?;
    let sub = str_arg("index-of", &a[1])?;
    let from = if a.len() == 3 {
        byte_index(s, int_arg("index-of", &a[2])?)
    } else {
        0
    };
    Ok(match s[from..].find(sub) {
        Some(b) => Value::Int(char_index(s, from + b)),
        None => Value::Nil,
    })
}

fn last_index_of(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = str_arg("last-index-of", &a[0])?;
    let sub = str_arg("last-index-of", &a[1])?;
    let upto = if a.len() == 3 {
        (byte_index(s, int_arg("last-index-of", &a[2])?) + sub.len()).min(s.len())
    } else {
        s.len()
    };
    Ok(match s.get(..upto).and_then(|h| h.rfind(sub)) {
        Some(b) => Value::Int(char_index(s, b)),
        None => Value::Nil,
    })
}

fn replace_impl(ctx: &mut Ctx<'_>, a: &mut [Value], all: bool) -> R<Value> {
    let s = str_arg("replace", &a[0])?.to_string();
    let out = match (&a[1], &a[2]) {
        (Value::Str(m), Value::Str(r)) => {
            // Bound the result before building it: many matches times a long replacement.
            let n = if m.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(&**m).count()
            };
            let n = if all { n } else { n.min(1) };
            check_text(ctx, s.len().saturating_add(n.saturating_mul(r.len())))?;
            if all {
                s.replace(&**m, r)
            } else {
                s.replacen(&**m, r, 1)
            }
        }
        (Value::Regex(re), Value::Str(r)) => {
            // Clojure replacement strings use $1; the regex crate uses ${1}.
            let rep = java_replacement(r);
            let n = if all { re.find_iter(&s).count() } else { 1 };
            // A group reference can copy the whole input per match; bound by the worst case.
            let per = if rep.contains('$') {
                r.len() + s.len()
            } else {
                r.len()
            };
            check_text(ctx, s.len().saturating_add(n.saturating_mul(per)))?;
            if all {
                re.replace_all(&s, rep.as_str()).into_owned()
            } else {
                re.replace(&s, rep.as_str()).into_owned()
            }
        }
        (Value::Regex(re), f @ Value::Func(_)) => {
            let f = f.clone();
            let re = re.clone();
            let mut out = String::new();
            let mut last = 0;
            for caps in re.captures_iter(&s) {
                let Some(m) = caps.get(0) else { continue };
                out.push_str(&s[last..m.start()]);
                let arg = super::regex::match_value(ctx, &caps)?;
                let r = ctx.apply(&f, &mut [arg])?;
                ctx.render(&r, &mut out, Style::Str)?;
                last = m.end();
                if !all {
                    break;
                }
            }
            out.push_str(&s[last..]);
            out
        }
        (Value::Str(m), f @ Value::Func(_)) => {
            let f = f.clone();
            let mut out = String::new();
            let mut rest = s.as_str();
            let mut done = false;
            while let Some(i) = rest.find(&**m).filter(|_| !done && !m.is_empty()) {
                out.push_str(&rest[..i]);
                let r = ctx.apply(&f, &mut [Value::Str(m.clone())])?;
                ctx.render(&r, &mut out, Style::Str)?;
                rest = &rest[i + m.len()..];
                done = !all;
            }
            out.push_str(rest);
            out
        }
        (m, _) => return type_err("replace", "a string or regex match", m),
    };
    ctx.string(&out)
}

fn java_replacement(r: &str) -> String {
    let mut out = String::new();
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    if n == '$' {
                        out.push_str("$$");
                    } else {
                        out.push(n);
                    }
                }
            }
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    out.push_str("$$");
                } else {
                    out.push_str(&format!("${{{digits}}}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

fn replace(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    replace_impl(ctx, a, true)
}

fn replace_first(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    replace_impl(ctx, a, false)
}

fn replace_any(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    if a.len() == 3 {
        return replace_impl(ctx, a, true);
    }
    // Core (replace smap coll).
    let smap = take(a, 0);
    let items = into_items(ctx, take(a, 1))?;
    let out = items
        .into_iter()
        .map(|x| {
            super::get_flex(&smap, &x)
                .filter(|_| super::has_key_flex(&smap, &x))
                .unwrap_or(x)
        })
        .collect();
    super::vec_value(ctx, out)
}

fn format(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let fmt = str_arg("format", &a[0])?.to_string();
    let args = &a[1..];
    let mut out = String::new();
    let mut chars = fmt.chars().peekable();
    let mut ai = 0;
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut flags = String::new();
        while let Some(&f) = chars
            .peek()
            .filter(|f| matches!(f, '-' | '0' | '+' | ',' | ' '))
        {
            flags.push(f);
            chars.next();
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(d);
            chars.next();
        }
        let mut prec: Option<usize> = None;
        if chars.peek() == Some(&'.') {
            chars.next();
            let mut p = String::new();
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                p.push(d);
                chars.next();
            }
            prec = p.parse().ok();
            if prec.is_some_and(|p| p > 340) {
                return err(
                    Reason::TypeError,
                    "format precision above 340 is not supported",
                );
            }
        }
        let conv = match chars.next() {
            Some(c) => c,
            None => return err(Reason::TypeError, "format string ends inside a conversion"),
        };
        if conv == '%' {
            out.push('%');
            continue;
        }
        if conv == 'n' {
            out.push('\n');
            continue;
        }
        let arg = match args.get(ai) {
            Some(v) => v,
            None => {
                return err(
                    Reason::TypeError,
                    format!("format: missing argument for %{conv}"),
                );
            }
        };
        ai += 1;
        let body = match conv {
            's' | 'S' => {
                let mut s = String::new();
                ctx.render(arg, &mut s, Style::Str)?;
                if let Some(p) = prec {
                    s = s.chars().take(p).collect();
                }
                if conv == 'S' { s.to_uppercase() } else { s }
            }
            'd' => match arg {
                Value::Int(i) => {
                    let mut s = i.to_string();
                    if flags.contains(',') {
                        s = group_thousands(&s);
                    }
                    if flags.contains('+') && *i >= 0 {
                        s.insert(0, '+');
                    }
                    s
                }
                other => return type_err("format %d", "an integer", other),
            },
            'f' | 'e' => {
                let x = super::math::f(arg, "format")?;
                let p = prec.unwrap_or(6);
                let mut s = if conv == 'f' {
                    java_fixed(x, p)
                } else {
                    java_exp(x, p)
                };
                if flags.contains('+') && x >= 0.0 {
                    s.insert(0, '+');
                }
                s
            }
            'x' | 'X' => {
                let i = int_arg("format %x", arg)?;
                let s = format!("{i:x}");
                if conv == 'X' { s.to_uppercase() } else { s }
            }
            'o' => format!("{:o}", int_arg("format %o", arg)?),
            'b' => arg.truthy().to_string(),
            'c' => {
                let mut s = String::new();
                ctx.render(arg, &mut s, Style::Str)?;
                s
            }
            other => {
                return err(
                    Reason::TypeError,
                    format!("format: unsupported conversion %{other}"),
                );
            }
        };
        let w: usize = width.parse().unwrap_or(0);
        check_text(ctx, out.len().saturating_add(w))?;
        let len = body.chars().count();
        if len < w {
            let pad = w - len;
            if flags.contains('-') {
                out.push_str(&body);
                out.extend(std::iter::repeat_n(' ', pad));
            } else if flags.contains('0') && conv != 's' {
                let (sign, digits) = if body.starts_with('-') || body.starts_with('+') {
                    body.split_at(1)
                } else {
                    ("", body.as_str())
                };
                out.push_str(sign);
                out.extend(std::iter::repeat_n('0', pad));
                out.push_str(digits);
            } else {
                out.extend(std::iter::repeat_n(' ', pad));
                out.push_str(&body);
            }
        } else {
            out.push_str(&body);
        }
    }
    ctx.string(&out)
}

/// `%.Nf` the way Java's Formatter does it: round the shortest decimal form of the double
/// half-up (so 2.675 gives 2.68, where the binary value would round down).
fn java_fixed(x: f64, p: usize) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    let text = format!("{}", x.abs());
    let (int_part, frac_part) = text.split_once('.').unwrap_or((&text, ""));
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes().chain(std::iter::repeat(b'0')).take(p))
        .collect();
    if frac_part.len() > p && frac_part.as_bytes()[p] >= b'5' {
        // Add one unit in the last kept place, carrying leftwards.
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let int_len = digits.len() - p;
    let mut out = String::new();
    if x.is_sign_negative() {
        out.push('-');
    }
    out.push_str(std::str::from_utf8(&digits[..int_len]).unwrap_or("0"));
    if p > 0 {
        out.push('.');
        out.push_str(std::str::from_utf8(&digits[int_len..]).unwrap_or(""));
    }
    out
}

fn group_thousands(s: &str) -> String {
    let (sign, digits) = if let Some(d) = s.strip_prefix('-') {
        ("-", d)
    } else {
        ("", s)
    };
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}")
}

fn java_exp(x: f64, p: usize) -> String {
    let s = format!("{x:.p$e}");
    match s.split_once('e') {
        Some((m, e)) => {
            let exp: i32 = e.parse().unwrap_or(0);
            format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
        }
        None => s,
    }
}

fn parse_long(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = match &a[0] {
        Value::Str(s) => s,
        Value::Nil => return Ok(Value::Nil),
        other => return type_err("parse-long", "a string", other),
    };
    let t = s.strip_prefix('+').unwrap_or(s);
    if t.is_empty()
        || !t
            .trim_start_matches('-')
            .bytes()
            .all(|b| b.is_ascii_digit())
        || t.starts_with("--")
    {
        return Ok(Value::Nil);
    }
    Ok(t.parse::<i64>().map(Value::Int).unwrap_or(Value::Nil))
}

fn parse_double(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let s = match &a[0] {
        Value::Str(s) => s.trim(),
        Value::Nil => return Ok(Value::Nil),
        other => return type_err("parse-double", "a string", other),
    };
    match s {
        "NaN" => return Ok(Value::Float(f64::NAN)),
        "Infinity" | "+Infinity" => return Ok(Value::Float(f64::INFINITY)),
        "-Infinity" => return Ok(Value::Float(f64::NEG_INFINITY)),
        _ => {}
    }
    let valid = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        && s.bytes().any(|b| b.is_ascii_digit());
    if !valid {
        return Ok(Value::Nil);
    }
    Ok(s.parse::<f64>().map(Value::Float).unwrap_or(Value::Nil))
}

fn parse_boolean(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Str(s) if &**s == "true" => Ok(Value::Bool(true)),
        Value::Str(s) if &**s == "false" => Ok(Value::Bool(false)),
        Value::Str(_) | Value::Nil => Ok(Value::Nil),
        other => type_err("parse-boolean", "a string", other),
    }
}
