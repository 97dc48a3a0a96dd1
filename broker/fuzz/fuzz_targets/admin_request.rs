//! The admin HTTP endpoint's request head parsing on arbitrary bytes, as `admin::read_head`
//! feeds it: the end of the head (`head_end`), then `parse_request` of the bytes up to it
//! (and of the whole input). Each must answer, never panic. Seed the corpus with
//! `broker/fuzz/seeds.py` (curl's and Prometheus' requests, the unit tests' bad ones).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(end) = sluice_broker::head_end(data) {
        if let Some(head) = data.get(..end) {
            if let Ok(request) = sluice_broker::parse_request(head) {
                assert!(request.path.starts_with('/'), "a routed path is absolute");
            }
        }
    }
    let _ = sluice_broker::parse_request(data);
});
