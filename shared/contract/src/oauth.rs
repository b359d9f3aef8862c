//! Contract of the OAuth state (clients, logins, pending logins, codes, refresh
//! families, the `jti` cache): single use under races, reuse detection, isolation.

use std::sync::Arc;

use domain::oauth::{
    AuthCode, ClientAuthMethod, Grant, GrantType, OAuthClient, PendingAuthorization, RefreshFamily, RefreshToken, UserLogin,
};
use domain::principal::{Principal, PrincipalKind, Role, Scopes};
use domain::{ErrorCode, Id, Timestamp};
use ports::Records;
use ports::oauth::{OAuthStore, Redemption, Rotation};

use crate::fresh_tenant;

fn rid(label: &str) -> Id {
    Id::new(format!("{label}{:016x}", rand::random::<u64>())).unwrap()
}

fn digest() -> String {
    format!(
        "{:016x}{:016x}{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>(),
        rand::random::<u64>(),
        rand::random::<u64>()
    )
}

fn grant(client: &Id) -> Grant {
    Grant {
        tenant: fresh_tenant("grant"),
        principal: rid("u"),
        client_id: client.clone(),
        scopes: Scopes::parse("mcp:tools tenant:read").unwrap(),
        resource: "https://api.example.com/mcp".into(),
        teams: vec![],
        projects: vec!["p1".into()],
    }
}

fn family(g: &Grant) -> RefreshFamily {
    RefreshFamily {
        id: rid("f"),
        client_id: g.client_id.clone(),
        tenant: g.tenant.clone(),
        created_at: Timestamp(1),
        revoked_at: None,
        revoked_reason: None,
    }
}

fn refresh(f: &RefreshFamily, g: &Grant) -> RefreshToken {
    RefreshToken {
        family: f.id.clone(),
        grant: g.clone(),
        issued_at: Timestamp(1),
        expires_at: Timestamp(i64::MAX / 2),
        rotated_at: None,
    }
}

pub async fn clients_and_logins(r: Records) {
    let client = OAuthClient {
        client_id: rid("c"),
        client_name: "Claude".into(),
        redirect_uris: vec!["http://127.0.0.1:33418/callback".into()],
        grant_types: vec![GrantType::AuthorizationCode, GrantType::RefreshToken],
        auth_method: ClientAuthMethod::None,
        secret_sha256: None,
        allowed_scopes: Scopes::parse("mcp:tools").unwrap(),
        tenant: None,
        dynamic: true,
        created_at: Timestamp(5),
        toolsets: domain::principal::Toolsets::default(),
        metadata_url: None,
    };
    r.create_client(&client).await.unwrap();
    assert_eq!(r.get_client(&client.client_id).await.unwrap(), Some(client.clone()));
    assert_eq!(r.create_client(&client).await.map_err(|e| e.code), Err(ErrorCode::Conflict));
    assert_eq!(r.get_client(&rid("nobody")).await.unwrap(), None);
    let mut changed = client.clone();
    changed.toolsets = domain::principal::Toolsets::parse("canonical,graph").unwrap();
    r.update_client(&changed).await.unwrap();
    assert_eq!(r.get_client(&client.client_id).await.unwrap(), Some(changed.clone()));
    let mut stranger = changed.clone();
    stranger.client_id = rid("never-created");
    assert_eq!(r.update_client(&stranger).await.map_err(|e| e.code), Err(ErrorCode::Conflict), "update never creates");
    assert_eq!(r.get_client(&stranger.client_id).await.unwrap(), None);

    let t = fresh_tenant("login");
    let p = Principal {
        tenant: t.clone(),
        id: rid("u"),
        kind: PrincipalKind::User,
        role: Role::Member,
        display_name: "Ada".into(),
        created_at: Timestamp(1),
        teams: Vec::new(),
        projects: Vec::new(),
        disabled: false,
    };
    let login = UserLogin {
        tenant: t.clone(),
        email: "ada@example.com".into(),
        principal: p.id.clone(),
        role: Role::Member,
        password_hash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into(),
        created_at: Timestamp(1),
        disabled: false,
    };
    r.create_login(&login, &p).await.unwrap();
    assert_eq!(r.get_login(&t, "Ada@Example.com").await.unwrap(), Some(login.clone()), "e-mail lookups ignore case");
    use ports::records::PrincipalStore;
    assert_eq!(r.get_principal(&t, &p.id).await.unwrap(), Some(p.clone()));
    // The same e-mail again fails as a whole: no second principal appears.
    let p2 = Principal { id: rid("u"), ..p.clone() };
    let dup = UserLogin { principal: p2.id.clone(), ..login.clone() };
    assert_eq!(r.create_login(&dup, &p2).await.map_err(|e| e.code), Err(ErrorCode::Conflict));
    assert_eq!(r.get_principal(&t, &p2.id).await.unwrap(), None, "a refused login leaves nothing behind");
    // Logins are per tenant.
    assert_eq!(r.get_login(&fresh_tenant("other"), "ada@example.com").await.unwrap(), None);
    assert_eq!(r.get_login(&t, "no such\nuser").await.unwrap(), None);
    // An update changes login and principal together; it never creates.
    let disabled = UserLogin { role: Role::Approver, disabled: true, ..login.clone() };
    let promoted = Principal { role: Role::Approver, ..p.clone() };
    r.update_login(&disabled, &promoted).await.unwrap();
    assert_eq!(r.get_login(&t, "ada@example.com").await.unwrap(), Some(disabled.clone()));
    assert_eq!(r.get_principal(&t, &p.id).await.unwrap(), Some(promoted));
    let ghost = UserLogin { email: "ghost@example.com".into(), principal: rid("g"), ..login.clone() };
    let ghost_p = Principal { id: ghost.principal.clone(), ..p.clone() };
    assert_eq!(r.update_login(&ghost, &ghost_p).await.map_err(|e| e.code), Err(ErrorCode::NotFound));
    assert_eq!(r.get_login(&t, "ghost@example.com").await.unwrap(), None, "update never creates");
    assert_eq!(r.get_principal(&t, &ghost_p.id).await.unwrap(), None);
}

pub async fn pending_logins_complete_once(r: Records) {
    let client = rid("c");
    let mut p = PendingAuthorization {
        id: rid("pa"),
        csrf_sha256: digest(),
        client_id: client,
        redirect_uri: "http://127.0.0.1/cb".into(),
        state: Some("xyz".into()),
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM".into(),
        scopes: Scopes::parse("mcp:tools").unwrap(),
        resource: "https://api.example.com/mcp".into(),
        user: None,
        expires_at: Timestamp(10),
        redirect_uri_explicit: true,
        failed_logins: 0,
    };
    let v1 = r.put_pending(&p, None).await.unwrap();
    assert_eq!(r.put_pending(&p, None).await.map_err(|e| e.code), Err(ErrorCode::Conflict));
    p.user = Some((fresh_tenant("pl"), rid("u")));
    let v2 = r.put_pending(&p, Some(v1)).await.unwrap();
    assert_eq!(r.get_pending(&p.id).await.unwrap(), Some((p.clone(), v2)));
    assert_eq!(r.put_pending(&p, Some(v1)).await.map_err(|e| e.code), Err(ErrorCode::Conflict), "stale version");
    assert_eq!(r.take_pending(&p.id, v1).await.map_err(|e| e.code), Err(ErrorCode::Conflict));
    r.take_pending(&p.id, v2).await.unwrap();
    assert_eq!(r.get_pending(&p.id).await.unwrap(), None);
    assert!(r.take_pending(&p.id, v2).await.is_err(), "completing twice fails");
}

pub async fn codes_are_single_use(r: Records) {
    let client = rid("c");
    let g = grant(&client);
    let code = AuthCode {
        grant: g.clone(),
        redirect_uri: "http://127.0.0.1/cb".into(),
        code_challenge: "c".into(),
        expires_at: Timestamp(100),
        redeemed_at: None,
        family: None,
        redirect_uri_explicit: true,
    };
    let d = digest();
    r.create_code(&d, &code).await.unwrap();
    assert_eq!(r.get_code(&d).await.unwrap(), Some(code.clone()), "reading does not spend");
    let f = family(&g);
    let rt = refresh(&f, &g);
    let rd = digest();
    let first = r.redeem_code(&d, Timestamp(50), &f, Some((&rd, &rt))).await.unwrap();
    let Redemption::Redeemed(spent) = first else { panic!("first redemption: {first:?}") };
    assert_eq!((spent.redeemed_at, spent.family.clone()), (Some(Timestamp(50)), Some(f.id.clone())));
    assert_eq!(r.get_refresh(&rd).await.unwrap(), Some(rt));
    assert!(r.get_family(&f.id).await.unwrap().unwrap().revoked_at.is_none());
    // Second presentation: refused, and the family it started is revoked.
    let f2 = family(&g);
    let again = r.redeem_code(&d, Timestamp(60), &f2, None).await.unwrap();
    assert!(matches!(again, Redemption::Reused(_)), "{again:?}");
    let revoked = r.get_family(&f.id).await.unwrap().unwrap();
    assert_eq!((revoked.revoked_at, revoked.revoked_reason.as_deref()), (Some(Timestamp(60)), Some("code_reuse")));
    assert_eq!(r.get_family(&f2.id).await.unwrap(), None, "a refused redemption creates nothing");
    assert_eq!(r.redeem_code(&digest(), Timestamp(1), &family(&g), None).await.unwrap(), Redemption::Unknown);
    assert_eq!(r.redeem_code("../../etc", Timestamp(1), &family(&g), None).await.unwrap(), Redemption::Unknown);

    // Racing redemptions: exactly one wins.
    let d = digest();
    r.create_code(&d, &code).await.unwrap();
    let r = Arc::new(r);
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (r, d, g) = (r.clone(), d.clone(), g.clone());
        tasks.push(tokio::spawn(async move { r.redeem_code(&d, Timestamp(70), &family(&g), None).await.unwrap() }));
    }
    let mut won = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), Redemption::Redeemed(_)) {
            won += 1;
        }
    }
    assert_eq!(won, 1, "one code, one redemption");
}

pub async fn refresh_rotation_detects_reuse(r: Records) {
    let client = rid("c");
    let g = grant(&client);
    let f = family(&g);
    let a = digest();
    r.create_family(&f, Some((&a, &refresh(&f, &g)))).await.unwrap();
    let b = digest();
    let rotated = r.rotate_refresh(&a, Timestamp(10), &b, &refresh(&f, &g)).await.unwrap();
    assert!(matches!(rotated, Rotation::Rotated(ref old) if old.rotated_at == Some(Timestamp(10))), "{rotated:?}");
    assert!(r.get_refresh(&b).await.unwrap().is_some());
    // The rotated token again: reuse, the whole family goes.
    let c = digest();
    let reused = r.rotate_refresh(&a, Timestamp(20), &c, &refresh(&f, &g)).await.unwrap();
    assert!(matches!(reused, Rotation::Reused(_)), "{reused:?}");
    assert_eq!(r.get_refresh(&c).await.unwrap(), None, "no successor for a reused token");
    let fam = r.get_family(&f.id).await.unwrap().unwrap();
    assert_eq!(fam.revoked_reason.as_deref(), Some("reuse_detected"));
    // Even the legitimate latest token is dead now.
    let d = digest();
    assert!(matches!(r.rotate_refresh(&b, Timestamp(30), &d, &refresh(&f, &g)).await.unwrap(), Rotation::Revoked(_)));
    assert_eq!(r.rotate_refresh(&digest(), Timestamp(30), &digest(), &refresh(&f, &g)).await.unwrap(), Rotation::Unknown);
    // Revoking is idempotent and keeps the first reason.
    r.revoke_family(&f.id, "revoked_by_client", Timestamp(40)).await.unwrap();
    assert_eq!(r.get_family(&f.id).await.unwrap().unwrap().revoked_reason.as_deref(), Some("reuse_detected"));

    // Racing rotations of one token: at most one succeeds, and a loser revokes the family.
    let f = family(&g);
    let a = digest();
    r.create_family(&f, Some((&a, &refresh(&f, &g)))).await.unwrap();
    let r = Arc::new(r);
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let (r, a, f, g) = (r.clone(), a.clone(), f.clone(), g.clone());
        tasks.push(tokio::spawn(async move { r.rotate_refresh(&a, Timestamp(50), &digest(), &refresh(&f, &g)).await.unwrap() }));
    }
    let mut rotated = 0;
    for t in tasks {
        if matches!(t.await.unwrap(), Rotation::Rotated(_)) {
            rotated += 1;
        }
    }
    assert!(rotated <= 1, "{rotated} rotations of one token");
    assert!(r.get_family(&f.id).await.unwrap().unwrap().revoked_at.is_some(), "concurrent use of one refresh token revokes it");
}

pub async fn jti_is_claimed_once(r: Records) {
    let jti = format!("jti-{:x}", rand::random::<u64>());
    assert!(!r.jti_claimed("https://idp.example.com", &jti).await.unwrap());
    assert!(r.claim_jti("https://idp.example.com", &jti, Timestamp(100)).await.unwrap());
    assert!(r.jti_claimed("https://idp.example.com", &jti).await.unwrap());
    assert!(!r.jti_claimed("https://other-idp.example.com", &jti).await.unwrap(), "per issuer");
    assert!(!r.claim_jti("https://idp.example.com", &jti, Timestamp(100)).await.unwrap(), "a replay");
    assert!(r.claim_jti("https://other-idp.example.com", &jti, Timestamp(100)).await.unwrap(), "per issuer");
    assert!(r.claim_jti("https://idp.example.com", &"x".repeat(600), Timestamp(1)).await.is_err());
    assert!(r.claim_jti("https://idp.example.com", "", Timestamp(1)).await.is_err());
}
