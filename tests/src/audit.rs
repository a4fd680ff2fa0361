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
