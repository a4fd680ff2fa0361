//! The audit chain's keys, as an operator makes them.

use std::path::{Path, PathBuf};

/// An Ed25519 key pair in `dir` as `openssl` writes it: `NAME.pem` (the private key, PKCS#8
/// PEM, for `BRAIN_AUDIT_KEY_FILE`) and `NAME.pub` (the public key, SPKI PEM, for
/// `--public-key`).
pub fn openssl_key_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (private, public) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.pub")),
    );
    let (p, q) = (private.to_str().unwrap(), public.to_str().unwrap());
    for args in [
        vec!["genpkey", "-algorithm", "ed25519", "-out", p],
        vec!["pkey", "-in", p, "-pubout", "-out", q],
    ] {
        let output = std::process::Command::new("openssl")
            .args(&args)
            .output()
            .expect("openssl runs");
        assert!(output.status.success(), "openssl {args:?}: {output:?}");
    }
    (private, public)
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A chain's link, as an attacker who read the guide computes it: the SHA-256 of the previous
/// hash's 32 bytes and the record's bytes, hex.
pub fn link(previous: &str, record: &str) -> String {
    use sha2::{Digest, Sha256};
    let previous: Vec<u8> = (0..previous.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&previous[i..i + 2], 16).unwrap())
        .collect();
    let mut hash = Sha256::new();
    hash.update(&previous);
    hash.update(record.as_bytes());
    hex(&hash.finalize())
}

/// `hash_0` of `tenant`'s chain: SHA-256("brain-audit-v1" ‖ tenant), hex.
pub fn genesis(tenant: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"brain-audit-v1");
    hash.update(tenant.as_bytes());
    hex(&hash.finalize())
}
