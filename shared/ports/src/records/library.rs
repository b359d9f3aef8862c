//! The book of projects, knowledge-base documents, and readback verifications with
//! their review queue.

use async_trait::async_trait;
use domain::memory::Verification;
use domain::spine::{BookEntry, KbDocument};
use domain::{Error, Id, Page, PageRequest, Result, TenantId};

use super::{Records, encode, put};
use crate::items::{Condition, Write};

/// The book of projects and knowledge-base documents.
#[async_trait]
pub trait LibraryStore: Send + Sync {
    /// Creates or replaces a book-of-projects entry.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a bad project name; `UNAVAILABLE`.
    async fn put_book_entry(&self, entry: &BookEntry) -> Result<()>;
    /// Entries of one project, or of all projects, ordered by project then id.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_book_entries(&self, tenant: &TenantId, project: Option<&str>, page: &PageRequest) -> Result<Page<BookEntry>>;
    /// Creates or replaces a knowledge-base document.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn put_kb_document(&self, doc: &KbDocument) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_kb_document(&self, tenant: &TenantId, id: &Id) -> Result<Option<KbDocument>>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn list_kb_documents(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<KbDocument>>;
}

#[async_trait]
impl LibraryStore for Records {
    async fn put_book_entry(&self, entry: &BookEntry) -> Result<()> {
        Id::new(entry.project.clone())
            .map_err(|_| Error::invalid_field("project", "must be 1-128 printable characters without # or /"))?;
        let t = entry.tenant.as_str();
        self.items
            .write(vec![put(t, "book", format!("{}#{}", entry.project, entry.id), 1, encode(entry)?, Condition::None)])
            .await
    }

    async fn list_book_entries(&self, tenant: &TenantId, project: Option<&str>, page: &PageRequest) -> Result<Page<BookEntry>> {
        let prefix = match project {
            Some(p) => format!("{}#", Id::new(p)?),
            None => String::new(),
        };
        self.page(tenant.as_str(), "book", &prefix, page, false).await
    }

    async fn put_kb_document(&self, doc: &KbDocument) -> Result<()> {
        self.items.write(vec![put(doc.tenant.as_str(), "kb", doc.id.to_string(), 1, encode(doc)?, Condition::None)]).await
    }

    async fn get_kb_document(&self, tenant: &TenantId, id: &Id) -> Result<Option<KbDocument>> {
        self.get_one(tenant.as_str(), "kb", id.as_str()).await
    }

    async fn list_kb_documents(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<KbDocument>> {
        self.page(tenant.as_str(), "kb", "", page, false).await
    }
}

/// Readback verifications and the review queue (SPEC §5.4): every indexed memory entry
/// or KB document has its latest verification; the failed ones are also listed in the
/// review queue, visible to approvers, until a later readback succeeds.
#[async_trait]
pub trait ReviewStore: Send + Sync {
    /// Records `v` (replacing the previous verification of the same record) and adds it
    /// to, or takes it off, the review queue — in one atomic write. A pending one leaves
    /// the queue as it is.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn put_verification(&self, v: &Verification) -> Result<()>;
    /// Records many verifications as [`Self::put_verification`] does each, in as few
    /// atomic writes as the backend takes (one on embedded): a batch of turns' vectors
    /// pays one commit, not one per turn. Each verification is written whole.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn put_verifications(&self, vs: &[Verification]) -> Result<()>;
    /// # Errors
    /// `UNAVAILABLE`.
    async fn get_verification(&self, tenant: &TenantId, kind: &str, doc: &Id) -> Result<Option<Verification>>;
    /// The review queue: records whose last readback failed, by kind and id.
    ///
    /// # Errors
    /// `INVALID_REQUEST` for a malformed cursor; `UNAVAILABLE`.
    async fn list_review(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<Verification>>;
    /// Takes a record off the review queue, keeping its verification as it is (a person
    /// looked at it and let it be). Idempotent.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn dismiss_review(&self, tenant: &TenantId, kind: &str, doc: &Id) -> Result<()>;
    /// The record's entry in the review queue, if it is there.
    ///
    /// # Errors
    /// `UNAVAILABLE`.
    async fn in_review(&self, tenant: &TenantId, kind: &str, doc: &Id) -> Result<Option<Verification>>;
}

#[async_trait]
impl ReviewStore for Records {
    async fn put_verification(&self, v: &Verification) -> Result<()> {
        self.items.write(verification_writes(v)?).await
    }

    async fn put_verifications(&self, vs: &[Verification]) -> Result<()> {
        let max = self.items.max_batch();
        let mut group: Vec<Write> = Vec::new();
        for v in vs {
            let writes = verification_writes(v)?;
            if !group.is_empty() && group.len() + writes.len() > max {
                self.items.write(std::mem::take(&mut group)).await?;
            }
            group.extend(writes);
        }
        if !group.is_empty() {
            self.items.write(group).await?;
        }
        Ok(())
    }

    async fn get_verification(&self, tenant: &TenantId, kind: &str, doc: &Id) -> Result<Option<Verification>> {
        self.get_one(tenant.as_str(), "verify", &format!("{kind}#{doc}")).await
    }

    async fn list_review(&self, tenant: &TenantId, page: &PageRequest) -> Result<Page<Verification>> {
        self.page(tenant.as_str(), "review", "", page, false).await
    }

    async fn in_review(&self, tenant: &TenantId, kind: &str, doc: &Id) -> Result<Option<Verification>> {
        self.get_one(tenant.as_str(), "review", &format!("{kind}#{doc}")).await
    }

    async fn dismiss_review(&self, tenant: &TenantId, kind: &str, doc: &Id) -> Result<()> {
        let (tenant, sk) = (tenant.as_str().to_owned(), format!("{kind}#{doc}"));
        self.items.write(vec![Write::Delete { tenant, part: "review".into(), sk, condition: Condition::None }]).await
    }
}

/// The writes of one verification: the record, and its place in the review queue (put
/// when it failed, taken off when it passed, left as it is while pending).
fn verification_writes(v: &Verification) -> Result<Vec<Write>> {
    let tenant = v.tenant.as_str();
    let sk = format!("{}#{}", v.kind, v.doc);
    let body = encode(v)?;
    let queue = if v.pending {
        // Not decided yet: a record already in the queue stays there until it is.
        None
    } else if v.verified {
        Some(Write::Delete { tenant: tenant.to_owned(), part: "review".into(), sk: sk.clone(), condition: Condition::None })
    } else {
        Some(put(tenant, "review", sk.clone(), 1, body.clone(), Condition::None))
    };
    let mut writes = vec![put(tenant, "verify", sk, 1, body, Condition::None)];
    writes.extend(queue);
    Ok(writes)
}
