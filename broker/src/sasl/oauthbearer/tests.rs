use super::*;
use base64::Engine;

const NOW_MS: i64 = 1_700_000_000_000;
const NOW_S: i64 = NOW_MS / 1000;

fn b64(text: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text)
}

/// An unsecured JWS with `claims` (JSON).
fn unsecured_token(claims: &str) -> String {
    format!("{}.{}.", b64(r#"{"alg":"none"}"#), b64(claims))
}

fn defaults() -> UnsecuredOptions {
    UnsecuredOptions::from_jaas(&BTreeMap::new()).expect("defaults")
}

#[test]
fn client_first_messages_as_kafka_parses_them() {
    let m = parse_client_first(b"n,,\x01auth=Bearer abc.def.\x01\x01").expect("valid");
    assert_eq!(
        m,
        ClientFirstMessage {
            authzid: "",
            token: "abc.def.",
            extensions: BTreeMap::new(),
        }
    );
    let m = parse_client_first(b"n,a=alice,\x01traceId=x y=1\x01auth=bearer   t0k-_~+/=\x01\x01")
        .expect("with authzid and an extension");
    assert_eq!(m.authzid, "alice");
    assert_eq!(m.token, "t0k-_~+/=");
    assert_eq!(m.extensions.get("traceId"), Some(&"x y=1"));
    for bad in [
        &b""[..],
        b"n,,\x01\x01",
        b"y,,\x01auth=Bearer t\x01\x01",
        b"n,,auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer t\x01",
        b"n,,\x01auth=Basic t\x01\x01",
        b"n,,\x01auth=Bearer\x01\x01",
        b"n,,\x01auth=Bearer t t\x01\x01",
        b"n,,\x01auth=Bearer t\x01k2=v\x01\x01",
        b"n,,\x01auth=Bearer t\x01k=\x01\x01",
        b"n,,\x01auth=Bearer t\x01k=\x7f\x01\x01",
        b"n,a=,\x01auth=Bearer t\x01\x01",
        b"n,a=x=y,\x01auth=Bearer t\x01\x01",
        b"n,a=x\x01auth=Bearer t\x01\x01",
        b"n,,\x01auth=Bearer \xff\x01\x01",
    ] {
        assert!(parse_client_first(bad).is_err(), "{bad:?}");
    }
    assert!(parse_client_first(b"n,a=x=2Cy=3D,\x01auth=Bearer t\x01\x01").is_ok());
}

#[test]
fn unsecured_tokens_checked_as_kafka_checks_them() {
    let v = Validator::Unsecured(defaults());
    let exp = NOW_S + 60;
    let good = unsecured_token(&format!(r#"{{"sub":"alice","iat":{NOW_S},"exp":{exp}}}"#));
    assert_eq!(
        v.validate(&good, NOW_MS),
        Ok(ValidToken {
            principal: "alice".into(),
            expiry_unix_ms: exp * 1000,
        })
    );
    let refused = |claims: String| {
        v.validate(&unsecured_token(&claims), NOW_MS)
            .expect_err(&claims)
    };
    refused(format!(r#"{{"sub":"alice","exp":{}}}"#, NOW_S));
    refused(format!(
        r#"{{"sub":"alice","iat":{},"exp":{exp}}}"#,
        NOW_S + 5
    ));
    refused(format!(r#"{{"sub":"alice","iat":{exp},"exp":{exp}}}"#));
    refused(r#"{"sub":"alice"}"#.to_owned());
    refused(format!(r#"{{"sub":" ","exp":{exp}}}"#));
    refused(format!(r#"{{"exp":{exp}}}"#));
    refused(format!(r#"{{"sub":"alice","exp":"{exp}"}}"#));
    refused(format!(r#"{{"sub":"alice","exp":{exp},"scope":7}}"#));
    // Not unsecured JWS.
    let claims = b64(&format!(r#"{{"sub":"alice","exp":{exp}}}"#));
    for bad in [
        format!("{}.{claims}.", b64(r#"{"alg":"HS256"}"#)),
        format!("{}.{claims}.sig", b64(r#"{"alg":"none"}"#)),
        format!("{}.{claims}", b64(r#"{"alg":"none"}"#)),
        format!("{}..{claims}.", b64(r#"{"alg":"none"}"#)),
        format!("{}.{claims}.", b64(r#"{"typ":"JWT"}"#)),
        format!("{}.{claims}.", b64("[1]")),
        format!("!!.{claims}."),
    ] {
        assert_eq!(
            v.validate(&bad, NOW_MS).map_err(|r| r.challenge()),
            Err(r#"{"status":"invalid_token"}"#.to_owned()),
            "{bad}"
        );
    }
}

#[test]
fn unsecured_options_from_the_login_module() {
    let options: BTreeMap<String, String> = [
        ("unsecuredValidatorPrincipalClaimName", "user"),
        ("unsecuredValidatorScopeClaimName", "roles"),
        ("unsecuredValidatorRequiredScope", "read write"),
        ("unsecuredValidatorAllowableClockSkewMs", "10000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let o = UnsecuredOptions::from_jaas(&options).expect("valid");
    let v = Validator::Unsecured(o);
    // Expired 5 s ago, within the 10 s skew.
    let token = unsecured_token(&format!(
        r#"{{"user":"bob","roles":["read","write","x"],"exp":{}}}"#,
        NOW_S - 5
    ));
    assert_eq!(v.validate(&token, NOW_MS).expect("valid").principal, "bob");
    let token = unsecured_token(&format!(
        r#"{{"user":"bob","roles":"read","exp":{}}}"#,
        NOW_S + 9
    ));
    let refusal = v.validate(&token, NOW_MS).expect_err("lacks write");
    assert_eq!(
        refusal.challenge(),
        r#"{"status":"insufficient_scope", "scope":"[read, write]"}"#
    );
    let mut negative = BTreeMap::new();
    negative.insert(
        "unsecuredValidatorAllowableClockSkewMs".to_owned(),
        "-1".to_owned(),
    );
    assert!(UnsecuredOptions::from_jaas(&negative).is_err());
}

#[test]
fn a_refused_token_is_challenged_then_fails() {
    let v = Validator::Unsecured(defaults());
    let mut x = OAuthExchange::default();
    let expired = unsecured_token(&format!(r#"{{"sub":"alice","exp":{}}}"#, NOW_S - 1));
    let message = format!("n,,\x01auth=Bearer {expired}\x01\x01");
    let challenge = r#"{"status":"invalid_token"}"#.to_owned();
    assert_eq!(
        x.evaluate(message.as_bytes(), &v, NOW_MS),
        Ok(OAuthStep::Challenge(challenge.clone()))
    );
    assert_eq!(
        x.evaluate(b"\x01", &v, NOW_MS),
        Err(OAuthFailure::Authentication(challenge))
    );
    // A lone 0x01 without a challenge before it is a malformed message.
    assert!(matches!(
        OAuthExchange::default().evaluate(b"\x01", &v, NOW_MS),
        Err(OAuthFailure::Malformed(_))
    ));
    let good = unsecured_token(&format!(r#"{{"sub":"alice","exp":{}}}"#, NOW_S + 1));
    let message = format!("n,a=bob,\x01auth=Bearer {good}\x01\x01");
    assert!(matches!(
        OAuthExchange::default().evaluate(message.as_bytes(), &v, NOW_MS),
        Err(OAuthFailure::Authentication(m)) if m.contains("different from the token's principal")
    ));
    let message = format!("n,a=alice,\x01auth=Bearer {good}\x01ext=1\x01\x01");
    assert!(matches!(
        OAuthExchange::default().evaluate(message.as_bytes(), &v, NOW_MS),
        Ok(OAuthStep::Done(t)) if t.principal == "alice"
    ));
}

mod signed {
    use super::*;
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    use ring::signature::{Ed25519KeyPair, KeyPair};

    /// An Ed25519 key pair: its signing key and its public JWK with `kid`.
    fn key(kid: &str) -> (EncodingKey, serde_json::Value) {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).expect("key");
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).expect("key");
        let x = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(pair.public_key().as_ref());
        let jwk = serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid, "alg": "EdDSA", "use": "sig"});
        (EncodingKey::from_ed_der(pkcs8.as_ref()), jwk)
    }

    fn sign(key: &EncodingKey, kid: &str, claims: &serde_json::Value) -> String {
        let mut header = Header::new(Algorithm::EdDSA);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, key).expect("signs")
    }

    #[test]
    fn jwks_tokens_checked_as_kafka_checks_them() {
        let (k1, jwk1) = key("k1");
        let (other, _) = key("k1");
        let set: jsonwebtoken::jwk::JwkSet =
            serde_json::from_value(serde_json::json!({ "keys": [jwk1] })).expect("JWKS");
        let v = Validator::Jwks(JwksValidator::with_keys(
            set,
            vec!["kafka".into()],
            Some("https://idp".into()),
        ));
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let now_ms = i64::try_from(now_s * 1000).expect("ms");
        let exp = now_s + 600;
        let claims = serde_json::json!({"sub": "carol", "aud": "kafka", "iss": "https://idp", "iat": now_s, "exp": exp});
        let good = sign(&k1, "k1", &claims);
        assert_eq!(
            v.validate(&good, now_ms),
            Ok(ValidToken {
                principal: "carol".into(),
                expiry_unix_ms: i64::try_from(exp * 1000).expect("ms"),
            })
        );
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut c = claims.clone();
            f(&mut c);
            sign(&k1, "k1", &c)
        };
        let refused = [
            ("wrong audience", with(&|c| c["aud"] = "other".into())),
            (
                "no audience",
                with(&|c| {
                    c.as_object_mut().expect("object").remove("aud");
                }),
            ),
            ("wrong issuer", with(&|c| c["iss"] = "https://evil".into())),
            ("expired", with(&|c| c["exp"] = (now_s - 120).into())),
            (
                "no iat",
                with(&|c| {
                    c.as_object_mut().expect("object").remove("iat");
                }),
            ),
            (
                "no sub",
                with(&|c| {
                    c.as_object_mut().expect("object").remove("sub");
                }),
            ),
            ("bad signature", sign(&other, "k1", &claims)),
            ("unknown kid", sign(&k1, "k2", &claims)),
            ("unsecured", unsecured_token(&claims.to_string())),
            ("garbage", "a.b.c".to_owned()),
        ];
        for (why, token) in refused {
            let refusal = v.validate(&token, now_ms).expect_err(why);
            assert_eq!(
                refusal.challenge(),
                r#"{"status":"invalid_token"}"#,
                "{why}"
            );
        }
    }
}
