//! Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; the
//! registration MCP's 2025-11-25 and 2026-07-28 authorization specs prefer): a client
//! whose `client_id` is an `https` URL is described by the JSON document at that URL,
//! fetched here when it signs in — no registration.
//!
//! The fetch is guarded as any request a stranger can point at a server must be: https
//! only, the URL's form checked (a path, no fragment, no user or password, no dot
//! segments), the host resolved once and every address public (no private, loopback,
//! link-local, CGNAT, documentation or multicast address) and the connection pinned to it
//! (a name that re-resolves elsewhere cannot redirect it), no redirects followed, at most
//! [`MAX_DOCUMENT_BYTES`] read within [`FETCH_TIMEOUT`], and only a 200 with a JSON body
//! accepted. The document must name itself (`client_id` equal to the URL), its
//! `client_name` and `redirect_uris`, and no shared secret. A good document is cached
//! as its `Cache-Control` says (within [`MIN_CACHE`]..[`MAX_CACHE`]); a failure never is.
//!
//! The client is stored under an id derived from the URL ([`client_id_for`]), so codes,
//! refresh tokens and an operator's `client toolsets` work as for a registered client;
//! the token endpoint takes the URL as `client_id`.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::*;

/// The largest document read (the draft recommends 5 KB).
pub const MAX_DOCUMENT_BYTES: usize = 5 * 1024;
/// How long a fetch may take, connection included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Cache bounds for a good document (its `Cache-Control: max-age` within them).
pub const MIN_CACHE: Duration = Duration::from_secs(60);
pub const MAX_CACHE: Duration = Duration::from_secs(24 * 3600);
/// The longest `client_id` URL taken.
pub const MAX_URL_LEN: usize = 512;
const MAX_NAME_LEN: usize = 200;

/// How the fetcher may reach documents. Production: public addresses only, the system's
/// and the built-in trust roots.
#[derive(Clone, Default)]
pub struct CimdPolicy {
    /// Loopback and private addresses allowed (tests serve documents on 127.0.0.1).
    pub allow_private: bool,
    /// Extra trusted roots (PEM), for a test CA.
    pub extra_roots_pem: Vec<Vec<u8>>,
}

/// Fetches and checks client metadata documents.
#[derive(Clone, Default)]
pub struct CimdFetcher {
    policy: Arc<std::sync::RwLock<Arc<CimdPolicy>>>,
}

impl CimdFetcher {
    fn policy(&self) -> Arc<CimdPolicy> {
        self.policy.read().map_or_else(|p| p.into_inner().clone(), |p| p.clone())
    }
}

impl OAuthService {
    /// How client metadata documents may be reached (tests: a loopback server with a
    /// test CA). Production keeps the default: public addresses, the usual roots.
    pub fn set_client_metadata_policy(&self, policy: CimdPolicy) {
        if let Ok(mut p) = self.cimd.policy.write() {
            *p = Arc::new(policy);
        }
    }
}

/// Whether `client_id` names a metadata document (an `https` URL) rather than a
/// registered client.
pub fn is_document_url(client_id: &str) -> bool {
    client_id.starts_with("https://")
}

/// The stored client id of the document at `url`: `cimd-` and 24 hex digits of its SHA-256.
///
/// # Errors
/// None in practice (the id is always well formed); `server_error` otherwise.
pub fn client_id_for(url: &str) -> OResult<Id> {
    let hex = sha256_hex(url);
    Id::new(format!("cimd-{}", &hex[..24])).map_err(|_| OAuthError::new("server_error", "a client id could not be derived"))
}

/// The host of a client id URL, for people (the consent page).
pub fn host_of(url: &str) -> Option<String> {
    reqwest::Url::parse(url).ok()?.host_str().map(str::to_owned)
}

fn refuse(description: impl Into<String>) -> OAuthError {
    OAuthError::new("invalid_client", description)
}

/// The URL's form, as the draft requires (checked before anything is fetched).
fn check_url(raw: &str) -> OResult<reqwest::Url> {
    if raw.len() > MAX_URL_LEN || !raw.is_ascii() || raw.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return Err(refuse(format!("the client_id URL must be printable ASCII of at most {MAX_URL_LEN} characters")));
    }
    if !raw.starts_with("https://") {
        return Err(refuse("a client_id URL must use https"));
    }
    if raw.contains('#') {
        return Err(refuse("a client_id URL must not have a fragment"));
    }
    let after_scheme = &raw["https://".len()..];
    let authority = after_scheme.split(['/', '?']).next().unwrap_or_default();
    if authority.contains('@') {
        return Err(refuse("a client_id URL must not carry a user name or password"));
    }
    let path = &after_scheme[authority.len()..];
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path == "/" {
        return Err(refuse("a client_id URL must have a path (e.g. https://app.example/oauth/client.json)"));
    }
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(refuse("a client_id URL must not have . or .. segments"));
    }
    let url = reqwest::Url::parse(raw).map_err(|_| refuse("the client_id is not a valid URL"))?;
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refuse("the client_id URL has no host"));
    }
    Ok(url)
}

/// Whether an address is one a public document can live at (RFC 6890's special-use
/// ranges refused).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_unspecified()
                || v4.is_multicast()
                || o[0] == 0
                || (o[0] == 100 && (64..128).contains(&o[1]))
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19))
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x0064 && s[1] == 0xff9b)
                || s[0] == 0x2002)
        }
    }
}

/// How long a good document may be kept, from its `Cache-Control` (`no-store`/`no-cache`:
/// not at all), bounded by [`MIN_CACHE`] and [`MAX_CACHE`].
fn cache_for(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let cc = headers.get(reqwest::header::CACHE_CONTROL).and_then(|v| v.to_str().ok()).unwrap_or_default().to_ascii_lowercase();
    if cc.split(',').any(|d| matches!(d.trim(), "no-store" | "no-cache" | "private")) {
        return None;
    }
    let max_age = cc.split(',').find_map(|d| d.trim().strip_prefix("max-age=").and_then(|v| v.trim().parse::<u64>().ok()));
    Some(max_age.map_or(MIN_CACHE, Duration::from_secs).clamp(MIN_CACHE, MAX_CACHE))
}

impl CimdFetcher {
    fn client(&self, host: &str, addrs: &[SocketAddr]) -> OResult<reqwest::Client> {
        let extra = &self.policy().extra_roots_pem;
        let tls = if extra.is_empty() {
            tls::client_config()
        } else {
            tls::client_config_trusting(extra).map_err(|_| OAuthError::new("server_error", "a configured root is not PEM"))?
        };
        reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .redirect(reqwest::redirect::Policy::none())
            .timeout(FETCH_TIMEOUT)
            .connect_timeout(FETCH_TIMEOUT)
            .no_proxy()
            .resolve_to_addrs(host, addrs)
            .build()
            .map_err(|_| OAuthError::new("server_error", "the metadata fetcher cannot start"))
    }

    /// The document at `url` as raw JSON and how long it may be cached.
    async fn fetch(&self, url: &reqwest::Url) -> OResult<(Value, Option<Duration>)> {
        let host = url.host_str().unwrap_or_default().trim_start_matches('[').trim_end_matches(']').to_owned();
        let port = url.port_or_known_default().unwrap_or(443);
        let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::time::timeout(FETCH_TIMEOUT, tokio::net::lookup_host((host.as_str(), port)))
                .await
                .map_err(|_| refuse(format!("{host}: the name did not resolve in time")))?
                .map_err(|_| refuse(format!("{host}: the name does not resolve")))?
                .collect(),
        };
        if addrs.is_empty() {
            return Err(refuse(format!("{host}: the name does not resolve")));
        }
        if !self.policy().allow_private
            && let Some(bad) = addrs.iter().find(|a| !is_public(a.ip()))
        {
            return Err(refuse(format!(
                "{host} resolves to {}, a private, loopback or otherwise special-use address: its metadata is not fetched",
                bad.ip()
            )));
        }
        let response = self
            .client(&host, &addrs)?
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| {
                let why =
                    if e.is_timeout() { "did not answer in time".to_owned() } else { "cannot be reached over TLS".to_owned() };
                refuse(format!("the client's metadata document {why}"))
            })?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(refuse(format!(
                "the client's metadata document answered HTTP {} (only 200 is accepted; redirects are not followed)",
                response.status().as_u16()
            )));
        }
        let json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|c| c.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
            .is_some_and(|c| c == "application/json" || (c.starts_with("application/") && c.ends_with("+json")));
        if !json {
            return Err(refuse("the client's metadata document is not served as application/json"));
        }
        if response.content_length().is_some_and(|n| n > MAX_DOCUMENT_BYTES as u64) {
            return Err(refuse(format!("the client's metadata document is larger than {MAX_DOCUMENT_BYTES} bytes")));
        }
        let cache = cache_for(response.headers());
        let mut response = response;
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|_| refuse("the client's metadata document was cut off"))? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(refuse(format!("the client's metadata document is larger than {MAX_DOCUMENT_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        let doc: Value = serde_json::from_slice(&body).map_err(|_| refuse("the client's metadata document is not JSON"))?;
        Ok((doc, cache))
    }
}

/// What a document says, checked: its name and redirect URIs.
fn check_document(url: &str, doc: &Value) -> OResult<(String, Vec<String>)> {
    let bad = |m: &str| OAuthError::new("invalid_client_metadata", format!("the client's metadata document {m}"));
    let obj = doc.as_object().ok_or_else(|| bad("is not a JSON object"))?;
    if obj.get("client_id").and_then(Value::as_str) != Some(url) {
        return Err(bad("must name itself: its client_id must equal its URL exactly"));
    }
    for forbidden in ["client_secret", "client_secret_expires_at"] {
        if obj.contains_key(forbidden) {
            return Err(bad(&format!("must not hold {forbidden} (a metadata document has no shared secret)")));
        }
    }
    match obj.get("token_endpoint_auth_method") {
        None | Some(Value::Null) => {}
        Some(Value::String(m)) if m == "none" => {}
        Some(Value::String(m)) if m == "private_key_jwt" => {
            return Err(bad("asks for private_key_jwt, which this server does not offer: use none (a public client with PKCE)"));
        }
        Some(_) => return Err(bad("must use token_endpoint_auth_method none (no shared secret)")),
    }
    if let Some(grants) = obj.get("grant_types") {
        let ok = grants
            .as_array()
            .is_some_and(|a| a.iter().all(|g| matches!(g.as_str(), Some("authorization_code" | "refresh_token"))));
        if !ok {
            return Err(bad("may list only the grant types authorization_code and refresh_token"));
        }
    }
    let name = obj.get("client_name").and_then(Value::as_str).map(str::trim).filter(|n| !n.is_empty());
    let name = name.ok_or_else(|| bad("must have a client_name"))?;
    if name.chars().count() > MAX_NAME_LEN || name.chars().any(char::is_control) {
        return Err(bad(&format!("has a client_name longer than {MAX_NAME_LEN} characters or with control characters")));
    }
    let uris: Vec<String> = match obj.get("redirect_uris") {
        Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_REDIRECT_URIS => a
            .iter()
            .map(|u| u.as_str().map(str::to_owned).ok_or_else(|| bad("lists a redirect URI that is not a string")))
            .collect::<OResult<_>>()?,
        _ => return Err(bad(&format!("must list 1 to {MAX_REDIRECT_URIS} redirect_uris"))),
    };
    if let Some(u) = uris.iter().find(|u| !super::registration::valid_redirect_uri(u)) {
        let shown: String = u.chars().take(100).collect();
        return Err(bad(&format!("lists {shown:?}, which is not allowed (https, http on localhost, or a private-use scheme)")));
    }
    Ok((name.to_owned(), uris))
}

impl OAuthService {
    /// The client a metadata document at `url` describes, fetched (or from the cache),
    /// checked and stored under [`client_id_for`]`(url)`.
    ///
    /// # Errors
    /// `invalid_client` / `invalid_client_metadata` naming what is wrong (the fetch, the
    /// URL, the document); `server_error` when the store cannot be written.
    pub async fn document_client(&self, url: &str) -> OResult<OAuthClient> {
        let parsed = check_url(url)?;
        let id = client_id_for(url)?;
        let cache_key = ports::CacheKey::global("cimd", id.as_str());
        let cached = match self.backend.cache.get(&cache_key).await {
            Ok(Some(bytes)) => serde_json::from_slice::<Value>(&bytes).ok(),
            _ => None,
        };
        let (doc, keep) = match cached {
            Some(doc) => (doc, None),
            None => {
                let (doc, keep) = self.cimd.fetch(&parsed).await?;
                (doc, keep)
            }
        };
        let (name, redirect_uris) = check_document(url, &doc)?;
        if let Some(ttl) = keep
            && let Ok(bytes) = serde_json::to_vec(&doc)
        {
            let _ = self.backend.cache.set(&cache_key, &bytes, ttl).await;
        }
        let existing = self.backend.records.get_client(&id).await?;
        let client = OAuthClient {
            client_id: id,
            client_name: name,
            redirect_uris,
            grant_types: vec![GrantType::AuthorizationCode, GrantType::RefreshToken],
            auth_method: ClientAuthMethod::None,
            secret_sha256: None,
            allowed_scopes: Scopes(Scope::ALL.iter().copied().filter(|s| s.grantable_to_mcp_client()).collect()),
            tenant: None,
            dynamic: true,
            created_at: existing.as_ref().map_or_else(|| self.now(), |c| c.created_at),
            // An operator's `client toolsets` for this client survives a re-fetch.
            toolsets: existing.as_ref().map(|c| c.toolsets.clone()).unwrap_or_default(),
            metadata_url: Some(url.to_owned()),
        };
        match &existing {
            None => match self.backend.records.create_client(&client).await {
                Err(e) if e.code == domain::ErrorCode::Conflict => self.backend.records.update_client(&client).await?,
                other => other?,
            },
            Some(old) if *old != client => self.backend.records.update_client(&client).await?,
            Some(_) => {}
        }
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_take_the_drafts_form_only() {
        assert!(check_url("https://app.example/oauth/client.json").is_ok());
        assert!(check_url("https://app.example:8443/c?v=1").is_ok(), "a port, and (discouraged) a query");
        for bad in [
            "http://app.example/client.json",
            "https://app.example",
            "https://app.example/",
            "https://app.example/client.json#x",
            "https://user:pw@app.example/client.json",
            "https://app.example/a/../client.json",
            "https://app.example/./client.json",
            "https://app.example/client json",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn special_use_addresses_are_not_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "192.0.2.1",
            "224.0.0.1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946", "8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn documents_must_name_themselves_and_hold_no_secret() {
        let url = "https://app.example/client.json";
        let good = json!({"client_id": url, "client_name": "App", "redirect_uris": ["http://127.0.0.1:3000/cb"]});
        assert_eq!(check_document(url, &good).unwrap().0, "App");
        let with = |k: &str, v: Value| {
            let mut d = good.clone();
            d[k] = v;
            d
        };
        assert!(check_document("https://app.example/other.json", &good).is_err(), "client_id must equal the URL");
        assert!(check_document(url, &with("client_secret", json!("s"))).is_err());
        assert!(check_document(url, &with("token_endpoint_auth_method", json!("client_secret_basic"))).is_err());
        assert!(check_document(url, &with("redirect_uris", json!(["javascript:alert(1)"]))).is_err());
        assert!(check_document(url, &with("redirect_uris", json!([]))).is_err());
        assert!(check_document(url, &with("client_name", json!(""))).is_err());
        assert!(check_document(url, &with("grant_types", json!(["client_credentials"]))).is_err());
    }

    #[test]
    fn cache_control_is_honoured_within_bounds() {
        let h = |v: &str| {
            let mut m = reqwest::header::HeaderMap::new();
            m.insert(reqwest::header::CACHE_CONTROL, v.parse().unwrap());
            m
        };
        assert_eq!(cache_for(&h("max-age=600")), Some(Duration::from_secs(600)));
        assert_eq!(cache_for(&h("public, max-age=5")), Some(MIN_CACHE));
        assert_eq!(cache_for(&h("max-age=9999999")), Some(MAX_CACHE));
        assert_eq!(cache_for(&h("no-store")), None);
        assert_eq!(cache_for(&reqwest::header::HeaderMap::new()), Some(MIN_CACHE));
    }
}
