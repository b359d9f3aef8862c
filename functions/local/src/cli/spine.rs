//! `continuity entity put`: the operator's write of one Spine entity (agents never write
//! the Spine directly; the use case audits it).

use anyhow::anyhow;
use domain::value::Attributes;
use ports::records::Expect;
use services::Services;
use services::admin::AdminService;

use super::{EntityCommand, domain_err};

pub(super) async fn run(s: &Services, admin: &AdminService, command: EntityCommand) -> anyhow::Result<()> {
    let EntityCommand::Put { tenant, entity_type, id, attributes, pole_class } = command;
    let attributes: Attributes =
        serde_json::from_str(&attributes).map_err(|e| anyhow!("--attributes must be a JSON object: {e}"))?;
    let operator = admin.operator(&tenant).await.map_err(domain_err)?;
    let e = s.entities.put(&operator, entity_type, id, pole_class, attributes, Expect::Any).await.map_err(domain_err)?;
    println!("stored {} {} (version {})", e.entity_type, e.id, e.version);
    Ok(())
}
