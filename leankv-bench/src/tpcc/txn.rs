//! The five TPC-C transactions (clauses 2.4–2.8) over the key-value interface.
//!
//! Each transaction runs as one engine transaction ([`Engine::transaction`]): leankv's applies
//! its writes as they are made and commits them atomically (all or none after a crash);
//! engines without such transactions run it operation by operation, each write its own commit
//! (records say which in `commit_unit`). Transactions are not isolated from each other, in
//! leankv as operation by operation, so the rules that keep the database consistent are the
//! same for both:
//! * Read-modify-writes of a row (counters, balances, stock) go through [`Operations::update`],
//!   which is atomic per key.
//! * New-Order's 1% rollback case (an unused item id, clause 2.4.2.3) is detected before
//!   anything is written: all items are looked up first, and the transaction stops with no
//!   effect if one is missing. The order id is only taken after that check.
//! * Delivery claims a new order by deleting it; a delete that finds nothing means another
//!   worker delivered that order, and the next oldest is tried.
//! * New-Order writes an order in the order it is found: its lines first, then the order row,
//!   then the new-order and by-customer entries that lead Delivery and Order-Status to it. A
//!   worker in another's district (without affinity) never meets an order without its lines.
//!
//! With warehouse affinity (or one worker) each district is changed by one worker only, and
//! the consistency conditions hold after the run (see `check`).

use super::load::{now, DISTRICTS, ITEMS};
use super::random::{last_name, TpccRandom};
use super::schema::*;
use crate::engine::{Engine, Operations, Table};
use anyhow::{anyhow, bail, Result};
use std::io::Write;

/// The transaction types, in the order of the standard mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::NewOrder,
        Kind::Payment,
        Kind::OrderStatus,
        Kind::Delivery,
        Kind::StockLevel,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new_order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order_status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock_level",
        }
    }

    /// Draws from the standard mix: 45% New-Order, 43% Payment, 4% each of the others
    /// (the minimum shares of clause 5.2.3, with New-Order taking the rest).
    pub fn draw(rng: &mut fastrand::Rng) -> Kind {
        match rng.u32(0..100) {
            0..45 => Kind::NewOrder,
            45..88 => Kind::Payment,
            88..92 => Kind::OrderStatus,
            92..96 => Kind::Delivery,
            _ => Kind::StockLevel,
        }
    }
}

/// How a transaction ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Committed,
    /// New-Order's intended rollback: nothing was written.
    RolledBack,
}

/// An item id that no item has: New-Order's rollback trigger.
const UNUSED_ITEM: u32 = ITEMS + 1;

/// Stock rows Stock-Level reads with one call (it reads up to 200).
const STOCK_LEVEL_READS: usize = 32;

/// The first `N` of `keys` as slices (empty ones past the end), for a read of many keys
/// without allocating.
fn key_slices<const N: usize>(keys: &[Key]) -> [&[u8]; N] {
    std::array::from_fn(|i| keys.get(i).map_or(&[][..], |key| &key[..]))
}

/// Reads the row under `key` (which must exist) and decodes it.
fn read<R: Row>(
    engine: &dyn Operations,
    table: Table,
    key: &[u8],
    buffer: &mut Vec<u8>,
) -> Result<R> {
    read_fields(engine, table, key, buffer, R::decode)
}

/// Reads the row under `key` (which must exist) into `buffer` and hands it to `fields`, which
/// returns `None` if it is not a row of `table` (see `Row::fields_at`).
fn read_fields<T>(
    engine: &dyn Operations,
    table: Table,
    key: &[u8],
    buffer: &mut Vec<u8>,
    fields: impl FnOnce(&[u8]) -> Option<T>,
) -> Result<T> {
    if !engine.get(table, key, buffer)? {
        bail!("{} row {key:?} is missing", TABLES[table]);
    }
    fields(buffer).ok_or_else(|| anyhow!("{} row {key:?} has a bad size", TABLES[table]))
}

/// Changes the row under `key` (which must exist) with `change`, atomically; returns what
/// `change` returned.
fn update<R: Row, T>(
    engine: &dyn Operations,
    table: Table,
    key: &[u8],
    change: impl FnOnce(&mut R) -> T,
) -> Result<T> {
    update_in_place(engine, table, key, |bytes| {
        let mut row = R::decode(bytes)?;
        let result = change(&mut row);
        row.encode_into(bytes);
        Some(result)
    })
}

/// Changes the row under `key` (which must exist) in place with `change`, which gets the
/// encoded row and returns `None` if it is not a row of `table` (see the in-place accessors
/// of [`Stock`] and [`Customer`]); atomically, as [`update`].
fn update_in_place<T>(
    engine: &dyn Operations,
    table: Table,
    key: &[u8],
    change: impl FnOnce(&mut [u8]) -> Option<T>,
) -> Result<T> {
    let mut change = Some(change);
    let mut result = None;
    let found = engine.update(table, key, &mut |bytes| {
        if let Some(change) = change.take() {
            result = change(bytes);
        }
    })?;
    match result {
        Some(result) => Ok(result),
        None if found => bail!("{} row {key:?} has a bad size", TABLES[table]),
        None => bail!("{} row {key:?} is missing", TABLES[table]),
    }
}

/// Keys (and values) of `table` that start with `prefix`, in order, until `visit` returns false.
fn scan_prefix(
    engine: &dyn Operations,
    table: Table,
    prefix: &[u8],
    mut visit: impl FnMut(&[u8], &[u8]) -> bool,
) -> Result<()> {
    let end = prefix_end(prefix);
    engine.scan(table, prefix, end.as_deref(), &mut |key, value| {
        key.starts_with(prefix) && visit(key, value)
    })
}

/// One worker's transaction state: its random source and scratch buffers.
pub struct Worker<'a> {
    engine: &'a dyn Engine,
    pub random: TpccRandom,
    warehouses: u32,
    /// Distinguishes this worker's history keys (see `history_key`).
    origin: u32,
    history_sequence: u64,
    /// Scratch space reused by every transaction, so that running one allocates nothing:
    /// values read, rows encoded, keys and items collected by scans.
    buffer: Vec<u8>,
    row: Vec<u8>,
    keys: Vec<Key>,
    items: Vec<u32>,
}

impl<'a> Worker<'a> {
    pub fn new(engine: &'a dyn Engine, random: TpccRandom, warehouses: u32, origin: u32) -> Self {
        Worker {
            engine,
            random,
            warehouses,
            origin,
            history_sequence: 0,
            buffer: Vec::new(),
            row: Vec::new(),
            keys: Vec::new(),
            items: Vec::new(),
        }
    }

    /// Runs one transaction of `kind` with home warehouse `w` as one engine transaction.
    pub fn run(&mut self, kind: Kind, w: u32) -> Result<Outcome> {
        let engine = self.engine;
        let mut outcome = Outcome::Committed;
        engine.transaction(&mut |transaction| {
            outcome = self.run_on(transaction, kind, w)?;
            Ok(())
        })?;
        Ok(outcome)
    }

    fn run_on(&mut self, engine: &dyn Operations, kind: Kind, w: u32) -> Result<Outcome> {
        match kind {
            Kind::NewOrder => self.new_order(engine, w),
            Kind::Payment => self.payment(engine, w).map(|()| Outcome::Committed),
            Kind::OrderStatus => self.order_status(engine, w).map(|_| Outcome::Committed),
            Kind::Delivery => self.delivery(engine, w).map(|()| Outcome::Committed),
            Kind::StockLevel => self.stock_level(engine, w).map(|_| Outcome::Committed),
        }
    }

    fn district(&mut self) -> u8 {
        self.random.uniform(1, u32::from(DISTRICTS)) as u8
    }

    /// A warehouse other than `w` (there must be one).
    fn other_warehouse(&mut self, w: u32) -> u32 {
        let other = self.random.uniform(1, self.warehouses - 1);
        if other >= w {
            other + 1
        } else {
            other
        }
    }

    /// Clause 2.4.
    pub fn new_order(&mut self, engine: &dyn Operations, w: u32) -> Result<Outcome> {
        let d = self.district();
        let c = self.random.customer_id();
        let line_count = self.random.uniform(5, 15);
        let rollback = self.random.uniform(1, 100) == 1;
        let mut lines = [(0, 0, 0); 15];
        let lines = &mut lines[..line_count as usize];
        for (number, line) in (1..).zip(lines.iter_mut()) {
            let item = if rollback && number == line_count {
                UNUSED_ITEM
            } else {
                self.random.item_id()
            };
            let supply = if self.warehouses > 1 && self.random.uniform(1, 100) == 1 {
                self.other_warehouse(w)
            } else {
                w
            };
            let quantity = self.random.uniform(1, 10);
            *line = (item, supply, quantity);
        }
        // The items are independent reads, read with one call as Stock-Level's stock rows.
        let item_keys: [Key; 15] =
            std::array::from_fn(|i| item_key(lines.get(i).map_or(0, |l| l.0)));
        let keys: [&[u8]; 15] = key_slices(&item_keys);
        let (mut prices, mut malformed) = ([0; 15], false);
        let mut price = |index: usize, row: &[u8]| match Item::decode(row) {
            Some(item) => prices[index] = item.price,
            None => malformed = true,
        };
        let found = engine.get_many(ITEM, &keys[..lines.len()], &mut price)?;
        if malformed {
            bail!("bad item row");
        }
        if found < lines.len() {
            return Ok(Outcome::RolledBack);
        }
        let warehouse: Warehouse = read(engine, WAREHOUSE, &warehouse_key(w), &mut self.buffer)?;
        let (district_tax, o) = update(
            engine,
            DISTRICT,
            &district_key(w, d),
            |district: &mut District| {
                let id = district.next_order_id;
                district.next_order_id += 1;
                (district.tax, id)
            },
        )?;
        let customer: Customer = read(engine, CUSTOMER, &customer_key(w, d, c), &mut self.buffer)?;
        let order = Order {
            customer: c,
            entry_date: now(),
            carrier: 0,
            line_count: line_count as u8,
            all_local: lines.iter().all(|&(_, supply, _)| supply == w),
        };
        let mut total = 0;
        for (number, (&(item, supply, quantity), price)) in (1..).zip(lines.iter().zip(prices)) {
            let dist_info = update_in_place(engine, STOCK, &stock_key(supply, item), |bytes| {
                let mut stock = Stock::counts_in(bytes)?;
                let dist_info = Stock::dist_in(bytes, usize::from(d))?;
                stock.quantity = if stock.quantity >= quantity + 10 {
                    stock.quantity - quantity
                } else {
                    stock.quantity + 91 - quantity
                };
                stock.ytd += quantity;
                stock.order_count += 1;
                if supply != w {
                    stock.remote_count += 1;
                }
                Stock::set_counts_in(bytes, stock);
                Some(dist_info)
            })?;
            let amount = i64::from(quantity) * price;
            total += amount;
            let line = OrderLine {
                item,
                supply_warehouse: supply,
                delivery_date: 0,
                quantity: quantity as u8,
                amount,
                dist_info,
            };
            engine.put(
                ORDER_LINE,
                &order_line_key(w, d, o, number),
                line.encode_in(&mut self.row),
            )?;
        }
        // Published after its lines, the entries that lead other transactions to it last.
        engine.put(ORDER, &order_key(w, d, o), order.encode_in(&mut self.row))?;
        engine.put(NEW_ORDER, &order_key(w, d, o), &[])?;
        engine.put(ORDER_BY_CUSTOMER, &order_by_customer_key(w, d, c, o), &[])?;
        // The total the terminal would show (clause 2.4.2.2), in 1/10,000 of a cent.
        let rates = i64::from(10_000 - customer.discount)
            * i64::from(10_000 + warehouse.tax + district_tax);
        std::hint::black_box(total * rates);
        Ok(Outcome::Committed)
    }

    /// The customer in the middle (rounded up) of those named `last` in the district, by
    /// first name (clause 2.5.2.2).
    fn customer_by_last_name(
        &mut self,
        engine: &dyn Operations,
        w: u32,
        d: u8,
        last: &[u8],
    ) -> Result<u32> {
        let ids = &mut self.items;
        ids.clear();
        scan_prefix(
            engine,
            CUSTOMER_BY_NAME,
            &customer_by_name_prefix(w, d, last),
            |key, _| {
                ids.push(trailing_u32(key));
                true
            },
        )?;
        if ids.is_empty() {
            bail!(
                "no customer named {} in district {w}/{d}",
                String::from_utf8_lossy(last)
            );
        }
        Ok(ids[ids.len().div_ceil(2) - 1])
    }

    /// 60% by last name, else by id (clauses 2.5.1.2 and 2.6.1.2).
    fn choose_customer(&mut self, engine: &dyn Operations, w: u32, d: u8) -> Result<u32> {
        if self.random.uniform(1, 100) <= 60 {
            let last = last_name(self.random.last_name_number());
            self.customer_by_last_name(engine, w, d, &last)
        } else {
            Ok(self.random.customer_id())
        }
    }

    /// Clause 2.5.
    pub fn payment(&mut self, engine: &dyn Operations, w: u32) -> Result<()> {
        let d = self.district();
        let (customer_w, customer_d) = if self.warehouses == 1 || self.random.uniform(1, 100) <= 85
        {
            (w, d)
        } else {
            (self.other_warehouse(w), self.district())
        };
        let amount = self.random.cents(100, 500_000);
        let warehouse_name = update(
            engine,
            WAREHOUSE,
            &warehouse_key(w),
            |warehouse: &mut Warehouse| {
                warehouse.ytd += amount;
                warehouse.name.clone()
            },
        )?;
        let district_name = update(
            engine,
            DISTRICT,
            &district_key(w, d),
            |district: &mut District| {
                district.ytd += amount;
                district.name.clone()
            },
        )?;
        let c = self.choose_customer(engine, customer_w, customer_d)?;
        update_in_place(
            engine,
            CUSTOMER,
            &customer_key(customer_w, customer_d, c),
            |bytes| {
                let mut account = Customer::account_in(bytes)?;
                let bad_credit = Customer::bad_credit_in(bytes)?;
                account.balance -= amount;
                account.ytd_payment += amount;
                account.payment_count += 1;
                Customer::set_account_in(bytes, account);
                if bad_credit {
                    let mut line = [0u8; 64];
                    let mut free = &mut line[..];
                    write!(free, "{c} {customer_d} {customer_w} {d} {w} {amount} ")
                        .expect("64 bytes hold six numbers");
                    let written = 64 - free.len();
                    Customer::prepend_data_in(bytes, &line[..written]);
                }
                Some(())
            },
        )?;
        let data = concat(&[&warehouse_name, b"    ", &district_name]);
        let history = History {
            customer: c,
            customer_district: customer_d,
            customer_warehouse: customer_w,
            district: d,
            warehouse: w,
            date: now(),
            amount,
            data,
        };
        self.history_sequence += 1;
        engine.put(
            HISTORY,
            &history_key(self.origin, self.history_sequence),
            history.encode_in(&mut self.row),
        )?;
        Ok(())
    }

    /// Clause 2.6. Returns the number of order lines of the customer's last order.
    pub fn order_status(&mut self, engine: &dyn Operations, w: u32) -> Result<usize> {
        let d = self.district();
        let c = self.choose_customer(engine, w, d)?;
        let customer: Customer = read(engine, CUSTOMER, &customer_key(w, d, c), &mut self.buffer)?;
        std::hint::black_box(customer.balance);
        let mut last_order = None;
        scan_prefix(
            engine,
            ORDER_BY_CUSTOMER,
            &customer_key(w, d, c),
            |key, _| {
                last_order = Some(trailing_u32(key));
                true
            },
        )?;
        let o = last_order.ok_or_else(|| anyhow!("customer {w}/{d}/{c} has no order"))?;
        let order: Order = read(engine, ORDER, &order_key(w, d, o), &mut self.buffer)?;
        let mut lines = 0;
        scan_prefix(engine, ORDER_LINE, &order_key(w, d, o), |_, value| {
            lines += usize::from(OrderLine::decode(value).is_some());
            true
        })?;
        if lines != usize::from(order.line_count) {
            bail!(
                "order {w}/{d}/{o} has {lines} lines, not {}",
                order.line_count
            );
        }
        Ok(lines)
    }

    /// Clause 2.7 (all ten districts in one go, as the deferred execution would).
    pub fn delivery(&mut self, engine: &dyn Operations, w: u32) -> Result<()> {
        let carrier = self.random.uniform(1, 10) as u8;
        let date = now();
        for d in 1..=DISTRICTS {
            let Some(o) = self.claim_oldest_new_order(engine, w, d)? else {
                continue; // nothing to deliver in this district
            };
            let c = update(engine, ORDER, &order_key(w, d, o), |order: &mut Order| {
                order.carrier = carrier;
                order.customer
            })?;
            let line_keys = &mut self.keys;
            line_keys.clear();
            scan_prefix(engine, ORDER_LINE, &order_key(w, d, o), |line, _| {
                line_keys.push(key(&[line]));
                true
            })?;
            let mut total = 0;
            for key in line_keys.iter() {
                total += update(engine, ORDER_LINE, key, |line: &mut OrderLine| {
                    line.delivery_date = date;
                    line.amount
                })?;
            }
            update_in_place(engine, CUSTOMER, &customer_key(w, d, c), |bytes| {
                let mut account = Customer::account_in(bytes)?;
                account.balance += total;
                account.delivery_count += 1;
                Customer::set_account_in(bytes, account);
                Some(())
            })?;
        }
        Ok(())
    }

    /// Deletes the district's oldest new order and returns its id (`None` if there is none).
    fn claim_oldest_new_order(
        &mut self,
        engine: &dyn Operations,
        w: u32,
        d: u8,
    ) -> Result<Option<u32>> {
        let prefix = district_key(w, d);
        loop {
            let mut oldest = None;
            scan_prefix(engine, NEW_ORDER, &prefix, |found, _| {
                oldest = Some(key(&[found]));
                false
            })?;
            let Some(key) = oldest else {
                return Ok(None);
            };
            if engine.delete(NEW_ORDER, &key)? {
                return Ok(Some(trailing_u32(&key)));
            }
        }
    }

    /// Clause 2.8. Returns the number of recently sold items low in stock.
    pub fn stock_level(&mut self, engine: &dyn Operations, w: u32) -> Result<usize> {
        let d = self.district();
        let threshold = self.random.uniform(10, 20);
        let district: District = read(engine, DISTRICT, &district_key(w, d), &mut self.buffer)?;
        let next = district.next_order_id;
        let end = order_key(w, d, next);
        let items = &mut self.items;
        items.clear();
        engine.scan(
            ORDER_LINE,
            &order_key(w, d, next.saturating_sub(20)),
            Some(&*end),
            &mut |key, value| {
                if key >= &*end {
                    return false;
                }
                if let Some(line) = OrderLine::decode(value) {
                    items.push(line.item);
                }
                true
            },
        )?;
        items.sort_unstable();
        items.dedup();
        self.keys.clear();
        self.keys
            .extend(items.iter().map(|&item| stock_key(w, item)));
        // The stock rows are independent reads: a read of many keys lets an engine overlap
        // their misses (leankv: `Tree::get_many_with`; others read them one by one).
        let (mut low, mut malformed) = (0, false);
        for chunk in self.keys.chunks(STOCK_LEVEL_READS) {
            let keys: [&[u8]; STOCK_LEVEL_READS] = key_slices(chunk);
            let mut count_low = |_, row: &[u8]| match Stock::quantity_in(row) {
                Some(quantity) => low += usize::from(quantity < threshold),
                None => malformed = true,
            };
            let found = engine.get_many(STOCK, &keys[..chunk.len()], &mut count_low)?;
            if found < chunk.len() || malformed {
                bail!("a stock row of warehouse {w} is missing or has a bad size");
            }
        }
        Ok(low)
    }
}
