//! `continuity stdio` on the home: MCP over stdin/stdout as a key's caller, or as the
//! person at this terminal.

use anyhow::anyhow;
use domain::principal::{Scopes, Toolsets};
use domain::{Id, TenantId};

use super::domain_err;

/// The caller of a `continuity stdio` session without a key — the person at this
/// terminal: `principal` of `tenant` with every scope an MCP client may hold, never
/// `admin` or `approvals:decide` (walls 4 and 5).
pub(super) async fn local_caller(
    admin: &services::admin::AdminService,
    tenant: TenantId,
    principal: Id,
    toolsets: Toolsets,
    teams: Vec<String>,
    projects: Vec<String>,
) -> anyhow::Result<domain::principal::CallerContext> {
    for name in teams.iter().chain(&projects) {
        Id::new(name.clone()).map_err(|_| anyhow!("--teams/--projects: {name:?} is not a valid name"))?;
    }
    let t = admin.show_tenant(&tenant).await.map_err(domain_err)?;
    let scopes = Scopes(domain::principal::Scope::ALL.iter().copied().filter(|s| s.grantable_to_mcp_client()).collect());
    let caller = domain::principal::CallerContext {
        tenant: t.id,
        principal,
        scopes,
        plan: t.plan,
        teams,
        projects,
        credential: "stdio".into(),
        client: None,
        toolsets,
    };
    Ok(caller)
}

pub(super) async fn stdio(s: &services::Services, caller: domain::principal::CallerContext) -> anyhow::Result<()> {
    tracing::info!(tenant = %caller.tenant, principal = %caller.principal, "serving MCP over stdio");
    use rmcp::ServiceExt as _;
    let server = mcp::ContinuityMcp::for_caller(s.clone(), caller)
        // On the reactor when stdin/stdout are pipes (as MCP clients start servers), not
        // a blocking-pool hand-off per write: a large answer goes out in far fewer hops.
        .serve(rmcp::transport::io::stdio_pipes())
        .await
        .map_err(|e| anyhow!("starting the stdio session: {e}"))?;
    server.waiting().await.map_err(|e| anyhow!("stdio session: {e}"))?;
    // The client closed the session: the turns it wrote get their vectors before the
    // process ends (the backlog is bounded, so this is seconds at most).
    if tokio::time::timeout(std::time::Duration::from_secs(15), s.search.settle()).await.is_err() {
        tracing::warn!("some turns' vectors were not written before the end; `continuity reindex --full` adds them");
    }
    Ok(())
}
