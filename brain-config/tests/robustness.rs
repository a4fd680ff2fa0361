//! Hostile input: a clear error each, no panic, no stack overflow, no unbounded read.

use std::io::Write;

use brain_config::{ConfigError, MAX_CONFIG_BYTES, Rule, load_file, parse};

#[track_caller]
fn check(bytes: &[u8], rule: Rule) -> String {
    let errors = parse(bytes, "host.json").expect_err("rejected");
    assert_eq!(errors.errors.len(), 1, "{errors}");
    assert_eq!(errors.errors[0].rule, rule, "{errors}");
    errors.to_string()
}

/// xorshift64*: deterministic bytes without a dependency.
fn random_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.max(1);
    (0..len)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

#[test]
fn random_bytes_are_rejected_clearly() {
    for seed in 1..=64 {
        let bytes = random_bytes(seed, 4096);
        let errors = parse(&bytes, "host.json").expect_err("random bytes are no config");
        let rule = errors.errors[0].rule;
        assert!(matches!(rule, Rule::InvalidUtf8 | Rule::Syntax), "{errors}");
        assert!(errors.errors[0].location.is_some(), "{errors}");
    }
    for seed in 1..=64 {
        let ascii: Vec<u8> = random_bytes(seed, 4096)
            .iter()
            .map(|b| b' ' + b % 95)
            .collect();
        let errors = parse(&ascii, "host.json").expect_err("random text is no config");
        assert!(
            matches!(errors.errors[0].rule, Rule::Syntax | Rule::InvalidType),
            "{errors}"
        );
    }
}

#[test]
fn fifty_megabytes() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let chunk = vec![b' '; 1024 * 1024];
    file.write_all(b"{\"tools\": [").unwrap();
    for _ in 0..50 {
        file.write_all(&chunk).unwrap();
    }
    file.write_all(b"]}").unwrap();
    file.flush().unwrap();
    let Err(ConfigError::Invalid(errors)) = load_file(file.path()) else {
        panic!("a 50 MB config is rejected");
    };
    assert_eq!(errors.errors[0].rule, Rule::TooLarge);
    assert!(
        errors.to_string().contains("larger than the 16 MiB limit"),
        "{errors}"
    );

    let bytes = vec![b' '; MAX_CONFIG_BYTES as usize + 1];
    check(&bytes, Rule::TooLarge);
}

#[test]
fn nested_a_hundred_thousand_levels() {
    let depth = 100_000;
    let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let message = check(arrays.as_bytes(), Rule::TooDeep);
    assert!(message.contains("host.json:1:128"), "{message}");

    let objects = format!("{}{}", "{\"a\":".repeat(depth), "}".repeat(depth));
    check(objects.as_bytes(), Rule::TooDeep);

    let unclosed = "[".repeat(depth);
    check(unclosed.as_bytes(), Rule::TooDeep);
}

#[test]
fn invalid_utf8() {
    let message = check(
        b"{\"tools\": [\n  {\"name\": \"\xff\xfe\"}]}",
        Rule::InvalidUtf8,
    );
    assert!(message.contains("host.json:2:13"), "{message}");
    assert!(message.contains("byte 0xFF at offset 24"), "{message}");
    // An overlong encoding of '/' and a lone surrogate.
    check(b"{\"tools\": \"\xc0\xaf\"}", Rule::InvalidUtf8);
    check(b"{\"tools\": \"\xed\xa0\x80\"}", Rule::InvalidUtf8);
}

#[test]
fn empty_and_odd_documents() {
    check(b"", Rule::Syntax);
    check(b"   \n", Rule::Syntax);
    check(b"null", Rule::InvalidType);
    check(b"[]", Rule::InvalidType);
    check(b"{}", Rule::MissingField);
    check(b"{\"tools\": {}}", Rule::InvalidType);
    check(b"{\"tools\": [1]}", Rule::InvalidType);
    check(b"{\"tools\": []} trailing", Rule::Syntax);
    // A byte-order mark is tolerated.
    parse(b"\xEF\xBB\xBF{\"tools\": []}", "host.json").unwrap();
}

#[test]
fn unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("host.json");
    let error = load_file(&missing).unwrap_err();
    assert!(matches!(error, ConfigError::Read { .. }));
    assert!(error.to_string().starts_with("cannot read "), "{error}");
    // A directory is not a config either.
    assert!(matches!(
        load_file(dir.path()),
        Err(ConfigError::Read { .. })
    ));
}
