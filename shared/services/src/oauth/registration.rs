//! Dynamic client registration (RFC 7591): what a client may register, checked before
//! anything is stored — redirect URIs above all (https, http on loopback, or an app's
//! private-use scheme).
use super::*;

/// A redirect URI we accept at registration: https, http on a loopback host (native
/// apps, RFC 8252 §7.3), or a private-use scheme (RFC 8252 §7.1) — never a fragment,
/// never `javascript:`/`data:`/`file:`.
pub(super) fn valid_redirect_uri(uri: &str) -> bool {
    if uri.len() > MAX_URI_LEN || !uri.is_ascii() || uri.contains('#') || uri.bytes().any(|b| b.is_ascii_control() || b == b' ') {
        return false;
    }
    let Some((scheme, rest)) = uri.split_once(':') else { return false };
    let lower = scheme.to_ascii_lowercase();
    if lower == "http" || lower == "https" {
        // The exact lower-case `scheme://` form only: `HTTP://x` or `http:x` would slip
        // past a case-sensitive prefix test and still reach a browser as http.
        return (uri.starts_with("https://") || uri.starts_with("http://")) && domain::oauth::is_secure_url(uri);
    }
    let scheme_ok = scheme.len() >= 2
        && scheme.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    scheme_ok && !rest.is_empty() && !NOT_PRIVATE_USE.contains(&lower.as_str())
}

/// Schemes that are not an app's private-use scheme (RFC 8252 §7.1): script and local
/// content, and network protocols a browser or the OS would hand the code to someone
/// else (`ftp:`, `ws:`, `mailto:`…).
const NOT_PRIVATE_USE: &[&str] = &[
    "javascript",
    "data",
    "file",
    "vbscript",
    "blob",
    "about",
    "filesystem",
    "view-source",
    "ftp",
    "ftps",
    "sftp",
    "tftp",
    "ws",
    "wss",
    "mailto",
    "tel",
    "sms",
    "smsto",
    "mms",
    "fax",
    "callto",
    "gopher",
    "ldap",
    "ldaps",
    "smtp",
    "imap",
    "pop",
    "telnet",
    "ssh",
    "git",
    "svn",
    "irc",
    "ircs",
    "news",
    "nntp",
    "rtsp",
    "rtmp",
    "sip",
    "sips",
    "xmpp",
    "magnet",
    "urn",
    "jar",
    "chrome",
    "chrome-extension",
    "moz-extension",
    "resource",
    "intent",
];

impl OAuthService {
    /// RFC 7591 dynamic client registration. Never grants `approvals:decide` or `admin`.
    ///
    /// # Errors
    /// `invalid_redirect_uri` / `invalid_client_metadata` naming the problem.
    pub async fn register(&self, body: &Value) -> OResult<Value> {
        let meta = |m: &str| OAuthError::new("invalid_client_metadata", m.to_owned());
        let obj = body.as_object().ok_or_else(|| meta("the body must be a JSON object"))?;
        let uris: Vec<String> = match obj.get("redirect_uris") {
            Some(Value::Array(a)) if !a.is_empty() && a.len() <= MAX_REDIRECT_URIS => a
                .iter()
                .map(|u| {
                    u.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| OAuthError::new("invalid_redirect_uri", "redirect URIs must be strings"))
                })
                .collect::<OResult<_>>()?,
            _ => {
                return Err(OAuthError::new(
                    "invalid_redirect_uri",
                    format!("redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs"),
                ));
            }
        };
        if let Some(bad) = uris.iter().find(|u| !valid_redirect_uri(u)) {
            let shown: String = bad.chars().take(100).collect();
            return Err(OAuthError::new(
                "invalid_redirect_uri",
                format!("{shown:?} is not allowed: use https, http on localhost, or a private-use scheme, without a fragment"),
            ));
        }
        let method = match obj.get("token_endpoint_auth_method") {
            None | Some(Value::Null) => ClientAuthMethod::None,
            Some(Value::String(m)) => ClientAuthMethod::parse(m)
                .map_err(|_| meta("token_endpoint_auth_method must be none, client_secret_basic or client_secret_post"))?,
            Some(_) => return Err(meta("token_endpoint_auth_method must be a string")),
        };
        let grants: Vec<GrantType> = match obj.get("grant_types") {
            None | Some(Value::Null) => vec![GrantType::AuthorizationCode, GrantType::RefreshToken],
            Some(Value::Array(a)) => a
                .iter()
                .map(|g| g.as_str().and_then(|g| GrantType::parse(g).ok()).ok_or_else(|| meta("unsupported grant type")))
                .collect::<OResult<_>>()?,
            Some(_) => return Err(meta("grant_types must be an array")),
        };
        if grants.is_empty() || grants.iter().any(|g| !matches!(g, GrantType::AuthorizationCode | GrantType::RefreshToken)) {
            return Err(meta(
                "a registered client may use authorization_code and refresh_token only; service clients are created by an administrator",
            ));
        }
        if let Some(rt) = obj.get("response_types") {
            let ok = rt.as_array().is_some_and(|a| a.iter().all(|r| r.as_str() == Some("code")));
            if !ok {
                return Err(meta("response_types may only contain code"));
            }
        }
        let scopes = match obj.get("scope") {
            None | Some(Value::Null) => Scopes(Scope::ALL.iter().copied().filter(|s| s.grantable_to_mcp_client()).collect()),
            Some(Value::String(s)) => {
                let parsed = Scopes::parse(s).map_err(|_| OAuthError::new("invalid_client_metadata", "unknown scope"))?;
                if let Some(bad) = parsed.0.iter().find(|s| !s.grantable_to_mcp_client()) {
                    return Err(meta(&format!("the scope {bad} is never granted to a registered client")));
                }
                parsed
            }
            Some(_) => return Err(meta("scope must be a string")),
        };
        let name = match obj.get("client_name") {
            Some(Value::String(n)) if n.chars().count() <= MAX_NAME_LEN && !n.chars().any(char::is_control) => n.clone(),
            Some(Value::String(_)) => return Err(meta("client_name is too long or has control characters")),
            None | Some(Value::Null) => "Unnamed client".into(),
            Some(_) => return Err(meta("client_name must be a string")),
        };
        let secret = (method != ClientAuthMethod::None).then(|| crate::random_token(32));
        let client = OAuthClient {
            client_id: Id::new(format!("dyn-{}", crate::random_token(16))).map_err(OAuthError::from)?,
            client_name: name,
            redirect_uris: uris,
            grant_types: grants,
            auth_method: method,
            secret_sha256: secret.as_deref().map(sha256_hex),
            allowed_scopes: scopes,
            tenant: None,
            dynamic: true,
            created_at: self.now(),
            toolsets: domain::principal::Toolsets::default(),
            metadata_url: None,
        };
        self.backend.records.create_client(&client).await.map_err(OAuthError::from)?;
        tracing::info!(client_id = %client.client_id, "oauth client registered");
        let mut out = json!({
            "client_id": client.client_id.as_str(),
            "client_id_issued_at": client.created_at.0 / 1000,
            "client_name": client.client_name,
            "redirect_uris": client.redirect_uris,
            "grant_types": client.grant_types.iter().map(|g| g.as_str()).collect::<Vec<_>>(),
            "response_types": ["code"],
            "token_endpoint_auth_method": client.auth_method.as_str(),
            "scope": client.allowed_scopes.to_oauth_string(),
        });
        if let Some(s) = secret {
            out["client_secret"] = json!(s);
            out["client_secret_expires_at"] = json!(0);
        }
        Ok(out)
    }

    // ---- client authentication -----------------------------------------------------
}
