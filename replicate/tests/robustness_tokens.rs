//! `ConnectTokenIssuer::issue` checks every parameter and says which one is wrong with
//! a typed `TokenError`; a valid token still connects.

use replicate::transport::udp::{
    ConnectTokenIssuer, MAX_TOKEN_EXPIRE_SECONDS, MAX_TOKEN_SERVERS, MAX_TOKEN_TIMEOUT_SECONDS,
    TokenError,
};
use std::net::SocketAddr;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

#[test]
fn valid_parameters_issue_a_token() {
    let issuer = ConnectTokenIssuer::with_random_key(9);
    let token = issuer.issue(1, vec![addr(5000)], 30, 5).unwrap();
    assert_eq!(token.client_id, 1);
    // The bounds themselves are accepted.
    let servers: Vec<_> = (1..=MAX_TOKEN_SERVERS as u16).map(addr).collect();
    issuer
        .issue(
            2,
            servers,
            MAX_TOKEN_EXPIRE_SECONDS,
            MAX_TOKEN_TIMEOUT_SECONDS,
        )
        .unwrap();
    issuer.issue(3, vec![addr(1)], 1, 1).unwrap();
}

#[test]
fn each_bad_parameter_has_its_error() {
    let issuer = ConnectTokenIssuer::with_random_key(9);
    let ok = vec![addr(5000)];
    let cases: Vec<(Vec<SocketAddr>, u64, i32, TokenError)> = vec![
        (vec![], 30, 5, TokenError::NoServerAddresses),
        (
            (1..=33).map(addr).collect(),
            30,
            5,
            TokenError::TooManyServerAddresses(33),
        ),
        (
            vec![addr(5000), addr(5001), addr(5000)],
            30,
            5,
            TokenError::DuplicateServerAddress(addr(5000)),
        ),
        (
            vec![SocketAddr::from(([0, 0, 0, 0], 5000))],
            30,
            5,
            TokenError::UnroutableServerAddress(SocketAddr::from(([0, 0, 0, 0], 5000))),
        ),
        (
            vec![addr(0)],
            30,
            5,
            TokenError::UnroutableServerAddress(addr(0)),
        ),
        (
            vec!["[::]:7000".parse().unwrap()],
            30,
            5,
            TokenError::UnroutableServerAddress("[::]:7000".parse().unwrap()),
        ),
        // u64::MAX used to wrap the expiry timestamp into an already expired token.
        (
            ok.clone(),
            u64::MAX,
            5,
            TokenError::ExpireOutOfRange(u64::MAX),
        ),
        (ok.clone(), 0, 5, TokenError::ExpireOutOfRange(0)),
        (
            ok.clone(),
            MAX_TOKEN_EXPIRE_SECONDS + 1,
            5,
            TokenError::ExpireOutOfRange(MAX_TOKEN_EXPIRE_SECONDS + 1),
        ),
        // netcode.io reads a negative timeout as "never time out".
        (ok.clone(), 30, -1, TokenError::TimeoutOutOfRange(-1)),
        (
            ok.clone(),
            30,
            i32::MIN,
            TokenError::TimeoutOutOfRange(i32::MIN),
        ),
        (ok.clone(), 30, 0, TokenError::TimeoutOutOfRange(0)),
        (
            ok.clone(),
            30,
            MAX_TOKEN_TIMEOUT_SECONDS + 1,
            TokenError::TimeoutOutOfRange(MAX_TOKEN_TIMEOUT_SECONDS + 1),
        ),
    ];
    for (servers, expire, timeout, expected) in cases {
        let got = issuer
            .issue(1, servers.clone(), expire, timeout)
            .unwrap_err();
        assert_eq!(got, expected, "{servers:?} {expire} {timeout}");
        // The message names the parameter.
        let text = got.to_string();
        assert!(!text.is_empty());
        // issue_with_user_data checks the same way.
        assert_eq!(
            issuer
                .issue_with_user_data(1, servers, expire, timeout, Some(&[0; 256]))
                .unwrap_err(),
            expected
        );
    }
    assert!(
        TokenError::ExpireOutOfRange(0)
            .to_string()
            .contains("expire_seconds")
    );
    assert!(
        TokenError::TimeoutOutOfRange(-1)
            .to_string()
            .contains("timeout_seconds")
    );
}

#[test]
fn token_errors_convert_into_the_facade_and_transport_errors() {
    let issuer = ConnectTokenIssuer::with_random_key(9);
    let facade = || -> Result<(), replicate::internals::facade::FacadeError> {
        issuer.issue(1, vec![], 30, 5)?;
        Ok(())
    };
    assert!(matches!(
        facade(),
        Err(replicate::internals::facade::FacadeError::Token(
            TokenError::NoServerAddresses
        ))
    ));
    let transport = || -> Result<(), replicate::transport::TransportError> {
        issuer.issue(1, vec![addr(5000)], 0, 5)?;
        Ok(())
    };
    assert!(matches!(
        transport(),
        Err(replicate::transport::TransportError::Config(_))
    ));
}
