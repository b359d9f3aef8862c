//! A deployed stack from the operator's machine (`--backend aws --stack NAME`): the
//! backend its outputs describe, `bootstrap` (the first tenant and owner key after
//! `sam deploy`) and `doctor`. This machine reaches DynamoDB, KMS, S3, SQS and Step
//! Functions; not the stack's cache or search collection, which live in its VPC — so the
//! backend here gets a cache of its own, and what only the functions can reach is
//! checked through the API's `/healthz`.

use std::sync::Arc;

use anyhow::anyhow;
use domain::TenantId;
use services::Services;
use services::admin::AdminService;
use store_aws::stack::{FindingState, StackOutputs};

use super::domain_err;

fn region(given: Option<&str>) -> anyhow::Result<String> {
    given
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_REGION").ok())
        .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
        .filter(|r| !r.trim().is_empty())
        .ok_or_else(|| anyhow!("which region is the stack in? give --region (or set AWS_REGION)"))
}

async fn outputs(stack: &str, region: &str) -> anyhow::Result<(store_aws::stack::SdkConfig, StackOutputs)> {
    // `CONTINUITY_AWS_ENDPOINT_URL` points every client at a local moto (tests).
    let endpoint = std::env::var("CONTINUITY_AWS_ENDPOINT_URL").ok().filter(|e| !e.is_empty());
    let sdk = store_aws::aws_config_for(endpoint.as_deref(), region).await;
    let outputs = store_aws::stack::describe(&sdk, stack).await.map_err(domain_err)?;
    Ok((sdk, outputs))
}

/// The services of `stack`, with a cache in this process (the stack's is out of reach).
pub(super) async fn services(stack: &str, region_given: Option<&str>) -> anyhow::Result<Services> {
    let region = region(region_given)?;
    let (sdk, outputs) = outputs(stack, &region).await?;
    let endpoint = std::env::var("CONTINUITY_AWS_ENDPOINT_URL").ok().filter(|e| !e.is_empty());
    let settings = outputs.settings(&region, endpoint.as_deref()).map_err(domain_err)?;
    let mut backend = store_aws::backend(&settings, &sdk, Arc::new(ports::SystemClock)).map_err(domain_err)?;
    backend.cache = Arc::new(store_embedded::MemoryCache::new(10_000));
    backend.limiter = Arc::new(store_embedded::MemoryLimiter::new());
    Ok(Services::new(backend))
}

/// `bootstrap`: the operator's tenant, owner and owner key; the key alone on stdout.
pub(super) async fn bootstrap(
    s: &Services,
    admin: &AdminService,
    stack: Option<&str>,
    region_given: Option<&str>,
    tenant: TenantId,
) -> anyhow::Result<()> {
    let Some(stack) = stack else { return Err(anyhow!("bootstrap needs --stack NAME (the name given to sam deploy)")) };
    if s.admin.show_tenant(&tenant).await.is_ok() {
        return Err(anyhow!(
            "stack {stack} is bootstrapped already: tenant {tenant} exists. Make another key with \
             `continuity --backend aws --stack {stack} key create --tenant {tenant} --scopes admin`"
        ));
    }
    let key = admin.bootstrap_operator(&tenant).await.map_err(domain_err)?;
    println!("{}", key.token);
    let region = region(region_given)?;
    let api = outputs(stack, &region).await.ok().and_then(|(_, o)| o.outputs.get("ApiUrl").cloned()).unwrap_or_default();
    eprintln!(
        "created the operator's tenant {tenant} with its owner, and the owner key above (every scope, admin included).\n\
         This is the only time the key is shown: keep it in a secret store.\n\n\
         MCP URL:    {api}/mcp   (Authorization: Bearer <key>)\n\
         Admin API:  {api}/v1/admin/tenants\n\n\
         Next: create a tenant for your organisation and its admin key:\n  \
         curl -X POST {api}/v1/admin/tenants -H 'Authorization: Bearer <key>' -H 'content-type: application/json' \\\n    \
         -d '{{\"id\":\"acme\",\"plan\":\"pro\",\"department\":\"customer_success\",\"industry\":\"saas\"}}'\n\
         then `continuity --backend aws --stack {stack} doctor` checks the whole stack."
    );
    Ok(())
}

/// `doctor`: every finding, then a non-zero exit if any failed.
pub(super) async fn doctor(stack: Option<&str>, region_given: Option<&str>) -> anyhow::Result<()> {
    let Some(stack) = stack else { return Err(anyhow!("doctor needs --stack NAME (the name given to sam deploy)")) };
    let region = region(region_given)?;
    let (sdk, outputs) = match outputs(stack, &region).await {
        Ok(o) => o,
        Err(e) => {
            println!("FAILED  stack {stack}: {e}");
            return Err(anyhow!("stack {stack} cannot be read; deploy it with `sam deploy --stack-name {stack}`"));
        }
    };
    println!("ok      stack {stack} ({region})");
    let findings = store_aws::stack::doctor(&sdk, &outputs, &region).await;
    for f in &findings {
        let state = match f.state {
            FindingState::Ok => "ok",
            FindingState::Warning => "WARNING",
            FindingState::Failed => "FAILED",
        };
        println!("{state:<7} {}: {}", f.what, f.detail);
    }
    let failed = findings.iter().filter(|f| f.state == FindingState::Failed).count();
    let warnings = findings.iter().filter(|f| f.state == FindingState::Warning).count();
    if failed > 0 {
        return Err(anyhow!("{failed} check(s) failed, {warnings} warning(s)"));
    }
    eprintln!("every check passed ({warnings} warning(s))");
    Ok(())
}
