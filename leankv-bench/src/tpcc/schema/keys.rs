//! The tables and their order-preserving keys: big-endian integers, names zero-padded to a
//! fixed width.

use crate::engine::Table;

pub const WAREHOUSE: Table = 0;
pub const DISTRICT: Table = 1;
pub const CUSTOMER: Table = 2;
/// Secondary index: customers by (warehouse, district, last name, first name, id).
pub const CUSTOMER_BY_NAME: Table = 3;
pub const HISTORY: Table = 4;
pub const NEW_ORDER: Table = 5;
pub const ORDER: Table = 6;
/// Secondary index: orders by (warehouse, district, customer, order id).
pub const ORDER_BY_CUSTOMER: Table = 7;
pub const ORDER_LINE: Table = 8;
pub const ITEM: Table = 9;
pub const STOCK: Table = 10;

/// Table names, indexed by the constants above.
pub const TABLES: &[&str] = &[
    "warehouse",
    "district",
    "customer",
    "customer_by_name",
    "history",
    "new_order",
    "order",
    "order_by_customer",
    "order_line",
    "item",
    "stock",
];

/// Width of first and last names in keys and rows.
pub const NAME_WIDTH: usize = 16;

/// Longest key: a customer-by-name entry (warehouse, district, two names, id).
const MAX_KEY_LEN: usize = 4 + 1 + 2 * NAME_WIDTH + 4;

/// A key built from big-endian fields, kept inline (building one allocates nothing).
#[derive(Clone, Copy)]
pub struct Key {
    len: u8,
    bytes: [u8; MAX_KEY_LEN],
}

impl Default for Key {
    fn default() -> Self {
        Key {
            len: 0,
            bytes: [0; MAX_KEY_LEN],
        }
    }
}

impl std::ops::Deref for Key {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        **self == **other
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", &**self)
    }
}

impl Key {
    /// A key with these bytes (a key read back from a scan).
    pub fn of(bytes: &[u8]) -> Key {
        Key::default().push(bytes)
    }

    fn push(mut self, field: &[u8]) -> Self {
        let start = usize::from(self.len);
        self.bytes[start..start + field.len()].copy_from_slice(field);
        self.len += field.len() as u8;
        self
    }

    pub fn u8(self, value: u8) -> Self {
        self.push(&[value])
    }

    pub fn u32(self, value: u32) -> Self {
        self.push(&value.to_be_bytes())
    }

    pub fn u64(self, value: u64) -> Self {
        self.push(&value.to_be_bytes())
    }

    /// A name zero-padded to `NAME_WIDTH` bytes, so shorter names sort first.
    pub fn name(self, name: &[u8]) -> Self {
        debug_assert!(name.len() <= NAME_WIDTH);
        let mut padded = [0u8; NAME_WIDTH];
        padded[..name.len()].copy_from_slice(name);
        self.push(&padded)
    }
}

pub fn warehouse_key(w: u32) -> Key {
    Key::default().u32(w)
}

pub fn district_key(w: u32, d: u8) -> Key {
    Key::default().u32(w).u8(d)
}

pub fn customer_key(w: u32, d: u8, c: u32) -> Key {
    Key::default().u32(w).u8(d).u32(c)
}

pub fn customer_by_name_key(w: u32, d: u8, last: &[u8], first: &[u8], c: u32) -> Key {
    Key::default().u32(w).u8(d).name(last).name(first).u32(c)
}

/// The prefix of all index entries for customers named `last` in one district.
pub fn customer_by_name_prefix(w: u32, d: u8, last: &[u8]) -> Key {
    Key::default().u32(w).u8(d).name(last)
}

/// History rows have no key in the specification: `origin` (0 for the loader, the worker
/// number plus one for workers) and a sequence number of that origin make one.
pub fn history_key(origin: u32, sequence: u64) -> Key {
    Key::default().u32(origin).u64(sequence)
}

/// Also the key of the order's NEW-ORDER row.
pub fn order_key(w: u32, d: u8, o: u32) -> Key {
    Key::default().u32(w).u8(d).u32(o)
}

pub fn order_by_customer_key(w: u32, d: u8, c: u32, o: u32) -> Key {
    Key::default().u32(w).u8(d).u32(c).u32(o)
}

pub fn order_line_key(w: u32, d: u8, o: u32, number: u8) -> Key {
    Key::default().u32(w).u8(d).u32(o).u8(number)
}

pub fn item_key(i: u32) -> Key {
    Key::default().u32(i)
}

pub fn stock_key(w: u32, i: u32) -> Key {
    Key::default().u32(w).u32(i)
}

/// The first key after every key that starts with `prefix` (`None`: no such key); `prefix`
/// is (a prefix of) a key.
pub fn prefix_end(prefix: &[u8]) -> Option<Key> {
    let mut end = Key::of(prefix);
    while let Some(&last) = end.last() {
        end.len -= 1;
        if last < u8::MAX {
            return Some(end.u8(last + 1));
        }
    }
    None
}

/// The last big-endian u32 of a key (the id that ends index and order keys).
pub fn trailing_u32(key: &[u8]) -> u32 {
    key.len().checked_sub(4).map_or(0, |at| {
        u32::from_be_bytes(key[at..].try_into().expect("4 bytes"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_like_their_fields() {
        // Numeric order survives byte order, across byte boundaries.
        let orders: Vec<_> = [(1, 1, 255), (1, 1, 256), (1, 2, 1), (2, 1, 0), (256, 1, 1)]
            .iter()
            .map(|&(w, d, o)| order_key(w, d, o))
            .collect();
        assert!(orders.windows(2).all(|pair| pair[0] < pair[1]));
        let lines: Vec<_> = (1..=15).map(|n| order_line_key(3, 4, 70_000, n)).collect();
        assert!(lines.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(order_line_key(3, 4, 70_000, 15) < order_line_key(3, 4, 70_001, 1));
        // Shorter last names sort before their extensions; first names order within one.
        let a = customer_by_name_key(1, 1, b"ABLE", b"ZED", 9);
        let b = customer_by_name_key(1, 1, b"ABLEBAR", b"ANN", 1);
        let c = customer_by_name_key(1, 1, b"ABLEBAR", b"BOB", 0);
        assert!(a < b && b < c);
        assert!(b.starts_with(&customer_by_name_prefix(1, 1, b"ABLEBAR")));
        assert!(!a.starts_with(&customer_by_name_prefix(1, 1, b"ABLEBAR")));
        assert_eq!(
            trailing_u32(&order_by_customer_key(1, 2, 3, 4_000_000)),
            4_000_000
        );
        assert!(stock_key(1, 100_000) < stock_key(2, 1));
        // The prefix end bounds exactly the keys with the prefix.
        let prefix = district_key(3, 255);
        let end = prefix_end(&prefix).unwrap();
        assert!(order_key(3, 255, u32::MAX) < end && end <= district_key(4, 0));
        assert_eq!(prefix_end(&[1, 0xff, 0xff]).as_deref(), Some(&[2][..]));
        assert!(prefix_end(&[0xff, 0xff]).is_none());
    }
}
