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
