//! The OAuth authorization server's state (SPEC §3.3): clients, user logins, pending
//! logins, authorization codes, refresh tokens and families, the ID-JAG `jti` cache.
//!
//! Written once over the item port (so both backends share it and one contract suite
//! covers it). Codes and refresh tokens are addressed by the SHA-256 of their value;
//! the value itself never reaches the store. Every state change that must happen once —
//! redeeming a code, rotating a refresh token, claiming a `jti` — is a conditional write,
//! so two racing requests cannot both succeed.

use async_trait::async_trait;
use domain::oauth::{AuthCode, OAuthClient, PendingAuthorization, RefreshFamily, RefreshToken, UserLogin};
use domain::principal::Principal;
use domain::{Error, ErrorCode, Id, Page, PageRequest, Result, TenantId, Timestamp};

use crate::items::{Condition, REGISTRY_TENANT, Write};
use crate::records::{Records, decode, encode, put};

const CLIENT: &str = "oauth_client";
const CODE: &str = "oauth_code";
const REFRESH: &str = "oauth_refresh";
const FAMILY: &str = "oauth_family";
const PENDING: &str = "oauth_pending";
const JTI: &str = "oauth_jti";
const LOGIN: &str = "login";

/// What presenting an authorization code found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redemption {
    /// First use: the code is now spent and the family (and refresh token) exist.
    Redeemed(AuthCode),
    /// The code was already spent; its family has been revoked.
    Reused(AuthCode),
    /// No such code.
    Unknown,
}

/// What presenting a refresh token found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rotation {
    /// The old token is spent and its successor stored.
    Rotated(RefreshToken),
    /// The token was already rotated (or raced): the whole family is now revoked.
    Reused(RefreshToken),
    /// The family was revoked earlier.
    Revoked(RefreshToken),
    /// No such token.
    Unknown,
}

#[async_trait]
pub trait OAuthStore: Send + Sync {
    /// # Errors
    /// `CONFLICT` if the id is taken; `UNAVAILABLE`.
    async fn create_client(&self, client: &OAuthClient) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_client(&self, client_id: &Id) -> Result<Option<OAuthClient>>;
    /// Replaces an existing client's record.
    ///
    /// # Errors
    /// `CONFLICT` if the client does not exist; `UNAVAILABLE`.
    async fn update_client(&self, client: &OAuthClient) -> Result<()>;

    /// Creates a user's principal and login together.
    ///
    /// # Errors
    /// `CONFLICT` if the e-mail or principal exists in the tenant; `UNAVAILABLE`.
    async fn create_login(&self, login: &UserLogin, principal: &Principal) -> Result<()>;
    /// Replaces an existing user's login and principal together (role, disabled).
    ///
    /// # Errors
    /// `NOT_FOUND` if either does not exist (nothing is written); `UNAVAILABLE`.
    async fn update_login(&self, login: &UserLogin, principal: &Principal) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_login(&self, tenant: &TenantId, email: &str) -> Result<Option<UserLogin>>;
    /// A tenant's logins, by e-mail.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_logins(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<UserLogin>>;

    /// Stores a pending login; `expected` is the stored version to replace (`None`: create).
    /// Returns the new version.
    ///
    /// # Errors
    /// `CONFLICT` when it changed meanwhile; `UNAVAILABLE`.
    async fn put_pending(&self, pending: &PendingAuthorization, expected: Option<u64>) -> Result<u64>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_pending(&self, id: &Id) -> Result<Option<(PendingAuthorization, u64)>>;
    /// Deletes a pending login if it is still at `version` (it can be completed once).
    ///
    /// # Errors
    /// `CONFLICT` when it was completed or changed meanwhile; `UNAVAILABLE`.
    async fn take_pending(&self, id: &Id, version: u64) -> Result<()>;

    /// # Errors
    /// `CONFLICT` on a digest collision; `UNAVAILABLE`.
    async fn create_code(&self, digest: &str, code: &AuthCode) -> Result<()>;
    /// Reads a code without spending it.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_code(&self, digest: &str) -> Result<Option<AuthCode>>;
    /// Spends a code atomically with creating its refresh family and first refresh token.
    /// A second presentation revokes that family (RFC 6749 §4.1.2).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn redeem_code(
        &self,
        digest: &str,
        at: Timestamp,
        family: &RefreshFamily,
        refresh: Option<(&str, &RefreshToken)>,
    ) -> Result<Redemption>;

    /// Starts a refresh family with its first token (grants without a code).
    ///
    /// # Errors
    /// `CONFLICT` on a collision; `UNAVAILABLE`.
    async fn create_family(&self, family: &RefreshFamily, refresh: Option<(&str, &RefreshToken)>) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_family(&self, id: &Id) -> Result<Option<RefreshFamily>>;
    /// Revokes a family (idempotent).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn revoke_family(&self, id: &Id, reason: &str, at: Timestamp) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_refresh(&self, digest: &str) -> Result<Option<RefreshToken>>;
    /// Spends `old_digest` and stores its successor, or detects reuse.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn rotate_refresh(&self, old_digest: &str, at: Timestamp, new_digest: &str, new: &RefreshToken) -> Result<Rotation>;

    /// Records a `jti` of `issuer` as used; `false` if it was seen before (a replay).
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn claim_jti(&self, issuer: &str, jti: &str, expires_at: Timestamp) -> Result<bool>;

    /// Whether a `jti` of `issuer` was claimed (and not yet pruned): a signed-out page
    /// session is one whose id was claimed at sign-out.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn jti_claimed(&self, issuer: &str, jti: &str) -> Result<bool>;

    /// Deletes authorization codes, pending sign-ins and used ID-JAG `jti`s that expired
    /// before `before` (the maintenance job passes a day's grace, so a code presented
    /// again soon after expiry is still recognised as reused). Returns how many.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn prune_expired(&self, before: Timestamp, max: usize) -> Result<usize>;
}

fn sha_hex(s: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(s.as_bytes()))
}

fn printable_key(s: &str) -> Result<&str> {
    if s.is_empty() || s.len() > 128 || !s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(Error::invalid("malformed key"));
    }
    Ok(s)
}

#[async_trait]
impl OAuthStore for Records {
    async fn create_client(&self, client: &OAuthClient) -> Result<()> {
        self.items()
            .write(vec![put(REGISTRY_TENANT, CLIENT, client.client_id.to_string(), 1, encode(client)?, Condition::Absent)])
            .await
    }

    async fn get_client(&self, client_id: &Id) -> Result<Option<OAuthClient>> {
        self.get_one(REGISTRY_TENANT, CLIENT, client_id.as_str()).await
    }

    async fn update_client(&self, client: &OAuthClient) -> Result<()> {
        self.items()
            .write(vec![put(REGISTRY_TENANT, CLIENT, client.client_id.to_string(), 1, encode(client)?, Condition::Exists)])
            .await
    }

    async fn create_login(&self, login: &UserLogin, principal: &Principal) -> Result<()> {
        if login.tenant != principal.tenant || login.principal != principal.id {
            return Err(Error::invalid("login and principal disagree"));
        }
        let email = login.email.to_ascii_lowercase();
        if email.is_empty() || email.len() > 254 || !email.bytes().all(|b| b.is_ascii_graphic()) || !email.contains('@') {
            return Err(Error::invalid_field("email", "must be an e-mail address"));
        }
        self.items()
            .write(vec![
                put(login.tenant.as_str(), LOGIN, email, 1, encode(login)?, Condition::Absent),
                put(principal.tenant.as_str(), "principal", principal.id.to_string(), 1, encode(principal)?, Condition::Absent),
            ])
            .await
            .map_err(
                |e| if e.code == ErrorCode::Conflict { Error::conflict("a user with this e-mail already exists") } else { e },
            )
    }

    async fn update_login(&self, login: &UserLogin, principal: &Principal) -> Result<()> {
        if login.tenant != principal.tenant || login.principal != principal.id {
            return Err(Error::invalid("login and principal disagree"));
        }
        let email = login.email.to_ascii_lowercase();
        self.items()
            .write(vec![
                put(login.tenant.as_str(), LOGIN, email, 1, encode(login)?, Condition::Exists),
                put(principal.tenant.as_str(), "principal", principal.id.to_string(), 1, encode(principal)?, Condition::Exists),
            ])
            .await
            .map_err(|e| if e.code == ErrorCode::Conflict { Error::not_found(format!("user {}", login.email)) } else { e })
    }

    async fn get_login(&self, tenant: &TenantId, email: &str) -> Result<Option<UserLogin>> {
        let email = email.to_ascii_lowercase();
        if email.is_empty() || email.len() > 254 || !email.bytes().all(|b| b.is_ascii_graphic()) {
            return Ok(None);
        }
        self.get_one(tenant.as_str(), LOGIN, &email).await
    }

    async fn list_logins(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<UserLogin>> {
        self.page(tenant.as_str(), LOGIN, "", page, false).await
    }

    async fn put_pending(&self, pending: &PendingAuthorization, expected: Option<u64>) -> Result<u64> {
        let (version, condition) = match expected {
            None => (1, Condition::Absent),
            Some(v) => (v + 1, Condition::Version(v)),
        };
        self.items()
            .write(vec![put(REGISTRY_TENANT, PENDING, pending.id.to_string(), version, encode(pending)?, condition)])
            .await?;
        Ok(version)
    }

    async fn get_pending(&self, id: &Id) -> Result<Option<(PendingAuthorization, u64)>> {
        match self.items().get(REGISTRY_TENANT, PENDING, id.as_str()).await? {
            Some(item) => Ok(Some((decode(&item)?, item.version))),
            None => Ok(None),
        }
    }

    async fn take_pending(&self, id: &Id, version: u64) -> Result<()> {
        self.items()
            .write(vec![Write::Delete {
                tenant: REGISTRY_TENANT.into(),
                part: PENDING.into(),
                sk: id.to_string(),
                condition: Condition::Version(version),
            }])
            .await
    }

    async fn create_code(&self, digest: &str, code: &AuthCode) -> Result<()> {
        let digest = printable_key(digest)?;
        self.items().write(vec![put(REGISTRY_TENANT, CODE, digest.to_owned(), 1, encode(code)?, Condition::Absent)]).await
    }

    async fn get_code(&self, digest: &str) -> Result<Option<AuthCode>> {
        let Ok(digest) = printable_key(digest) else { return Ok(None) };
        self.get_one(REGISTRY_TENANT, CODE, digest).await
    }

    async fn redeem_code(
        &self,
        digest: &str,
        at: Timestamp,
        family: &RefreshFamily,
        refresh: Option<(&str, &RefreshToken)>,
    ) -> Result<Redemption> {
        let Ok(digest) = printable_key(digest) else { return Ok(Redemption::Unknown) };
        let Some(item) = self.items().get(REGISTRY_TENANT, CODE, digest).await? else { return Ok(Redemption::Unknown) };
        let mut code: AuthCode = decode(&item)?;
        if code.redeemed_at.is_some() {
            if let Some(f) = &code.family {
                self.revoke_family(f, "code_reuse", at).await?;
            }
            return Ok(Redemption::Reused(code));
        }
        code.redeemed_at = Some(at);
        code.family = Some(family.id.clone());
        let mut writes = vec![put(
            REGISTRY_TENANT,
            CODE,
            digest.to_owned(),
            item.version + 1,
            encode(&code)?,
            Condition::Version(item.version),
        )];
        writes.extend(family_writes(family, refresh)?);
        match self.items().write(writes).await {
            Ok(()) => Ok(Redemption::Redeemed(code)),
            // Lost a race with another redemption of the same code: that is a reuse.
            Err(e) if e.code == ErrorCode::Conflict => {
                let Some(item) = self.items().get(REGISTRY_TENANT, CODE, digest).await? else { return Ok(Redemption::Unknown) };
                let code: AuthCode = decode(&item)?;
                if let Some(f) = &code.family {
                    self.revoke_family(f, "code_reuse", at).await?;
                }
                Ok(Redemption::Reused(code))
            }
            Err(e) => Err(e),
        }
    }

    async fn create_family(&self, family: &RefreshFamily, refresh: Option<(&str, &RefreshToken)>) -> Result<()> {
        self.items().write(family_writes(family, refresh)?).await
    }

    async fn get_family(&self, id: &Id) -> Result<Option<RefreshFamily>> {
        self.get_one(REGISTRY_TENANT, FAMILY, id.as_str()).await
    }

    async fn revoke_family(&self, id: &Id, reason: &str, at: Timestamp) -> Result<()> {
        for _ in 0..3 {
            let Some(item) = self.items().get(REGISTRY_TENANT, FAMILY, id.as_str()).await? else { return Ok(()) };
            let mut family: RefreshFamily = decode(&item)?;
            if family.revoked_at.is_some() {
                return Ok(());
            }
            family.revoked_at = Some(at);
            family.revoked_reason = Some(reason.to_owned());
            let w = put(
                REGISTRY_TENANT,
                FAMILY,
                id.to_string(),
                item.version + 1,
                encode(&family)?,
                Condition::Version(item.version),
            );
            match self.items().write(vec![w]).await {
                Ok(()) => return Ok(()),
                Err(e) if e.code == ErrorCode::Conflict => {}
                Err(e) => return Err(e),
            }
        }
        Err(Error::unavailable(format!("family {id} kept changing while being revoked")))
    }

    async fn get_refresh(&self, digest: &str) -> Result<Option<RefreshToken>> {
        let Ok(digest) = printable_key(digest) else { return Ok(None) };
        self.get_one(REGISTRY_TENANT, REFRESH, digest).await
    }

    async fn rotate_refresh(&self, old_digest: &str, at: Timestamp, new_digest: &str, new: &RefreshToken) -> Result<Rotation> {
        let Ok(old_digest) = printable_key(old_digest) else { return Ok(Rotation::Unknown) };
        let new_digest = printable_key(new_digest)?;
        let Some(item) = self.items().get(REGISTRY_TENANT, REFRESH, old_digest).await? else { return Ok(Rotation::Unknown) };
        let mut old: RefreshToken = decode(&item)?;
        let Some(family_item) = self.items().get(REGISTRY_TENANT, FAMILY, old.family.as_str()).await? else {
            return Ok(Rotation::Revoked(old));
        };
        let family: RefreshFamily = decode(&family_item)?;
        if family.revoked_at.is_some() {
            return Ok(Rotation::Revoked(old));
        }
        if old.rotated_at.is_some() {
            self.revoke_family(&old.family, "reuse_detected", at).await?;
            return Ok(Rotation::Reused(old));
        }
        old.rotated_at = Some(at);
        let writes = vec![
            put(
                REGISTRY_TENANT,
                REFRESH,
                old_digest.to_owned(),
                item.version + 1,
                encode(&old)?,
                Condition::Version(item.version),
            ),
            put(REGISTRY_TENANT, REFRESH, new_digest.to_owned(), 1, encode(new)?, Condition::Absent),
            // The family must still be the unrevoked one read above: a revocation racing
            // this rotation makes the whole write fail.
            put(
                REGISTRY_TENANT,
                FAMILY,
                family.id.to_string(),
                family_item.version + 1,
                family_item.body.clone(),
                Condition::Version(family_item.version),
            ),
        ];
        match self.items().write(writes).await {
            Ok(()) => Ok(Rotation::Rotated(old)),
            Err(e) if e.code == ErrorCode::Conflict => {
                // Someone rotated it first: two holders of one token means it leaked.
                self.revoke_family(&old.family, "reuse_detected", at).await?;
                Ok(Rotation::Reused(old))
            }
            Err(e) => Err(e),
        }
    }

    async fn claim_jti(&self, issuer: &str, jti: &str, expires_at: Timestamp) -> Result<bool> {
        if jti.is_empty() || jti.len() > 512 {
            return Err(Error::invalid_field("jti", "must be 1-512 characters"));
        }
        let sk = format!("{}#{}", sha_hex(issuer), sha_hex(jti));
        let res = self.items().write(vec![put(REGISTRY_TENANT, JTI, sk, 1, encode(&expires_at)?, Condition::Absent)]).await;
        match res {
            Ok(()) => Ok(true),
            Err(e) if e.code == ErrorCode::Conflict => Ok(false),
            Err(e) => Err(e),
        }
    }

    async fn jti_claimed(&self, issuer: &str, jti: &str) -> Result<bool> {
        if jti.is_empty() || jti.len() > 512 {
            return Ok(false);
        }
        let sk = format!("{}#{}", sha_hex(issuer), sha_hex(jti));
        Ok(self.get_one::<Timestamp>(REGISTRY_TENANT, JTI, &sk).await?.is_some())
    }

    async fn prune_expired(&self, before: Timestamp, max: usize) -> Result<usize> {
        let mut deleted = 0;
        for part in [CODE, PENDING, JTI] {
            let mut after: Option<String> = None;
            loop {
                let q = crate::items::Query {
                    tenant: REGISTRY_TENANT,
                    part,
                    prefix: "",
                    after: after.as_deref(),
                    limit: 200,
                    descending: false,
                };
                let (items, more) = self.items().query(q).await?;
                let Some(last) = items.last() else { break };
                after = Some(last.sk.clone());
                let mut writes = Vec::new();
                for i in &items {
                    let expires_at = match part {
                        CODE => decode::<AuthCode>(i)?.expires_at,
                        PENDING => decode::<PendingAuthorization>(i)?.expires_at,
                        _ => decode::<Timestamp>(i)?,
                    };
                    if expires_at < before && deleted + writes.len() < max {
                        writes.push(Write::Delete {
                            tenant: REGISTRY_TENANT.into(),
                            part: part.into(),
                            sk: i.sk.clone(),
                            condition: Condition::None,
                        });
                    }
                }
                for chunk in writes.chunks(self.items().max_batch()) {
                    self.items().write(chunk.to_vec()).await?;
                    deleted += chunk.len();
                }
                if !more || deleted >= max {
                    break;
                }
            }
        }
        Ok(deleted)
    }
}

fn family_writes(family: &RefreshFamily, refresh: Option<(&str, &RefreshToken)>) -> Result<Vec<Write>> {
    let mut writes = vec![put(REGISTRY_TENANT, FAMILY, family.id.to_string(), 1, encode(family)?, Condition::Absent)];
    if let Some((digest, token)) = refresh {
        writes.push(put(REGISTRY_TENANT, REFRESH, printable_key(digest)?.to_owned(), 1, encode(token)?, Condition::Absent));
    }
    Ok(writes)
}
