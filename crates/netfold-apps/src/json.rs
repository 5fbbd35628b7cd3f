//! A small, bounded JSON (RFC 8259) reader for the iperf3 control channel.
//!
//! The library crate carries no JSON dependency, and iperf3 only sends small flat objects, so
//! this is a recursive-descent parser with a nesting limit (no stack exhaustion from `[[[[...`)
//! that works on input the caller has already bounded in size. Any malformed input is an `Err`,
//! never a panic.

/// A parsed JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    Array(Vec<Value>),
    /// Members in document order (duplicates kept; `get` returns the first, as cJSON does).
    Object(Vec<(String, Value)>),
}

/// Why a document was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    Syntax,
    TooDeep,
    TrailingData,
}

/// Nesting deeper than this is refused.
const MAX_DEPTH: usize = 32;

impl Value {
    /// The member named `key` of an object.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Object(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Number(n) => Some(*n),
            _ => None,
        }
    }
    /// A number as a non-negative integer, saturating (cJSON's `valueint` saturates too).
    pub fn as_u64(&self) -> Option<u64> {
        self.as_f64().map(|n| {
            if n.is_nan() || n <= 0.0 {
                0
            } else if n >= u64::MAX as f64 {
                u64::MAX
            } else {
                n as u64
            }
        })
    }
}

/// Parses one JSON document (surrounding whitespace allowed).
pub fn parse(text: &[u8]) -> Result<Value, Error> {
    let mut p = Parser { s: text, i: 0 };
    let v = p.value(0)?;
    p.ws();
    if p.i != p.s.len() {
        return Err(Error::TrailingData);
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, lit: &[u8]) -> Result<(), Error> {
        if self.s.get(self.i..self.i + lit.len()) == Some(lit) {
            self.i += lit.len();
            Ok(())
        } else {
            Err(Error::Syntax)
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value, Error> {
        if depth > MAX_DEPTH {
            return Err(Error::TooDeep);
        }
        self.ws();
        match self.peek().ok_or(Error::Syntax)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string().map(Value::String),
            b't' => self.eat(b"true").map(|_| Value::Bool(true)),
            b'f' => self.eat(b"false").map(|_| Value::Bool(false)),
            b'n' => self.eat(b"null").map(|_| Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Error::Syntax),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, Error> {
        self.i += 1;
        let mut members = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(Error::Syntax);
            }
            let k = self.string()?;
            self.ws();
            self.eat(b":")?;
            let v = self.value(depth + 1)?;
            members.push((k, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(Error::Syntax),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Value, Error> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            return Ok(Value::Array(items));
        }
        loop {
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(Error::Syntax),
            }
        }
    }

    fn number(&mut self) -> Result<Value, Error> {
        let start = self.i;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.i += 1;
        }
        let text = core::str::from_utf8(&self.s[start..self.i]).map_err(|_| Error::Syntax)?;
        text.parse::<f64>()
            .map(Value::Number)
            .map_err(|_| Error::Syntax)
    }

    /// RFC 8259 §7 strings, `\uXXXX` escapes included (lone surrogates become U+FFFD).
    fn string(&mut self) -> Result<String, Error> {
        self.i += 1;
        let mut out = Vec::new();
        loop {
            let c = self.peek().ok_or(Error::Syntax)?;
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.peek().ok_or(Error::Syntax)?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let hex = self.s.get(self.i..self.i + 4).ok_or(Error::Syntax)?;
                            let hex = core::str::from_utf8(hex).map_err(|_| Error::Syntax)?;
                            let code = u32::from_str_radix(hex, 16).map_err(|_| Error::Syntax)?;
                            self.i += 4;
                            char::from_u32(code).unwrap_or('\u{fffd}')
                        }
                        _ => return Err(Error::Syntax),
                    };
                    let mut b = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                }
                0..=0x1f => return Err(Error::Syntax),
                _ => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| Error::Syntax)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iperf3_parameters() {
        let v = parse(
            br#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":2,
                "reverse":true,"len":131072,"pacing_timer":1000,"client_version":"3.12"}"#,
        )
        .unwrap();
        assert_eq!(v.get("tcp"), Some(&Value::Bool(true)));
        assert_eq!(v.get("parallel").and_then(Value::as_u64), Some(2));
        assert_eq!(v.get("len").and_then(Value::as_u64), Some(131072));
        assert_eq!(v.get("client_version"), Some(&Value::String("3.12".into())));
        assert_eq!(v.get("udp"), None);
    }

    #[test]
    fn rejects_garbage_without_panicking() {
        let deep = "[".repeat(10_000);
        for bad in [
            &b""[..],
            b"{",
            b"{\"a\"}",
            b"[1,]",
            b"\"\\u12\"",
            b"tru",
            b"{} x",
            b"\"\x01\"",
            b"-",
            deep.as_bytes(),
        ] {
            assert!(parse(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse(deep.as_bytes()), Err(Error::TooDeep));
        assert_eq!(
            parse(br#" {"s":"a\"\u00e9\n","n":[-1.5e3,null,false]} "#)
                .unwrap()
                .get("s"),
            Some(&Value::String("a\"\u{e9}\n".into()))
        );
    }
}
