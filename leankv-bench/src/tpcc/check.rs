//! The consistency conditions 1–4 of clause 3.3.2, checked over the whole database after a
//! run:
//! 1. W_YTD = sum(D_YTD) over the warehouse's districts;
//! 2. D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID) in each district;
//! 3. max(NO_O_ID) - min(NO_O_ID) + 1 = the number of NEW-ORDER rows in each district;
//! 4. sum(O_OL_CNT) = the number of ORDER-LINE rows in each district.

use super::load::DISTRICTS;
use super::schema::*;
use crate::engine::{Engine, Table};
use anyhow::{anyhow, Result};

/// Calls `visit` on every row of `table` whose key starts with `prefix`.
fn each(
    engine: &dyn Engine,
    table: Table,
    prefix: &[u8],
    mut visit: impl FnMut(&[u8], &[u8]),
) -> Result<()> {
    let end = prefix_end(prefix);
    engine.scan(table, prefix, end.as_deref(), &mut |key, value| {
        let inside = key.starts_with(prefix);
        if inside {
            visit(key, value);
        }
        inside
    })
}

/// Checks conditions 1–4 for warehouses `1..=warehouses`; returns every violation found.
pub fn violations(engine: &dyn Engine, warehouses: u32) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut buffer = Vec::new();
    for w in 1..=warehouses {
        if !engine.get(WAREHOUSE, &warehouse_key(w), &mut buffer)? {
            found.push(format!("warehouse {w} is missing"));
            continue;
        }
        let warehouse = Warehouse::decode(&buffer).ok_or_else(|| anyhow!("bad warehouse row"))?;
        let mut district_ytd = 0;
        for d in 1..=DISTRICTS {
            if !engine.get(DISTRICT, &district_key(w, d), &mut buffer)? {
                found.push(format!("district {w}/{d} is missing"));
                continue;
            }
            let district = District::decode(&buffer).ok_or_else(|| anyhow!("bad district row"))?;
            district_ytd += district.ytd;
            check_district(engine, w, d, &district, &mut found)?;
        }
        if warehouse.ytd != district_ytd {
            found.push(format!(
                "condition 1, warehouse {w}: W_YTD {} != sum(D_YTD) {district_ytd}",
                warehouse.ytd
            ));
        }
    }
    Ok(found)
}

fn check_district(
    engine: &dyn Engine,
    w: u32,
    d: u8,
    district: &District,
    found: &mut Vec<String>,
) -> Result<()> {
    let prefix = district_key(w, d);
    let (mut max_order, mut line_sum) = (0, 0u64);
    let mut bad_rows = 0;
    each(engine, ORDER, &prefix, |key, value| {
        max_order = max_order.max(trailing_u32(key));
        match Order::decode(value) {
            Some(order) => line_sum += u64::from(order.line_count),
            None => bad_rows += 1,
        }
    })?;
    let (mut new_orders, mut min_new, mut max_new) = (0u64, u32::MAX, 0);
    each(engine, NEW_ORDER, &prefix, |key, _| {
        let o = trailing_u32(key);
        new_orders += 1;
        min_new = min_new.min(o);
        max_new = max_new.max(o);
    })?;
    let mut lines = 0u64;
    each(engine, ORDER_LINE, &prefix, |_, _| lines += 1)?;
    let place = format!("district {w}/{d}");
    if bad_rows > 0 {
        found.push(format!("{place}: {bad_rows} order rows of the wrong size"));
    }
    let last_id = district.next_order_id - 1;
    if last_id != max_order || (new_orders > 0 && last_id != max_new) {
        found.push(format!(
            "condition 2, {place}: D_NEXT_O_ID - 1 = {last_id}, max(O_ID) = {max_order}, \
             max(NO_O_ID) = {}",
            if new_orders > 0 {
                max_new.to_string()
            } else {
                "none".into()
            }
        ));
    }
    if new_orders > 0 && u64::from(max_new - min_new) + 1 != new_orders {
        found.push(format!(
            "condition 3, {place}: NO_O_ID spans {min_new}..={max_new} but {new_orders} rows exist"
        ));
    }
    if line_sum != lines {
        found.push(format!(
            "condition 4, {place}: sum(O_OL_CNT) = {line_sum} but {lines} ORDER-LINE rows exist"
        ));
    }
    Ok(())
}
