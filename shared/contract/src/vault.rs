//! Contract of the Spine vault's key store ([`ports::vault::KeyWrapper`]) and of entity
//! payloads sealed with it: the stored body never holds the plaintext, reads decrypt, and
//! a tampered or moved ciphertext is refused (`INTERNAL`), never returned.

use std::sync::Arc;

use domain::spine::{Entity, PoleClass};
use domain::value::{Attributes, Value};
use domain::{EntityType, ErrorCode, Id, PageRequest, Timestamp};
use ports::Records;
use ports::items::{Condition, ItemStore, Write};
use ports::records::{EntityStore, Expect};
use ports::vault::{KeyWrapper, MAGIC, Vault};

use crate::fresh_tenant;

/// What a vault check needs: the key store, and an item store to keep records in.
pub struct VaultFixture {
    pub wrapper: Arc<dyn KeyWrapper>,
    pub items: Arc<dyn ItemStore>,
}

const SECRET: &str = "Acme renewal at risk: CFO unhappy (vault-check)";

fn entity(t: &domain::TenantId, id: &str) -> Entity {
    let mut a = Attributes::new();
    a.insert("name".into(), Value::Text(SECRET.into()));
    Entity {
        tenant: t.clone(),
        entity_type: EntityType::new("account").unwrap_or_else(|e| panic!("{e}")),
        id: Id::new(id).unwrap_or_else(|e| panic!("{e}")),
        pole_class: PoleClass::Organization,
        attributes: a,
        created_at: Timestamp(1),
        updated_at: Timestamp(1),
        version: 0,
        source_updated_at: None,
    }
}

pub async fn data_keys_are_bound_to_their_tenant(f: VaultFixture) {
    let (a, b) = (fresh_tenant("vka"), fresh_tenant("vkb"));
    let (plain, wrapped) = f.wrapper.generate_data_key(&a).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plain.len(), 32, "a 256-bit key");
    assert!(!wrapped.windows(plain.len()).any(|w| w == plain.as_slice()), "the wrapped key does not contain the key");
    assert_eq!(f.wrapper.unwrap_data_key(&a, &wrapped).await.unwrap_or_else(|e| panic!("{e}")), plain);
    let e = f.wrapper.unwrap_data_key(&b, &wrapped).await.expect_err("another tenant's key must not unwrap");
    assert_eq!(e.code, ErrorCode::Internal);
    let mut tampered = wrapped.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    assert!(f.wrapper.unwrap_data_key(&a, &tampered).await.is_err());
}

pub async fn entities_are_sealed_at_rest(f: VaultFixture) {
    let records = Records::new(f.items.clone()).with_vault(Arc::new(Vault::new(f.wrapper.clone())));
    let t = fresh_tenant("vault");
    let stored = records.put_entity(&entity(&t, "acme-1"), Expect::Absent).await.unwrap_or_else(|e| panic!("{e}"));
    records.put_entity(&entity(&t, "acme-2"), Expect::Absent).await.unwrap_or_else(|e| panic!("{e}"));
    let raw = f.items.get(t.as_str(), "entity", "account#acme-1").await.unwrap_or_else(|e| panic!("{e}")).expect("stored");
    assert!(raw.body.starts_with(MAGIC), "sealed");
    assert!(!String::from_utf8_lossy(&raw.body).contains("CFO"), "no plaintext at rest");
    let got = records.get_entity(&t, &stored.entity_type, &stored.id).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, Some(stored.clone()));
    let listed = records.list_entities(&t, None, &PageRequest::first(10)).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(listed.items.len(), 2);
    // A fresh vault (another process) reads with the stored, wrapped key.
    let other = Records::new(f.items.clone()).with_vault(Arc::new(Vault::new(f.wrapper.clone())));
    assert_eq!(
        other.get_entity(&t, &stored.entity_type, &stored.id).await.unwrap_or_else(|e| panic!("{e}")),
        Some(stored.clone())
    );

    // A ciphertext moved to another entity's address, or tampered with, is refused.
    let put_raw = |sk: &str, body: Vec<u8>| Write::Put {
        item: ports::items::Item { tenant: t.to_string(), part: "entity".into(), sk: sk.into(), version: 9, body },
        condition: Condition::None,
    };
    f.items.write(vec![put_raw("account#acme-2", raw.body.clone())]).await.unwrap_or_else(|e| panic!("{e}"));
    let e = records
        .get_entity(&t, &stored.entity_type, &Id::new("acme-2").unwrap_or_else(|e| panic!("{e}")))
        .await
        .expect_err("moved");
    assert_eq!(e.code, ErrorCode::Internal);
    let mut bad = raw.body.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    f.items.write(vec![put_raw("account#acme-1", bad)]).await.unwrap_or_else(|e| panic!("{e}"));
    let e = records.get_entity(&t, &stored.entity_type, &stored.id).await.expect_err("tampered");
    assert_eq!(e.code, ErrorCode::Internal);
    assert!(!e.message.contains("CFO"));

    // Bodies written before the vault (plain JSON) are still read.
    let plain = Records::new(f.items.clone());
    let legacy = plain.put_entity(&entity(&t, "legacy"), Expect::Absent).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.get_entity(&t, &legacy.entity_type, &legacy.id).await.unwrap_or_else(|e| panic!("{e}")), Some(legacy));
}

/// Source apps (under the deployment's own key) and grants (under the tenant's) are
/// sealed at rest; a store without a vault refuses them; a pull's state is versioned; a
/// pending connect is taken once, and not after it expired.
pub async fn source_secrets_are_sealed_and_connects_single_use(f: VaultFixture) {
    use domain::connector::ConnectorSource;
    use domain::source::{ConnectStart, Grant, SourceApp, SyncState};
    use ports::records::SourceStore as _;

    let bare = Records::new(f.items.clone());
    let records = Records::new(f.items.clone()).with_vault(Arc::new(Vault::new(f.wrapper.clone())));
    let t = fresh_tenant("src");
    let src = ConnectorSource::new("hubspot").unwrap();
    let app = SourceApp {
        client_id: "client-1".into(),
        client_secret: "app-secret-4711".into(),
        base_url: None,
        webhook_secret: Some("hook-secret-4711".into()),
    };
    let e = bare.put_source_app(&src, &app).await.unwrap_err();
    assert_eq!(e.code, domain::ErrorCode::InvalidRequest, "no vault, no secret kept: {e}");
    records.put_source_app(&src, &app).await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(records.get_source_app(&src).await.unwrap(), Some(app));
    assert!(records.source_app_names().await.unwrap().contains(&"hubspot".to_owned()));
    let raw = f.items.get(ports::items::REGISTRY_TENANT, "source_app", "hubspot").await.unwrap().unwrap();
    assert!(!String::from_utf8_lossy(&raw.body).contains("app-secret-4711"), "the app is sealed at rest");

    let grant = Grant {
        access_token: "tok-access-4711".into(),
        refresh_token: Some("tok-refresh-4711".into()),
        expires_at: Some(domain::Timestamp(5)),
        api_base: "https://api.hubapi.com".into(),
        obtained_at: domain::Timestamp(1),
    };
    records.put_grant(&t, &src, &grant).await.unwrap();
    assert_eq!(records.get_grant(&t, &src).await.unwrap(), Some(grant));
    let raw = f.items.get(t.as_str(), "connector_grant", "hubspot").await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&raw.body);
    assert!(!text.contains("tok-access-4711") && !text.contains("tok-refresh-4711"), "the grant is sealed at rest");
    assert_eq!(records.get_grant(&fresh_tenant("other"), &src).await.unwrap(), None, "another tenant has none");
    assert!(records.delete_grant(&t, &src).await.unwrap());
    assert!(!records.delete_grant(&t, &src).await.unwrap());

    let state = SyncState::fresh(t.clone(), src.clone(), 300, domain::Timestamp(10));
    let v1 = records.put_sync(&state, Expect::Absent).await.unwrap();
    assert_eq!(v1.version, 1);
    assert_eq!(records.put_sync(&state, Expect::Absent).await.unwrap_err().code, domain::ErrorCode::Conflict);
    let v2 = records.put_sync(&SyncState { fetched: 100, ..v1.clone() }, Expect::Version(1)).await.unwrap();
    assert_eq!((v2.version, v2.fetched), (2, 100));
    assert_eq!(
        records.put_sync(&v1, Expect::Version(1)).await.unwrap_err().code,
        domain::ErrorCode::Conflict,
        "a stale run loses"
    );
    assert_eq!(records.get_sync(&t, &src).await.unwrap(), Some(v2));

    let start = ConnectStart {
        tenant: t.clone(),
        source: src.clone(),
        verifier: Some("v".repeat(43)),
        redirect_uri: "https://c.example/v1/connectors/oauth/callback".into(),
        expires_at: domain::Timestamp(1_000),
    };
    let state_a = format!("state-a-{t}");
    records.put_connect_start(&state_a, &start).await.unwrap();
    assert_eq!(records.put_connect_start(&state_a, &start).await.unwrap_err().code, domain::ErrorCode::Conflict);
    assert_eq!(records.take_connect_start(&state_a, domain::Timestamp(999)).await.unwrap(), Some(start.clone()));
    assert_eq!(records.take_connect_start(&state_a, domain::Timestamp(999)).await.unwrap(), None, "used once");
    let state_b = format!("state-b-{t}");
    records.put_connect_start(&state_b, &start).await.unwrap();
    assert_eq!(records.take_connect_start(&state_b, domain::Timestamp(1_000)).await.unwrap(), None, "expired");
    assert_eq!(records.take_connect_start(&state_b, domain::Timestamp(1)).await.unwrap(), None, "and gone");
}
