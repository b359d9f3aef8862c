//! Connect and disconnect: the OAuth sign-in (its single-use `state`, PKCE where the
//! source takes it, the code traded for a sealed grant), Stripe's restricted key, and
//! revocation at the source.

use domain::connector::{ConnectorState, ConnectorStatus};
use domain::source::{ConnectStart, Grant, SyncState};
use domain::tenant::PlanTier;
use domain::{Error, Result, TenantId};
use ports::records::{ConnectorStore, Expect, SourceStore, TenantStore};
use serde_json::Value as Json;

use super::catalog::Source;
use super::client::{self, Failure};
use super::{CONNECT_TTL_MS, SourceService, connector, default_interval_secs, min_interval_secs, pkce_pair, query, random_state};

impl SourceService {
    // ---- connect ---------------------------------------------------------------------

    pub(super) async fn move_to(
        &self,
        tenant: &TenantId,
        s: Source,
        to: ConnectorState,
        error: Option<(String, String)>,
    ) -> Result<ConnectorStatus> {
        let progress = (to == ConnectorState::SyncingInitial).then_some(0.0);
        let status = self.backend.records.transition_connector(tenant, &connector(s), to, progress, error, self.now()).await?;
        let _ = self.backend.cache.evict(&[crate::capabilities::connectors_key(tenant)]).await;
        Ok(status)
    }

    /// Moves the connector to `oauth_pending`, whatever state allows it.
    async fn pending(&self, tenant: &TenantId, s: Source) -> Result<()> {
        let current = self.backend.records.get_connector(tenant, &connector(s)).await?;
        match current.map(|c| c.state) {
            None | Some(ConnectorState::NotConnected | ConnectorState::SyncError) => {
                self.move_to(tenant, s, ConnectorState::OauthPending, None).await.map(|_| ())
            }
            Some(ConnectorState::OauthPending) => Ok(()),
            Some(state) => Err(Error::conflict(format!(
                "{} is already connected ({state}); disconnect it first (continuity connector disconnect {})",
                s.title(),
                s.name()
            ))),
        }
    }

    /// Starts a connect: the URL the person opens to sign in at the source. The source
    /// sends them back to `{base}/v1/connectors/oauth/callback`.
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant or source; `CONNECTOR_NOT_AVAILABLE` without a
    /// registered app; `INVALID_REQUEST` for Stripe (it takes a key); `CONFLICT` when
    /// the source is connected already; `UNAVAILABLE`.
    pub async fn start_connect(&self, tenant: &TenantId, source: &str, base: &str) -> Result<String> {
        let s = Source::parse(source)?;
        self.backend.records.get_tenant(tenant).await?.ok_or_else(|| Error::not_found(format!("tenant {tenant}")))?;
        if !s.uses_oauth() {
            return Err(Error::invalid_field(
                "source",
                "Stripe is connected with a restricted API key (read access to customers, subscriptions and events): continuity connector connect stripe --api-key-stdin, or POST /v1/connectors/stripe/connect {\"api_key\": …}",
            ));
        }
        let app = self.app(s).await?;
        let ends = s.endpoints(Some(&app))?;
        self.pending(tenant, s).await?;
        let state = random_state();
        let redirect_uri = format!("{}/v1/connectors/oauth/callback", base.trim_end_matches('/'));
        let (verifier, challenge) = if s.pkce() { Some(pkce_pair()) } else { None }.unzip();
        let start = ConnectStart {
            tenant: tenant.clone(),
            source: connector(s),
            verifier,
            redirect_uri: redirect_uri.clone(),
            expires_at: self.now().plus_millis(CONNECT_TTL_MS),
        };
        self.backend.records.put_connect_start(&state, &start).await?;
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", app.client_id.as_str()),
            ("redirect_uri", redirect_uri.as_str()),
            ("scope", s.scopes()),
            ("state", state.as_str()),
        ];
        if let Some(c) = &challenge {
            pairs.extend([("code_challenge", c.as_str()), ("code_challenge_method", "S256")]);
        }
        if s == Source::Jira {
            pairs.extend([("audience", "api.atlassian.com"), ("prompt", "consent")]);
        }
        self.audit.record(tenant, "system:connectors", "connector.sign_in", Some(s.name().to_owned()), "ok").await;
        Ok(format!("{}?{}", ends.authorize, query(&pairs)))
    }

    /// The source sent the person back: takes the pending connect of `state`, trades the
    /// code for tokens, keeps them sealed, and queues the initial pull. The connector's
    /// status is the answer (also when the person refused at the source: `sync_error`).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for an unknown, used or expired `state` (nothing changes);
    /// `UNAVAILABLE`.
    pub async fn callback(&self, state: &str, code: Option<&str>, refused: Option<&str>) -> Result<ConnectorStatus> {
        let start = self.backend.records.take_connect_start(state, self.now()).await?.ok_or_else(|| {
            Error::invalid_field("state", "this sign-in link is unknown, used already or expired; start the connect again")
        })?;
        let s = Source::parse(start.source.as_str())?;
        let tenant = start.tenant.clone();
        let fail = |why: String| async move {
            tracing::warn!(tenant = %tenant, source = s.name(), reason = %why, "connect failed");
            self.move_to(&tenant, s, ConnectorState::SyncError, Some(("oauth_pending".into(), why))).await
        };
        if let Some(why) = refused {
            let why: String = why.chars().filter(|c| !c.is_control()).take(200).collect();
            return fail(format!("the sign-in at {} was not completed ({why}); connect again", s.title())).await;
        }
        let Some(code) = code.filter(|c| !c.is_empty() && c.len() <= 4096) else {
            return fail(format!("{} sent no authorization code back; connect again", s.title())).await;
        };
        let grant = match self.exchange(s, &start, code).await {
            Ok(g) => g,
            Err(f) => return fail(format!("{} did not grant access: {}", s.title(), f.message())).await,
        };
        self.backend.records.put_grant(&start.tenant, &connector(s), &grant).await?;
        self.connected(&start.tenant, s).await
    }

    /// Trades an authorization code for a grant (Jira: and finds the site it reaches).
    async fn exchange(&self, s: Source, start: &ConnectStart, code: &str) -> std::result::Result<Grant, Failure> {
        let app = self.app(s).await.map_err(|e| Failure::Failed(e.message))?;
        let ends = s.endpoints(Some(&app)).map_err(|e| Failure::Failed(e.message))?;
        let mut fields = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", start.redirect_uri.as_str()),
            ("client_id", app.client_id.as_str()),
            ("client_secret", app.client_secret.as_str()),
        ];
        if let Some(v) = &start.verifier {
            fields.push(("code_verifier", v.as_str()));
        }
        let tokens = client::token(s, &ends.token, &fields).await?;
        let api_base = match s {
            Source::Salesforce => {
                let url = tokens.instance_url.clone().ok_or_else(|| Failure::Failed("Salesforce sent no instance_url".into()))?;
                s.check_base_url(&url).map_err(|e| Failure::Failed(format!("instance_url {url}: {}", e.message)))?;
                url
            }
            Source::Jira => {
                let url = ends.resources.clone().unwrap_or_default();
                let sites =
                    client::call(s, reqwest::Method::GET, &url, client::Auth::Bearer(&tokens.access_token), client::Body::Empty)
                        .await?;
                let id = sites
                    .as_array()
                    .and_then(|a| a.first())
                    .and_then(|site| site.get("id"))
                    .and_then(Json::as_str)
                    .filter(|id| id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
                    .ok_or_else(|| Failure::Failed("the grant reaches no Jira site".into()))?;
                format!("{}/ex/jira/{id}", ends.api)
            }
            _ => ends.api.clone(),
        };
        let now = self.now();
        Ok(Grant {
            access_token: tokens.access_token,
            refresh_token: tokens.refresh_token,
            expires_at: tokens.expires_in.map(|s| now.plus_millis(s.saturating_mul(1000))),
            api_base,
            obtained_at: now,
        })
    }

    /// Connects Stripe with a restricted API key: checked with one read, kept sealed.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a key that is not a Stripe secret or restricted key, or that
    /// Stripe refuses (its answer says why); `CONFLICT` when connected already; `UNAVAILABLE`.
    pub async fn connect_with_key(&self, tenant: &TenantId, source: &str, key: &str) -> Result<ConnectorStatus> {
        let s = Source::parse(source)?;
        self.backend.records.get_tenant(tenant).await?.ok_or_else(|| Error::not_found(format!("tenant {tenant}")))?;
        let key = key.trim();
        if s != Source::Stripe {
            return Err(Error::invalid_field(
                "api_key",
                format!("{} is connected by signing in (OAuth), not with a key", s.title()),
            ));
        }
        if !(key.starts_with("rk_") || key.starts_with("sk_")) || key.len() > 512 || key.chars().any(char::is_whitespace) {
            return Err(Error::invalid_field("api_key", "a Stripe restricted key (rk_live_… or rk_test_…) or secret key (sk_…)"));
        }
        let app = self.backend.records.get_source_app(&connector(s)).await?;
        let api = s.endpoints(app.as_ref())?.api;
        self.pending(tenant, s).await?;
        let probe = client::call(
            s,
            reqwest::Method::GET,
            &format!("{api}/v1/customers?limit=1"),
            client::Auth::Bearer(key),
            client::Body::Empty,
        )
        .await;
        if let Err(f) = probe {
            let why = format!("Stripe refused the key: {}", f.message());
            self.move_to(tenant, s, ConnectorState::SyncError, Some(("oauth_pending".into(), why.clone()))).await?;
            return Err(Error::invalid_field("api_key", why));
        }
        let grant =
            Grant { access_token: key.to_owned(), refresh_token: None, expires_at: None, api_base: api, obtained_at: self.now() };
        self.backend.records.put_grant(tenant, &connector(s), &grant).await?;
        self.connected(tenant, s).await
    }

    /// After a grant is kept: `oauth_complete`, a fresh pull state, the initial pull queued.
    async fn connected(&self, tenant: &TenantId, s: Source) -> Result<ConnectorStatus> {
        let status = self.move_to(tenant, s, ConnectorState::OauthComplete, None).await?;
        let plan = self.backend.records.get_tenant(tenant).await?.map_or(PlanTier::Pro, |t| t.plan);
        let src = connector(s);
        let fresh = SyncState::fresh(tenant.clone(), src.clone(), default_interval_secs(plan), self.now());
        match self.backend.records.get_sync(tenant, &src).await? {
            Some(old) => {
                // A connection made again keeps its interval (within the plan's range now).
                let interval_secs = old.interval_secs.max(min_interval_secs(plan));
                self.backend
                    .records
                    .put_sync(&SyncState { version: old.version, interval_secs, ..fresh }, Expect::Version(old.version))
                    .await?
            }
            None => self.backend.records.put_sync(&fresh, Expect::Absent).await?,
        };
        self.audit.record(tenant, "system:connectors", "connector.connect", Some(s.name().to_owned()), "ok").await;
        self.queue(tenant, s).await?;
        Ok(status)
    }

    /// Disconnects: revokes the grant at the source where it has an endpoint (what the
    /// source answered is reported), forgets the tokens and the pull, `not_connected`.
    /// What was pulled stays in the Spine.
    ///
    /// # Errors
    /// `NOT_FOUND` for a connector that is not connected; `UNAVAILABLE`.
    pub async fn disconnect(&self, tenant: &TenantId, source: &str) -> Result<String> {
        let s = Source::parse(source)?;
        let src = connector(s);
        let status = self.backend.records.get_connector(tenant, &src).await?;
        if status.as_ref().is_none_or(|c| c.state == ConnectorState::NotConnected) {
            return Err(Error::not_found(format!("a {} connection of tenant {tenant}", s.title())));
        }
        let revoked = match self.backend.records.get_grant(tenant, &src).await? {
            Some(g) => self.revoke(s, &g).await,
            None => "no grant was held".to_owned(),
        };
        self.backend.records.delete_grant(tenant, &src).await?;
        self.backend.records.delete_sync(tenant, &src).await?;
        // A pull running now updates the connector's status too: its write and ours
        // may meet, so a conflict is tried again (the grant and the pull are gone by now,
        // so that pull stops at its next page; on a busy machine that page may take
        // seconds, so up to 5 s of tries).
        let mut tries = 0;
        loop {
            match self.move_to(tenant, s, ConnectorState::NotConnected, None).await {
                Err(e) if e.code == domain::ErrorCode::Conflict && tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                other => {
                    other?;
                    break;
                }
            }
        }
        self.audit.record(tenant, "system:connectors", "connector.disconnect", Some(s.name().to_owned()), "ok").await;
        Ok(revoked)
    }

    /// Revokes at the source, best effort: what happened, for the person.
    async fn revoke(&self, s: Source, g: &Grant) -> String {
        let app = self.backend.records.get_source_app(&connector(s)).await.ok().flatten();
        let Ok(ends) = s.endpoints(app.as_ref()) else { return "not revoked (no app)".into() };
        let refresh = g.refresh_token.as_deref().unwrap_or(&g.access_token);
        let sent = match s {
            Source::Hubspot => {
                let url = format!(
                    "{}/oauth/v1/refresh-tokens/{}",
                    ends.api,
                    form_urlencoded::byte_serialize(refresh.as_bytes()).collect::<String>()
                );
                client::call(s, reqwest::Method::DELETE, &url, client::Auth::None, client::Body::Empty).await
            }
            Source::Salesforce => {
                let url = ends.token.replace("/token", "/revoke");
                client::call(s, reqwest::Method::POST, &url, client::Auth::None, client::Body::Form(&[("token", refresh)])).await
            }
            Source::Zendesk => {
                let url = format!("{}/api/v2/oauth/tokens/current.json", g.api_base);
                client::call(s, reqwest::Method::DELETE, &url, client::Auth::Bearer(&g.access_token), client::Body::Empty).await
            }
            Source::Jira => {
                return "Atlassian has no revocation endpoint: remove the app under your Atlassian account's connected apps"
                    .into();
            }
            Source::Stripe => {
                return "the key is yours: roll or delete it in the Stripe dashboard if it is no longer needed".into();
            }
        };
        match sent {
            Ok(_) => format!("revoked at {}", s.title()),
            Err(f) => format!("not revoked at {} ({}); the tokens are forgotten here", s.title(), f.message()),
        }
    }
}
