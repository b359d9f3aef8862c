//! The maintenance Lambda's handler: whatever the scheduled event says, run the job once
//! and answer its report (EventBridge ignores it; `cargo lambda invoke` shows it).

use services::Services;

/// Runs the maintenance job.
///
/// # Errors
/// The job's error (`UNAVAILABLE`); the invocation fails, and EventBridge's next tick
/// runs it again.
pub async fn handle(services: &Services, event: &serde_json::Value) -> Result<serde_json::Value, domain::Error> {
    tracing::info!(source = event.get("source").and_then(|v| v.as_str()).unwrap_or("manual"), "maintenance triggered");
    let report = services.maintenance.run().await?;
    serde_json::to_value(report).map_err(domain::Error::internal)
}
