//! The five sources a tenant can connect, as each documents its OAuth app flow and API.
//!
//! | source | sign-in | token | PKCE | refresh | revoke |
//! |---|---|---|---|---|---|
//! | `hubspot` | `app.hubspot.com/oauth/authorize` | `api.hubapi.com/oauth/v1/token` (form) | no | 30 min tokens, refresh kept | `DELETE /oauth/v1/refresh-tokens/{token}` |
//! | `salesforce` | `login.salesforce.com/services/oauth2/authorize` | `…/services/oauth2/token` (form, `instance_url`) | S256 | on 401 (session timeout) | `POST /services/oauth2/revoke` |
//! | `zendesk` | `{subdomain}.zendesk.com/oauth/authorizations/new` | `…/oauth/tokens` (JSON) | S256 | when `expires_in` is given | `DELETE /api/v2/oauth/tokens/current.json` |
//! | `jira` | `auth.atlassian.com/authorize` (`audience=api.atlassian.com`, `offline_access`) | `auth.atlassian.com/oauth/token` (JSON, rotating refresh) | S256 | rotating | none (the person removes the app) |
//! | `stripe` | a restricted API key (`rk_…`), entered once | — | — | — | — (the key is the customer's) |
//!
//! A source app's `base_url` replaces every host of its source (a Zendesk subdomain must
//! be given; for the others it serves a sandbox or a local server in development).

use domain::source::SourceApp;
use domain::{Error, Result};

/// One connectable source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Hubspot,
    Salesforce,
    Zendesk,
    Jira,
    Stripe,
}

/// Where a source's sign-in, token and API live for one deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub authorize: String,
    pub token: String,
    /// The API base before a grant names its own (Salesforce's instance, Jira's site).
    pub api: String,
    /// Jira: where the sites a grant reaches are listed.
    pub resources: Option<String>,
}

impl Source {
    pub const ALL: [Source; 5] = [Self::Hubspot, Self::Salesforce, Self::Zendesk, Self::Jira, Self::Stripe];

    /// # Errors
    /// `NOT_FOUND` naming the connectable sources.
    pub fn parse(raw: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|s| s.name() == raw).ok_or_else(|| {
            Error::not_found(format!(
                "source {raw:?} cannot be connected; sources that can: {}",
                Self::ALL.map(Self::name).join(", ")
            ))
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Hubspot => "hubspot",
            Self::Salesforce => "salesforce",
            Self::Zendesk => "zendesk",
            Self::Jira => "jira",
            Self::Stripe => "stripe",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Self::Hubspot => "HubSpot",
            Self::Salesforce => "Salesforce",
            Self::Zendesk => "Zendesk",
            Self::Jira => "Jira",
            Self::Stripe => "Stripe",
        }
    }

    /// Whether a person signs in at the source (OAuth), rather than giving a key.
    pub fn uses_oauth(self) -> bool {
        self != Self::Stripe
    }

    pub fn pkce(self) -> bool {
        matches!(self, Self::Salesforce | Self::Zendesk | Self::Jira)
    }

    /// Whether the token endpoint takes JSON (else a form).
    pub fn json_token_requests(self) -> bool {
        matches!(self, Self::Zendesk | Self::Jira)
    }

    /// The scopes asked for: read access to what the mapping reads.
    pub fn scopes(self) -> &'static str {
        match self {
            Self::Hubspot => "oauth crm.objects.companies.read crm.objects.contacts.read crm.objects.deals.read",
            Self::Salesforce => "api refresh_token",
            Self::Zendesk => "read",
            Self::Jira => "read:jira-work offline_access",
            Self::Stripe => "",
        }
    }

    /// The source's endpoints for `app` (its `base_url`, if any, replaces every host).
    ///
    /// # Errors
    /// `INVALID_REQUEST` for Zendesk without a `base_url` (the subdomain).
    pub fn endpoints(self, app: Option<&SourceApp>) -> Result<Endpoints> {
        let base = app.and_then(|a| a.base_url.as_deref()).map(|b| b.trim_end_matches('/').to_owned());
        let at = |default: &str| base.clone().unwrap_or_else(|| default.to_owned());
        Ok(match self {
            Self::Hubspot => Endpoints {
                authorize: format!("{}/oauth/authorize", at("https://app.hubspot.com")),
                token: format!("{}/oauth/v1/token", at("https://api.hubapi.com")),
                api: at("https://api.hubapi.com"),
                resources: None,
            },
            Self::Salesforce => Endpoints {
                authorize: format!("{}/services/oauth2/authorize", at("https://login.salesforce.com")),
                token: format!("{}/services/oauth2/token", at("https://login.salesforce.com")),
                api: at("https://login.salesforce.com"),
                resources: None,
            },
            Self::Zendesk => {
                let b = base.clone().ok_or_else(|| {
                    Error::invalid_field(
                        "base_url",
                        "Zendesk lives at your subdomain: register the app with --base-url https://YOURS.zendesk.com",
                    )
                })?;
                Endpoints {
                    authorize: format!("{b}/oauth/authorizations/new"),
                    token: format!("{b}/oauth/tokens"),
                    api: b,
                    resources: None,
                }
            }
            Self::Jira => Endpoints {
                authorize: format!("{}/authorize", at("https://auth.atlassian.com")),
                token: format!("{}/oauth/token", at("https://auth.atlassian.com")),
                api: at("https://api.atlassian.com"),
                resources: Some(format!("{}/oauth/token/accessible-resources", at("https://api.atlassian.com"))),
            },
            Self::Stripe => {
                Endpoints { authorize: String::new(), token: String::new(), api: at("https://api.stripe.com"), resources: None }
            }
        })
    }

    /// Checks a source app's `base_url`: the source's own hosts over https, or a
    /// loopback address outside AWS Lambda (development and tests).
    ///
    /// # Errors
    /// `INVALID_REQUEST` naming what is wrong.
    pub fn check_base_url(self, raw: &str) -> Result<()> {
        match self {
            // Sign-in and API hosts differ for these; the action hosts are a subset.
            Self::Hubspot | Self::Jira => {
                let url = reqwest::Url::parse(raw).map_err(|e| Error::invalid_field("base_url", format!("not a URL: {e}")))?;
                let host = url.host_str().unwrap_or_default();
                if matches!(host, "127.0.0.1" | "localhost" | "[::1]") {
                    crate::actions::check_base_url(self.name(), raw)
                } else {
                    Err(Error::invalid_field(
                        "base_url",
                        format!("{} has one public address; give a base URL only for a local server", self.title()),
                    ))
                }
            }
            _ => crate::actions::check_base_url(self.name(), raw),
        }
    }

    /// The Spine entity type of each object this source's pull reads, by the name the
    /// pull gives it (for deletions).
    pub fn entity_type(self, object: &str) -> Option<&'static str> {
        Some(match (self, object) {
            (Self::Hubspot, "companies") | (Self::Salesforce, "Account") | (Self::Zendesk, "organizations") => "account",
            (Self::Stripe, "customers") => "account",
            (Self::Hubspot, "contacts") | (Self::Salesforce, "Contact") => "contact",
            (Self::Hubspot, "deals") => "opportunity",
            (Self::Salesforce, "Case") | (Self::Zendesk, "tickets") | (Self::Jira, "issues") => "ticket",
            (Self::Stripe, "subscriptions") => "subscription",
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_has_a_mapping_and_parses_back() {
        for s in Source::ALL {
            assert_eq!(Source::parse(s.name()).unwrap(), s);
            assert!(crate::ingest::mapping::mapping(s.name()).is_some(), "{} has no mapping", s.name());
        }
        let e = Source::parse("notion").unwrap_err();
        assert!(e.message.contains("hubspot, salesforce, zendesk, jira, stripe"), "{}", e.message);
    }

    #[test]
    fn a_base_url_replaces_every_host_and_zendesk_needs_one() {
        let app = SourceApp {
            client_id: "c".into(),
            client_secret: "s".into(),
            base_url: Some("http://127.0.0.1:9/".into()),
            webhook_secret: None,
        };
        let e = Source::Jira.endpoints(Some(&app)).unwrap();
        assert_eq!(e.token, "http://127.0.0.1:9/oauth/token");
        assert_eq!(e.resources.as_deref(), Some("http://127.0.0.1:9/oauth/token/accessible-resources"));
        assert_eq!(Source::Hubspot.endpoints(None).unwrap().authorize, "https://app.hubspot.com/oauth/authorize");
        assert!(Source::Zendesk.endpoints(None).is_err());
        assert!(Source::Hubspot.check_base_url("https://evil.example").is_err());
        assert!(Source::Zendesk.check_base_url("https://acme.zendesk.com").is_ok());
        assert!(Source::Zendesk.check_base_url("https://acme.zendesk.com.evil.example").is_err());
        assert!(Source::Salesforce.check_base_url("http://127.0.0.1:8080").is_ok());
    }
}
