//! A small slice of Java date/time interop. Dates and instants are ISO-8601 strings (so they
//! print, compare and encode to JSON naturally) and durations are integer milliseconds:
//! `(LocalDate/parse "2024-01-15")` is `"2024-01-15"`, `(.plusDays d 3)` is `"2024-01-18"`,
//! `(Duration/between a b)` is a number of milliseconds. Unparseable text gives nil (bad data
//! signals).

use super::{Builtin, b, int_arg, type_err};
use crate::error::R;
use crate::eval::Ctx;
use crate::value::Value;

pub(crate) const BUILTINS: &[Builtin] = &[
    b!(
        "LocalDate/parse",
        1,
        1,
        local_date_parse,
        "(LocalDate/parse \"2024-01-15\"): the date as an ISO string, or nil"
    ),
    b!(
        "Instant/parse",
        1,
        1,
        instant_parse,
        "(Instant/parse \"2024-01-15T10:00:00Z\"): the instant as a UTC ISO string, or nil"
    ),
    b!(
        "Duration/between",
        2,
        2,
        duration_between,
        "(Duration/between a b): milliseconds from a to b"
    ),
    b!(
        "java.util.Date.",
        0,
        1,
        date_ctor,
        "(java.util.Date.) now, or (java.util.Date. ms): a UTC ISO instant string"
    ),
    b!(
        ".plusDays",
        2,
        2,
        |c, a| shift_days(c, &a[0], &a[1], 1),
        "(.plusDays date n)"
    ),
    b!(
        ".minusDays",
        2,
        2,
        |c, a| shift_days(c, &a[0], &a[1], -1),
        "(.minusDays date n)"
    ),
    b!(
        ".isBefore",
        2,
        2,
        |_, a| compare_times(&a[0], &a[1], true),
        "(.isBefore a b)"
    ),
    b!(
        ".isAfter",
        2,
        2,
        |_, a| compare_times(&a[0], &a[1], false),
        "(.isAfter a b)"
    ),
    b!(
        ".toEpochDay",
        1,
        1,
        |_, a| Ok(millis_of(&a[0])
            .map(|m| Value::Int(m.div_euclid(DAY_MS)))
            .unwrap_or(Value::Nil)),
        "(.toEpochDay date)"
    ),
    b!(
        ".toEpochMilli",
        1,
        1,
        |_, a| Ok(millis_of(&a[0]).map(Value::Int).unwrap_or(Value::Nil)),
        "(.toEpochMilli instant)"
    ),
    b!(
        ".getTime",
        1,
        1,
        |_, a| Ok(millis_of(&a[0]).map(Value::Int).unwrap_or(Value::Nil)),
        "(.getTime date): epoch milliseconds"
    ),
    b!(
        ".toMillis",
        1,
        1,
        |_, a| duration(&a[0], 1),
        "(.toMillis duration)"
    ),
    b!(
        ".getSeconds",
        1,
        1,
        |_, a| duration(&a[0], 1000),
        "(.getSeconds duration)"
    ),
    b!(
        ".toSeconds",
        1,
        1,
        |_, a| duration(&a[0], 1000),
        "(.toSeconds duration)"
    ),
    b!(
        ".toMinutes",
        1,
        1,
        |_, a| duration(&a[0], 60_000),
        "(.toMinutes duration)"
    ),
    b!(
        ".toHours",
        1,
        1,
        |_, a| duration(&a[0], 3_600_000),
        "(.toHours duration)"
    ),
    b!(
        ".toDays",
        1,
        1,
        |_, a| duration(&a[0], DAY_MS),
        "(.toDays duration)"
    ),
];

const DAY_MS: i64 = 86_400_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

fn num(s: &str) -> Option<i64> {
    // Date fields are short; longer digit runs are malformed (and could overflow arithmetic).
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// `YYYY-MM-DD` → epoch day.
fn parse_date(s: &str) -> Option<i64> {
    let mut parts = s.splitn(3, '-');
    let (y, m, d) = (
        num(parts.next()?)?,
        num(parts.next()?)?,
        num(parts.next()?)?,
    );
    if s.len() != 10 || !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    Some(days_from_civil(y, m, d))
}

/// RFC 3339 instant (`2024-01-15T10:00:00Z`, fractional seconds and offsets allowed) → epoch ms.
fn parse_instant(s: &str) -> Option<i64> {
    let (date, rest) = s.split_once(['T', 't'])?;
    let day = parse_date(date)?;
    let (time, offset_ms) = if let Some(t) = rest.strip_suffix(['Z', 'z']) {
        (t, 0)
    } else {
        let idx = rest.rfind(['+', '-'])?;
        let (t, off) = rest.split_at(idx);
        let sign = if off.starts_with('-') { -1 } else { 1 };
        let (oh, om) = off[1..].split_once(':')?;
        (t, sign * (num(oh)? * 3_600_000 + num(om)? * 60_000))
    };
    let mut hms = time.splitn(3, ':');
    let h = num(hms.next()?)?;
    let mi = num(hms.next()?)?;
    let sec_text = hms.next().unwrap_or("0");
    let (sec, frac) = sec_text.split_once('.').unwrap_or((sec_text, ""));
    let sec = num(sec)?;
    let ms = if frac.is_empty() {
        0
    } else {
        let digits: String = frac.chars().chain(std::iter::repeat('0')).take(3).collect();
        num(&digits)?
    };
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    Some(day * DAY_MS + h * 3_600_000 + mi * 60_000 + sec * 1000 + ms - offset_ms)
}

fn format_date(day: i64) -> String {
    // Keep far-out dates inside the civil-date arithmetic's range.
    let (y, m, d) = civil_from_days(day.clamp(-1_000_000_000, 1_000_000_000));
    format!("{y:04}-{m:02}-{d:02}")
}

fn format_instant(ms: i64) -> String {
    let day = ms.div_euclid(DAY_MS);
    let rem = ms.rem_euclid(DAY_MS);
    let day = day.clamp(-1_000_000_000, 1_000_000_000);
    let (h, mi, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    if milli == 0 {
        format!("{}T{h:02}:{mi:02}:{s:02}Z", format_date(day))
    } else {
        format!("{}T{h:02}:{mi:02}:{s:02}.{milli:03}Z", format_date(day))
    }
}

/// Epoch milliseconds of a date or instant string, or of a number of milliseconds.
fn millis_of(v: &Value) -> Option<i64> {
    match v {
        Value::Str(s) if s.len() == 10 => parse_date(s).map(|d| d * DAY_MS),
        Value::Str(s) => parse_instant(s),
        Value::Int(i) => Some(*i),
        _ => None,
    }
}

fn local_date_parse(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Str(s) => ctx.string_or_nil(parse_date(s).map(format_date).as_deref()),
        other => type_err("LocalDate/parse", "a string", other),
    }
}

fn instant_parse(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    match &a[0] {
        Value::Str(s) => ctx.string_or_nil(parse_instant(s).map(format_instant).as_deref()),
        other => type_err("Instant/parse", "a string", other),
    }
}

fn duration_between(_: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    Ok(match (millis_of(&a[0]), millis_of(&a[1])) {
        (Some(x), Some(y)) => Value::Int(y.saturating_sub(x)),
        _ => Value::Nil,
    })
}

fn date_ctor(ctx: &mut Ctx<'_>, a: &mut [Value]) -> R<Value> {
    let ms = match a.first() {
        Some(v) => int_arg("java.util.Date.", v)?,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0),
    };
    ctx.string(&format_instant(ms))
}

fn shift_days(ctx: &Ctx<'_>, v: &Value, n: &Value, sign: i64) -> R<Value> {
    let n = int_arg("plusDays", n)?.saturating_mul(sign);
    match v {
        Value::Str(s) if s.len() == 10 => ctx.string_or_nil(
            parse_date(s)
                .map(|d| format_date(d.saturating_add(n)))
                .as_deref(),
        ),
        Value::Str(s) => ctx.string_or_nil(
            parse_instant(s)
                .map(|m| format_instant(m.saturating_add(n.saturating_mul(DAY_MS))))
                .as_deref(),
        ),
        other => type_err("plusDays", "a date", other),
    }
}

fn compare_times(a: &Value, b: &Value, before: bool) -> R<Value> {
    match (millis_of(a), millis_of(b)) {
        (Some(x), Some(y)) => Ok(Value::Bool(if before { x < y } else { x > y })),
        _ => type_err(
            if before { ".isBefore" } else { ".isAfter" },
            "dates or instants",
            a,
        ),
    }
}

fn duration(v: &Value, unit: i64) -> R<Value> {
    match v {
        Value::Int(ms) => Ok(Value::Int(ms / unit)),
        Value::Nil => Ok(Value::Nil),
        other => type_err("duration", "milliseconds", other),
    }
}
