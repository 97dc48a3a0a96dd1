use super::*;
use pbkdf2::pbkdf2_hmac;
use sha2::{Sha256, Sha512};

/// RFC 7677 §3's example: user "user", password "pencil".
const RFC_SALT: &str = "W22ZaJ0SNY7soEsUEjb6gQ==";
const RFC_CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const RFC_SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const RFC_SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const RFC_CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const RFC_SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn salted(m: ScramMechanism, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    match m {
        ScramMechanism::Sha256 => {
            let mut out = [0u8; 32];
            pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut out);
            out.to_vec()
        }
        ScramMechanism::Sha512 => {
            let mut out = [0u8; 64];
            pbkdf2_hmac::<Sha512>(password.as_bytes(), salt, iterations, &mut out);
            out.to_vec()
        }
    }
}

/// `credentials` with `user`'s credential for `m` from `password`, as
/// AlterUserScramCredentials stores it.
fn with_user(m: ScramMechanism, user: &str, password: &str, salt: &[u8]) -> ScramCredentials {
    let s = salted(m, password, salt, 4096);
    let mut c = ScramCredentials::new();
    c.entry(user.to_string()).or_default().insert(
        m,
        ScramCredential {
            salt: salt.to_vec(),
            stored_key: m.stored_key(&s),
            server_key: m.server_key(&s),
            iterations: 4096,
        },
    );
    c
}

fn rfc_credentials() -> ScramCredentials {
    let salt = BASE64.decode(RFC_SALT).unwrap();
    with_user(ScramMechanism::Sha256, "user", "pencil", &salt)
}

fn generic(m: ScramMechanism) -> ScramFailure {
    ScramFailure(format!(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
        m.name()
    ))
}

#[test]
fn rfc_7677_example() {
    let creds = rfc_credentials();
    let mut x = ScramExchange::new(ScramMechanism::Sha256, RFC_SERVER_NONCE.into());
    assert_eq!(
        x.evaluate(RFC_CLIENT_FIRST.as_bytes(), &creds),
        Ok(ScramStep::Challenge(RFC_SERVER_FIRST.as_bytes().to_vec()))
    );
    assert_eq!(
        x.evaluate(RFC_CLIENT_FINAL.as_bytes(), &creds),
        Ok(ScramStep::Done {
            user: "user".into(),
            reply: RFC_SERVER_FINAL.as_bytes().to_vec()
        })
    );
    assert_eq!(
        x.evaluate(RFC_CLIENT_FINAL.as_bytes(), &creds),
        Err(generic(ScramMechanism::Sha256)),
        "a message after the exchange fails"
    );
}

/// The client side of RFC 5802 for the tests: its final message for `server_first`.
fn client_final(
    m: ScramMechanism,
    password: &str,
    client_first_bare: &str,
    server_first: &str,
) -> String {
    let fields: Vec<&str> = server_first.split(',').collect();
    let nonce = fields[0].strip_prefix("r=").unwrap();
    let salt = BASE64
        .decode(fields[1].strip_prefix("s=").unwrap())
        .unwrap();
    let iterations: u32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
    let s = salted(m, password, &salt, iterations);
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{client_first_bare},{server_first},{without_proof}");
    let client_key = m.hmac(&s, b"Client Key");
    let signature = m.hmac(&m.hash(&client_key), auth.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    format!("{without_proof},p={}", BASE64.encode(proof))
}

fn run(
    m: ScramMechanism,
    creds: &ScramCredentials,
    first: &str,
    password: &str,
) -> Result<ScramStep, ScramFailure> {
    let mut x = ScramExchange::new(m, "SeRvErNoNcE".into());
    let ScramStep::Challenge(server_first) = x.evaluate(first.as_bytes(), creds)? else {
        panic!("the first message completed the exchange");
    };
    let server_first = String::from_utf8(server_first).unwrap();
    let bare = first
        .split_once(",n=")
        .map(|(_, b)| format!("n={b}"))
        .unwrap();
    x.evaluate(
        client_final(m, password, &bare, &server_first).as_bytes(),
        creds,
    )
}

#[test]
fn sha_512_round_trip_and_wrong_password() {
    let m = ScramMechanism::Sha512;
    let creds = with_user(m, "alice", "alice-secret", b"0123456789abcdef");
    let first = "n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL";
    assert!(matches!(
        run(m, &creds, first, "alice-secret"),
        Ok(ScramStep::Done { user, .. }) if user == "alice"
    ));
    assert_eq!(run(m, &creds, first, "wrong"), Err(generic(m)));
    // Same name, the other mechanism: no credential.
    assert_eq!(
        run(ScramMechanism::Sha256, &creds, first, "alice-secret"),
        Err(generic(ScramMechanism::Sha256))
    );
}

#[test]
fn escaped_names_authzid_and_extensions() {
    let m = ScramMechanism::Sha256;
    let creds = with_user(m, "a,b=c", "pw", b"salt");
    let ok = |r: Result<ScramStep, ScramFailure>| matches!(r, Ok(ScramStep::Done { user, .. }) if user == "a,b=c");
    assert!(ok(run(m, &creds, "n,,n=a=2Cb=3Dc,r=abc", "pw")));
    assert!(ok(run(m, &creds, "n,,n=a=2Cb=3Dc,r=abc,ext=1", "pw")));
    let mut x = ScramExchange::new(m, "s".into());
    assert_eq!(
        x.evaluate(b"n,a=other,n=a=2Cb=3Dc,r=abc", &creds),
        Err(ScramFailure(
            "Authentication failed: Client requested an authorization id that is different from username".into()
        ))
    );
}

#[test]
fn refused_first_messages() {
    let m = ScramMechanism::Sha256;
    let creds = rfc_credentials();
    for first in [
        "y,,n=user,r=abc",                // channel binding flag other than n
        "p=tls-unique,,n=user,r=abc",     // channel binding asked for
        "n,,n=user,r=abc,tokenauth=true", // delegation token: none exist
        "n,,n=nobody,r=abc",              // unknown user
        "n,,n=us=er,r=abc",               // a bad escape
        "n,,n=user,r=",                   // empty nonce
        "n,,n=user",                      // no nonce
        "n,,r=abc,n=user",                // out of order
        "n,,m=ext,n=user,r=abc",          // mandatory extension
        "n,,n=user,r=abc,1=2",            // extension key not alphabetic
        "",
        "\u{80}",
    ] {
        let mut x = ScramExchange::new(m, "s".into());
        assert_eq!(
            x.evaluate(first.as_bytes(), &creds),
            Err(generic(m)),
            "{first}"
        );
    }
}

#[test]
fn refused_final_messages() {
    let m = ScramMechanism::Sha256;
    let creds = rfc_credentials();
    let nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
    let proof = "dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    for last in [
        format!("c=biws,r={nonce}x,p={proof}"), // another nonce
        format!("c=eSws,r={nonce},p={proof}"),  // channel binding "y,,"
        format!("c=biws,r={nonce},p=AAAA"),     // short proof
        format!("c=biws,r={nonce},p=!!"),       // not base64
        format!("c=biws,r={nonce}"),            // no proof
        format!("r={nonce},c=biws,p={proof}"),  // out of order
        RFC_CLIENT_FIRST.to_string(),           // the first message again
    ] {
        let mut x = ScramExchange::new(m, RFC_SERVER_NONCE.into());
        x.evaluate(RFC_CLIENT_FIRST.as_bytes(), &creds).unwrap();
        assert_eq!(
            x.evaluate(last.as_bytes(), &creds),
            Err(generic(m)),
            "{last}"
        );
    }
}
