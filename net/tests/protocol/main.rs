//! Integration tests of the `net` crate's public API, in one test binary (one link of the large
//! `kafka-protocol` crate instead of one per file).

mod common;
mod fetch;
mod frames;
mod no_panic;
mod requests;
mod responses;
