//! The reader: source text to [`Form`]s with line:col positions. Nesting is bounded by
//! `Limits::max_reader_depth`, so deeply nested input is an error, never a stack overflow.

use std::sync::Arc;

use crate::error::{LispError, Pos, Reason};

/// A syntax tree node with its source position.
#[derive(Clone, Debug)]
pub(crate) struct Form {
    pub kind: FormKind,
    pub pos: Pos,
}

/// The shapes the reader produces.
#[derive(Clone, Debug)]
pub(crate) enum FormKind {
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    Keyword(Arc<str>),
    Symbol(Arc<str>),
    List(Vec<Form>),
    Vector(Vec<Form>),
    /// Flat key/value sequence.
    Map(Vec<Form>),
    Set(Vec<Form>),
    Regex(Arc<str>),
    /// `#( ... )`: the body list.
    AnonFn(Vec<Form>),
}

impl Form {
    pub(crate) fn sym_name(&self) -> Option<&str> {
        match &self.kind {
            FormKind::Symbol(s) => Some(s),
            _ => None,
        }
    }
}

pub(crate) struct Reader<'a> {
    chars: Vec<char>,
    i: usize,
    /// The byte offset of `chars[i]` in `src`.
    byte: usize,
    line: u32,
    col: u32,
    max_depth: usize,
    src: &'a str,
}

fn perr(msg: impl Into<String>, pos: Pos) -> LispError {
    LispError::new(Reason::ParseError, msg).with_pos(pos)
}

fn is_delim(c: char) -> bool {
    c.is_whitespace() || matches!(c, '(' | ')' | '[' | ']' | '{' | '}' | '"' | ';' | ',')
}

impl<'a> Reader<'a> {
    pub(crate) fn new(src: &'a str, max_depth: usize) -> Self {
        Reader {
            chars: src.chars().collect(),
            i: 0,
            byte: 0,
            line: 1,
            col: 1,
            max_depth,
            src,
        }
    }

    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn peek2(&self) -> Option<char> {
        self.chars.get(self.i + 1).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.i).copied()?;
        self.i += 1;
        self.byte += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() || c == ',' {
                self.bump();
            } else if c == ';' {
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.bump();
                }
            } else {
                break;
            }
        }
    }

    /// Reads every top-level form.
    pub(crate) fn read_all(&mut self) -> Result<Vec<Form>, LispError> {
        let mut out = Vec::new();
        while let Some(f) = self.read_next(0)? {
            out.push(f);
        }
        Ok(out)
    }

    /// Reads every top-level form with its exact source text (what a session keeps of a
    /// definition).
    pub(crate) fn read_all_with_text(&mut self) -> Result<Vec<(Form, &'a str)>, LispError> {
        let mut out = Vec::new();
        while let Some((start, f)) = self.read_next_at(0)? {
            out.push((f, &self.src[start..self.byte]));
        }
        Ok(out)
    }

    /// Reads the next form, skipping `#_` discards; `None` at end of input.
    pub(crate) fn read_next(&mut self, depth: usize) -> Result<Option<Form>, LispError> {
        Ok(self.read_next_at(depth)?.map(|(_, f)| f))
    }

    /// [`Reader::read_next`], with the byte offset where the form starts.
    fn read_next_at(&mut self, depth: usize) -> Result<Option<(usize, Form)>, LispError> {
        loop {
            self.skip_ws();
            if self.peek().is_none() {
                return Ok(None);
            }
            if self.peek() == Some('#') && self.peek2() == Some('_') {
                self.bump();
                self.bump();
                let p = self.pos();
                if self.read_next(depth + 1)?.is_none() {
                    return Err(perr("#_ at end of input has nothing to discard", p));
                }
                continue;
            }
            let start = self.byte;
            return self.read_form(depth).map(|f| Some((start, f)));
        }
    }

    fn read_seq(
        &mut self,
        close: char,
        depth: usize,
        open_pos: Pos,
    ) -> Result<Vec<Form>, LispError> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => {
                    return Err(perr(
                        format!(
                            "unexpected end of input: missing `{close}` for the form opened at {open_pos}"
                        ),
                        self.pos(),
                    ));
                }
                Some(c) if c == close => {
                    self.bump();
                    return Ok(items);
                }
                Some(c @ (')' | ']' | '}')) => {
                    return Err(perr(
                        format!(
                            "unmatched delimiter `{c}`: expected `{close}` to close the form opened at {open_pos}"
                        ),
                        self.pos(),
                    ));
                }
                Some('#') if self.peek2() == Some('_') => {
                    self.bump();
                    self.bump();
                    let p = self.pos();
                    self.skip_ws();
                    if self.peek() == Some(close) || self.peek().is_none() {
                        return Err(perr("#_ has nothing to discard", p));
                    }
                    self.read_form(depth + 1)?;
                }
                Some(_) => items.push(self.read_form(depth + 1)?),
            }
        }
    }

    fn read_form(&mut self, depth: usize) -> Result<Form, LispError> {
        let pos = self.pos();
        if depth >= self.max_depth {
            return Err(LispError::new(
                Reason::DepthExceeded,
                format!("forms are nested deeper than {} levels", self.max_depth),
            )
            .with_pos(pos));
        }
        let c = match self.peek() {
            Some(c) => c,
            None => return Err(perr("unexpected end of input", pos)),
        };
        let kind = match c {
            '(' => {
                self.bump();
                FormKind::List(self.read_seq(')', depth, pos)?)
            }
            '[' => {
                self.bump();
                FormKind::Vector(self.read_seq(']', depth, pos)?)
            }
            '{' => {
                self.bump();
                let items = self.read_seq('}', depth, pos)?;
                if items.len() % 2 != 0 {
                    return Err(perr(
                        "map literal must contain an even number of forms",
                        pos,
                    ));
                }
                FormKind::Map(items)
            }
            ')' | ']' | '}' => {
                self.bump();
                return Err(perr(format!("unmatched delimiter `{c}`"), pos));
            }
            '"' => {
                self.bump();
                FormKind::Str(self.read_string(pos)?.into())
            }
            '\'' => {
                self.bump();
                let inner = self.read_required(depth, pos, "quote")?;
                FormKind::List(vec![
                    Form {
                        kind: FormKind::Symbol("quote".into()),
                        pos,
                    },
                    inner,
                ])
            }
            '`' => return Err(perr("syntax quote is not supported (no macros)", pos)),
            '~' => return Err(perr("unquote is not supported (no macros)", pos)),
            '@' => return Err(perr("deref `@` is not supported (no atoms)", pos)),
            '^' => return Err(perr("metadata `^` is not supported", pos)),
            '\\' => {
                self.bump();
                FormKind::Str(self.read_char(pos)?.into())
            }
            ':' => {
                self.bump();
                if self.peek() == Some(':') {
                    self.bump();
                }
                let tok = self.read_token();
                if tok.is_empty() || tok.contains(':') || tok.ends_with('/') || tok.starts_with('/')
                {
                    return Err(perr(format!("invalid keyword `:{tok}`"), pos));
                }
                FormKind::Keyword(tok.into())
            }
            '#' => {
                self.bump();
                match self.peek() {
                    Some('{') => {
                        self.bump();
                        FormKind::Set(self.read_seq('}', depth, pos)?)
                    }
                    Some('(') => {
                        self.bump();
                        FormKind::AnonFn(self.read_seq(')', depth, pos)?)
                    }
                    Some('"') => {
                        self.bump();
                        FormKind::Regex(self.read_regex(pos)?.into())
                    }
                    Some('\'') => {
                        self.bump();
                        let inner = self.read_required(depth, pos, "#'")?;
                        FormKind::List(vec![
                            Form {
                                kind: FormKind::Symbol("var".into()),
                                pos,
                            },
                            inner,
                        ])
                    }
                    Some('#') => {
                        self.bump();
                        let tok = self.read_token();
                        match tok.as_str() {
                            "Inf" => FormKind::Float(f64::INFINITY),
                            "-Inf" => FormKind::Float(f64::NEG_INFINITY),
                            "NaN" => FormKind::Float(f64::NAN),
                            _ => return Err(perr(format!("unknown symbolic value ##{tok}"), pos)),
                        }
                    }
                    _ => return Err(perr("unsupported `#` dispatch form", pos)),
                }
            }
            _ => {
                let tok = self.read_token();
                if tok.is_empty() {
                    self.bump();
                    return Err(perr(format!("unexpected character `{c}`"), pos));
                }
                parse_atom(&tok, pos)?
            }
        };
        Ok(Form { kind, pos })
    }

    fn read_required(&mut self, depth: usize, pos: Pos, what: &str) -> Result<Form, LispError> {
        match self.read_next(depth + 1)? {
            Some(f) => Ok(f),
            None => Err(perr(format!("{what} at end of input"), pos)),
        }
    }

    fn read_token(&mut self) -> String {
        let mut s = String::new();
        while let Some(c) = self.peek() {
            if is_delim(c) {
                break;
            }
            s.push(c);
            self.bump();
        }
        s
    }

    fn read_string(&mut self, start: Pos) -> Result<String, LispError> {
        let mut s = String::new();
        loop {
            let p = self.pos();
            match self.bump() {
                None => return Err(perr("unterminated string literal", start)),
                Some('"') => return Ok(s),
                Some('\\') => match self.bump() {
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some('r') => s.push('\r'),
                    Some('b') => s.push('\u{8}'),
                    Some('f') => s.push('\u{c}'),
                    Some('0') => s.push('\0'),
                    Some('"') => s.push('"'),
                    Some('\\') => s.push('\\'),
                    Some('u') => {
                        let mut code = 0u32;
                        for _ in 0..4 {
                            let d = self
                                .bump()
                                .and_then(|c| c.to_digit(16))
                                .ok_or_else(|| perr("invalid \\u escape in string", p))?;
                            code = code * 16 + d;
                        }
                        s.push(char::from_u32(code).ok_or_else(|| perr("invalid \\u escape", p))?);
                    }
                    Some(c) => {
                        return Err(perr(format!("unsupported escape `\\{c}` in string"), p));
                    }
                    None => return Err(perr("unterminated string literal", start)),
                },
                Some(c) => s.push(c),
            }
        }
    }

    fn read_regex(&mut self, start: Pos) -> Result<String, LispError> {
        let mut s = String::new();
        loop {
            match self.bump() {
                None => return Err(perr("unterminated regex literal", start)),
                Some('"') => return Ok(s),
                Some('\\') => {
                    s.push('\\');
                    match self.bump() {
                        Some(c) => s.push(c),
                        None => return Err(perr("unterminated regex literal", start)),
                    }
                }
                Some(c) => s.push(c),
            }
        }
    }

    fn read_char(&mut self, pos: Pos) -> Result<String, LispError> {
        let first = match self.bump() {
            Some(c) => c,
            None => return Err(perr("character literal at end of input", pos)),
        };
        let mut tok = String::from(first);
        while let Some(c) = self.peek() {
            if is_delim(c) {
                break;
            }
            tok.push(c);
            self.bump();
        }
        if tok.chars().count() == 1 {
            return Ok(tok);
        }
        let named = match tok.as_str() {
            "newline" => "\n",
            "space" => " ",
            "tab" => "\t",
            "return" => "\r",
            "backspace" => "\u{8}",
            "formfeed" => "\u{c}",
            _ => {
                if let Some(hex) = tok.strip_prefix('u')
                    && hex.len() == 4
                    && let Ok(code) = u32::from_str_radix(hex, 16)
                    && let Some(c) = char::from_u32(code)
                {
                    return Ok(c.to_string());
                }
                return Err(perr(format!("unsupported character literal \\{tok}"), pos));
            }
        };
        Ok(named.to_string())
    }
}

fn parse_atom(tok: &str, pos: Pos) -> Result<FormKind, LispError> {
    match tok {
        "nil" => return Ok(FormKind::Nil),
        "true" => return Ok(FormKind::Bool(true)),
        "false" => return Ok(FormKind::Bool(false)),
        _ => {}
    }
    let b = tok.as_bytes();
    let numeric = b[0].is_ascii_digit()
        || ((b[0] == b'-' || b[0] == b'+') && b.len() > 1 && b[1].is_ascii_digit());
    if numeric {
        return parse_number(tok, pos);
    }
    if tok.contains("//") && tok != "/" {
        return Err(perr(format!("invalid symbol `{tok}`"), pos));
    }
    Ok(FormKind::Symbol(tok.into()))
}

fn parse_number(tok: &str, pos: Pos) -> Result<FormKind, LispError> {
    let (neg, body) = match tok.as_bytes()[0] {
        b'-' => (true, &tok[1..]),
        b'+' => (false, &tok[1..]),
        _ => (false, tok),
    };
    let body_int = body.strip_suffix('N').unwrap_or(body);
    if let Some(hex) = body_int
        .strip_prefix("0x")
        .or_else(|| body_int.strip_prefix("0X"))
    {
        return match i64::from_str_radix(hex, 16) {
            Ok(v) => Ok(FormKind::Int(if neg { -v } else { v })),
            Err(_) => Err(perr(format!("invalid number `{tok}`"), pos)),
        };
    }
    if body_int.bytes().all(|c| c.is_ascii_digit()) {
        let s = if neg {
            format!("-{body_int}")
        } else {
            body_int.to_string()
        };
        return match s.parse::<i64>() {
            Ok(v) => Ok(FormKind::Int(v)),
            Err(_) => Err(perr(
                format!("integer literal `{tok}` does not fit in 64 bits"),
                pos,
            )),
        };
    }
    if body.contains('/') {
        return Err(perr(
            format!("ratio literals are not supported: `{tok}`"),
            pos,
        ));
    }
    let fbody = body.strip_suffix('M').unwrap_or(body);
    let valid = fbody
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'-' | b'+'));
    if valid && let Ok(v) = fbody.parse::<f64>() {
        return Ok(FormKind::Float(if neg { -v } else { v }));
    }
    Err(perr(format!("invalid number `{tok}`"), pos))
}
