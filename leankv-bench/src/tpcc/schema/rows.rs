//! The rows: compact fixed-layout values (every row of a table has one size, so updates can
//! rewrite a value in place), written and read field by field.

use super::keys::NAME_WIDTH;
use arrayvec::ArrayVec;

/// Writes fixed-layout fields into a value.
pub struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) {
        self.out[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    pub fn u8(&mut self, value: u8) {
        self.put(&[value]);
    }

    pub fn u16(&mut self, value: u16) {
        self.put(&value.to_le_bytes());
    }

    pub fn u32(&mut self, value: u32) {
        self.put(&value.to_le_bytes());
    }

    pub fn i64(&mut self, value: i64) {
        self.put(&value.to_le_bytes());
    }

    pub fn u64(&mut self, value: u64) {
        self.put(&value.to_le_bytes());
    }

    /// A string in `width` bytes behind a length byte (longer strings are cut).
    pub fn text(&mut self, text: &[u8], width: usize) {
        let len = text.len().min(width);
        self.u8(len as u8);
        self.put(&text[..len]);
        self.out[self.at..self.at + width - len].fill(0);
        self.at += width - len;
    }
}

/// Reads fixed-layout fields from a value.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let field = self.bytes[self.at..self.at + N]
            .try_into()
            .expect("N bytes");
        self.at += N;
        field
    }

    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }

    pub fn i64(&mut self) -> i64 {
        i64::from_le_bytes(self.take())
    }

    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }

    pub fn text<const W: usize>(&mut self) -> Text<W> {
        let len = usize::from(self.u8()).min(W);
        let text = text(&self.bytes[self.at..self.at + len]);
        self.at += W;
        text
    }
}

/// A text field kept inline, at most `W` bytes: decoding a row allocates nothing.
pub type Text<const W: usize> = ArrayVec<u8, W>;

/// `bytes` as a text field, cut at `W` bytes.
pub fn text<const W: usize>(bytes: &[u8]) -> Text<W> {
    concat(&[bytes])
}

/// The parts one after the other as a text field, cut at `W` bytes.
pub fn concat<const W: usize>(parts: &[&[u8]]) -> Text<W> {
    let mut joined = Text::new();
    for part in parts {
        let len = part.len().min(joined.remaining_capacity());
        joined
            .try_extend_from_slice(&part[..len])
            .expect("cut to the remaining capacity");
    }
    joined
}

/// A row with a fixed encoded size.
pub trait Row: Sized {
    const SIZE: usize;
    fn write(&self, out: &mut Writer<'_>);
    fn read(input: &mut Reader<'_>) -> Self;

    fn encode(&self) -> Vec<u8> {
        let mut bytes = vec![0; Self::SIZE];
        self.encode_into(&mut bytes);
        bytes
    }

    /// Encodes into `buffer` (resized to `SIZE`): a caller that reuses one allocates nothing.
    fn encode_in<'b>(&self, buffer: &'b mut Vec<u8>) -> &'b [u8] {
        buffer.resize(Self::SIZE, 0);
        self.encode_into(buffer);
        buffer
    }

    /// Encodes into `bytes`, which must be `SIZE` long.
    fn encode_into(&self, bytes: &mut [u8]) {
        assert_eq!(bytes.len(), Self::SIZE, "row buffer of the wrong size");
        let mut writer = Writer { out: bytes, at: 0 };
        self.write(&mut writer);
        debug_assert_eq!(writer.at, Self::SIZE);
    }

    /// Decodes a value; `None` if it does not have this row's size.
    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(Self::read(&mut Self::fields_at(bytes, 0)?))
    }

    /// Reads the fields of the encoded row `bytes` from offset `at` on, without decoding the
    /// rest; `None` if `bytes` does not have this row's size.
    fn fields_at(bytes: &[u8], at: usize) -> Option<Reader<'_>> {
        (bytes.len() == Self::SIZE).then_some(Reader { bytes, at })
    }

    /// Writes fields into the encoded row `bytes` (which must have this row's size) from
    /// offset `at` on.
    fn set_fields_at(bytes: &mut [u8], at: usize) -> Writer<'_> {
        assert_eq!(bytes.len(), Self::SIZE, "row buffer of the wrong size");
        Writer { out: bytes, at }
    }
}

/// Street, city, state and zip: the address block several relations share.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Address {
    pub street_1: Text<20>,
    pub street_2: Text<20>,
    pub city: Text<20>,
    pub state: Text<2>,
    pub zip: Text<9>,
}

impl Address {
    const SIZE: usize = 3 * 21 + 3 + 10;

    fn write(&self, out: &mut Writer<'_>) {
        out.text(&self.street_1, 20);
        out.text(&self.street_2, 20);
        out.text(&self.city, 20);
        out.text(&self.state, 2);
        out.text(&self.zip, 9);
    }

    fn read(input: &mut Reader<'_>) -> Self {
        Address {
            street_1: input.text::<20>(),
            street_2: input.text::<20>(),
            city: input.text::<20>(),
            state: input.text::<2>(),
            zip: input.text::<9>(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warehouse {
    pub name: Text<10>,
    pub address: Address,
    /// Rate in 1/10,000.
    pub tax: u32,
    /// Cents.
    pub ytd: i64,
}

impl Row for Warehouse {
    const SIZE: usize = 11 + Address::SIZE + 4 + 8;

    fn write(&self, out: &mut Writer<'_>) {
        out.text(&self.name, 10);
        self.address.write(out);
        out.u32(self.tax);
        out.i64(self.ytd);
    }

    fn read(input: &mut Reader<'_>) -> Self {
        Warehouse {
            name: input.text::<10>(),
            address: Address::read(input),
            tax: input.u32(),
            ytd: input.i64(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct District {
    pub name: Text<10>,
    pub address: Address,
    pub tax: u32,
    pub ytd: i64,
    pub next_order_id: u32,
}

impl Row for District {
    const SIZE: usize = 11 + Address::SIZE + 4 + 8 + 4;

    fn write(&self, out: &mut Writer<'_>) {
        out.text(&self.name, 10);
        self.address.write(out);
        out.u32(self.tax);
        out.i64(self.ytd);
        out.u32(self.next_order_id);
    }

    fn read(input: &mut Reader<'_>) -> Self {
        District {
            name: input.text::<10>(),
            address: Address::read(input),
            tax: input.u32(),
            ytd: input.i64(),
            next_order_id: input.u32(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customer {
    pub first: Text<NAME_WIDTH>,
    pub middle: Text<2>,
    pub last: Text<NAME_WIDTH>,
    pub address: Address,
    pub phone: Text<16>,
    pub since: u64,
    /// "GC" or "BC".
    pub credit: Text<2>,
    pub credit_limit: i64,
    pub discount: u32,
    pub balance: i64,
    pub ytd_payment: i64,
    pub payment_count: u32,
    pub delivery_count: u32,
    pub data: Text<CUSTOMER_DATA_WIDTH>,
}

/// Longest customer data (clause 2.5.2.2 keeps it at 500 characters).
pub const CUSTOMER_DATA_WIDTH: usize = 500;

impl Row for Customer {
    const SIZE: usize =
        17 + 3 + 17 + Address::SIZE + 17 + 8 + 3 + 8 + 4 + 8 + 8 + 4 + 4 + 2 + CUSTOMER_DATA_WIDTH;

    fn write(&self, out: &mut Writer<'_>) {
        out.text(&self.first, NAME_WIDTH);
        out.text(&self.middle, 2);
        out.text(&self.last, NAME_WIDTH);
        self.address.write(out);
        out.text(&self.phone, 16);
        out.u64(self.since);
        out.text(&self.credit, 2);
        out.i64(self.credit_limit);
        out.u32(self.discount);
        out.i64(self.balance);
        out.i64(self.ytd_payment);
        out.u32(self.payment_count);
        out.u32(self.delivery_count);
        // Data is up to 500 bytes, longer than a length byte counts: two length bytes.
        let len = self.data.len().min(CUSTOMER_DATA_WIDTH);
        out.u16(len as u16);
        out.put(&self.data[..len]);
        out.out[out.at..out.at + CUSTOMER_DATA_WIDTH - len].fill(0);
        out.at += CUSTOMER_DATA_WIDTH - len;
    }

    fn read(input: &mut Reader<'_>) -> Self {
        let first = input.text::<NAME_WIDTH>();
        let middle = input.text::<2>();
        let last = input.text::<NAME_WIDTH>();
        let address = Address::read(input);
        let phone = input.text::<16>();
        let since = input.u64();
        let credit = input.text::<2>();
        let credit_limit = input.i64();
        let discount = input.u32();
        let balance = input.i64();
        let ytd_payment = input.i64();
        let payment_count = input.u32();
        let delivery_count = input.u32();
        let len = usize::from(input.u16()).min(CUSTOMER_DATA_WIDTH);
        let data = text(&input.bytes[input.at..input.at + len]);
        input.at += CUSTOMER_DATA_WIDTH;
        Customer {
            first,
            middle,
            last,
            address,
            phone,
            since,
            credit,
            credit_limit,
            discount,
            balance,
            ytd_payment,
            payment_count,
            delivery_count,
            data,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    pub customer: u32,
    pub customer_district: u8,
    pub customer_warehouse: u32,
    pub district: u8,
    pub warehouse: u32,
    pub date: u64,
    pub amount: i64,
    pub data: Text<24>,
}

impl Row for History {
    const SIZE: usize = 4 + 1 + 4 + 1 + 4 + 8 + 8 + 25;

    fn write(&self, out: &mut Writer<'_>) {
        out.u32(self.customer);
        out.u8(self.customer_district);
        out.u32(self.customer_warehouse);
        out.u8(self.district);
        out.u32(self.warehouse);
        out.u64(self.date);
        out.i64(self.amount);
        out.text(&self.data, 24);
    }

    fn read(input: &mut Reader<'_>) -> Self {
        History {
            customer: input.u32(),
            customer_district: input.u8(),
            customer_warehouse: input.u32(),
            district: input.u8(),
            warehouse: input.u32(),
            date: input.u64(),
            amount: input.i64(),
            data: input.text::<24>(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub customer: u32,
    pub entry_date: u64,
    /// 0 until delivered.
    pub carrier: u8,
    pub line_count: u8,
    pub all_local: bool,
}

impl Row for Order {
    const SIZE: usize = 4 + 8 + 1 + 1 + 1;

    fn write(&self, out: &mut Writer<'_>) {
        out.u32(self.customer);
        out.u64(self.entry_date);
        out.u8(self.carrier);
        out.u8(self.line_count);
        out.u8(self.all_local.into());
    }

    fn read(input: &mut Reader<'_>) -> Self {
        Order {
            customer: input.u32(),
            entry_date: input.u64(),
            carrier: input.u8(),
            line_count: input.u8(),
            all_local: input.u8() != 0,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLine {
    pub item: u32,
    pub supply_warehouse: u32,
    /// 0 until delivered.
    pub delivery_date: u64,
    pub quantity: u8,
    pub amount: i64,
    pub dist_info: Text<24>,
}

impl Row for OrderLine {
    const SIZE: usize = 4 + 4 + 8 + 1 + 8 + 25;

    fn write(&self, out: &mut Writer<'_>) {
        out.u32(self.item);
        out.u32(self.supply_warehouse);
        out.u64(self.delivery_date);
        out.u8(self.quantity);
        out.i64(self.amount);
        out.text(&self.dist_info, 24);
    }

    fn read(input: &mut Reader<'_>) -> Self {
        OrderLine {
            item: input.u32(),
            supply_warehouse: input.u32(),
            delivery_date: input.u64(),
            quantity: input.u8(),
            amount: input.i64(),
            dist_info: input.text::<24>(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub image_id: u32,
    pub name: Text<24>,
    pub price: i64,
    pub data: Text<50>,
}

impl Row for Item {
    const SIZE: usize = 4 + 25 + 8 + 51;

    fn write(&self, out: &mut Writer<'_>) {
        out.u32(self.image_id);
        out.text(&self.name, 24);
        out.i64(self.price);
        out.text(&self.data, 50);
    }

    fn read(input: &mut Reader<'_>) -> Self {
        Item {
            image_id: input.u32(),
            name: input.text::<24>(),
            price: input.i64(),
            data: input.text::<50>(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stock {
    pub quantity: u32,
    /// S_DIST_01 .. S_DIST_10.
    pub dist: [Text<24>; 10],
    pub ytd: u32,
    pub order_count: u32,
    pub remote_count: u32,
    pub data: Text<50>,
}

impl Row for Stock {
    const SIZE: usize = 4 + 10 * 25 + 4 + 4 + 4 + 51;

    fn write(&self, out: &mut Writer<'_>) {
        out.u32(self.quantity);
        for dist in &self.dist {
            out.text(dist, 24);
        }
        out.u32(self.ytd);
        out.u32(self.order_count);
        out.u32(self.remote_count);
        out.text(&self.data, 50);
    }

    fn read(input: &mut Reader<'_>) -> Self {
        Stock {
            quantity: input.u32(),
            dist: std::array::from_fn(|_| input.text::<24>()),
            ytd: input.u32(),
            order_count: input.u32(),
            remote_count: input.u32(),
            data: input.text::<50>(),
        }
    }
}

/// The account of a customer row, which Payment and Delivery change: read and written in
/// place in the encoded row ([`Customer::account_in`], [`Customer::set_account_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustomerAccount {
    pub balance: i64,
    pub ytd_payment: i64,
    pub payment_count: u32,
    pub delivery_count: u32,
}

/// Fields of an encoded customer row, reached without decoding the rest (see [`Stock`]'s):
/// Payment changes one customer per transaction and Delivery ten, and the 500-byte data field
/// made decoding and re-encoding whole rows their largest copy. Each reading accessor returns
/// `None` for bytes that are not a customer row.
impl Customer {
    const CREDIT_AT: usize = 2 * (NAME_WIDTH + 1) + 3 + Address::SIZE + 17 + 8;
    const ACCOUNT_AT: usize = Self::CREDIT_AT + 3 + 8 + 4;
    const DATA_AT: usize = Self::ACCOUNT_AT + 8 + 8 + 4 + 4;

    pub fn account_in(bytes: &[u8]) -> Option<CustomerAccount> {
        let mut fields = Self::fields_at(bytes, Self::ACCOUNT_AT)?;
        Some(CustomerAccount {
            balance: fields.i64(),
            ytd_payment: fields.i64(),
            payment_count: fields.u32(),
            delivery_count: fields.u32(),
        })
    }

    /// Writes `account` into `bytes`, an encoded customer row (checked by
    /// [`Self::account_in`]).
    pub fn set_account_in(bytes: &mut [u8], account: CustomerAccount) {
        let mut out = Self::set_fields_at(bytes, Self::ACCOUNT_AT);
        out.i64(account.balance);
        out.i64(account.ytd_payment);
        out.u32(account.payment_count);
        out.u32(account.delivery_count);
    }

    /// Whether the customer has bad credit ("BC").
    pub fn bad_credit_in(bytes: &[u8]) -> Option<bool> {
        Some(&*Self::fields_at(bytes, Self::CREDIT_AT)?.text::<2>() == b"BC")
    }

    /// Puts `prefix` before the data of `bytes`, an encoded customer row, keeping the first
    /// [`CUSTOMER_DATA_WIDTH`] bytes (as `concat(&[prefix, &data])` does).
    pub fn prepend_data_in(bytes: &mut [u8], prefix: &[u8]) {
        let old_len = Self::fields_at(bytes, Self::DATA_AT)
            .expect("a customer row")
            .u16();
        let old_len = usize::from(old_len).min(CUSTOMER_DATA_WIDTH);
        let start = Self::DATA_AT + 2;
        let prefix = &prefix[..prefix.len().min(CUSTOMER_DATA_WIDTH)];
        let new_len = (prefix.len() + old_len).min(CUSTOMER_DATA_WIDTH);
        let kept = new_len - prefix.len();
        bytes.copy_within(start..start + kept, start + prefix.len());
        bytes[start..start + prefix.len()].copy_from_slice(prefix);
        Self::set_fields_at(bytes, Self::DATA_AT).u16(new_len as u16);
    }
}

/// The counters of a stock row, which New-Order changes: read and written in place in the
/// encoded row ([`Stock::counts_in`], [`Stock::set_counts_in`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StockCounts {
    pub quantity: u32,
    pub ytd: u32,
    pub order_count: u32,
    pub remote_count: u32,
}

/// Fields of an encoded stock row, reached without decoding the rest (as a driver over
/// fixed-size records updates them in place): New-Order changes ten stock rows per
/// transaction and Stock-Level reads the quantity of about two hundred, and decoding and
/// re-encoding whole rows (ten district texts and the data) cost them most of their copying.
/// Each accessor returns `None` for bytes that are not a stock row.
impl Stock {
    const QUANTITY_AT: usize = 0;
    const DIST_AT: usize = 4;
    const DIST_WIDTH: usize = 25;
    const COUNTS_AT: usize = Self::DIST_AT + 10 * Self::DIST_WIDTH;

    pub fn quantity_in(bytes: &[u8]) -> Option<u32> {
        Some(Self::fields_at(bytes, Self::QUANTITY_AT)?.u32())
    }

    pub fn counts_in(bytes: &[u8]) -> Option<StockCounts> {
        let mut fields = Self::fields_at(bytes, Self::QUANTITY_AT)?;
        let quantity = fields.u32();
        fields.at = Self::COUNTS_AT;
        Some(StockCounts {
            quantity,
            ytd: fields.u32(),
            order_count: fields.u32(),
            remote_count: fields.u32(),
        })
    }

    /// Writes `counts` into `bytes`, an encoded stock row (checked by [`Self::counts_in`]).
    pub fn set_counts_in(bytes: &mut [u8], counts: StockCounts) {
        Self::set_fields_at(bytes, Self::QUANTITY_AT).u32(counts.quantity);
        let mut out = Self::set_fields_at(bytes, Self::COUNTS_AT);
        out.u32(counts.ytd);
        out.u32(counts.order_count);
        out.u32(counts.remote_count);
    }

    /// S_DIST_xx of `district` (1 to 10).
    pub fn dist_in(bytes: &[u8], district: usize) -> Option<Text<24>> {
        let index = district.checked_sub(1).filter(|&index| index < 10)?;
        Some(Self::fields_at(bytes, Self::DIST_AT + index * Self::DIST_WIDTH)?.text::<24>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-place accessors of `customer`'s encoded row read and write what decoding sees.
    fn customer_accessors_agree_with_the_layout(customer: &Customer) {
        let mut bytes = customer.encode();
        let account = CustomerAccount {
            balance: customer.balance,
            ytd_payment: customer.ytd_payment,
            payment_count: customer.payment_count,
            delivery_count: customer.delivery_count,
        };
        assert_eq!(Customer::account_in(&bytes), Some(account));
        assert_eq!(
            Customer::bad_credit_in(&bytes),
            Some(&*customer.credit == b"BC")
        );
        assert_eq!(
            Customer::account_in(&bytes[1..]),
            None,
            "not a customer row"
        );
        let changed = CustomerAccount {
            balance: -7,
            ytd_payment: 8,
            payment_count: 9,
            delivery_count: 10,
        };
        Customer::set_account_in(&mut bytes, changed);
        Customer::prepend_data_in(&mut bytes, b"12 3 4 5 6 700 ");
        let expected = Customer {
            balance: -7,
            ytd_payment: 8,
            payment_count: 9,
            delivery_count: 10,
            data: concat(&[b"12 3 4 5 6 700 ", &customer.data]),
            ..customer.clone()
        };
        assert_eq!(Customer::decode(&bytes), Some(expected.clone()));
        assert_eq!(bytes, expected.encode(), "zero padding kept");
    }

    #[test]
    fn rows_round_trip_at_their_fixed_sizes() {
        let address = Address {
            street_1: text(b"street one"),
            street_2: text(b"s2"),
            city: text(b"a city with a long na"), // 21 bytes: cut to 20
            state: text(b"CA"),
            zip: text(b"123411111"),
        };
        let customer = Customer {
            first: text(b"firstname"),
            middle: text(b"OE"),
            last: text(b"PRICALLYOUGHT"),
            address: address.clone(),
            phone: text(b"0123456789012345"),
            since: 99,
            credit: text(b"BC"),
            credit_limit: 5_000_000,
            discount: 4_999,
            balance: -1_000,
            ytd_payment: 1_000,
            payment_count: 1,
            delivery_count: 0,
            data: text(&[b'x'; 500]),
        };
        let bytes = customer.encode();
        assert_eq!(bytes.len(), Customer::SIZE);
        customer_accessors_agree_with_the_layout(&customer);
        customer_accessors_agree_with_the_layout(&Customer {
            credit: text(b"GC"),
            data: text(b"short data"),
            ..customer.clone()
        });
        let decoded = Customer::decode(&bytes).unwrap();
        assert_eq!(&*decoded.address.city, b"a city with a long n");
        assert_eq!(
            Customer {
                address: Address {
                    city: text(b"a city with a long n"),
                    ..address
                },
                ..customer
            },
            decoded
        );
        let stock = Stock {
            quantity: 91,
            dist: std::array::from_fn(|i| text(&[b'a' + i as u8; 24])),
            ytd: 5,
            order_count: 2,
            remote_count: 1,
            data: text(b"dataORIGINALdata"),
        };
        let mut bytes = stock.encode();
        assert_eq!(Stock::decode(&bytes), Some(stock.clone()));
        // The in-place accessors agree with the whole row's layout.
        assert_eq!(Stock::quantity_in(&bytes), Some(91));
        let counts = StockCounts {
            quantity: 91,
            ytd: 5,
            order_count: 2,
            remote_count: 1,
        };
        assert_eq!(Stock::counts_in(&bytes), Some(counts));
        for district in 1..=10 {
            assert_eq!(
                Stock::dist_in(&bytes, district).as_ref(),
                Some(&stock.dist[district - 1])
            );
        }
        assert_eq!(Stock::dist_in(&bytes, 11), None);
        assert_eq!(Stock::quantity_in(&bytes[1..]), None, "not a stock row");
        let changed = StockCounts {
            quantity: 17,
            ytd: 6,
            order_count: 3,
            remote_count: 2,
        };
        Stock::set_counts_in(&mut bytes, changed);
        assert_eq!(
            Stock::decode(&bytes),
            Some(Stock {
                quantity: 17,
                ytd: 6,
                order_count: 3,
                remote_count: 2,
                ..stock
            })
        );
        let line = OrderLine {
            item: 100_000,
            supply_warehouse: 7,
            delivery_date: 0,
            quantity: 10,
            amount: 999_999,
            dist_info: text(&[b'q'; 24]),
        };
        assert_eq!(OrderLine::decode(&line.encode()), Some(line));
        assert_eq!(Order::decode(&[0; 3]), None, "a value of the wrong size");
    }
}
