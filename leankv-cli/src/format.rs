//! The dump format: JSON lines, one object per line.
//!
//! * `{"begin":{"format":1}}` opens a dump (`dump` writes it first). Once it is read, `load`
//!   requires the matching end line: a dump cut off at a line boundary is refused, not taken
//!   for a whole one.
//! * `{"end":{"pairs":N,"trees":M}}` closes a dump (`dump` writes it last): the number of pair
//!   lines (stores and removals) and tree lines since the begin line, which `load` checks.
//!   Input without begin and end lines (written by hand or by other tools) is read as before.
//! * `{"tree":"users"}` names a tree (`dump` writes one before the tree's pairs, so that an
//!   empty tree survives a dump and load; `load` creates it).
//! * `{"tree":"users","key":"ada","value":"lovelace"}` is a pair (`load` stores it).
//! * `{"tree":"users","key":"ada","value":null}` removes a key (`load` only; `dump` never
//!   writes it).
//!
//! A key or value is a JSON string when its bytes are valid UTF-8 (the string's UTF-8 bytes
//! are the bytes), else `{"base64":"..."}` (standard alphabet, padded). Either form is read
//! for any bytes. Unknown fields are refused, so a typo is not silently dropped.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// Bytes as the format writes them: a string if UTF-8, else `{"base64":...}`.
pub struct Encoded<'a>(pub &'a [u8]);

impl Serialize for Encoded<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(self.0) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("base64", &STANDARD.encode(self.0))?;
                map.end()
            }
        }
    }
}

/// A line as `dump` writes it (borrowed, so writing allocates nothing per pair but the
/// encoding of non-UTF-8 bytes).
#[derive(Serialize)]
pub struct OutRecord<'a> {
    /// The tree.
    pub tree: &'a str,
    /// The key (absent in a tree line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<Encoded<'a>>,
    /// The value (absent in a tree line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Encoded<'a>>,
}

/// The version of the format that `dump` writes and `load` reads, in the begin line.
pub const FORMAT_VERSION: u64 = 1;

/// The first line of a dump.
#[derive(Serialize)]
pub struct OutBegin {
    /// `{"format":FORMAT_VERSION}`.
    pub begin: BeginInfo,
}

/// The last line of a dump.
#[derive(Serialize)]
pub struct OutEnd {
    /// What the dump holds.
    pub end: EndInfo,
}

/// What a begin line says.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(deny_unknown_fields)]
pub struct BeginInfo {
    /// The format version.
    pub format: u64,
}

/// What an end line says: the pair and tree lines of the dump it closes.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq, Clone, Copy, Default)]
#[serde(deny_unknown_fields)]
pub struct EndInfo {
    /// Pair lines (with a key: stores and removals).
    pub pairs: u64,
    /// Tree lines.
    pub trees: u64,
}

/// Bytes read from either form.
#[derive(Debug, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Base64 {
            base64: String,
        }
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Text(String),
            Base64(Base64),
        }
        match Either::deserialize(deserializer)
            .map_err(|_| de::Error::custom("expected a string or {\"base64\": \"...\"}"))?
        {
            Either::Text(text) => Ok(Bytes(text.into_bytes())),
            Either::Base64(Base64 { base64 }) => STANDARD
                .decode(base64)
                .map(Bytes)
                .map_err(|e| de::Error::custom(format!("bad base64: {e}"))),
        }
    }
}

/// A line as `load` reads it.
#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct InRecord {
    /// The tree; `None` in a begin or end line.
    #[serde(default)]
    pub tree: Option<String>,
    /// The key; `None` in a tree line.
    #[serde(default)]
    pub key: Option<Bytes>,
    /// `None`: no `value` field (a tree line); `Some(None)`: `"value":null` (remove the key);
    /// `Some(Some(bytes))`: store.
    #[serde(default, deserialize_with = "present")]
    pub value: Option<Option<Bytes>>,
    /// A begin line's field.
    #[serde(default)]
    pub begin: Option<BeginInfo>,
    /// An end line's field.
    #[serde(default)]
    pub end: Option<EndInfo>,
}

/// A field that is present (possibly `null`) deserializes to `Some`; an absent one takes
/// the default, `None`.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Option<Bytes>>, D::Error> {
    Option::<Bytes>::deserialize(deserializer).map(Some)
}

/// What a line asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Change {
    /// Create the tree if missing.
    Tree(String),
    /// Store `value` under `key`.
    Insert {
        /// The tree.
        tree: String,
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Remove `key`.
    Remove {
        /// The tree.
        tree: String,
        /// The key.
        key: Vec<u8>,
    },
}

/// What a line is.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A change to apply.
    Change(Change),
    /// A dump begins.
    Begin(BeginInfo),
    /// A dump ends.
    End(EndInfo),
}

/// Parses one line of the format.
pub fn parse_line(line: &[u8]) -> Result<Line, String> {
    let record: InRecord = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    let tree = match (record.tree, record.begin, record.end) {
        (Some(tree), None, None) => tree,
        (None, Some(begin), None) if record.key.is_none() && record.value.is_none() => {
            return Ok(Line::Begin(begin))
        }
        (None, None, Some(end)) if record.key.is_none() && record.value.is_none() => {
            return Ok(Line::End(end))
        }
        (None, None, None) => return Err("a line without a \"tree\"".into()),
        _ => {
            return Err(
                "\"begin\", \"end\" and \"tree\" lines are separate lines, with no other field"
                    .into(),
            )
        }
    };
    match (record.key, record.value) {
        (None, None) => Ok(Line::Change(Change::Tree(tree))),
        (Some(Bytes(key)), Some(Some(Bytes(value)))) => {
            Ok(Line::Change(Change::Insert { tree, key, value }))
        }
        (Some(Bytes(key)), Some(None)) => Ok(Line::Change(Change::Remove { tree, key })),
        (Some(_), None) => Err("a key without a value (\"value\": null removes a key)".into()),
        (None, Some(_)) => Err("a value without a key".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(tree: &str, key: Option<&[u8]>, value: Option<&[u8]>) -> String {
        serde_json::to_string(&OutRecord {
            tree,
            key: key.map(Encoded),
            value: value.map(Encoded),
        })
        .unwrap()
    }

    #[test]
    fn lines_are_written_as_documented() {
        assert_eq!(line("users", None, None), r#"{"tree":"users"}"#);
        assert_eq!(
            line("users", Some(b"ada"), Some(b"lovelace")),
            r#"{"tree":"users","key":"ada","value":"lovelace"}"#
        );
        assert_eq!(
            line("t", Some(b"\xff\x00"), Some(b"")),
            r#"{"tree":"t","key":{"base64":"/wA="},"value":""}"#
        );
    }

    #[test]
    fn every_line_reads_back() {
        type Case<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);
        let cases: [Case; 4] = [
            (None, None),
            (Some(b"ada"), Some(b"lovelace")),
            (Some(b"\xff\x00\n"), Some("caf\u{e9} \"\t".as_bytes())),
            (Some(b""), Some(b"\x80")),
        ];
        for (key, value) in cases {
            let parsed = parse_line(line("t", key, value).as_bytes()).unwrap();
            let Line::Change(parsed) = parsed else {
                panic!("not a change: {parsed:?}")
            };
            let expected = match (key, value) {
                (Some(key), Some(value)) => Change::Insert {
                    tree: "t".into(),
                    key: key.to_vec(),
                    value: value.to_vec(),
                },
                _ => Change::Tree("t".into()),
            };
            assert_eq!(parsed, expected);
        }
        assert_eq!(
            parse_line(br#"{"tree":"t","key":"k","value":null}"#).unwrap(),
            Line::Change(Change::Remove {
                tree: "t".into(),
                key: b"k".to_vec()
            })
        );
    }

    #[test]
    fn begin_and_end_lines_read_back() {
        let begin = serde_json::to_string(&OutBegin {
            begin: BeginInfo {
                format: FORMAT_VERSION,
            },
        })
        .unwrap();
        assert_eq!(begin, r#"{"begin":{"format":1}}"#);
        assert_eq!(
            parse_line(begin.as_bytes()).unwrap(),
            Line::Begin(BeginInfo { format: 1 })
        );
        let end = serde_json::to_string(&OutEnd {
            end: EndInfo { pairs: 7, trees: 2 },
        })
        .unwrap();
        assert_eq!(end, r#"{"end":{"pairs":7,"trees":2}}"#);
        assert_eq!(
            parse_line(end.as_bytes()).unwrap(),
            Line::End(EndInfo { pairs: 7, trees: 2 })
        );
    }

    #[test]
    fn malformed_lines_are_refused() {
        for bad in [
            &br#"{"tree":"t","key":"k"}"#[..],
            br#"{"tree":"t","value":"v"}"#,
            br#"{"tree":"t","key":"k","valeu":"v"}"#,
            br#"{"tree":"t","key":{"base64":"!!"},"value":"v"}"#,
            br#"{"tree":"t","key":{"hex":"00"},"value":"v"}"#,
            br#"{"tree":"t","key":5,"value":"v"}"#,
            br#"{"key":"k","value":"v"}"#,
            br#"{"tree":null}"#,
            br#"{"begin":{"format":1},"tree":"t"}"#,
            br#"{"end":{"pairs":1,"trees":1},"key":"k","value":"v"}"#,
            br#"{"end":{"pairs":1}}"#,
            br#"{"end":{"pairs":1,"trees":1,"more":2}}"#,
            br#"{"begin":{}}"#,
            b"not json",
        ] {
            assert!(parse_line(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
