//! Connector credentials for governed actions (`continuity connector credential`,
//! `PUT …/connectors/{source}/credential`): stored sealed by the vault, never shown
//! again — listing names the sources that hold one, nothing more.

use domain::action::Credential;
use domain::{Error, Id, Result, TenantId};
use ports::records::CredentialStore as _;

use super::AdminService;

/// The source's name, if connector actions exist for it.
fn source(raw: &str) -> Result<Id> {
    let raw = raw.trim();
    if crate::actions::OPERATIONS.iter().any(|o| o.source == raw) {
        return Id::new(raw.to_owned());
    }
    let mut acting: Vec<&str> = crate::actions::OPERATIONS.iter().map(|o| o.source).collect();
    acting.dedup();
    Err(Error::invalid_field("source", format!("no actions for {raw:?}; connectors that act: {}", acting.join(", "))))
}

impl AdminService {
    /// Stores (or replaces) the tenant's credential for `source`'s write API.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a source without actions or a malformed credential (or a
    /// store without a vault); `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn set_credential(&self, tenant: &TenantId, source_name: &str, credential: Credential) -> Result<()> {
        self.show_tenant(tenant).await?;
        let source = source(source_name)?;
        let credential = Credential {
            base_url: credential.base_url.map(|u| u.trim().trim_end_matches('/').to_owned()).filter(|u| !u.is_empty()),
            token: credential.token.trim().to_owned(),
            email: credential.email.map(|e| e.trim().to_owned()).filter(|e| !e.is_empty()),
        };
        credential.check()?;
        match &credential.base_url {
            Some(url) => crate::actions::check_base_url(source.as_str(), url)?,
            None if crate::actions::needs_base_url(source.as_str()) => {
                return Err(Error::invalid_field(
                    "base_url",
                    format!("{source}'s API address is per account: give it (your instance, subdomain or site, over https)"),
                ));
            }
            None => {}
        }
        self.backend.records.put_credential(tenant, &source, &credential).await?;
        self.audited(tenant, "admin:connector.credential", source.as_str(), "stored (sealed)").await;
        Ok(())
    }

    /// Removes the tenant's credential for `source`; approved actions for it then fail
    /// with a clear reason until one is stored again.
    ///
    /// # Errors
    /// `NOT_FOUND` when there is none (or the tenant is unknown); `UNAVAILABLE`.
    pub async fn remove_credential(&self, tenant: &TenantId, source_name: &str) -> Result<()> {
        self.show_tenant(tenant).await?;
        let source = source(source_name)?;
        if !self.backend.records.delete_credential(tenant, &source).await? {
            return Err(Error::not_found(format!("a {source} credential of tenant {tenant}")));
        }
        self.audited(tenant, "admin:connector.credential", source.as_str(), "removed").await;
        Ok(())
    }

    /// The sources the tenant holds a credential for (never the credentials).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown tenant; `UNAVAILABLE`.
    pub async fn credential_sources(&self, tenant: &TenantId) -> Result<Vec<String>> {
        self.show_tenant(tenant).await?;
        self.backend.records.credential_sources(tenant).await
    }
}
