//! One JAAS login module entry, as Kafka's `sasl.jaas.config` holds it
//! (`org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="secret";`):
//! the module's class, its control flag and its options. Values are quoted (`"…"`, `\` escapes
//! the next character) or bare words.

use std::collections::BTreeMap;

use tuning::config::BrokerConfig;

use super::error::SaslConfigError;

/// The `PLAIN` mechanism's name.
pub(super) const PLAIN: &str = "PLAIN";

/// The login module `PLAIN`'s `sasl.jaas.config` must name.
pub(super) const PLAIN_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.plain.PlainLoginModule";

/// A parsed login module entry.
#[derive(Debug, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module's class name.
    pub module: String,
    /// The options, by name.
    pub options: BTreeMap<String, String>,
}

/// The key and options of `mechanism`'s JAAS entry on `listener`
/// (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`), which must
/// name `module`. When neither key is set, `missing` makes the error from the prefixed key.
///
/// # Errors
/// [`SaslConfigError`] naming the key at fault: none set (`missing`), a malformed entry,
/// another login module.
pub(super) fn listener_options(
    config: &BrokerConfig,
    listener: &str,
    mechanism: &str,
    module: &str,
    missing: impl FnOnce(String) -> SaslConfigError,
) -> Result<(String, BTreeMap<String, String>), SaslConfigError> {
    let prefixed = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    );
    let (key, text) = match (
        config.security_properties.get(&prefixed),
        config.security_properties.get("sasl.jaas.config"),
    ) {
        (Some(text), _) => (prefixed, text),
        (None, Some(text)) => ("sasl.jaas.config".to_owned(), text),
        (None, None) => return Err(missing(prefixed)),
    };
    let entry = parse(text).map_err(|why| SaslConfigError::BadJaasConfig {
        key: key.clone(),
        why,
    })?;
    if entry.module != module {
        return Err(SaslConfigError::BadJaasConfig {
            key,
            why: format!("{mechanism} needs {module}, not {}", entry.module),
        });
    }
    Ok((key, entry.options))
}

/// Parses `text`: `CLASS FLAG (NAME=VALUE)* ;` — one entry, as Kafka's broker accepts it.
///
/// # Errors
/// A message naming what is missing or malformed.
pub fn parse(text: &str) -> Result<JaasEntry, String> {
    let mut tokens = Tokens { rest: text.trim() };
    let module = tokens.word().ok_or("no login module class")?;
    let flag = tokens
        .word()
        .ok_or("no control flag after the login module")?;
    if !matches!(
        flag.as_str(),
        "required" | "requisite" | "sufficient" | "optional"
    ) {
        return Err(format!("Invalid control flag {flag}"));
    }
    let mut options = BTreeMap::new();
    loop {
        tokens.skip_space();
        if tokens.rest.starts_with(';') {
            tokens.rest = tokens.rest[1..].trim();
            break;
        }
        let name = tokens.word().ok_or("expected an option or `;`")?;
        tokens.skip_space();
        if !tokens.rest.starts_with('=') {
            return Err(format!("option {name} has no `=`"));
        }
        tokens.rest = &tokens.rest[1..];
        tokens.skip_space();
        let value = tokens
            .value()
            .ok_or_else(|| format!("option {name} has no value"))?;
        options.insert(name, value);
    }
    if !tokens.rest.is_empty() {
        return Err(
            "JAAS config entry not terminated by semi-colon, or more than one entry".into(),
        );
    }
    Ok(JaasEntry { module, options })
}

struct Tokens<'a> {
    rest: &'a str,
}

impl Tokens<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start();
    }

    /// A bare word: up to whitespace, `=` or `;`.
    fn word(&mut self) -> Option<String> {
        self.skip_space();
        let end = self
            .rest
            .find(|c: char| c.is_whitespace() || c == '=' || c == ';')
            .unwrap_or(self.rest.len());
        if end == 0 {
            return None;
        }
        let word = self.rest[..end].to_owned();
        self.rest = &self.rest[end..];
        Some(word)
    }

    /// A quoted string (with `\` escapes) or a bare word.
    fn value(&mut self) -> Option<String> {
        let Some(quoted) = self.rest.strip_prefix('"') else {
            return self.word();
        };
        let mut out = String::new();
        let mut chars = quoted.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => out.push(chars.next()?.1),
                '"' => {
                    self.rest = &quoted[i + 1..];
                    return Some(out);
                }
                other => out.push(other),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_login_module_lines() {
        let e = parse(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required
               username="admin" password="admin-secret" user_admin="admin-secret"
               user_alice="a \"quoted\" secret" user_bob=bare;"#,
        )
        .expect("valid");
        assert_eq!(
            e.module,
            "org.apache.kafka.common.security.plain.PlainLoginModule"
        );
        assert_eq!(e.options["user_alice"], "a \"quoted\" secret");
        assert_eq!(e.options["user_bob"], "bare");
        assert_eq!(e.options.len(), 5);
        for bad in [
            "",
            "Module",
            "Module maybe;",
            "Module required user_a=\"x\"",
            "Module required user_a;",
            "Module required user_a=\"unterminated;",
            "Module required; Other required;",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
