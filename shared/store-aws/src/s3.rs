//! The blob-store port over S3: one bucket, every object under its tenant's prefix.
//!
//! The object key is [`BlobKey::full`], `{tenant}/{path}`. Tenant slugs contain no `/`,
//! so the `{tenant}/` prefix of one tenant never matches another's (`ab/` vs `ab-c/`),
//! and listing with it cannot leak across tenants. Encryption at rest, versioning and
//! lifecycle rules are bucket settings from the SAM template, not this adapter's concern.

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
use domain::{Error, Result, TenantId};
use ports::blob::{BlobKey, BlobStore, MAX_BLOB_BYTES};

use crate::unavailable;

/// S3's largest page of a listing.
const MAX_KEYS_PER_CALL: u32 = 1000;

/// The blob store over one S3 bucket.
#[derive(Debug, Clone)]
pub struct S3Blobs {
    client: Client,
    bucket: String,
}

impl S3Blobs {
    /// Use [`crate::settings::s3_client`] for `client`: against moto it must be path-style.
    pub fn new(client: Client, bucket: impl Into<String>) -> Self {
        Self { client, bucket: bucket.into() }
    }

    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// Creates the bucket unless it exists.
    ///
    /// For tests and local development only: the production bucket comes from the SAM
    /// template with encryption, versioning and public-access blocks.
    ///
    /// # Errors
    /// `UNAVAILABLE` when S3 cannot be reached or refuses the bucket.
    pub async fn create_bucket_if_missing(&self) -> Result<()> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => return Ok(()),
            Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => {}
            Err(e) => return Err(unavailable("s3 HeadBucket", &e)),
        }
        let mut req = self.client.create_bucket().bucket(&self.bucket);
        // us-east-1 is the one region S3 refuses as an explicit location constraint.
        if let Some(region) = self.client.config().region().map(|r| r.as_ref().to_owned())
            && region != "us-east-1"
        {
            let config =
                CreateBucketConfiguration::builder().location_constraint(BucketLocationConstraint::from(region.as_str())).build();
            req = req.create_bucket_configuration(config);
        }
        match req.send().await {
            Ok(_) => Ok(()),
            // Another test process won the race: the bucket is there, which is all we want.
            Err(e) if e.as_service_error().is_some_and(|s| s.is_bucket_already_owned_by_you()) => Ok(()),
            Err(e) => Err(unavailable("s3 CreateBucket", &e)),
        }
    }
}

/// Rebuilds a blob key from an object key listed under `{tenant}/`. Objects that do not
/// parse were not written through this port; they are skipped rather than failing the list.
fn key_from_object(tenant: &TenantId, object_key: &str) -> Option<BlobKey> {
    let path = object_key.strip_prefix(tenant.as_str())?.strip_prefix('/')?;
    BlobKey::new(tenant, path).ok()
}

#[async_trait]
impl BlobStore for S3Blobs {
    async fn delete(&self, key: &BlobKey) -> Result<()> {
        // S3 answers 204 for a key that is not there too.
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(key.full())
            .send()
            .await
            .map_err(|e| unavailable("s3 DeleteObject", &e))?;
        Ok(())
    }

    async fn put(&self, key: &BlobKey, bytes: &[u8]) -> Result<()> {
        if bytes.len() > MAX_BLOB_BYTES {
            return Err(Error::invalid_field("bytes", format!("must be at most {MAX_BLOB_BYTES} bytes")));
        }
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(key.full())
            .body(ByteStream::from(bytes.to_vec()))
            .send()
            .await
            .map_err(|e| unavailable("s3 PutObject", &e))?;
        Ok(())
    }

    async fn get(&self, key: &BlobKey) -> Result<Option<Vec<u8>>> {
        let out = match self.client.get_object().bucket(&self.bucket).key(key.full()).send().await {
            Ok(out) => out,
            Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
            Err(e) => return Err(unavailable("s3 GetObject", &e)),
        };
        let bytes = out.body.collect().await.map_err(|e| unavailable("s3 GetObject body", &e))?;
        Ok(Some(bytes.into_bytes().to_vec()))
    }

    async fn list(&self, tenant: &TenantId, prefix: &str, after: Option<&str>, limit: u32) -> Result<Vec<BlobKey>> {
        let mut keys = Vec::new();
        let want = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut continuation: Option<String> = None;
        // S3 returns at most 1000 keys per call, in UTF-8 byte order, which is the port's
        // order too since every key shares the `{tenant}/` prefix.
        while keys.len() < want {
            let room = u32::try_from(want - keys.len()).unwrap_or(u32::MAX).min(MAX_KEYS_PER_CALL);
            let out = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(format!("{tenant}/{prefix}"))
                .set_start_after(after.map(|a| format!("{tenant}/{a}")))
                .set_continuation_token(continuation.take())
                .max_keys(i32::try_from(room).unwrap_or(1000))
                .send()
                .await
                .map_err(|e| unavailable("s3 ListObjectsV2", &e))?;
            for object in out.contents() {
                match object.key().and_then(|k| key_from_object(tenant, k)) {
                    Some(k) => keys.push(k),
                    None => tracing::warn!(bucket = %self.bucket, key = ?object.key(), "foreign s3 object skipped"),
                }
            }
            match out.next_continuation_token() {
                Some(token) if out.is_truncated() == Some(true) => continuation = Some(token.to_owned()),
                _ => break,
            }
        }
        keys.truncate(want);
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_keys_map_back_to_blob_keys() {
        let t = TenantId::new("acme").unwrap();
        let k = BlobKey::new(&t, "raw/2026-11-29/batch-1.json").unwrap();
        assert_eq!(k.full(), "acme/raw/2026-11-29/batch-1.json");
        assert_eq!(key_from_object(&t, &k.full()), Some(k));
        // Another tenant whose slug extends ours is not ours.
        assert_eq!(key_from_object(&t, "acme-corp/raw/x.json"), None);
        assert_eq!(key_from_object(&t, "acme/../x"), None);
    }
}
