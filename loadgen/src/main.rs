//! `sluice-loadgen`, the benchmark client. It comes with the loadgen issue, after the broker;
//! until then it says so and exits with status 2.

fn main() {
    eprintln!("sluice-loadgen: not built yet; see the loadgen issue");
    std::process::exit(2);
}
