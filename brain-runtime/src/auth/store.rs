//! Where user-delegated tokens (`authorization_code`) live between runs: one entry per binding
//! resource × tenant. `brain-harness login` writes them, calls read and refresh them. A library
//! user implements [`TokenStore`]; [`FileTokenStore`] is a JSON file readable by its owner only.

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

impl StoreKey {
    fn text(&self) -> String {
        format!("{} {}", self.tenant, self.resource)
    }
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

/// Keeps user-delegated tokens. Errors are messages for the operator (never a token).
pub trait TokenStore: Send + Sync {
    /// The tokens stored under `key`, if any.
    fn load(&self, key: &StoreKey) -> Result<Option<StoredTokens>, String>;
    /// Stores `tokens` under `key`, replacing what was there (a refresh rotates them).
    fn save(&self, key: &StoreKey, tokens: &StoredTokens) -> Result<(), String>;
    /// Removes the tokens under `key`; whether there were any.
    fn remove(&self, key: &StoreKey) -> Result<bool, String>;
}

/// A JSON file, mode 0600, rewritten whole (through a temporary file and a rename) on every
/// change. Within one process, changes are serialized; two processes refreshing the same entry
/// at once may each spend the refresh token (the server then refuses one of them).
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

    /// Where tokens live by default: `$BRAIN_TOKEN_STORE`, else `brain/tokens.json` under
    /// `$XDG_CONFIG_HOME`, else under `$HOME/.config`.
    pub fn default_path() -> Option<PathBuf> {
        if let Some(path) = std::env::var_os("BRAIN_TOKEN_STORE") {
            return Some(PathBuf::from(path));
        }
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

    fn read(&self) -> Result<File, String> {
        match std::fs::read(&self.path) {
            // Only where, never serde's text: it may quote a token.
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|error| {
                format!(
                    "the token store {} is not valid at line {}, column {}; remove it and log in \
                     again",
                    self.path.display(),
                    error.line(),
                    error.column()
                )
            }),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(File::default()),
            Err(error) => Err(format!("cannot read {}: {error}", self.path.display())),
        }
    }

    fn write(&self, file: &File) -> Result<(), String> {
        let fail = |error: std::io::Error| format!("cannot write {}: {error}", self.path.display());
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir).map_err(fail)?;
        let text = serde_json::to_vec_pretty(file).expect("tokens serialize");
        let temporary = self.path.with_extension("json.tmp");
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut out = options.open(&temporary).map_err(fail)?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                out.set_permissions(std::fs::Permissions::from_mode(0o600))
                    .map_err(fail)?;
            }
            out.write_all(&text).map_err(fail)?;
            out.sync_all().map_err(fail)?;
        }
        std::fs::rename(&temporary, &self.path).map_err(fail)
    }
}

impl TokenStore for FileTokenStore {
    fn load(&self, key: &StoreKey) -> Result<Option<StoredTokens>, String> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        Ok(self.read()?.tokens.remove(&key.text()))
    }

    fn save(&self, key: &StoreKey, tokens: &StoredTokens) -> Result<(), String> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = self.read()?;
        file.tokens.insert(key.text(), tokens.clone());
        self.write(&file)
    }

    fn remove(&self, key: &StoreKey) -> Result<bool, String> {
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = self.read()?;
        let removed = file.tokens.remove(&key.text()).is_some();
        if removed {
            self.write(&file)?;
        }
        Ok(removed)
    }
}

/// Tokens kept in memory only (for a process that logs in itself, or tests).
#[derive(Debug, Default)]
pub struct MemoryTokenStore(Mutex<BTreeMap<StoreKey, StoredTokens>>);

impl TokenStore for MemoryTokenStore {
    fn load(&self, key: &StoreKey) -> Result<Option<StoredTokens>, String> {
        Ok(self.0.lock().map_err(|_| "poisoned")?.get(key).cloned())
    }

    fn save(&self, key: &StoreKey, tokens: &StoredTokens) -> Result<(), String> {
        self.0
            .lock()
            .map_err(|_| "poisoned")?
            .insert(key.clone(), tokens.clone());
        Ok(())
    }

    fn remove(&self, key: &StoreKey) -> Result<bool, String> {
        Ok(self.0.lock().map_err(|_| "poisoned")?.remove(key).is_some())
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
            scopes: vec!["mcp".into()],
            dpop_key: Some("dpop-key-secret-value".into()),
        }
    }

    #[test]
    fn saves_loads_and_removes_per_resource_and_tenant_in_a_private_file() {
        let dir = std::env::temp_dir().join(format!("brain-store-{}", uuid::Uuid::new_v4()));
        let store = FileTokenStore::new(dir.join("tokens.json"));
        let key = |tenant: &str| StoreKey {
            resource: "https://mcp.example/mcp".into(),
            tenant: tenant.into(),
        };
        assert_eq!(store.load(&key("a")).unwrap(), None);
        store.save(&key("a"), &tokens("access-a")).unwrap();
        store.save(&key("b"), &tokens("access-b")).unwrap();
        assert_eq!(
            store.load(&key("a")).unwrap().unwrap().access_token,
            "access-a"
        );
        assert_eq!(
            store.load(&key("b")).unwrap().unwrap().access_token,
            "access-b"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path())
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(store.remove(&key("a")).unwrap());
        assert!(!store.remove(&key("a")).unwrap());
        assert_eq!(store.load(&key("a")).unwrap(), None);
        let debug = format!("{:?}", tokens("access-a"));
        assert!(
            !debug.contains("access-a") && !debug.contains("secret-value"),
            "{debug}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
