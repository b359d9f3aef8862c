//! The authorization endpoint's flow: the request checked and kept as a pending
//! sign-in, the sign-in page (passwords checked with failure-only limits), and consent.
use super::*;

impl OAuthService {
    /// Validates an authorization request and starts a pending login.
    ///
    /// # Errors
    /// [`AuthorizeError::Page`] when the client or redirect URI is not to be trusted;
    /// [`AuthorizeError::Redirect`] back to the client for every other problem.
    pub async fn begin_authorize(&self, base: &str, params: &Params) -> std::result::Result<PendingView, AuthorizeError> {
        let page = |e: &'static str, d: &str| AuthorizeError::Page(OAuthError::new(e, d.to_owned()));
        let client_id = params.get("client_id").ok_or_else(|| page("invalid_request", "missing client_id"))?;
        let client = if cimd::is_document_url(client_id) {
            // Described by the document at that URL: fetched and checked now; errors are
            // shown here, never redirected (its redirect URIs are not verified yet).
            self.document_client(client_id).await.map_err(AuthorizeError::Page)?
        } else {
            let client_id = Id::new(client_id).map_err(|_| page("invalid_client", "unknown client"))?;
            self.backend.records.get_client(&client_id).await?.ok_or_else(|| page("invalid_client", "unknown client"))?
        };
        let redirect_uri_explicit = params.get("redirect_uri").is_some();
        let redirect_uri = match params.get("redirect_uri") {
            Some(u) if client.redirect_uris.iter().any(|r| r == u) => u.to_owned(),
            Some(_) => return Err(page("invalid_request", "redirect_uri does not exactly match a registered redirect URI")),
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            None => return Err(page("invalid_request", "missing redirect_uri")),
        };
        let state = params.get("state").map(str::to_owned);
        if state.as_ref().is_some_and(|s| s.len() > MAX_STATE_LEN) {
            return Err(page("invalid_request", "state is too long"));
        }
        let issuer = issuer_of(base);
        let redirect_errors = may_redirect_errors(&client, &redirect_uri);
        let fail = |error: &'static str, description: &str| {
            if !redirect_errors {
                return AuthorizeError::Page(OAuthError::new(error, description.to_owned()));
            }
            let mut pairs = vec![("error", error), ("error_description", description)];
            if let Some(s) = &state {
                pairs.push(("state", s.as_str()));
            }
            pairs.push(("iss", issuer.as_str()));
            AuthorizeError::Redirect(append_query(&redirect_uri, &pairs))
        };
        if params.get("response_type") != Some("code") {
            return Err(fail("unsupported_response_type", "response_type must be code"));
        }
        if !client.allows_grant(GrantType::AuthorizationCode) {
            return Err(fail("unauthorized_client", "this client may not use the authorization code flow"));
        }
        let challenge =
            params.get("code_challenge").ok_or_else(|| fail("invalid_request", "PKCE is required: send code_challenge"))?;
        if params.get("code_challenge_method") != Some("S256") {
            return Err(fail("invalid_request", "code_challenge_method must be S256"));
        }
        if challenge.len() != 43 || !challenge.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(fail("invalid_request", "code_challenge must be BASE64URL(SHA256(verifier))"));
        }
        let resource = self.check_resource(base, params.get("resource")).map_err(|e| fail(e.error, &e.description))?;
        let requested = match params.get("scope") {
            Some(s) => Scopes::parse(s).map_err(|_| fail("invalid_scope", "unknown scope"))?,
            None => Scopes::parse(DEFAULT_SCOPES).map_err(|_| fail("server_error", "default scopes"))?,
        };
        // Grant what the client may have of what it asked for (never `approvals:decide`
        // or `admin` to a registered client); refuse only when nothing is left.
        let requested = Scopes(
            requested
                .0
                .into_iter()
                .filter(|s| client.allowed_scopes.contains(*s) && (!client.dynamic || s.grantable_to_mcp_client()))
                .collect(),
        );
        if requested.0.is_empty() {
            return Err(fail("invalid_scope", "this client may have none of the requested scopes"));
        }
        let csrf = crate::random_token(32);
        let pending = PendingAuthorization {
            id: Id::new(crate::random_token(16)).map_err(AuthorizeError::from)?,
            csrf_sha256: sha256_hex(&csrf),
            client_id: client.client_id.clone(),
            redirect_uri,
            state,
            code_challenge: challenge.to_owned(),
            scopes: requested,
            resource,
            user: None,
            expires_at: self.now().plus_millis(PENDING_AUTHORIZATION_TTL_SECS * 1000),
            redirect_uri_explicit,
            failed_logins: 0,
        };
        self.backend.records.put_pending(&pending, None).await?;
        let client_host = client.metadata_url.as_deref().and_then(cimd::host_of);
        Ok(PendingView {
            pending,
            client_name: client.client_name,
            client_host,
            csrf: Some(csrf),
            teams: Vec::new(),
            projects: Vec::new(),
        })
    }

    /// RFC 8707: the resource must be us (the MCP URL or the API base); absent means the
    /// MCP URL. Returns the canonical form, which becomes the token's `aud`.
    pub(super) fn check_resource(&self, base: &str, resource: Option<&str>) -> OResult<String> {
        let mcp = mcp_resource_of(base);
        let root = base.trim_end_matches('/');
        match resource {
            None => Ok(mcp),
            Some(r) if r == mcp => Ok(mcp),
            Some(r) if r == root || r == format!("{root}/") => Ok(root.to_owned()),
            Some(_) => Err(OAuthError::new("invalid_target", "resource must be this server's MCP URL")),
        }
    }

    async fn pending(&self, id: &str, csrf: &str) -> std::result::Result<(PendingAuthorization, u64), AuthorizeError> {
        let expired = || {
            AuthorizeError::Page(OAuthError::new(
                "invalid_request",
                "this sign-in has expired or was already used; start again from your app",
            ))
        };
        let id = Id::new(id).map_err(|_| expired())?;
        let (p, v) = self.backend.records.get_pending(&id).await?.ok_or_else(expired)?;
        if p.expires_at < self.now() {
            return Err(expired());
        }
        if !ct_eq(&p.csrf_sha256, &sha256_hex(csrf)) {
            return Err(AuthorizeError::Page(OAuthError::new(
                "invalid_request",
                "the form is stale or forged (CSRF check failed)",
            )));
        }
        Ok((p, v))
    }

    /// Checks a user's password (argon2id, on the blocking pool; a dummy hash is
    /// verified for an unknown user so timing says nothing). Only failures count, per
    /// source and e-mail ([`FAILURES_PER_EMAIL_AND_SOURCE`]) and per source
    /// ([`FAILURES_PER_SOURCE`]): past either, that source is refused for a while. Failures
    /// from other sources only slow a correct password down ([`FAILURES_PER_EMAIL`],
    /// [`SIGN_IN_BACKOFF`]) — they never refuse it. `source` is the client's address
    /// (`None`: unknown, all such callers share one budget). Used by the OAuth sign-in
    /// page and the approvals console.
    ///
    /// # Errors
    /// `UNAVAILABLE` when the store cannot be read; `INTERNAL` if the check cannot run.
    pub async fn check_password(
        &self,
        tenant: &str,
        email: &str,
        password_given: &str,
        source: Option<std::net::IpAddr>,
    ) -> Result<PasswordCheck> {
        let email = email.trim().to_ascii_lowercase();
        let who = sha256_hex(&format!("{}\n{email}", tenant.trim()));
        let from = source.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
        let mine = [
            (format!("signin-fail:{who}:{from}"), FAILURES_PER_EMAIL_AND_SOURCE),
            (format!("signin-fail:source:{from}"), FAILURES_PER_SOURCE),
        ];
        let everyone = format!("signin-fail:{who}");
        let limiter = &self.backend.limiter;
        for (key, rate) in &mine {
            match limiter.peek(key, *rate).await {
                Ok(d) if !d.allowed => return Ok(PasswordCheck::Limited(d.retry_after_secs)),
                Ok(_) => {}
                // Fail closed: without the limiter, password guessing would be unbounded.
                Err(e) => {
                    tracing::warn!(error = %e, "sign-in limiter unavailable; sign-in refused");
                    return Ok(PasswordCheck::Unavailable);
                }
            }
        }
        match limiter.peek(&everyone, FAILURES_PER_EMAIL).await {
            Ok(d) if !d.allowed => tokio::time::sleep(SIGN_IN_BACKOFF).await,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "sign-in limiter unavailable; sign-in refused");
                return Ok(PasswordCheck::Unavailable);
            }
        }
        let login = match TenantId::new(tenant.trim()) {
            Ok(t) => self.backend.records.get_login(&t, &email).await?,
            Err(_) => None,
        };
        let given = password_given.to_owned();
        let stored = login.as_ref().filter(|l| !l.disabled).map(|l| l.password_hash.clone());
        let ok = tokio::task::spawn_blocking(move || match stored {
            Some(hash) => password::verify(&given, &hash),
            None => {
                password::verify_dummy(&given);
                false
            }
        })
        .await
        .map_err(|e| Error::internal(format!("password check: {e}")))?;
        if let Some(l) = login.filter(|_| ok) {
            return Ok(PasswordCheck::Ok(l));
        }
        for (key, rate) in mine.iter().chain(std::iter::once(&(everyone, FAILURES_PER_EMAIL))) {
            if let Err(e) = limiter.acquire(key, *rate).await {
                tracing::warn!(error = %e, "a failed sign-in was not counted");
            }
        }
        Ok(PasswordCheck::Wrong)
    }

    /// Signs a user in on a page of the browser (the approvals console or the dashboard):
    /// the password checked like the login page's (10 failures a minute per source and
    /// per account), the role one that may open `page` (the console: owner, admin,
    /// approver; the dashboard: owner, admin). One sign-in opens every page the role may
    /// open, each session with that page's own scopes.
    ///
    /// # Errors
    /// `UNAUTHENTICATED` for a wrong workspace, e-mail or password (one message);
    /// `FORBIDDEN` for a role that may not open `page`; `RATE_LIMITED`; `UNAVAILABLE`.
    pub async fn page_login_user(
        &self,
        page: crate::auth::Page,
        base: &str,
        (tenant, email, password): (&str, &str, &str),
        source: Option<std::net::IpAddr>,
    ) -> Result<crate::auth::PageSessions> {
        use crate::auth::Page;
        let login = match self.check_password(tenant, email, password, source).await? {
            PasswordCheck::Ok(l) => l,
            PasswordCheck::Wrong => return Err(Error::unauthenticated("Unknown workspace, e-mail or password.")),
            PasswordCheck::Limited(secs) => {
                return Err(Error::new(domain::ErrorCode::RateLimited, format!("Too many attempts. Wait {secs} seconds."))
                    .with_retry_after(secs));
            }
            PasswordCheck::Unavailable => return Err(Error::unavailable("the sign-in limiter is unavailable")),
        };
        let role = self.backend.records.get_principal(&login.tenant, &login.principal).await?.map(|p| p.role);
        let Some(role) = role.filter(|r| page.role_may(*r)) else {
            return Err(Error::forbidden(match page {
                Page::Console => "Your role cannot decide approvals (it takes owner, admin or approver).",
                Page::Dashboard => "The dashboard is for owners and admins of the workspace.",
            }));
        };
        tracing::info!(tenant = %login.tenant, principal = %login.principal, ?page, "page sign-in: user signed in");
        let mut sessions = crate::auth::PageSessions::default();
        for p in [Page::Console, Page::Dashboard].into_iter().filter(|p| p.role_may(role)) {
            let via = format!("{}user:{}", p.via_prefix(), login.email);
            let (token, _) = self.tokens.issue_console(base, &login.tenant, &login.principal, &via).await?;
            sessions.set(p, token);
        }
        Ok(sessions)
    }

    /// Checks a sign-in on the login page: the failure limits of [`Self::check_password`]
    /// and 5 failures per login page (then it must be started again); argon2 runs on the
    /// blocking pool.
    ///
    /// # Errors
    /// [`AuthorizeError::Page`] for an expired, forged or used-up form.
    pub async fn login(
        &self,
        pending_id: &str,
        csrf: &str,
        tenant: &str,
        email: &str,
        password_given: &str,
        source: Option<std::net::IpAddr>,
    ) -> std::result::Result<LoginOutcome, AuthorizeError> {
        let (mut p, v) = self.pending(pending_id, csrf).await?;
        let (client_name, client_host) = self.client_name(&p.client_id).await?;
        let view = |p: PendingAuthorization| PendingView {
            pending: p,
            client_name: client_name.clone(),
            client_host: client_host.clone(),
            csrf: None,
            teams: Vec::new(),
            projects: Vec::new(),
        };
        let wrong = "Unknown workspace, e-mail or password.".to_owned();
        if p.failed_logins >= MAX_FAILED_LOGINS {
            return Err(AuthorizeError::Page(OAuthError::new(
                "access_denied",
                "too many failed sign-ins; start again from your app",
            )));
        }
        let login = match self.check_password(tenant, email, password_given, source).await? {
            PasswordCheck::Limited(secs) => {
                return Ok(LoginOutcome::Retry(view(p), format!("Too many attempts. Wait {secs} seconds and try again.")));
            }
            PasswordCheck::Unavailable => {
                return Ok(LoginOutcome::Retry(view(p), "Sign-in is briefly unavailable. Try again in a few seconds.".into()));
            }
            PasswordCheck::Wrong => None,
            PasswordCheck::Ok(login) => Some(login),
        };
        let Some(login) = login else {
            tracing::info!("sign-in refused");
            p.failed_logins += 1;
            let failed = p.failed_logins;
            self.backend.records.put_pending(&p, Some(v)).await?;
            if failed >= MAX_FAILED_LOGINS {
                return Err(AuthorizeError::Page(OAuthError::new(
                    "access_denied",
                    "too many failed sign-ins; start again from your app",
                )));
            }
            return Ok(LoginOutcome::Retry(view(p), wrong));
        };
        let client = self.backend.records.get_client(&p.client_id).await?;
        if client.and_then(|c| c.tenant).is_some_and(|t| t != login.tenant) {
            return Ok(LoginOutcome::Retry(view(p), "This application belongs to another workspace.".into()));
        }
        p.user = Some((login.tenant.clone(), login.principal.clone()));
        self.backend.records.put_pending(&p, Some(v)).await?;
        tracing::info!(tenant = %login.tenant, principal = %login.principal, "signed in for consent");
        let member = self.backend.records.get_principal(&login.tenant, &login.principal).await?;
        let (teams, projects) = member.map(|m| (m.teams, m.projects)).unwrap_or_default();
        Ok(LoginOutcome::Consent(PendingView { teams, projects, ..view(p) }))
    }

    /// A client's name and, for a metadata-document client, its URL's host.
    async fn client_name(&self, id: &Id) -> Result<(String, Option<String>)> {
        Ok(match self.backend.records.get_client(id).await? {
            Some(c) => (c.client_name, c.metadata_url.as_deref().and_then(cimd::host_of)),
            None => ("Unknown client".to_owned(), None),
        })
    }

    /// The consent decision. Returns where to send the browser.
    ///
    /// # Errors
    /// [`AuthorizeError::Page`] for an expired, forged or not-signed-in form.
    pub async fn consent(
        &self,
        base: &str,
        pending_id: &str,
        csrf: &str,
        approve: bool,
    ) -> std::result::Result<String, AuthorizeError> {
        let (p, v) = self.pending(pending_id, csrf).await?;
        let (tenant, principal) =
            p.user.clone().ok_or_else(|| AuthorizeError::Page(OAuthError::new("invalid_request", "sign in first")))?;
        // One decision per pending login, even if the form is posted twice.
        self.backend.records.take_pending(&p.id, v).await.map_err(|e| {
            if e.code == ErrorCode::Conflict {
                AuthorizeError::Page(OAuthError::new("invalid_request", "this sign-in was already completed"))
            } else {
                e.into()
            }
        })?;
        let issuer = issuer_of(base);
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if !approve {
            pairs.push(("error", "access_denied".into()));
            pairs.push(("error_description", "the user declined".into()));
        } else {
            let Some(member) = self.backend.records.get_principal(&tenant, &principal).await?.filter(|m| !m.disabled) else {
                return Err(AuthorizeError::Page(OAuthError::new("access_denied", "the user no longer exists or is disabled")));
            };
            let allowed = member.role.allowed_scopes();
            let scopes = Scopes(p.scopes.0.iter().copied().filter(|s| allowed.contains(*s)).collect());
            if scopes.0.is_empty() {
                pairs.push(("error", "invalid_scope".into()));
                pairs.push(("error_description", "your role allows none of the requested scopes".into()));
            } else {
                let code = crate::random_token(32);
                let record = AuthCode {
                    grant: Grant {
                        tenant: tenant.clone(),
                        principal: principal.clone(),
                        client_id: p.client_id.clone(),
                        scopes,
                        resource: p.resource.clone(),
                        // The user's memberships as of this consent; a refresh reads
                        // them again.
                        teams: member.teams,
                        projects: member.projects,
                    },
                    redirect_uri: p.redirect_uri.clone(),
                    code_challenge: p.code_challenge.clone(),
                    expires_at: self.now().plus_millis(AUTH_CODE_TTL_SECS * 1000),
                    redeemed_at: None,
                    family: None,
                    redirect_uri_explicit: p.redirect_uri_explicit,
                };
                self.backend.records.create_code(&sha256_hex(&code), &record).await?;
                tracing::info!(tenant = %tenant, principal = %principal, client_id = %p.client_id, "authorization granted");
                pairs.push(("code", code));
            }
        }
        if let Some(s) = &p.state {
            pairs.push(("state", s.clone()));
        }
        pairs.push(("iss", issuer));
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Ok(append_query(&p.redirect_uri, &borrowed))
    }

    // ---- token endpoint ------------------------------------------------------------
}
