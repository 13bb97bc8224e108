//! The commands, one module each (`kv` holds the single-key and range ones).

pub mod check;
pub mod compact;
pub mod dump;
pub mod kv;
pub mod load;
pub mod stat;
