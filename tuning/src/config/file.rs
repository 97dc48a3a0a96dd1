//! TOML config files: flattening a document into `(key, value)` pairs as a `.properties` file
//! would hold them.

use super::error::ConfigError;
use std::path::Path;

/// Flattens a TOML document into `(key, value)` pairs: nested tables join with `.`
/// (`[log] retention.ms = 1` → `log.retention.ms`), integers and booleans become their decimal
/// text, strings stay, arrays of scalars join with `,` (`cores = [0, 2]` → `0,2`). Pairs come
/// out sorted by key.
///
/// # Errors
/// [`ConfigError::ParseFile`] for invalid TOML, floats, dates, nested arrays, arrays of tables
/// and keys given twice (e.g. both as `"log.retention.ms"` and under `[log]`). The
/// `[[shard]]` sections are skipped here: [`crate::config::parse_shard_sections`] reads them.
pub fn flatten_toml(text: &str, path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
    let parse_err = |why: String| ConfigError::ParseFile {
        path: path.to_owned(),
        why,
    };
    let mut table: toml::Table = toml::from_str(text).map_err(|e| parse_err(e.to_string()))?;
    table.remove("shard");
    let mut out = Vec::new();
    flatten_into("", &table, &mut out).map_err(parse_err)?;
    out.sort();
    for pair in out.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(parse_err(format!("key `{}` is set twice", pair[0].0)));
        }
    }
    Ok(out)
}

pub(super) fn flatten_into(
    prefix: &str,
    table: &toml::Table,
    out: &mut Vec<(String, String)>,
) -> Result<(), String> {
    for (k, v) in table {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            toml::Value::Table(t) => flatten_into(&key, t, out)?,
            toml::Value::Array(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    parts.push(scalar_text(&key, item)?);
                }
                out.push((key, parts.join(",")));
            }
            other => {
                let text = scalar_text(&key, other)?;
                out.push((key, text));
            }
        }
    }
    Ok(())
}

fn scalar_text(key: &str, v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        toml::Value::Float(_) => Err(format!(
            "key `{key}`: floats are not accepted; use an integer"
        )),
        toml::Value::Datetime(_) => Err(format!("key `{key}`: dates are not accepted")),
        toml::Value::Array(_) | toml::Value::Table(_) => Err(format!(
            "key `{key}`: nested arrays and arrays of tables are not supported"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_flattening() {
        let text = r#"
            "log.retention.ms" = 1000
            "auto.create.topics.enable" = false
            [log]
            segment.bytes = 2048
            cleanup.policy = ["delete"]
            [sluice]
            cores = "0"
        "#;
        let pairs = flatten_toml(text, Path::new("x.toml")).expect("valid");
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("auto.create.topics.enable", "false"),
                ("log.cleanup.policy", "delete"),
                ("log.retention.ms", "1000"),
                ("log.segment.bytes", "2048"),
                ("sluice.cores", "0"),
            ]
        );
        let dup = "\"log.retention.ms\" = 1\n[log]\nretention.ms = 2\n";
        let err = flatten_toml(dup, Path::new("x.toml")).expect_err("set twice");
        assert!(err.to_string().contains("log.retention.ms"), "{err}");
        for bad in [
            "a = 1.5",
            "a = [[1]]",
            "[[other]]\ncore = 1",
            "a = ",
            "a = 1979-05-27",
        ] {
            assert!(
                flatten_toml(bad, Path::new("x.toml")).is_err(),
                "`{bad}` must be rejected"
            );
        }
    }
}
