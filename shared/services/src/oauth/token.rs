//! The token endpoint (the four grants: authorization code with PKCE, refresh with
//! rotation and reuse detection, client credentials, the ID-JAG jwt-bearer grant),
//! client authentication, and revocation.
use super::*;

impl OAuthService {
    /// Authenticates the client of a token/revocation request (RFC 6749 §2.3).
    async fn authenticate_client(&self, params: &Params, creds: &ClientCredentials) -> OResult<OAuthClient> {
        let bad = || OAuthError::new("invalid_client", "client authentication failed");
        let form_secret = params.get("client_secret");
        let (id, secret) = match (&creds.basic, form_secret) {
            (Some(_), Some(_)) => {
                return Err(OAuthError::new("invalid_request", "use one client authentication method, not two"));
            }
            (Some((id, secret)), None) => {
                if params.get("client_id").is_some_and(|f| f != id) {
                    return Err(OAuthError::new("invalid_request", "client_id does not match the Authorization header"));
                }
                (id.as_str(), Some(secret.as_str()))
            }
            (None, Some(secret)) => (params.require("client_id")?, Some(secret)),
            (None, None) => (params.require("client_id")?, None),
        };
        // A metadata-document client names itself by its URL; it was stored when it signed in.
        let client_id = if cimd::is_document_url(id) {
            cimd::client_id_for(id).map_err(|_| bad())?
        } else {
            Id::new(id).map_err(|_| bad())?
        };
        let client = self.backend.records.get_client(&client_id).await.map_err(OAuthError::from)?.ok_or_else(bad)?;
        match (&client.secret_sha256, secret) {
            (None, None) => Ok(client),
            (Some(stored), Some(given)) => {
                // Basic and post are both accepted for a confidential client: the secret is what matters.
                if ct_eq(stored, &sha256_hex(given)) { Ok(client) } else { Err(bad()) }
            }
            _ => Err(bad()),
        }
    }

    // ---- authorization endpoint ----------------------------------------------------

    /// The token endpoint.
    ///
    /// # Errors
    /// RFC 6749 §5.2 errors.
    pub async fn token(&self, base: &str, params: &Params, creds: &ClientCredentials) -> OResult<TokenResponse> {
        let grant_type = params.require("grant_type")?;
        let grant = GrantType::parse(grant_type)
            .map_err(|_| OAuthError::new("unsupported_grant_type", format!("grant_type {grant_type:?} is not supported")))?;
        let client = self.authenticate_client(params, creds).await?;
        if !client.allows_grant(grant) {
            return Err(OAuthError::new("unauthorized_client", format!("this client may not use {grant}")));
        }
        match grant {
            GrantType::AuthorizationCode => self.grant_code(base, params, &client).await,
            GrantType::RefreshToken => self.grant_refresh(base, params, &client).await,
            GrantType::ClientCredentials => self.grant_client_credentials(base, params, &client).await,
            GrantType::JwtBearer => self.grant_jwt_bearer(base, params, &client).await,
        }
    }

    fn new_refresh(&self, family: &RefreshFamily, grant: &Grant) -> (String, RefreshToken) {
        let now = self.now();
        let record = RefreshToken {
            family: family.id.clone(),
            grant: grant.clone(),
            issued_at: now,
            expires_at: now.plus_millis(REFRESH_TOKEN_TTL_SECS * 1000),
            rotated_at: None,
        };
        (crate::random_token(32), record)
    }

    /// The access token (offered the client's toolsets as they are now) and the response.
    async fn access_response(
        &self,
        base: &str,
        grant: &Grant,
        client: &OAuthClient,
        refresh_token: Option<String>,
    ) -> OResult<TokenResponse> {
        let (access, ttl) = self.tokens.issue(base, grant, &client.toolsets).await.map_err(OAuthError::from)?;
        Ok(TokenResponse {
            access_token: access,
            token_type: "Bearer",
            expires_in: ttl,
            refresh_token,
            scope: grant.scopes.to_oauth_string(),
        })
    }

    fn new_family(&self, grant: &Grant) -> OResult<RefreshFamily> {
        Ok(RefreshFamily {
            id: Id::new(crate::random_token(16)).map_err(OAuthError::from)?,
            client_id: grant.client_id.clone(),
            tenant: grant.tenant.clone(),
            created_at: self.now(),
            revoked_at: None,
            revoked_reason: None,
        })
    }

    async fn grant_code(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let code = params.require("code")?;
        let verifier = params.require("code_verifier")?;
        let redirect_uri = params.get("redirect_uri");
        let invalid = |d: &str| OAuthError::new("invalid_grant", d.to_owned());
        let unknown = "unknown, expired or used authorization code";
        if !valid_verifier(verifier) {
            return Err(OAuthError::new("invalid_request", "code_verifier must be 43-128 unreserved characters"));
        }
        if code.len() > 256 {
            return Err(invalid(unknown));
        }
        let digest = sha256_hex(code);
        let records = &self.backend.records;
        let rec = records.get_code(&digest).await.map_err(OAuthError::from)?.ok_or_else(|| invalid(unknown))?;
        let g = rec.grant.clone();
        let family = self.new_family(&g)?;
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        let problem = if rec.redeemed_at.is_some() || rec.expires_at < self.now() {
            Some(unknown)
        } else if g.client_id != client.client_id {
            Some("the code was issued to another client")
        } else if redirect_uri.is_some_and(|u| u != rec.redirect_uri) || (redirect_uri.is_none() && rec.redirect_uri_explicit) {
            Some("redirect_uri does not match the authorization request")
        } else if !ct_eq(&challenge, &rec.code_challenge) {
            Some("PKCE verification failed")
        } else if params.get("resource").is_some_and(|r| r != g.resource) {
            Some("resource does not match the authorization request")
        } else {
            None
        };
        if let Some(p) = problem {
            // A code gets one presentation, right or wrong: spend it now (a second
            // presentation of a spent code revokes what the first one issued).
            if let Redemption::Redeemed(_) =
                records.redeem_code(&digest, self.now(), &family, None).await.map_err(OAuthError::from)?
            {
                records.revoke_family(&family.id, "invalid_redemption", self.now()).await.map_err(OAuthError::from)?;
            }
            if rec.redeemed_at.is_some() {
                tracing::warn!(client_id = %client.client_id, "authorization code reused; what it issued is revoked");
            }
            return Err(invalid(p));
        }
        let refresh = client.allows_grant(GrantType::RefreshToken).then(|| self.new_refresh(&family, &g));
        let refresh_digest = refresh.as_ref().map(|(t, _)| sha256_hex(t));
        let first = match (&refresh_digest, &refresh) {
            (Some(d), Some((_, r))) => Some((d.as_str(), r)),
            _ => None,
        };
        let spent = records.redeem_code(&digest, self.now(), &family, first).await.map_err(OAuthError::from)?;
        if !matches!(spent, Redemption::Redeemed(_)) {
            return Err(invalid(unknown));
        }
        let resp = self.access_response(base, &g, client, refresh.map(|(t, _)| t)).await?;
        tracing::info!(tenant = %g.tenant, principal = %g.principal, client_id = %client.client_id, "tokens issued (authorization_code)");
        Ok(resp)
    }

    async fn grant_refresh(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let presented = params.require("refresh_token")?;
        let invalid = || OAuthError::new("invalid_grant", "unknown, expired or revoked refresh token");
        if presented.len() > 256 {
            return Err(invalid());
        }
        let digest = sha256_hex(presented);
        let current = self.backend.records.get_refresh(&digest).await.map_err(OAuthError::from)?.ok_or_else(invalid)?;
        if current.grant.client_id != client.client_id {
            return Err(invalid());
        }
        if current.expires_at < self.now() {
            return Err(invalid());
        }
        // Re-check who the grant is for: a principal that is gone gets nothing, and the
        // scopes never exceed what its role and the client allow today.
        let mut stored = current.grant.clone();
        let member = self.backend.records.get_principal(&stored.tenant, &stored.principal).await.map_err(OAuthError::from)?;
        // A user disabled since sign-in gets nothing more (its login's flag is read too:
        // a user disabled before principals carried the flag has it only there).
        let Some(member) = member.filter(|m| !m.disabled) else { return Err(invalid()) };
        if member.kind == domain::principal::PrincipalKind::User
            && let Some(login) =
                self.backend.records.get_login(&stored.tenant, &member.display_name).await.map_err(OAuthError::from)?
            && login.principal == member.id
            && login.disabled
        {
            return Err(invalid());
        }
        let allowed = member.role.allowed_scopes();
        // Memberships as they are now: a user removed from a team loses it at the next
        // refresh (only the authorization-code grant issues refresh tokens, so the
        // grant is a signed-in user's).
        stored.teams.clone_from(&member.teams);
        stored.projects.clone_from(&member.projects);
        stored.scopes = Scopes(
            stored.scopes.0.iter().copied().filter(|s| allowed.contains(*s) && client.allowed_scopes.contains(*s)).collect(),
        );
        if stored.scopes.0.is_empty() {
            return Err(OAuthError::new("invalid_scope", "none of the granted scopes is allowed any more"));
        }
        // A `scope` parameter narrows this access token only; the successor refresh token
        // keeps the grant (RFC 6749 §6).
        let mut grant = stored.clone();
        if let Some(s) = params.get("scope") {
            let narrowed = Scopes::parse(s).map_err(|_| OAuthError::new("invalid_scope", "unknown scope"))?;
            if narrowed.0.iter().any(|x| !stored.scopes.contains(*x)) {
                return Err(OAuthError::new("invalid_scope", "a refresh may only narrow the granted scopes"));
            }
            grant.scopes = narrowed;
        }
        if params.get("resource").is_some_and(|r| r != grant.resource) {
            return Err(OAuthError::new("invalid_target", "resource does not match the original grant"));
        }
        let family = self.backend.records.get_family(&current.family).await.map_err(OAuthError::from)?.ok_or_else(invalid)?;
        let (token, record) = self.new_refresh(&family, &stored);
        match self
            .backend
            .records
            .rotate_refresh(&digest, self.now(), &sha256_hex(&token), &record)
            .await
            .map_err(OAuthError::from)?
        {
            Rotation::Rotated(_) => {
                tracing::info!(tenant = %grant.tenant, client_id = %client.client_id, "tokens refreshed");
                self.access_response(base, &grant, client, Some(token)).await
            }
            Rotation::Reused(_) => {
                tracing::warn!(tenant = %grant.tenant, client_id = %client.client_id, family = %family.id, "refresh token reuse: family revoked");
                Err(invalid())
            }
            Rotation::Revoked(_) | Rotation::Unknown => Err(invalid()),
        }
    }

    async fn tenant_plan(&self, tenant: &TenantId) -> OResult<PlanTier> {
        let t = self.auth.tenant_config(tenant).await.map_err(OAuthError::from)?;
        t.map(|t| t.plan).ok_or_else(|| OAuthError::new("invalid_client", "the client's tenant no longer exists"))
    }

    /// The requested scopes the client may have (RFC 6749 §3.3: the server may grant
    /// less than asked, and says so in the response's `scope`); all allowed ones when
    /// none is asked for.
    fn requested_scopes(params: &Params, allowed: &Scopes) -> OResult<Scopes> {
        match params.get("scope") {
            None => Ok(allowed.clone()),
            Some(s) => {
                let req = Scopes::parse(s).map_err(|_| OAuthError::new("invalid_scope", "unknown scope"))?;
                let granted = Scopes(req.0.intersection(&allowed.0).copied().collect());
                if granted.0.is_empty() {
                    return Err(OAuthError::new("invalid_scope", "this client may have none of the requested scopes"));
                }
                Ok(granted)
            }
        }
    }

    async fn grant_client_credentials(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let tenant = client
            .tenant
            .clone()
            .ok_or_else(|| OAuthError::new("unauthorized_client", "this client is not bound to a tenant"))?;
        if !client.is_confidential() {
            return Err(OAuthError::new("unauthorized_client", "client_credentials needs a confidential client"));
        }
        self.tenant_plan(&tenant).await?;
        let resource = self.check_resource(base, params.get("resource"))?;
        let scopes = Self::requested_scopes(params, &client.allowed_scopes)?;
        let grant = Grant {
            tenant: tenant.clone(),
            principal: client.client_id.clone(),
            client_id: client.client_id.clone(),
            scopes,
            resource,
            teams: vec![],
            projects: vec![],
        };
        let resp = self.access_response(base, &grant, client, None).await?;
        tracing::info!(tenant = %tenant, client_id = %client.client_id, "tokens issued (client_credentials)");
        Ok(resp)
    }

    async fn grant_jwt_bearer(&self, base: &str, params: &Params, client: &OAuthClient) -> OResult<TokenResponse> {
        let assertion = params.require("assertion")?;
        let tenant_id = client
            .tenant
            .clone()
            .ok_or_else(|| OAuthError::new("unauthorized_client", "enterprise sign-in needs a client bound to a tenant"))?;
        if !client.is_confidential() {
            return Err(OAuthError::new("unauthorized_client", "enterprise sign-in needs a confidential client"));
        }
        let tenant = self
            .auth
            .tenant_config(&tenant_id)
            .await
            .map_err(OAuthError::from)?
            .ok_or_else(|| OAuthError::new("invalid_client", "the client's tenant no longer exists"))?;
        if tenant.plan != PlanTier::Enterprise {
            return Err(OAuthError::new("unauthorized_client", "enterprise sign-in (ID-JAG) needs the enterprise plan"));
        }
        let resource = self.check_resource(base, params.get("resource"))?;
        let a = self
            .idp
            .verify(&self.backend, assertion, &tenant, client.client_id.as_str(), &issuer_of(base), &resource, self.now())
            .await?;
        // The user: a local login with the asserted e-mail, else a member principal
        // named after the IdP subject (created on first sign-in).
        // A local account is linked only through an e-mail the IdP says it verified;
        // otherwise the user is a member principal named after the IdP subject.
        let by_email = match (&a.email, a.email_verified) {
            (Some(e), true) => self.backend.records.get_login(&tenant.id, e).await.map_err(OAuthError::from)?,
            _ => None,
        };
        let principal = match by_email {
            Some(l) if !l.disabled => l.principal,
            Some(_) => return Err(OAuthError::new("invalid_grant", "this user is disabled")),
            None => {
                let id = Id::new(format!("sso-{}", &sha256_hex(&format!("{}\n{}", a.issuer, a.subject))[..32]))
                    .map_err(OAuthError::from)?;
                let p = Principal {
                    tenant: tenant.id.clone(),
                    id: id.clone(),
                    kind: PrincipalKind::User,
                    role: Role::Member,
                    display_name: a.email.clone().unwrap_or_else(|| a.subject.chars().take(100).collect()),
                    created_at: self.now(),
                    teams: Vec::new(),
                    projects: Vec::new(),
                    disabled: false,
                };
                match self.backend.records.create_principal(&p).await {
                    Ok(()) => {}
                    Err(e) if e.code == ErrorCode::Conflict => {}
                    Err(e) => return Err(e.into()),
                }
                id
            }
        };
        let member = self
            .backend
            .records
            .get_principal(&tenant.id, &principal)
            .await
            .map_err(OAuthError::from)?
            .ok_or_else(|| OAuthError::new("invalid_grant", "the user no longer exists"))?;
        if member.disabled {
            return Err(OAuthError::new("invalid_grant", "this user is disabled"));
        }
        let role = member.role;
        let allowed = Scopes(role.allowed_scopes().0.intersection(&client.allowed_scopes.0).copied().collect());
        let mut scopes = Self::requested_scopes(params, &allowed)?;
        if let Some(asserted) = a.scope.as_deref() {
            // The IdP's scope bounds the grant; words we do not know (`openid`…) grant nothing.
            let known: std::collections::BTreeSet<Scope> =
                asserted.split_whitespace().filter_map(|w| Scope::parse(w).ok()).collect();
            scopes = Scopes(scopes.0.intersection(&known).copied().collect());
        }
        if scopes.0.is_empty() {
            return Err(OAuthError::new("invalid_scope", "no requested scope is allowed"));
        }
        let grant = Grant {
            tenant: tenant.id.clone(),
            principal,
            client_id: client.client_id.clone(),
            scopes,
            resource,
            // The user's teams here and those its IdP groups map to (bounded like any
            // membership list: they ride in the token).
            teams: domain::principal::memberships("teams", member.teams.iter().chain(&a.teams).cloned().collect()).map_err(
                |e| OAuthError::new("invalid_grant", format!("the user's teams and mapped IdP groups: {}", e.message)),
            )?,
            projects: member.projects,
        };
        let resp = self.access_response(base, &grant, client, None).await?;
        tracing::info!(tenant = %tenant.id, client_id = %client.client_id, "tokens issued (jwt-bearer ID-JAG)");
        Ok(resp)
    }

    // ---- revocation ----------------------------------------------------------------

    /// RFC 7009: revoking a refresh token revokes its family. Unknown tokens and access
    /// tokens (which expire within the hour and are not tracked) answer success too.
    ///
    /// # Errors
    /// `invalid_client`, `invalid_request`, `temporarily_unavailable`.
    pub async fn revoke(&self, params: &Params, creds: &ClientCredentials) -> OResult<()> {
        let client = self.authenticate_client(params, creds).await?;
        let token = params.require("token")?;
        if token.len() > 256 {
            return Ok(());
        }
        if let Some(rt) = self.backend.records.get_refresh(&sha256_hex(token)).await.map_err(OAuthError::from)?
            && rt.grant.client_id == client.client_id
        {
            self.backend.records.revoke_family(&rt.family, "revoked_by_client", self.now()).await.map_err(OAuthError::from)?;
            tracing::info!(client_id = %client.client_id, "refresh family revoked by the client");
        }
        Ok(())
    }
}
