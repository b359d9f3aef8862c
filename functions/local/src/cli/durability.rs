//! The durability and maintenance commands — `maintenance`, `reindex`, `backup`,
//! `compact`, `restore` — the same on the embedded home and, with `--backend aws`, on a
//! stack's table, bucket and index. Long ones print progress on stderr.

use anyhow::anyhow;

use super::{Command, domain_err};
use crate::progress::Progress;

/// The durability and maintenance commands: the same on the embedded home and, with
/// `--backend aws`, on a stack's table, bucket and index.
pub(super) async fn run(s: &services::Services, command: Command) -> anyhow::Result<()> {
    match command {
        Command::Maintenance => {
            let r = s.maintenance.run().await.map_err(domain_err)?;
            println!(
                "maintenance: {} tenants; {} audit records pruned, {} session memories expired, {} personal memories and {} turns \
                 forgotten (time to live), {} expired OAuth records deleted, {} gates expired, {} sticky notes expired; \
                 governance upkeep queued for {} tenants (the pipeline consumer runs it){}",
                r.tenants,
                r.audit_pruned,
                r.sessions_expired,
                r.personal_forgotten,
                r.turns_forgotten,
                r.oauth_pruned,
                r.gates_expired,
                r.notes_expired,
                r.resume_queued,
                if r.resume_not_queued > 0 { format!(", {} could not be queued", r.resume_not_queued) } else { String::new() }
            );
            // The others were pruned; the failures are in the log, and the next run retries.
            if r.tenants_failed > 0 || r.oauth_failed {
                anyhow::bail!(
                    "maintenance: pruning failed for {} tenant(s){} (the log names each and why); the next run retries",
                    r.tenants_failed,
                    if r.oauth_failed { " and for the authorization server" } else { "" }
                );
            }
            Ok(())
        }
        Command::Reindex { tenant, full } => {
            let progress = Progress::new("reindex: records", None);
            let r = s.search.reindex(&tenant, full, &|n| progress.set(n as u64)).await.map_err(domain_err);
            progress.finish();
            let r = r?;
            println!(
                "reindex of {tenant} with {}: {} indexed ({} verified by readback), {} already indexed, {} superseded removed, {} orphaned flagged for review",
                s.embedder_name(),
                r.indexed,
                r.verified,
                r.kept,
                r.removed,
                r.orphaned
            );
            Ok(())
        }
        Command::Backup { tenant } => {
            let (path, lines) = s.backup.backup(&tenant).await.map_err(domain_err)?;
            println!("wrote the Spine snapshot: {lines} records to {path}");
            let progress = Progress::new("backup: records", None);
            let r = s.backup.backup_records(&tenant, &|n| progress.set(n as u64)).await.map_err(domain_err);
            progress.finish();
            let r = r?;
            println!(
                "wrote the complete backup: {} records of {} types to {} ({} files and manifest.json, in the tenant's blob folder)",
                r.records,
                r.manifest.parts.len(),
                r.folder,
                r.manifest.files
            );
            Ok(())
        }
        Command::Restore { tenant, merge } => {
            let progress = Progress::new("restore: backup files", None);
            let report = s.backup.restore_with(&tenant, merge, &|files| progress.set(files as u64)).await.map_err(domain_err);
            progress.finish();
            let report = report?;
            let rec = &report.records;
            match &rec.folder {
                Some(_) if rec.skipped.is_some() => println!("{}", rec.skipped.as_deref().unwrap_or_default()),
                Some(folder) => {
                    let failed: Vec<&str> = rec.parts.iter().filter(|p| !p.matches).map(|p| p.part.as_str()).collect();
                    println!(
                        "restored the complete backup {folder}: {} records ({} written, {} already as new); {} of {} record types match the backup by hash{}",
                        rec.records,
                        rec.written,
                        rec.unchanged,
                        rec.parts.len() - failed.len(),
                        rec.parts.len(),
                        if failed.is_empty() {
                            String::new()
                        } else {
                            format!(" — differ (the store holds newer or other records): {}", failed.join(", "))
                        }
                    );
                }
                None => println!(
                    "no complete backup of {tenant} found (`continuity backup --tenant {tenant}` writes one); replaying the Spine's backups"
                ),
            }
            println!(
                "restored the Spine from {} files: {} entities written ({} already as new), {} relationships, {} signals{}",
                report.files,
                report.entities,
                report.unchanged,
                report.relationships,
                report.signals,
                if report.bad_lines > 0 { format!("; {} unreadable lines skipped", report.bad_lines) } else { String::new() }
            );
            if rec.folder.is_some() && rec.skipped.is_none() {
                let r = s.search.reindex(&tenant, false, &|_| {}).await.map_err(domain_err)?;
                println!("rebuilt the search index: {} indexed, {} already indexed", r.indexed, r.kept);
            }
            Ok(())
        }
        Command::Compact { tenant } => {
            let r = s.backup.compact(&tenant, 2).await.map_err(domain_err)?;
            println!(
                "compacted {} backup files into {} ({} lines){}",
                r.merged,
                r.written,
                r.lines,
                if r.kept_unreadable > 0 {
                    format!("; {} files with unreadable lines kept as they were", r.kept_unreadable)
                } else {
                    String::new()
                }
            );
            Ok(())
        }
        _ => Err(anyhow!("only maintenance, reindex, backup, compact and restore run against the AWS backend")),
    }
}
