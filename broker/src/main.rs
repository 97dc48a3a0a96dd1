//! `sluice`: the broker binary. Glue only: logging to stderr (`RUST_LOG`), then
//! [`sluice_broker::run`].

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = sluice_broker::run() {
        eprintln!("sluice: {e:#}");
        std::process::exit(1);
    }
}
