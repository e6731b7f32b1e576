//! Finding where a JSON pointer points in JSON text, so diagnostics can say `file:line:col`.
//!
//! Only the path to the target is followed; sibling values are skipped by scanning, without
//! recursion, so any nesting depth is safe.

/// 1-based line and column (in characters) of the value `pointer` designates in `text`, or of
/// the deepest existing parent when the pointed-at member is missing.
pub fn locate(text: &str, pointer: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut pos = skip_ws(bytes, 0);
    if pointer.is_empty() {
        return Some(line_col(text, pos));
    }
    let tokens = pointer
        .strip_prefix('/')?
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"));
    for token in tokens {
        match bytes.get(pos)? {
            b'{' => match find_member(bytes, pos, &token) {
                Some(p) => pos = p,
                None => return Some(line_col(text, pos)),
            },
            b'[' => {
                let index: usize = token.parse().ok()?;
                match find_element(bytes, pos, index) {
                    Some(p) => pos = p,
                    None => return Some(line_col(text, pos)),
                }
            }
            _ => return Some(line_col(text, pos)),
        }
    }
    Some(line_col(text, pos))
}

fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(pos)];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// End of the string starting at `i` (on its opening quote), and its raw contents.
fn scan_string(b: &[u8], i: usize) -> Option<(usize, &[u8])> {
    let mut j = i + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return Some((j + 1, &b[i + 1..j])),
            _ => j += 1,
        }
    }
    None
}

/// End of the value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => scan_string(b, i).map(|(end, _)| end),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = scan_string(b, j)?.0;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            Some(j)
        }
    }
}

fn find_member(b: &[u8], open: usize, key: &str) -> Option<usize> {
    let mut i = skip_ws(b, open + 1);
    while b.get(i) == Some(&b'"') {
        let (end, raw) = scan_string(b, i)?;
        let value = skip_ws(b, skip_ws(b, end) + 1);
        // Keys with escapes are compared through a JSON decode of just the key.
        let matches = if raw.contains(&b'\\') {
            serde_json::from_slice::<String>(&b[i..end]).is_ok_and(|k| k == key)
        } else {
            raw == key.as_bytes()
        };
        if matches {
            return Some(value);
        }
        i = skip_ws(b, skip_value(b, value)?);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
    }
    None
}

fn find_element(b: &[u8], open: usize, index: usize) -> Option<usize> {
    let mut i = skip_ws(b, open + 1);
    for _ in 0..index {
        if matches!(b.get(i), None | Some(b']')) {
            return None;
        }
        i = skip_ws(b, skip_value(b, i)?);
        if b.get(i) == Some(&b',') {
            i = skip_ws(b, i + 1);
        }
    }
    (!matches!(b.get(i), None | Some(b']'))).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str =
        "{\n  \"a\": {\"x\": [1, {\"y\": \"}\"}, 3]},\n  \"b/c\": true,\n  \"q\\\"k\": 5\n}";

    #[test]
    fn follows_members_and_elements() {
        assert_eq!(locate(DOC, ""), Some((1, 1)));
        assert_eq!(locate(DOC, "/a"), Some((2, 8)));
        assert_eq!(locate(DOC, "/a/x/1/y"), Some((2, 24)));
        assert_eq!(locate(DOC, "/a/x/2"), Some((2, 30)));
        assert_eq!(locate(DOC, "/b~1c"), Some((3, 10)));
        assert_eq!(locate(DOC, "/q\"k"), Some((4, 11)));
    }

    #[test]
    fn missing_members_point_at_the_parent() {
        assert_eq!(locate(DOC, "/a/nope"), Some((2, 8)));
        assert_eq!(locate(DOC, "/a/x/9"), Some((2, 14)));
    }

    #[test]
    fn garbage_and_deep_nesting_are_safe() {
        assert_eq!(locate("", "/a"), None);
        let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(locate(&deep, "/0/0/0").is_some());
        assert!(locate("{\"a\": [1, 2", "/a/5").is_some());
        assert!(locate("{\"a\": \"unterminated", "/a/b").is_some());
    }
}
