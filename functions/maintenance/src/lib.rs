//! The maintenance Lambda's handler: run the job the scheduled event names — the
//! governance heartbeat fan-out when its input says `{"job": "heartbeat"}` (every 30
//! minutes, on a schedule of its own), the connectors' pull fan-out for `{"job": "pulls"}`
//! (every 5 minutes: one `connector.sync` message per due connector on the work queue,
//! which the pipeline function runs, and the notification digests a minute old), the daily jobs for
//! `{"job": "daily"}` (one `maintenance.daily` message per tenant, whose reindex and
//! backup compaction the pipeline function runs), the maintenance job otherwise (the hourly schedule) — and answer
//! its report (EventBridge ignores it; `cargo lambda invoke` shows it).

use services::Services;

/// Runs the job the event names.
///
/// # Errors
/// The job's error (`UNAVAILABLE`); also when a heartbeat or a tenant's daily jobs
/// could not be queued (after every other tenant's were): the invocation fails, Lambda retries it once, then its event goes to the schedules'
/// dead-letter queue, which alarms. (A tenant's hourly pruning failing is counted and
/// alarmed on instead: `MaintenanceFailures`.)
pub async fn handle(services: &Services, event: &serde_json::Value) -> Result<serde_json::Value, domain::Error> {
    tracing::info!(source = event.get("source").and_then(|v| v.as_str()).unwrap_or("manual"), "maintenance triggered");
    match event.get("job").and_then(serde_json::Value::as_str) {
        Some("heartbeat") => {
            let (queued, not_queued) = services.maintenance.queue_resume(services::maintenance::WORKFLOW_IDLE).await?;
            if not_queued > 0 {
                return Err(domain::Error::unavailable(format!(
                    "the governance heartbeat of {not_queued} tenant(s) could not be queued ({queued} queued)"
                )));
            }
            Ok(serde_json::json!({ "resume_queued": queued }))
        }
        Some("pulls") => {
            let pulls = services.sources.queue_due().await?;
            let digests = services.notify.flush_digests(std::time::Duration::from_secs(60)).await?;
            Ok(serde_json::json!({ "pulls_queued": pulls, "digests_queued": digests }))
        }
        Some("daily") => {
            let (queued, not_queued) = services.maintenance.queue_daily().await?;
            if not_queued > 0 {
                return Err(domain::Error::unavailable(format!(
                    "the daily jobs of {not_queued} tenant(s) could not be queued ({queued} queued)"
                )));
            }
            Ok(serde_json::json!({ "daily_queued": queued }))
        }
        _ => {
            let report = services.maintenance.run().await?;
            serde_json::to_value(report).map_err(domain::Error::internal)
        }
    }
}
