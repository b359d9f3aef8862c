//! `continuity tenant …`: create, show, list and change tenants, and the identity
//! providers each trusts for enterprise sign-in.

use anyhow::anyhow;
use domain::oauth::TrustedIdp;
use services::admin::{AdminService, TenantChanges};

use super::{IdpCommand, TenantCommand, TenantSetArgs, domain_err};

/// A promotion run with its progress on a terminal (a line every 5 000 records), and
/// what it did.
async fn promote(admin: &AdminService, slug: &domain::TenantId, max_records: Option<u64>) -> anyhow::Result<bool> {
    use std::io::IsTerminal as _;
    let terminal = std::io::stderr().is_terminal();
    let started = std::time::Instant::now();
    let r = admin
        .promote_tenant(slug, max_records, &|n| {
            if terminal && n.is_multiple_of(5_000) {
                #[allow(clippy::cast_precision_loss)]
                let rate = n as f64 / started.elapsed().as_secs_f64().max(0.001);
                eprintln!("backfilled {n} records ({rate:.0}/s)…");
            }
        })
        .await
        .map_err(domain_err)?;
    match r.state {
        _ if !r.verified && r.parts.is_empty() => println!(
            "promotion of {slug} under way: {} records backfilled so far ({} written this run){}; run `continuity tenant promote {slug}` to go on",
            r.copied,
            r.written,
            r.note.as_deref().map(|n| format!(" — {n}")).unwrap_or_default()
        ),
        _ if !r.verified => {
            let differ: Vec<&str> = r.parts.iter().filter(|p| !p.matches).map(|p| p.part.as_str()).collect();
            println!(
                "the fortress of {slug} differs from the main store ({}): {}",
                if differ.is_empty() { "not compared".to_owned() } else { differ.join(", ") },
                r.note.as_deref().unwrap_or("run `continuity tenant promote` again")
            );
        }
        _ => println!(
            "{slug} is promoted: {} records in the fortress, {} record types equal by hash ({} written, {} removed this run); its writes are mirrored",
            r.copied,
            r.parts.len(),
            r.written,
            r.removed
        ),
    }
    Ok(r.state == ports::fortress::PromotionState::Promoted && r.verified)
}

pub(super) async fn run(admin: &AdminService, command: TenantCommand) -> anyhow::Result<()> {
    match command {
        TenantCommand::Create { slug, plan, department, industry } => {
            let t = admin.create_tenant(slug, plan, department, industry).await.map_err(domain_err)?;
            println!("created tenant {} (plan {}, {} × {})", t.id, t.plan, t.department, t.industry);
        }
        TenantCommand::Show { slug, schema } => {
            let t = admin.show_tenant(&slug).await.map_err(domain_err)?;
            if schema {
                println!("{}", serde_json::to_string_pretty(&services::capabilities::schema_document(&t))?);
                return Ok(());
            }
            println!("tenant:        {}", t.id);
            println!("display name:  {}", t.display_name);
            println!("plan:          {}", t.plan);
            println!("department:    {}", t.department);
            println!("industry:      {}", t.industry);
            println!("storage tier:  {}", t.storage_tier);
            println!("rate limit:    {}/min for the tenant", t.effective_rate_limit());
            let policy = t.triage.unwrap_or_default();
            println!(
                "triage:        weights {:?}, auto-approve ≥ {}, reject < {}, approval timeout {} s, personal data: {}{}",
                policy.weights,
                policy.auto_approve,
                policy.reject_below,
                policy.approval_timeout_secs,
                policy.personal_data,
                if t.triage.is_none() { " (defaults)" } else { "" }
            );
            for idp in &t.trusted_idps {
                println!("trusted IdP:   {} ({})", idp.issuer, idp.jwks_uri.as_deref().unwrap_or("inline JWKS"));
            }
            println!("created:       {}", t.created_at.to_rfc3339());
            println!("version:       {}", t.version);
        }
        TenantCommand::List => {
            for t in admin.list_tenants().await.map_err(domain_err)? {
                println!("{t}");
            }
        }
        TenantCommand::Promote { slug, max_records } => {
            promote(admin, &slug, max_records).await?;
        }
        TenantCommand::Usage { slug } => {
            let u = admin.usage(&slug).await.map_err(domain_err)?;
            println!("tenant:        {} (storage tier {})", u.tenant, u.storage_tier);
            println!("entities:      {}", u.entities);
            println!("last 24 hours: {} reads, {} writes (audited calls)", u.reads_last_day, u.writes_last_day);
            println!("promotion:     {}{}", if u.suggest_promotion { "suggested — " } else { "not suggested — " }, u.reason);
            if u.suggest_promotion {
                println!("               run `continuity tenant promote {}`", u.tenant);
            }
        }
        TenantCommand::Set { slug, mut changes } => {
            // Promotion is the fortress backfill, not a label: the tier changes when it ends.
            if changes.storage_tier == Some(domain::tenant::StorageTier::Promoted) {
                changes.storage_tier = None;
                if !promote(admin, &slug, None).await? {
                    eprintln!("the other changes asked were not made: run `tenant set` again once the tenant is promoted");
                    return Ok(());
                }
            }
            let triage = triage_policy(admin, &slug, &changes).await?;
            let c = TenantChanges {
                triage,
                plan: changes.plan,
                department: changes.department,
                industry: changes.industry,
                storage_tier: changes.storage_tier,
                display_name: changes.display_name,
                rate_limit_per_minute: changes.rate_limit_per_minute,
            };
            let t = admin.set_tenant(&slug, c).await.map_err(domain_err)?;
            println!(
                "updated tenant {} (plan {}, {} × {}, storage {}, version {})",
                t.id, t.plan, t.department, t.industry, t.storage_tier, t.version
            );
        }
        TenantCommand::Idp(IdpCommand::Add { tenant, issuer, jwks_uri, jwks_file, map_group }) => {
            let mut group_teams = std::collections::BTreeMap::new();
            for m in map_group {
                let (group, team) = m
                    .rsplit_once('=')
                    .ok_or_else(|| anyhow!("--map-group {m:?}: write it GROUP=TEAM (e.g. eng-platform=platform)"))?;
                group_teams.insert(group.trim().to_owned(), team.trim().to_owned());
            }
            let jwks = match jwks_file {
                Some(f) => Some(
                    serde_json::from_str(&std::fs::read_to_string(&f).map_err(|e| anyhow!("reading {}: {e}", f.display()))?)
                        .map_err(|e| anyhow!("{} is not JSON: {e}", f.display()))?,
                ),
                None => None,
            };
            let mapped = group_teams.len();
            let idp = TrustedIdp { issuer: issuer.clone(), jwks_uri, jwks, group_teams };
            let t = admin.trust_idp(&tenant, idp).await.map_err(domain_err)?;
            println!(
                "tenant {} now trusts {issuer} ({} trusted IdPs; {mapped} groups mapped to teams)",
                t.id,
                t.trusted_idps.len()
            );
        }
        TenantCommand::Idp(IdpCommand::Remove { tenant, issuer }) => {
            let t = admin.distrust_idp(&tenant, &issuer).await.map_err(domain_err)?;
            println!("tenant {} no longer trusts {issuer}", t.id);
        }
    }
    Ok(())
}

/// The tenant's triage policy with the flags given applied to its current one; `None`
/// when no triage flag was given (the policy is left alone).
async fn triage_policy(
    admin: &AdminService,
    tenant: &domain::TenantId,
    changes: &TenantSetArgs,
) -> anyhow::Result<Option<domain::tenant::TriagePolicy>> {
    let given = changes.triage_weights.is_some()
        || changes.auto_approve.is_some()
        || changes.reject_below.is_some()
        || changes.approval_timeout.is_some()
        || changes.personal_data.is_some();
    if !given {
        return Ok(None);
    }
    let current = admin.show_tenant(tenant).await.map_err(domain_err)?.triage.unwrap_or_default();
    let weights = match &changes.triage_weights {
        Some(w) => <[f64; 5]>::try_from(w.as_slice()).map_err(|_| anyhow!("--triage-weights takes five numbers"))?,
        None => current.weights,
    };
    Ok(Some(domain::tenant::TriagePolicy {
        weights,
        auto_approve: changes.auto_approve.unwrap_or(current.auto_approve),
        reject_below: changes.reject_below.unwrap_or(current.reject_below),
        approval_timeout_secs: changes.approval_timeout.unwrap_or(current.approval_timeout_secs),
        personal_data: changes.personal_data.unwrap_or(current.personal_data),
    }))
}
