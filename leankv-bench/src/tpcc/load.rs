//! Population of the initial database (clause 4.3.3.1) for warehouses `1..=W`: the item
//! table once, then each warehouse with its stock, districts, customers (with history rows and
//! the by-name index), orders (with the by-customer index), order lines and new orders.
//! Warehouses are loaded by several threads in parallel; rows go to the engine in batches.

use super::random::{last_name, NurandConstants, TpccRandom};
use super::schema::*;
use crate::engine::{Engine, Table};
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicU32, Ordering};

pub const ITEMS: u32 = 100_000;
pub const DISTRICTS: u8 = 10;
pub const CUSTOMERS_PER_DISTRICT: u32 = 3_000;
/// Orders loaded per district; the last 900 of them are undelivered (new orders).
pub const ORDERS_PER_DISTRICT: u32 = 3_000;
pub const FIRST_UNDELIVERED: u32 = 2_101;

/// Rows per `put_batch` call.
const BATCH: usize = 2_000;

/// Collects rows per table and hands them to the engine in batches.
struct Batches<'a> {
    engine: &'a dyn Engine,
    pending: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
}

impl<'a> Batches<'a> {
    fn new(engine: &'a dyn Engine) -> Self {
        Batches {
            engine,
            pending: vec![Vec::new(); TABLES.len()],
        }
    }

    fn put(&mut self, table: Table, key: Key, value: Vec<u8>) -> Result<()> {
        self.pending[table].push((key.to_vec(), value));
        if self.pending[table].len() >= BATCH {
            self.engine.put_batch(table, &self.pending[table])?;
            self.pending[table].clear();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        for (table, rows) in self.pending.iter_mut().enumerate() {
            if !rows.is_empty() {
                self.engine.put_batch(table, rows)?;
                rows.clear();
            }
        }
        Ok(())
    }
}

/// Seconds since the Unix epoch: the dates the loader and the transactions store.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

fn address(random: &mut TpccRandom) -> Address {
    Address {
        street_1: text(&random.astring(10, 20)),
        street_2: text(&random.astring(10, 20)),
        city: text(&random.astring(10, 20)),
        state: text(&random.astring(2, 2).to_ascii_uppercase()),
        zip: text(&random.zip()),
    }
}

/// Loads `warehouses` warehouses with `threads` threads; returns the rows written. The data
/// depends only on `seed` and `constants`.
pub fn load(
    engine: &dyn Engine,
    warehouses: u32,
    threads: usize,
    constants: NurandConstants,
    seed: u64,
) -> Result<u64> {
    let bar = ProgressBar::new(u64::from(warehouses) + 1).with_style(
        ProgressStyle::with_template(
            "  loading {bar:30} {pos}/{len} (items + warehouses), {elapsed}",
        )
        .expect("valid template"),
    );
    let mut rows = load_items(engine, &mut TpccRandom::new(seed, constants))?;
    bar.inc(1);
    let next = AtomicU32::new(1);
    let loaded: Vec<Result<u64>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                let (next, bar) = (&next, &bar);
                scope.spawn(move || -> Result<u64> {
                    let mut rows = 0;
                    loop {
                        let w = next.fetch_add(1, Ordering::Relaxed);
                        if w > warehouses {
                            return Ok(rows);
                        }
                        // Seeded by warehouse, not thread: the same data every time.
                        let seed = seed ^ (u64::from(w) << 20);
                        rows += load_warehouse(engine, w, &mut TpccRandom::new(seed, constants))?;
                        bar.inc(1);
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("loader thread panicked"))
            .collect()
    });
    for result in loaded {
        rows += result?;
    }
    bar.finish_and_clear();
    Ok(rows)
}

fn load_items(engine: &dyn Engine, random: &mut TpccRandom) -> Result<u64> {
    let mut batches = Batches::new(engine);
    for i in 1..=ITEMS {
        let item = Item {
            image_id: random.uniform(1, 10_000),
            name: text(&random.astring(14, 24)),
            price: random.cents(100, 10_000),
            data: text(&random.data_with_original()),
        };
        batches.put(ITEM, item_key(i), item.encode())?;
    }
    batches.finish()?;
    Ok(u64::from(ITEMS))
}

fn load_warehouse(engine: &dyn Engine, w: u32, random: &mut TpccRandom) -> Result<u64> {
    let mut batches = Batches::new(engine);
    let mut rows = 0u64;
    let mut put = |table: Table, key: Key, value: Vec<u8>| {
        rows += 1;
        batches.put(table, key, value)
    };
    let date = now();
    let warehouse = Warehouse {
        name: text(&random.astring(6, 10)),
        address: address(random),
        tax: random.uniform(0, 2_000),
        ytd: 30_000_000,
    };
    put(WAREHOUSE, warehouse_key(w), warehouse.encode())?;
    for i in 1..=ITEMS {
        let stock = Stock {
            quantity: random.uniform(10, 100),
            dist: std::array::from_fn(|_| text(&random.astring(24, 24))),
            ytd: 0,
            order_count: 0,
            remote_count: 0,
            data: text(&random.data_with_original()),
        };
        put(STOCK, stock_key(w, i), stock.encode())?;
    }
    for d in 1..=DISTRICTS {
        let district = District {
            name: text(&random.astring(6, 10)),
            address: address(random),
            tax: random.uniform(0, 2_000),
            ytd: 3_000_000,
            next_order_id: ORDERS_PER_DISTRICT + 1,
        };
        put(DISTRICT, district_key(w, d), district.encode())?;
        for c in 1..=CUSTOMERS_PER_DISTRICT {
            // The first thousand customers cover every last name once.
            let number = if c <= 1_000 {
                c - 1
            } else {
                random.last_name_number()
            };
            let customer = Customer {
                first: text(&random.astring(8, 16)),
                middle: text(b"OE"),
                last: last_name(number),
                address: address(random),
                phone: text(&random.nstring(16, 16)),
                since: date,
                credit: text(if random.uniform(1, 10) == 1 {
                    b"BC"
                } else {
                    b"GC"
                }),
                credit_limit: 5_000_000,
                discount: random.uniform(0, 5_000),
                balance: -1_000,
                ytd_payment: 1_000,
                payment_count: 1,
                delivery_count: 0,
                data: text(&random.astring(300, 500)),
            };
            let index_key = customer_by_name_key(w, d, &customer.last, &customer.first, c);
            put(CUSTOMER_BY_NAME, index_key, Vec::new())?;
            put(CUSTOMER, customer_key(w, d, c), customer.encode())?;
            let history = History {
                customer: c,
                customer_district: d,
                customer_warehouse: w,
                district: d,
                warehouse: w,
                date,
                amount: 1_000,
                data: text(&random.astring(12, 24)),
            };
            let sequence = (u64::from(w) << 32) | (u64::from(d) << 16) | u64::from(c);
            put(HISTORY, history_key(0, sequence), history.encode())?;
        }
        // Customers place the loaded orders in a random permutation.
        let mut customers: Vec<u32> = (1..=CUSTOMERS_PER_DISTRICT).collect();
        random.rng.shuffle(&mut customers);
        for (o, &c) in (1..=ORDERS_PER_DISTRICT).zip(&customers) {
            let delivered = o < FIRST_UNDELIVERED;
            let order = Order {
                customer: c,
                entry_date: date,
                carrier: if delivered {
                    random.uniform(1, 10) as u8
                } else {
                    0
                },
                line_count: random.uniform(5, 15) as u8,
                all_local: true,
            };
            for number in 1..=order.line_count {
                let line = OrderLine {
                    item: random.uniform(1, ITEMS),
                    supply_warehouse: w,
                    delivery_date: if delivered { date } else { 0 },
                    quantity: 5,
                    amount: if delivered {
                        0
                    } else {
                        random.cents(1, 999_999)
                    },
                    dist_info: text(&random.astring(24, 24)),
                };
                put(ORDER_LINE, order_line_key(w, d, o, number), line.encode())?;
            }
            put(
                ORDER_BY_CUSTOMER,
                order_by_customer_key(w, d, c, o),
                Vec::new(),
            )?;
            put(ORDER, order_key(w, d, o), order.encode())?;
            if !delivered {
                put(NEW_ORDER, order_key(w, d, o), Vec::new())?;
            }
        }
    }
    batches.finish()?;
    Ok(rows)
}
