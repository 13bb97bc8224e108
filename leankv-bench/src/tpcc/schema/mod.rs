//! The TPC-C relations as key-value tables: order-preserving keys (big-endian integers, names
//! zero-padded to a fixed width) and compact fixed-layout values, so that every row of a table
//! has one size and updates can rewrite a value in place.
//!
//! Key fields are not repeated in values. Money is stored in cents and rates in units of
//! 1/10,000 (integers keep the consistency sums exact). Null dates and carrier ids are 0.

mod keys;
mod rows;

pub use keys::*;
pub use rows::*;
