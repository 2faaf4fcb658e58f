//! schedkit-io: schedkit's data in and out for the tools researchers already use.
//!
//! - [`tables`]: a report and a trace as typed column tables (pandas DataFrames in the
//!   Python module, Parquet files with `--parquet`);
//! - [`parquet`]: writing those tables as Parquet files (feature `parquet`);
//! - [`simso`]: SimSo configurations (XML) in and out;
//! - [`shard`]: sweeps split into shards or batches and merged back exactly;
//! - [`compare`]: one scenario under several simulator policies.

mod columns;
pub mod compare;
mod error;
#[cfg(feature = "parquet")]
pub mod parquet;
pub mod shard;
pub mod simso;
pub mod tables;

pub use error::Error;
