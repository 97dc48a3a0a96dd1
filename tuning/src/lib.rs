//! Per-core config model and the `sluice tune` probe.
//!
//! Empty until the config issue; the single-node broker issue brings the first config keys.
