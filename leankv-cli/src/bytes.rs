//! Keys and values between the command line and bytes: arguments as UTF-8 or hex, output as
//! escaped text or hex, and key ranges from `--prefix`/`--from`/`--to`.

use crate::cli::RangeArgs;
use crate::error::{CliError, CliResult};
use std::ops::Bound;

/// How keys and values given on the command line are read and how `get`/`scan` print them.
#[derive(Debug, Clone, Copy)]
pub struct Encoding {
    /// `--hex`: hex in and out.
    pub hex: bool,
}

impl Encoding {
    /// The bytes of an argument: its UTF-8 bytes, or the bytes its hex digits spell.
    pub fn parse(&self, what: &str, argument: &str) -> CliResult<Vec<u8>> {
        if !self.hex {
            return Ok(argument.as_bytes().to_vec());
        }
        hex::decode(argument)
            .map_err(|e| CliError::usage(format!("{what} {argument:?} is not hex (--hex): {e}")))
    }

    /// Bytes as printed by `scan` (and `get --hex`): hex, or text with escapes.
    pub fn show(&self, bytes: &[u8]) -> String {
        if self.hex {
            hex::encode(bytes)
        } else {
            escape(bytes)
        }
    }
}

/// Bytes as one line of readable text: valid UTF-8 as it is, except that `\`, tab, newline,
/// carriage return and other control characters are escaped (`\\`, `\t`, `\n`, `\r`, `\xNN`,
/// `\u{NNNN}`), and bytes that are not UTF-8 as `\xNN`. Distinct inputs give distinct
/// outputs, and the output holds no tab or newline.
pub fn escape(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => text.push_str("\\\\"),
                '\t' => text.push_str("\\t"),
                '\n' => text.push_str("\\n"),
                '\r' => text.push_str("\\r"),
                c if c.is_ascii_control() => {
                    let _ = write!(text, "\\x{:02x}", c as u32);
                }
                c if c.is_control() => {
                    let _ = write!(text, "\\u{{{:04x}}}", c as u32);
                }
                c => text.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(text, "\\x{byte:02x}");
        }
    }
    text
}

/// A key range as bounds.
#[derive(Debug, Clone)]
pub struct KeyRange {
    /// Lower bound.
    pub low: Bound<Vec<u8>>,
    /// Upper bound.
    pub high: Bound<Vec<u8>>,
}

impl KeyRange {
    /// The range `--prefix`, `--from` (included) and `--to` (excluded) describe together.
    pub fn from_args(args: &RangeArgs, encoding: Encoding) -> CliResult<KeyRange> {
        let parse = |what: &str, argument: &Option<String>| {
            argument
                .as_deref()
                .map(|argument| encoding.parse(what, argument))
                .transpose()
        };
        let prefix = parse("prefix", &args.prefix)?;
        let from = parse("key", &args.from)?;
        let to = parse("key", &args.to)?;
        let mut low = Bound::Unbounded;
        let mut high = Bound::Unbounded;
        if let Some(prefix) = prefix {
            if let Some(end) = prefix_successor(&prefix) {
                high = Bound::Excluded(end);
            }
            low = Bound::Included(prefix);
        }
        if let Some(from) = from {
            low = match low {
                Bound::Included(prefix) if prefix > from => Bound::Included(prefix),
                _ => Bound::Included(from),
            };
        }
        if let Some(to) = to {
            high = match high {
                Bound::Excluded(end) if end < to => Bound::Excluded(end),
                _ => Bound::Excluded(to),
            };
        }
        Ok(KeyRange { low, high })
    }

    /// True when no key can lie in the range (its low bound is not below its high bound).
    pub fn is_empty(&self) -> bool {
        match (&self.low, &self.high) {
            (Bound::Included(low), Bound::Excluded(high)) => low >= high,
            _ => false,
        }
    }

    /// The bounds as the tree's range methods take them.
    pub fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (as_slice(&self.low), as_slice(&self.high))
    }
}

fn as_slice(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key.as_slice()),
        Bound::Excluded(key) => Bound::Excluded(key.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The smallest key above every key that starts with `prefix`; `None` when there is none
/// (the prefix is empty or all `0xff`).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_is_readable_and_unambiguous() {
        assert_eq!(escape(b"plain text"), "plain text");
        assert_eq!(escape("café".as_bytes()), "café");
        assert_eq!(escape(b"a\tb\nc\\d\r\x00"), "a\\tb\\nc\\\\d\\r\\x00");
        assert_eq!(escape(b"\xff\xfeok"), "\\xff\\xfeok");
        assert_eq!(escape("\u{85}".as_bytes()), "\\u{0085}");
    }

    #[test]
    fn ranges_combine_prefix_from_and_to() {
        let text = Encoding { hex: false };
        let range = |prefix: Option<&str>, from: Option<&str>, to: Option<&str>| {
            let args = RangeArgs {
                prefix: prefix.map(String::from),
                from: from.map(String::from),
                to: to.map(String::from),
            };
            KeyRange::from_args(&args, text).unwrap()
        };
        let r = range(Some("ab"), None, None);
        assert_eq!(r.low, Bound::Included(b"ab".to_vec()));
        assert_eq!(r.high, Bound::Excluded(b"ac".to_vec()));
        let r = range(Some("ab"), Some("abc"), Some("zz"));
        assert_eq!(r.low, Bound::Included(b"abc".to_vec()));
        assert_eq!(r.high, Bound::Excluded(b"ac".to_vec()));
        let r = range(Some("ab"), Some("a"), Some("abx"));
        assert_eq!(r.low, Bound::Included(b"ab".to_vec()));
        assert_eq!(r.high, Bound::Excluded(b"abx".to_vec()));
        assert!(range(None, Some("b"), Some("a")).is_empty());
        assert!(range(Some("b"), None, Some("a")).is_empty());
        let all = range(Some(""), None, None);
        assert_eq!(all.high, Bound::Unbounded);
        assert!(!all.is_empty());
        assert_eq!(prefix_successor(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_successor(b"\xff"), None);
    }

    #[test]
    fn hex_arguments_are_checked() {
        let hex = Encoding { hex: true };
        assert_eq!(hex.parse("key", "00ff").unwrap(), [0, 255]);
        assert_eq!(hex.parse("key", "").unwrap(), b"");
        assert!(hex.parse("key", "0g").is_err());
        assert!(hex.parse("key", "abc").is_err());
        assert_eq!(hex.show(b"\x01\xab"), "01ab");
    }
}
