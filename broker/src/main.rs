//! `sluice`, the broker binary. The storage engine exists (crate `storage`); the Kafka
//! listener, shards and request handlers come with the single-node broker issue, so for now
//! the binary says so and exits with status 2 instead of pretending to serve.

fn main() {
    eprintln!("sluice: the Kafka listener is not built yet; see the single-node broker issue");
    std::process::exit(2);
}
