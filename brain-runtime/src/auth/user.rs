//! A user's login and logout: [`login`] runs the authorization code flow for a binding and
//! stores the tokens (as `brain-harness login` does), [`logout`] removes them.

use std::sync::Arc;

use brain_config::ToolBinding;

use super::code::UserAgent;
use super::oauth::OAuth;
use super::store::{StoreKey, TokenStore};

/// Runs the authorization code flow for `binding` (whose `auth.type` is `authorization_code`)
/// on behalf of `tenant`, and stores the tokens in `store`: asks the server for its challenge,
/// finds its authorization server, takes the user there through `agent`. Returns a line about
/// what was stored (issuer, scopes, expiry; never a token). `env` reads the binding's secret
/// variables.
pub async fn login(
    binding: &ToolBinding,
    tenant: &str,
    store: Arc<dyn TokenStore>,
    agent: Arc<dyn UserAgent>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let http = crate::http::client(true)?;
    let auth = binding
        .auth
        .clone()
        .ok_or_else(|| format!("{} has no `auth`: it needs no login", binding.name))?;
    let url = binding.url.as_deref().unwrap_or_default();
    let oauth = OAuth::new(
        &binding.name,
        url,
        auth,
        http,
        &env,
        Some(store),
        Some(agent),
    )?;
    oauth.login(tenant).await
}

/// Removes the tokens `login` stored for `binding` and `tenant`; whether there were any.
pub fn logout(binding: &ToolBinding, tenant: &str, store: &dyn TokenStore) -> Result<bool, String> {
    store.remove(&StoreKey {
        resource: binding.url.clone().unwrap_or_default(),
        tenant: tenant.to_owned(),
    })
}
