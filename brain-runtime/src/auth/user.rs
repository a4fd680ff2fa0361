//! A user's login and logout: [`login`] runs the authorization code flow for a binding and
//! stores the tokens in the state's store (as `brain-harness login` does), [`logout`] leaves a
//! tombstone there, and [`import_token_file`] moves an earlier brain's `tokens.json` in.

use std::sync::Arc;

use brain_config::{Grant, ToolBinding};

use super::code::UserAgent;
use super::error::AuthError;
use super::grants::TokenStore;
use super::oauth::OAuth;
use super::store::FileTokenStore;

/// The OAuth client of `binding`, on `store`.
fn client(
    binding: &ToolBinding,
    store: Arc<dyn TokenStore>,
    agent: Option<Arc<dyn UserAgent>>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<OAuth, AuthError> {
    let auth = binding.auth.clone().ok_or_else(|| AuthError::NoAuth {
        binding: binding.name.clone(),
    })?;
    let http = crate::http::client(true, &[]).map_err(AuthError::Flow)?;
    let url = binding.url.as_deref().unwrap_or_default();
    OAuth::new(&binding.name, url, auth, http, env, store, agent).map_err(AuthError::Flow)
}

/// Runs the authorization code flow for `binding` (whose `auth.type` is `authorization_code`)
/// on behalf of `tenant`, and stores the tokens in `store`: asks the server for its challenge,
/// finds its authorization server, takes the user there through `agent`. Returns a line about
/// what was stored (issuer, scopes, expiry; never a token). `env` reads the binding's secret
/// variables. A login replaces what the grant was (a logout's tombstone, a grant needing a
/// new login).
pub async fn login(
    binding: &ToolBinding,
    tenant: &str,
    store: Arc<dyn TokenStore>,
    agent: Arc<dyn UserAgent>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, AuthError> {
    client(binding, store, Some(agent), &env)?
        .login(tenant)
        .await
        .map_err(AuthError::Flow)
}

/// Logs `tenant` out of `binding`'s grant: its tokens go, and a tombstone stays, so that a
/// process refreshing them at that moment cannot bring them back. Whether it held tokens.
pub async fn logout(
    binding: &ToolBinding,
    tenant: &str,
    store: Arc<dyn TokenStore>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<bool, AuthError> {
    client(binding, store, None, &env)?
        .logout(tenant)
        .await
        .map_err(AuthError::Flow)
}

/// Imports the tokens of an earlier brain's token file into `store`, for the user-delegated
/// `bindings` whose `url` they were stored for (a grant the store already has is kept), then
/// renames the file (`tokens.json.imported`), so that an older harness cannot keep spending
/// the same refresh tokens. Returns how many grants were imported.
pub async fn import_token_file(
    file: &FileTokenStore,
    bindings: &[ToolBinding],
    store: Arc<dyn TokenStore>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<usize, AuthError> {
    let entries = file.entries()?;
    let mut imported = 0;
    for binding in bindings {
        if binding
            .auth
            .as_ref()
            .is_none_or(|a| a.grant != Grant::AuthorizationCode)
        {
            continue;
        }
        let url = binding.url.as_deref().unwrap_or_default();
        let mut oauth = None;
        for (key, tokens) in entries.iter().filter(|(key, _)| key.resource == url) {
            let oauth = match &mut oauth {
                Some(oauth) => oauth,
                None => oauth.insert(client(binding, Arc::clone(&store), None, &env)?),
            };
            if oauth
                .import(&key.tenant, tokens.clone())
                .await
                .map_err(AuthError::Flow)?
            {
                imported += 1;
            }
        }
    }
    file.retire()?;
    Ok(imported)
}
