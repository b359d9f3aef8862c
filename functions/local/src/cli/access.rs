//! Who may come in: `continuity key …` (API keys), `user …` (people who sign in with a
//! password), `client …` (confidential OAuth clients) and `signing-key …` (the keys that
//! sign access tokens).

use anyhow::anyhow;
use services::admin::{AdminService, KeyRequest, NewServiceClient, NewUser, UserChanges};

use super::{ClientCommand, KeyCommand, SigningKeyCommand, UserCommand, domain_err};

pub(super) async fn keys(admin: &AdminService, command: KeyCommand) -> anyhow::Result<()> {
    match command {
        KeyCommand::Create { tenant, scopes, principal, teams, projects, toolsets, name } => {
            let req = KeyRequest { tenant, scopes, principal, teams, projects };
            let key = admin.create_named_key(req, toolsets, name).await.map_err(domain_err)?;
            println!("{}", key.token);
            eprintln!("created key {} for tenant {}; this is the only time its secret is shown", key.key_id, key.tenant);
        }
        KeyCommand::Revoke { tenant, key_id } => {
            admin.revoke_key(&tenant, &key_id).await.map_err(domain_err)?;
            println!("revoked key {key_id} of tenant {tenant}");
        }
        KeyCommand::List { tenant } => {
            for k in admin.list_keys(&tenant).await.map_err(domain_err)? {
                let state = k.revoked_at.map_or_else(|| "active".to_owned(), |t| format!("revoked {}", t.to_rfc3339()));
                let name = k.name.as_deref().map(|n| format!("  name={n:?}")).unwrap_or_default();
                println!("{}  {}  principal={}  scopes=\"{}\"{name}", k.key_id, state, k.principal, k.scopes.to_oauth_string());
            }
        }
    }
    Ok(())
}

pub(super) async fn users(admin: &AdminService, command: UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Add { tenant, email, role, teams, projects } => {
            // Names are checked before the password is asked for.
            let teams = domain::principal::memberships("teams", none_if_blank(teams)).map_err(domain_err)?;
            let projects = domain::principal::memberships("projects", none_if_blank(projects)).map_err(domain_err)?;
            let password = read_password(&format!("Password for {email}: "))?;
            let shown = memberships_line(&teams, &projects);
            let id = admin
                .add_user(NewUser { tenant: tenant.clone(), email: email.clone(), role, password, teams, projects })
                .await
                .map_err(domain_err)?;
            println!("added user {email} ({role}{shown}) to tenant {tenant} as principal {id}");
        }
        UserCommand::Set { tenant, email, role, disabled, teams, projects } => {
            if role.is_none() && disabled.is_none() && teams.is_none() && projects.is_none() {
                return Err(anyhow::anyhow!("nothing to change: give --role, --disabled true|false, --teams and/or --projects"));
            }
            let changes = UserChanges { role, disabled, teams: teams.map(none_if_blank), projects: projects.map(none_if_blank) };
            admin.set_user(&tenant, &email, changes).await.map_err(domain_err)?;
            println!("changed user {email} of tenant {tenant}");
        }
        UserCommand::List { tenant } => {
            for u in admin.list_users(&tenant).await.map_err(domain_err)? {
                let state = if u.disabled { "disabled" } else { "active" };
                println!(
                    "{}  {}  {state}  principal={}{}",
                    u.email,
                    u.role,
                    u.principal,
                    memberships_line(&u.teams, &u.projects)
                );
            }
        }
    }
    Ok(())
}

/// A `--teams` list without blank names (`--teams ''` is one empty name: no teams).
fn none_if_blank(names: Vec<String>) -> Vec<String> {
    names.into_iter().filter(|n| !n.trim().is_empty()).collect()
}

/// `, teams a,b, projects p` (nothing for none).
fn memberships_line(teams: &[String], projects: &[String]) -> String {
    let mut out = String::new();
    if !teams.is_empty() {
        out.push_str(&format!(", teams {}", teams.join(",")));
    }
    if !projects.is_empty() {
        out.push_str(&format!(", projects {}", projects.join(",")));
    }
    out
}

pub(super) async fn clients(admin: &AdminService, command: ClientCommand) -> anyhow::Result<()> {
    match command {
        ClientCommand::Toolsets { client_id, toolsets } => {
            admin.set_client_toolsets(&client_id, toolsets.clone()).await.map_err(domain_err)?;
            println!("client {client_id} is offered the toolsets {} from its next sign-in or refresh", toolsets.to_list_string());
        }
        ClientCommand::Create { tenant, name, scopes, jwt_bearer, toolsets } => {
            let c = admin
                .create_service_client(NewServiceClient { tenant, name, scopes, jwt_bearer, toolsets })
                .await
                .map_err(domain_err)?;
            println!("client_id={}", c.client_id);
            println!("client_secret={}", c.client_secret);
            eprintln!("this is the only time the client secret is shown");
        }
    }
    Ok(())
}

/// The home's token-signing keys (files under `keys/`).
pub(super) fn signing_keys(home: &std::path::Path, command: &SigningKeyCommand) -> anyhow::Result<()> {
    let now = ports::Clock::now(&ports::SystemClock);
    let signer = store_embedded::FileSigner::open(&home.join("keys"), now).map_err(domain_err)?;
    if matches!(command, SigningKeyCommand::Rotate) {
        let kid = signer.rotate(now).map_err(domain_err)?;
        println!("new signing key {kid}; restart `continuity serve` to sign with it");
    }
    for kid in signer.kids() {
        println!("{kid}");
    }
    Ok(())
}

/// A password from a terminal prompt (not echoed), or the first line of stdin.
fn read_password(prompt: &str) -> anyhow::Result<String> {
    use std::io::{BufRead as _, IsTerminal as _};
    let line = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(prompt)?
    } else {
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        line
    };
    let password = line.trim_end_matches(['\r', '\n']).to_owned();
    if password.is_empty() {
        return Err(anyhow!("no password given (pipe it on stdin or type it at the prompt)"));
    }
    Ok(password)
}
