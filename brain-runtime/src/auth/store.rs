//! What a grant's tokens are when stored ([`StoredTokens`], the payload a [`crate::auth::TokenStore`]
//! keeps sealed), and the JSON token file earlier brains kept (`tokens.json`), read once to
//! import it into the state's store ([`FileTokenStore`]).

use super::error::AuthError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Which tokens: the binding's server (its `url`) and the tenant they were obtained for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreKey {
    /// The binding's `url`.
    pub resource: String,
    /// The tenant.
    pub tenant: String,
}

/// The tokens of one user at one server, and what refreshing them needs. Debug output shows no
/// secret.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredTokens {
    /// The authorization server that issued them.
    pub issuer: String,
    /// Its token endpoint (refresh requests go there).
    pub token_endpoint: String,
    /// The `resource` parameter they were issued for.
    pub resource: String,
    /// The client they were issued to.
    pub client_id: String,
    /// That client's secret, when it has one (from dynamic registration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    pub client_auth: String,
    /// The access token.
    pub access_token: String,
    /// `Bearer` or `DPoP`.
    pub token_type: String,
    /// The refresh token, when one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the Unix epoch), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// When it is due for a refresh (seconds since the Unix epoch), as the process that
    /// obtained it decided from its lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_at: Option<u64>,
    /// The scopes requested.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The private key DPoP-bound tokens are bound to (PKCS#8 PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<String>,
}

impl std::fmt::Debug for StoredTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredTokens")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("client_id", &self.client_id)
            .field("token_type", &self.token_type)
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// The JSON token file of earlier brains (mode 0600, one entry per binding URL × tenant): read
/// to import its tokens into the state's store, then renamed, so that an older harness cannot
/// keep spending the same refresh tokens.
#[derive(Debug)]
pub struct FileTokenStore {
    path: PathBuf,
    lock: Mutex<()>,
}

#[derive(Default, Serialize, Deserialize)]
struct File {
    tokens: BTreeMap<String, StoredTokens>,
}

impl FileTokenStore {
    /// A store in the file at `path` (created on the first save).
    pub fn new(path: impl Into<PathBuf>) -> FileTokenStore {
        FileTokenStore {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    /// Where earlier brains kept tokens by default: `brain/tokens.json` under
    /// `$XDG_CONFIG_HOME`, else under `$HOME/.config`.
    pub fn default_path() -> Option<PathBuf> {
        let config = std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".config")))?;
        Some(config.join("brain").join("tokens.json"))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> Result<File, AuthError> {
        let failed = |message: String| AuthError::TokenFile {
            path: self.path.clone(),
            message,
        };
        match std::fs::read(&self.path) {
            // Only where, never serde's text: it may quote a token.
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                failed(format!(
                    "the token store {} is not valid at line {}, column {}; remove it and log in \
                     again",
                    self.path.display(),
                    error.line(),
                    error.column()
                ))
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
            Err(error) => Err(failed(format!(
                "cannot read {}: {error}",
                self.path.display()
            ))),
        }
    }

    /// Every entry: the binding URL and tenant it was stored for, and the tokens.
    pub fn entries(&self) -> Result<Vec<(StoreKey, StoredTokens)>, AuthError> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let file = self.read()?;
        Ok(file
            .tokens
            .into_iter()
            .filter_map(|(text, tokens)| {
                let (tenant, resource) = text.split_once(' ')?;
                Some((
                    StoreKey {
                        resource: resource.to_owned(),
                        tenant: tenant.to_owned(),
                    },
                    tokens,
                ))
            })
            .collect())
    }

    /// Renames the file to `tokens.json.imported` once its tokens are in the state's store.
    pub fn retire(&self) -> Result<PathBuf, AuthError> {
        let retired = self.path.with_extension("json.imported");
        std::fs::rename(&self.path, &retired).map_err(|e| AuthError::TokenFile {
            path: self.path.clone(),
            message: format!("cannot rename {}: {e}", self.path.display()),
        })?;
        Ok(retired)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(access: &str) -> StoredTokens {
        StoredTokens {
            issuer: "https://as.example".into(),
            token_endpoint: "https://as.example/token".into(),
            resource: "https://mcp.example/mcp".into(),
            client_id: "brain".into(),
            client_secret: Some("client-secret-value".into()),
            client_auth: "client_secret_basic".into(),
            access_token: access.into(),
            token_type: "Bearer".into(),
            refresh_token: Some("refresh-secret-value".into()),
            expires_at: Some(1),
            refresh_at: None,
            scopes: vec!["mcp".into()],
            dpop_key: Some("dpop-key-secret-value".into()),
        }
    }

    #[test]
    fn an_earlier_token_file_is_read_then_retired() {
        let dir = std::env::temp_dir().join(format!("brain-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokens.json");
        let file = File {
            tokens: [
                ("a https://mcp.example/mcp".to_owned(), tokens("access-a")),
                ("b https://mcp.example/mcp".to_owned(), tokens("access-b")),
            ]
            .into(),
        };
        std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
        let store = FileTokenStore::new(&path);
        let entries = store.entries().unwrap();
        let tenants: Vec<(&str, &str)> = entries
            .iter()
            .map(|(key, tokens)| (key.tenant.as_str(), tokens.access_token.as_str()))
            .collect();
        assert_eq!(tenants, [("a", "access-a"), ("b", "access-b")]);
        assert_eq!(entries[0].0.resource, "https://mcp.example/mcp");
        let retired = store.retire().unwrap();
        assert!(!path.exists() && retired.ends_with("tokens.json.imported"));
        assert_eq!(FileTokenStore::new(&path).entries().unwrap().len(), 0);
        let debug = format!("{:?}", tokens("access-a"));
        assert!(
            !debug.contains("access-a") && !debug.contains("secret-value"),
            "{debug}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
