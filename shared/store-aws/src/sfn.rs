//! The triage workflow on Step Functions (SPEC §6.3): each proposal is one execution of
//! `statemachines/triage.asl.json`, named by the proposal's id (so starting it twice
//! runs it once), and a person's decision ends the execution's wait with its task token.

use async_trait::async_trait;
use aws_sdk_sfn::Client;
use domain::{Error, Id, Result, TenantId};
use ports::workflow::Workflow;
use serde_json::{Value, json};

use crate::unavailable;

/// Step Functions `SendTask*` refuse a cause over 32 768 characters and an error over 256.
const MAX_CAUSE: usize = 32_768;

pub struct StepFunctionsWorkflow {
    client: Client,
    state_machine_arn: String,
}

impl StepFunctionsWorkflow {
    pub fn new(client: Client, state_machine_arn: &str) -> Self {
        Self { client, state_machine_arn: state_machine_arn.to_owned() }
    }
}

/// `CONFLICT` for a wait that has ended: timed out, already decided, or unknown.
fn ended(what: &str) -> Error {
    Error::conflict(format!("{what}: the wait has ended (timed out or decided) or the token is unknown"))
}

fn truncated(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[async_trait]
impl Workflow for StepFunctionsWorkflow {
    fn name(&self) -> &'static str {
        "step-functions"
    }

    async fn start(&self, tenant: &TenantId, proposal: &Id) -> Result<()> {
        let input = json!({ "tenant": tenant.as_str(), "proposal": proposal.as_str() }).to_string();
        let started = self
            .client
            .start_execution()
            .state_machine_arn(&self.state_machine_arn)
            .name(proposal.as_str())
            .input(input)
            .send()
            .await;
        match started {
            Ok(_) => Ok(()),
            // The same name with the same input is the same execution: started once.
            Err(e)
                if e.as_service_error()
                    .is_some_and(aws_sdk_sfn::operation::start_execution::StartExecutionError::is_execution_already_exists) =>
            {
                Ok(())
            }
            Err(e) => Err(unavailable("states StartExecution", &e)),
        }
    }

    async fn send_success(&self, token: &str, output: &Value) -> Result<()> {
        match self.client.send_task_success().task_token(token).output(output.to_string()).send().await {
            Ok(_) => Ok(()),
            Err(e) => Err(match e.as_service_error() {
                Some(s) if s.is_task_timed_out() || s.is_task_does_not_exist() || s.is_invalid_token() => {
                    ended("SendTaskSuccess")
                }
                _ => unavailable("states SendTaskSuccess", &e),
            }),
        }
    }

    async fn send_failure(&self, token: &str, error: &str, cause: &str) -> Result<()> {
        let sent = self
            .client
            .send_task_failure()
            .task_token(token)
            .error(truncated(error, 256))
            .cause(truncated(cause, MAX_CAUSE))
            .send()
            .await;
        match sent {
            Ok(_) => Ok(()),
            Err(e) => Err(match e.as_service_error() {
                Some(s) if s.is_task_timed_out() || s.is_task_does_not_exist() || s.is_invalid_token() => {
                    ended("SendTaskFailure")
                }
                _ => unavailable("states SendTaskFailure", &e),
            }),
        }
    }

    async fn send_heartbeat(&self, token: &str) -> Result<()> {
        match self.client.send_task_heartbeat().task_token(token).send().await {
            Ok(_) => Ok(()),
            Err(e) => Err(match e.as_service_error() {
                Some(s) if s.is_task_timed_out() || s.is_task_does_not_exist() || s.is_invalid_token() => {
                    ended("SendTaskHeartbeat")
                }
                _ => unavailable("states SendTaskHeartbeat", &e),
            }),
        }
    }
}
