//! A binding's credentials, as [`RuntimeBuilder::build`] reads them: its static token, or the
//! OAuth client it shares with the bindings of its server that have the same `auth`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use brain_config::ToolBinding;

use super::{RuntimeBuilder, RuntimeError};
use crate::auth::{Credentials, OAuth, Token, TokenStore};
use crate::http::HttpClient;

impl RuntimeBuilder<'_> {
    /// `binding`'s credentials and whether its `token_env` is missing: its static token, its
    /// OAuth client (one per server and `auth`, kept in `oauths`), or none. A variable not set
    /// is recorded in `missing` with its use (and, for `auth`, in `missing_auth`).
    pub(super) fn credentials(
        &self,
        binding: &ToolBinding,
        http: &HttpClient,
        token_store: &Arc<dyn TokenStore>,
        oauths: &mut HashMap<(String, String), Arc<OAuth>>,
        missing: &mut BTreeMap<String, Vec<String>>,
        missing_auth: &mut Vec<String>,
    ) -> Result<(Credentials, bool), RuntimeError> {
        Ok(match (&binding.token_env, &binding.auth) {
            (None, Some(auth)) => {
                for (field, var) in auth.env_vars() {
                    if (self.env)(var).is_none() {
                        missing
                            .entry(var.to_owned())
                            .or_default()
                            .push(format!("auth.{field} of {}", binding.name));
                        missing_auth.push(var.to_owned());
                    }
                }
                if missing_auth.is_empty() {
                    let url = binding.url.clone().unwrap_or_default();
                    let key = (url.clone(), serde_json::to_string(auth).unwrap_or_default());
                    let oauth = match oauths.get(&key) {
                        Some(oauth) => oauth.clone(),
                        None => {
                            let oauth = OAuth::new(
                                &binding.name,
                                &url,
                                auth.clone(),
                                http.clone(),
                                &*self.env,
                                Arc::clone(token_store),
                                self.user_agent.clone(),
                            )
                            .map_err(|message| RuntimeError::Auth {
                                tool: binding.name.clone(),
                                message,
                            })?;
                            let oauth = Arc::new(oauth);
                            oauths.insert(key, oauth.clone());
                            oauth
                        }
                    };
                    (Credentials::OAuth(oauth), false)
                } else {
                    (Credentials::None, false)
                }
            }
            (None, None) => (Credentials::None, false),
            (Some(var), _) => match (self.env)(var) {
                Some(value) => {
                    let token = Token::new(&value).ok_or_else(|| RuntimeError::InvalidToken {
                        var: var.clone(),
                        tool: binding.name.clone(),
                    })?;
                    (Credentials::Static(token), false)
                }
                None => {
                    missing
                        .entry(var.clone())
                        .or_default()
                        .push(format!("token_env of {}", binding.name));
                    (Credentials::None, true)
                }
            },
        })
    }
}
