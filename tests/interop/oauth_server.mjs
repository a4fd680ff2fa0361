// A real OAuth 2.1 authorization server for brain's tests: oidc-provider (panva, OpenID
// certified) on 127.0.0.1, offline, with interactions approved at once (a logged-in user who
// consents to what is asked). Usage: node oauth_server.mjs RESOURCE ACCESS_TOKEN_TTL_SECONDS
//
// Prints {"issuer": ...} on stdout when it listens. Besides the provider's own endpoints it
// serves GET /stats: token requests by grant type, their failures, and revocations.
//
// Refresh tokens rotate, with oidc-provider's reuse detection (a spent refresh token presented
// again revokes the grant), unless BRAIN_TEST_AS_ROTATE=0: then a refresh token stays valid
// when presented again, as on a server with a reuse grace period. BRAIN_TEST_AS_REFRESH_DELAY_MS
// delays the answer to the first refresh (after the server spent the token), so that a test can
// kill its client mid-refresh.
//
// The user who logs in is the authorization request's `login_hint` (`alice`, `bob`, ...), or
// `user1` without one.
//
// BRAIN_TEST_AS_JWT=1 issues JWT access tokens (RFC 9068, signed with the provider's keys,
// published at its jwks_uri) instead of opaque ones, with `sub` (the user, or the client for a
// machine), `client_id` and `aud` (the resource), and a `tenant` claim: for a machine
// (client_credentials), its client's, `acme` for `brain-service` and `globex` for
// `brain-service-globex`; for a user, the user's, `acme` for alice and carol and `globex` for bob
// (none for other users).
import http from 'node:http';
import Provider, { errors } from 'oidc-provider';
import { createRemoteJWKSet, jwtVerify } from 'jose';

const [resource, ttlText] = process.argv.slice(2);
const accessTtl = Number(ttlText || 300);
const rotate = process.env.BRAIN_TEST_AS_ROTATE !== '0';
const jwt = process.env.BRAIN_TEST_AS_JWT === '1';
// With JWTs on, tokens for this resource are opaque still (for a resource server that introspects).
const opaqueResource = process.env.BRAIN_TEST_AS_OPAQUE_RESOURCE;
const tenants = { 'brain-service': 'acme', 'brain-service-globex': 'globex' };
const userTenants = { alice: 'acme', bob: 'globex', carol: 'acme' };
let refreshDelay = Number(process.env.BRAIN_TEST_AS_REFRESH_DELAY_MS || 0);
const server = http.createServer();
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const issuer = `http://127.0.0.1:${server.address().port}`;
const stats = { token: {}, token_errors: {}, revocations: 0, authorizations: 0, exchanges: {} };
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

const provider = new Provider(issuer, {
  clients: [
    // Machine to machine.
    {
      client_id: 'brain-service', client_secret: 'service-secret-0123456789',
      grant_types: ['client_credentials'], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      client_id: 'brain-service-globex', client_secret: 'globex-secret-0123456789',
      grant_types: ['client_credentials'], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    // A user's native client (any loopback port, PKCE, refresh tokens).
    {
      client_id: 'brain-user', application_type: 'native', token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    },
    // A gateway acting on behalf of users: it exchanges a user's access token (RFC 8693).
    {
      client_id: 'brain-exchange', client_secret: 'exchange-secret-0123456789',
      grant_types: [TOKEN_EXCHANGE], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    // The MCP server, introspecting the tokens it is shown.
    {
      client_id: 'mcp-server', client_secret: 'mcp-server-secret-0123456789',
      grant_types: [], response_types: [], redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  scopes: ['mcp:basic', 'mcp:admin', 'offline_access'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: () => true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      // Any resource asked for is served, with itself as the audience.
      getResourceServerInfo: (ctx, indicator) => ({
        scope: 'mcp:basic mcp:admin',
        audience: indicator,
        accessTokenFormat: jwt && indicator !== opaqueResource ? 'jwt' : 'opaque',
        accessTokenTTL: accessTtl,
      }),
    },
  },
  extraTokenClaims: (ctx, token) => {
    // A token issued by exchange names the client that acts for the user (RFC 8693 `act`).
    if (token.gty === 'token_exchange') return { act: { sub: token.clientId } };
    if (!jwt) return undefined;
    // A user's token (authorization code, refresh) names its account; a machine's does not.
    const tenant = token.accountId ? userTenants[token.accountId] : tenants[token.clientId];
    return tenant ? { tenant } : {};
  },
  findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  issueRefreshToken: (ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: rotate,
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: { ClientCredentials: accessTtl, AccessToken: accessTtl },
});
provider.proxy = false;

provider.use(async (ctx, next) => {
  if (ctx.path === '/token' && refreshDelay > 0) {
    await next();
    if (ctx.oidc?.params?.grant_type === 'refresh_token') {
      const delay = refreshDelay;
      refreshDelay = 0;
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
    return;
  }
  if (ctx.path === '/stats') {
    ctx.body = stats;
    return;
  }
  if (!ctx.path.startsWith('/interaction/')) return next();
  // Approve at once: log the hinted user (or "user1") in, then grant what the client asked for.
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  let result;
  if (details.prompt.name === 'login') {
    result = { login: { accountId: details.params.login_hint || 'user1' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: details.params.client_id });
    if (details.params.scope) grant.addOIDCScope(details.params.scope);
    for (const [res, scopes] of Object.entries(details.prompt.details.missingResourceScopes || {})) {
      grant.addResourceScope(res, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
    stats.authorizations += 1;
  }
  await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
});

const count = (table, key) => { table[key] = (table[key] || 0) + 1; };
provider.on('grant.success', (ctx) => count(stats.token, ctx.oidc.params.grant_type));
provider.on('grant.error', (ctx, error) => {
  count(stats.token_errors, `${ctx.oidc.params?.grant_type}:${error.error}`);
  console.error('grant.error', error.error, error.error_description);
});
provider.on('revocation.success', () => { stats.revocations += 1; });
provider.on('server_error', (ctx, error) => console.error('server_error', error));

// Token exchange (RFC 8693) on behalf of a user: the subject token is a user's access token of
// this server (opaque, looked up; or a JWT, verified with its keys), active and not expired;
// the issued token names the user (`sub`) and the exchanging client as the actor
// (`act.sub`), for the requested resource. Counted per user in /stats `exchanges`.
// BRAIN_TEST_AS_EXCHANGE_DENY names users whose exchange is refused (`invalid_grant`).
const denied = new Set((process.env.BRAIN_TEST_AS_EXCHANGE_DENY || '').split(',').filter(Boolean));
const jwks = createRemoteJWKSet(new URL(`${issuer}/jwks`));
async function subjectOf(token) {
  if (token.split('.').length === 3) {
    try {
      const { payload } = await jwtVerify(token, jwks, { issuer });
      return payload.sub;
    } catch {
      return undefined;
    }
  }
  const found = await provider.AccessToken.find(token);
  return found && !found.isExpired ? found.accountId : undefined;
}
provider.registerGrantType(TOKEN_EXCHANGE, async (ctx) => {
  const { params, client } = ctx.oidc;
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest('subject_token_type must be an access token');
  }
  if (params.actor_token) throw new errors.InvalidRequest('actor_token is not supported');
  const sub = await subjectOf(params.subject_token);
  if (!sub) throw new errors.InvalidGrant('the subject token is not active');
  if (denied.has(sub)) throw new errors.InvalidGrant(`${sub} may not be impersonated`);
  const target = params.resource || resource;
  const token = new provider.AccessToken({
    accountId: sub,
    client,
    scope: params.scope || 'mcp:basic',
    gty: 'token_exchange',
  });
  token.resourceServer = new provider.ResourceServer(target, {
    scope: 'mcp:basic mcp:admin', audience: target, accessTokenFormat: 'opaque', accessTokenTTL: accessTtl,
  });
  const value = await token.save();
  count(stats.exchanges, sub);
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: 'Bearer',
    expires_in: token.expiration,
    scope: token.scope,
  };
}, ['subject_token', 'subject_token_type', 'requested_token_type', 'audience', 'resource', 'scope',
  'actor_token', 'actor_token_type'], ['audience', 'resource']);

server.on('request', provider.callback());
console.log(JSON.stringify({ issuer }));
// The reader may stop reading stdout once it knows the issuer: later notices go to stderr.
console.log = console.info = (...args) => console.error(...args);
