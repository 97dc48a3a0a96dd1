//! Kafka's `SslPrincipalMapper` (`ssl.principal.mapping.rules`, KIP-371): the name of a TLS
//! client's principal from its certificate's subject distinguished name (RFC 2253 form, as
//! Java's `X500Principal.getName()` writes it).
//!
//! Rules are tried in order; the first that matches names the principal:
//! - `DEFAULT`: the distinguished name itself;
//! - `RULE:pattern/replacement/` with an optional `L` or `U` after the last `/` (lower or upper
//!   case): when `pattern` (a regular expression) matches the whole name, every match in it is
//!   replaced by `replacement` (`$1` … back references, `\` escapes a `/`).
//!
//! No rule matching is an authentication failure, as in Kafka.

use regex::Regex;

/// The default of `ssl.principal.mapping.rules`.
pub const DEFAULT_RULES: &str = "DEFAULT";

/// Why `ssl.principal.mapping.rules` does not parse.
#[derive(Debug, thiserror::Error)]
pub enum MappingRulesError {
    /// Text that is neither `DEFAULT` nor a complete `RULE:…/…/`.
    #[error("Invalid rule: {rest}")]
    InvalidRule { rest: String },
    /// The pattern of a rule is not a regular expression.
    #[error("Invalid rule pattern `{pattern}`: {source}")]
    BadPattern {
        pattern: String,
        source: regex::Error,
    },
}

/// No rule matched a distinguished name (Kafka's `NoMatchingRule`).
#[derive(Debug, thiserror::Error)]
#[error("No rules apply to {dn}, rules {rules}")]
pub struct NoMatchingRule {
    dn: String,
    rules: String,
}

#[derive(Debug)]
enum Case {
    Keep,
    Lower,
    Upper,
}

#[derive(Debug)]
enum Rule {
    Default,
    Replace {
        /// `^(?:pattern)$`: whether the rule applies (Java's `Matcher.matches`).
        whole: Regex,
        pattern: Regex,
        /// The replacement in the `regex` crate's syntax.
        replacement: String,
        case: Case,
    },
}

/// Parsed `ssl.principal.mapping.rules`.
#[derive(Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
    text: String,
}

impl PrincipalMapper {
    /// Parses `rules` (comma-separated; a rule's pattern may itself hold commas).
    ///
    /// # Errors
    /// [`MappingRulesError`] naming the text that does not parse.
    pub fn parse(rules: &str) -> Result<PrincipalMapper, MappingRulesError> {
        let mut parsed = Vec::new();
        let mut rest = rules.trim_start();
        while !rest.is_empty() {
            let (rule, after) = if let Some(after) = rest.strip_prefix("DEFAULT") {
                (Rule::Default, after)
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                parse_rule(after).ok_or_else(|| MappingRulesError::InvalidRule {
                    rest: rest.to_owned(),
                })??
            } else {
                return Err(MappingRulesError::InvalidRule {
                    rest: rest.to_owned(),
                });
            };
            parsed.push(rule);
            let after = after.trim_start();
            rest = match after.strip_prefix(',') {
                Some(next) => next.trim_start(),
                None if after.is_empty() => after,
                None => {
                    return Err(MappingRulesError::InvalidRule {
                        rest: after.to_owned(),
                    })
                }
            };
        }
        if parsed.is_empty() {
            parsed.push(Rule::Default);
        }
        Ok(PrincipalMapper {
            rules: parsed,
            text: rules.to_owned(),
        })
    }

    /// The principal name for distinguished name `dn`.
    ///
    /// # Errors
    /// [`NoMatchingRule`] when no rule applies.
    pub fn name(&self, dn: &str) -> Result<String, NoMatchingRule> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_owned()),
                Rule::Replace {
                    whole,
                    pattern,
                    replacement,
                    case,
                } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let name = pattern.replace_all(dn, replacement.as_str());
                    return Ok(match case {
                        Case::Keep => name.into_owned(),
                        Case::Lower => name.to_lowercase(),
                        Case::Upper => name.to_uppercase(),
                    });
                }
            }
        }
        Err(NoMatchingRule {
            dn: dn.to_owned(),
            rules: self.text.clone(),
        })
    }
}

/// After `RULE:`: `pattern/replacement/[LU]`, and the text after it; `None` when a `/` is
/// missing.
fn parse_rule(text: &str) -> Option<Result<(Rule, &str), MappingRulesError>> {
    let (pattern, after) = split_unescaped(text)?;
    let (replacement, after) = split_unescaped(after)?;
    let (case, after) = match after.chars().next() {
        Some('L') => (Case::Lower, &after[1..]),
        Some('U') => (Case::Upper, &after[1..]),
        _ => (Case::Keep, after),
    };
    let compile = |p: &str| {
        Regex::new(p).map_err(|source| MappingRulesError::BadPattern {
            pattern: pattern.clone(),
            source,
        })
    };
    let built = compile(&format!("^(?:{pattern})$")).and_then(|whole| {
        Ok(Rule::Replace {
            whole,
            pattern: compile(&pattern)?,
            replacement: java_replacement(&replacement),
            case,
        })
    });
    Some(built.map(|rule| (rule, after)))
}

/// The text up to the first `/` not escaped by `\` (a `\/` becomes `/`), and the text after
/// that `/`.
fn split_unescaped(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '/' => return Some((out, &text[i + 1..])),
            other => out.push(other),
        }
    }
    None
}

/// Java's `Matcher.replaceAll` replacement (`$1`, `\$` for a literal `$`) in the `regex`
/// crate's syntax (`${1}`, `$$`).
fn java_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    out.push(d);
                    chars.next();
                }
                out.push('}');
            }
            '$' => out.push_str("$$"),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's `SslPrincipalMapperTest` cases, by behaviour.
    #[test]
    fn rules_as_kafka_applies_them() {
        let m = PrincipalMapper::parse(DEFAULT_RULES).expect("default");
        assert_eq!(
            m.name("CN=Duke,OU=JavaSoft,O=Sun").expect("dn"),
            "CN=Duke,OU=JavaSoft,O=Sun"
        );

        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, DEFAULT",
        )
        .expect("rules with commas in patterns");
        assert_eq!(
            m.name("CN=Duke,OU=ServiceUsers,O=Org,C=US").expect("1"),
            "Duke"
        );
        assert_eq!(
            m.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US")
                .expect("2"),
            "duke@sme"
        );
        assert_eq!(m.name("cn=duke,OU=JavaSoft,O=Sun").expect("3"), "DUKE");
        assert_eq!(
            m.name("OU=JavaSoft,O=Sun").expect("default"),
            "OU=JavaSoft,O=Sun"
        );

        let m = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/").expect("one rule");
        assert!(m.name("OU=x").is_err(), "no rule applies");
        let m = PrincipalMapper::parse(r"RULE:^CN=([^,]*)\/x.*$/$1 \$/").expect("escapes");
        assert_eq!(m.name("CN=a/x,O=b").expect("escaped slash"), "a $");
    }

    #[test]
    fn bad_rules_are_refused() {
        for bad in [
            "DEFAUL",
            "RULE:^CN=(.*)$",
            "RULE:^CN=(.*)$/$1",
            "RULE:(/x/",
            "DEFAULT DEFAULT",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
        assert!(PrincipalMapper::parse("  ").is_ok(), "empty is DEFAULT");
    }
}
