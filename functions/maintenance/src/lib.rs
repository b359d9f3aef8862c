//! The maintenance Lambda's handler: run the job the scheduled event names — the
//! daily jobs (reindex, backup compaction) when its input says `{"job": "daily"}`, the
//! maintenance job otherwise (the hourly schedule) — and answer its report
//! (EventBridge ignores it; `cargo lambda invoke` shows it).

use services::Services;

/// Runs the maintenance job or the daily jobs.
///
/// # Errors
/// The job's error (`UNAVAILABLE`); the invocation fails, and EventBridge's next tick
/// runs it again.
pub async fn handle(services: &Services, event: &serde_json::Value) -> Result<serde_json::Value, domain::Error> {
    tracing::info!(source = event.get("source").and_then(|v| v.as_str()).unwrap_or("manual"), "maintenance triggered");
    if event.get("job").and_then(serde_json::Value::as_str) == Some("daily") {
        let report = services.maintenance.daily().await?;
        return serde_json::to_value(report).map_err(domain::Error::internal);
    }
    let report = services.maintenance.run().await?;
    serde_json::to_value(report).map_err(domain::Error::internal)
}
