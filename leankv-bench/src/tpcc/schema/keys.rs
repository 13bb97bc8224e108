//! The tables and their order-preserving keys: big-endian integers, names zero-padded to a
//! fixed width.

use crate::engine::Table;
use arrayvec::ArrayVec;

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

/// A key kept inline (building one allocates nothing).
pub type Key = ArrayVec<u8, MAX_KEY_LEN>;

/// The key made of `fields` one after the other.
pub fn key(fields: &[&[u8]]) -> Key {
    let mut key = Key::new();
    for field in fields {
        key.try_extend_from_slice(field)
            .expect("TPC-C keys fit MAX_KEY_LEN");
    }
    key
}

/// A name zero-padded to `NAME_WIDTH` bytes, so shorter names sort first.
fn name(name: &[u8]) -> [u8; NAME_WIDTH] {
    debug_assert!(name.len() <= NAME_WIDTH);
    let mut padded = [0; NAME_WIDTH];
    padded[..name.len()].copy_from_slice(name);
    padded
}

pub fn warehouse_key(w: u32) -> Key {
    key(&[&w.to_be_bytes()])
}

pub fn district_key(w: u32, d: u8) -> Key {
    key(&[&w.to_be_bytes(), &[d]])
}

pub fn customer_key(w: u32, d: u8, c: u32) -> Key {
    key(&[&w.to_be_bytes(), &[d], &c.to_be_bytes()])
}

pub fn customer_by_name_key(w: u32, d: u8, last: &[u8], first: &[u8], c: u32) -> Key {
    key(&[
        &w.to_be_bytes(),
        &[d],
        &name(last),
        &name(first),
        &c.to_be_bytes(),
    ])
}

/// The prefix of all index entries for customers named `last` in one district.
pub fn customer_by_name_prefix(w: u32, d: u8, last: &[u8]) -> Key {
    key(&[&w.to_be_bytes(), &[d], &name(last)])
}

/// History rows have no key in the specification: `origin` (0 for the loader, the worker
/// number plus one for workers) and a sequence number of that origin make one.
pub fn history_key(origin: u32, sequence: u64) -> Key {
    key(&[&origin.to_be_bytes(), &sequence.to_be_bytes()])
}

/// Also the key of the order's NEW-ORDER row.
pub fn order_key(w: u32, d: u8, o: u32) -> Key {
    key(&[&w.to_be_bytes(), &[d], &o.to_be_bytes()])
}

pub fn order_by_customer_key(w: u32, d: u8, c: u32, o: u32) -> Key {
    key(&[&w.to_be_bytes(), &[d], &c.to_be_bytes(), &o.to_be_bytes()])
}

pub fn order_line_key(w: u32, d: u8, o: u32, number: u8) -> Key {
    key(&[&w.to_be_bytes(), &[d], &o.to_be_bytes(), &[number]])
}

pub fn item_key(i: u32) -> Key {
    key(&[&i.to_be_bytes()])
}

pub fn stock_key(w: u32, i: u32) -> Key {
    key(&[&w.to_be_bytes(), &i.to_be_bytes()])
}

/// The first key after every key that starts with `prefix` (`None`: no such key); `prefix`
/// is (a prefix of) a key.
pub fn prefix_end(prefix: &[u8]) -> Option<Key> {
    let mut end = key(&[prefix]);
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
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
