//! Parsing and range checks of one property value, with Kafka's integer, boolean and
//! "-1 = unlimited" conventions; failures are [`ConfigError::InvalidValue`] naming the key.

use super::error::{invalid, ConfigError};

/// Parses an integer and checks `min <= n <= max`.
pub(super) fn parse_ranged(key: &str, value: &str, min: i64, max: i64) -> Result<i64, ConfigError> {
    let n: i64 = value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "not an integer"))?;
    if n < min || n > max {
        let why = if max == i64::MAX {
            format!("must be at least {min}")
        } else {
            format!("must be between {min} and {max}")
        };
        return Err(invalid(key, value, why));
    }
    Ok(n)
}

/// Like [`parse_ranged`] for a non-negative range, returned unsigned.
pub(super) fn parse_unsigned(
    key: &str,
    value: &str,
    min: u64,
    max: i64,
) -> Result<u64, ConfigError> {
    let min_signed = i64::try_from(min).map_err(|_| invalid(key, value, "bad minimum"))?;
    let n = parse_ranged(key, value, min_signed, max)?;
    u64::try_from(n).map_err(|_| invalid(key, value, "must not be negative"))
}

pub(super) fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "expected `true` or `false`")),
    }
}

pub(super) fn render_unlimited(v: Option<u64>) -> String {
    match v {
        Some(n) => n.to_string(),
        None => "-1".to_owned(),
    }
}

/// Parses a Kafka `long` property with `min <= n`.
pub(super) fn parse_long_min(key: &str, value: &str, min: i64) -> Result<i64, ConfigError> {
    let n: i64 = value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "not an integer"))?;
    if n < min {
        return Err(invalid(key, value, format!("must be at least {min}")));
    }
    Ok(n)
}

/// A Kafka `int` property that must be `>= 0`.
pub(super) fn parse_u32_int(key: &str, value: &str) -> Result<u32, ConfigError> {
    let n = parse_ranged(key, value, 0, i64::from(i32::MAX))?;
    u32::try_from(n).map_err(|_| invalid(key, value, "out of range"))
}

/// A double as Kafka's `Double.toString` writes the usual ones: `0.5`, `1.0`, `1000000.0`
/// (Java switches to `1.0E7` from 10^7, where Rust's shortest form is used instead).
pub(super) fn render_double(d: f64) -> String {
    if d.fract() == 0.0 && d.abs() < 1e7 {
        format!("{d:.1}")
    } else {
        d.to_string()
    }
}
