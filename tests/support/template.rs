//! The SAM template (`infra/template.yaml`) as data, for tests that check what it
//! deploys without deploying it.
//!
//! [`Template::load`] parses the YAML with its CloudFormation short-form tags (`!Ref`,
//! `!Sub`, `!GetAtt`, `!If`, …) turned into the long form (`{"Ref": …}`,
//! `{"Fn::Sub": …}`, …) as `serde_json::Value`. [`Template::evaluate`] binds a
//! [`Stack`] — its name, id, region, account and parameter values (the template's
//! defaults unless overridden) — and evaluates intrinsic functions and conditions:
//! a `Ref` to a resource becomes the placeholder `<Ref:Logical>`, a `Fn::GetAtt`
//! `<GetAtt:Logical.Attribute>`, and `AWS::NoValue` drops the key or item.
//!
//! On top of that, the readers an end-to-end test needs: the API routes
//! ([`Evaluated::routes`], matched like API Gateway by [`route_for`]), the SQS event
//! sources ([`Evaluated::queue_consumers`]), the schedules ([`Evaluated::schedules`])
//! and the explicit physical names ([`Evaluated::physical_names`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use base64::Engine as _;
use serde_json::{Map, Value};

/// The region of [`Stack::default`] and of [`Stack::new`].
pub const REGION: &str = "eu-west-1";
/// The account of [`Stack::default`] and of [`Stack::new`].
pub const ACCOUNT: &str = "123456789012";

/// Resource properties that hold a physical name (checked at the top level of a
/// resource's properties; a tag called `Name` is not one).
pub const NAME_PROPERTIES: [&str; 19] = [
    "Name",
    "VectorBucketName",
    "ServerlessCacheName",
    "AliasName",
    "LogGroupName",
    "QueueName",
    "TopicName",
    "DashboardName",
    "StateMachineName",
    "CollectionName",
    "AlarmName",
    "FunctionName",
    "RoleName",
    "ManagedPolicyName",
    "TableName",
    "BucketName",
    "ReplicationGroupId",
    "UserId",
    "UserGroupId",
];

/// `infra/template.yaml`, found at run time ([`crate::workspace_root`]).
pub fn path() -> PathBuf {
    crate::workspace_root().join("infra").join("template.yaml")
}

/// YAML with CloudFormation short-form tags, as long-form JSON.
///
/// # Errors
/// The YAML does not parse, or a tag is used in a way CloudFormation does not know.
pub fn yaml_to_json(text: &str) -> Result<Value, String> {
    let yaml: serde_norway::Value = serde_norway::from_str(text).map_err(|e| format!("YAML: {e}"))?;
    convert(yaml)
}

fn convert(yaml: serde_norway::Value) -> Result<Value, String> {
    use serde_norway::Value as Y;
    Ok(match yaml {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                n.as_f64().and_then(serde_json::Number::from_f64).map(Value::Number).ok_or(format!("number {n}"))?
            }
        }
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => Value::Array(items.into_iter().map(convert).collect::<Result<_, _>>()?),
        Y::Mapping(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let key = match k {
                    Y::String(s) => s,
                    Y::Number(n) => n.to_string(),
                    Y::Bool(b) => b.to_string(),
                    other => return Err(format!("unsupported mapping key {other:?}")),
                };
                out.insert(key, convert(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let value = convert(tagged.value)?;
            let (key, value) = match name {
                "Ref" => ("Ref".to_owned(), value),
                "Condition" => ("Condition".to_owned(), value),
                // `!GetAtt A.B.C` is `["A", "B.C"]`: the logical id has no dot.
                "GetAtt" => match value {
                    Value::String(s) => {
                        let (resource, attribute) = s.split_once('.').ok_or(format!("!GetAtt {s}: no attribute"))?;
                        ("Fn::GetAtt".to_owned(), Value::Array(vec![resource.into(), attribute.into()]))
                    }
                    other => ("Fn::GetAtt".to_owned(), other),
                },
                "Sub" | "Join" | "Select" | "Split" | "If" | "Equals" | "Not" | "And" | "Or" | "FindInMap" | "Base64"
                | "GetAZs" | "Cidr" | "ImportValue" | "Transform" | "Length" | "ToJsonString" => (format!("Fn::{name}"), value),
                other => return Err(format!("unknown tag !{other}")),
            };
            let mut out = Map::new();
            out.insert(key, value);
            Value::Object(out)
        }
    })
}

/// The template, as long-form JSON.
#[derive(Clone, Debug)]
pub struct Template {
    /// The whole document. Tests may change it (add or remove a resource or an event)
    /// and read it again.
    pub doc: Value,
}

impl Template {
    /// `infra/template.yaml`.
    ///
    /// # Panics
    /// The file cannot be read or parsed.
    pub fn load() -> Self {
        let path = path();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        Self::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// A template from its YAML text.
    ///
    /// # Errors
    /// See [`yaml_to_json`].
    pub fn parse(text: &str) -> Result<Self, String> {
        Ok(Self { doc: yaml_to_json(text)? })
    }

    /// A template from its long-form JSON (a changed copy of another's `doc`).
    pub fn from_value(doc: Value) -> Self {
        Self { doc }
    }

    /// Every resource as written (including those whose condition is false).
    pub fn raw_resources(&self) -> Map<String, Value> {
        self.doc.get("Resources").and_then(Value::as_object).cloned().unwrap_or_default()
    }

    /// Whether the template declares resource `id` (whatever its condition).
    pub fn declares(&self, id: &str) -> bool {
        self.doc.get("Resources").and_then(|r| r.get(id)).is_some()
    }

    /// Each parameter's default value (`None` for a parameter without one).
    pub fn parameter_defaults(&self) -> BTreeMap<String, Option<Value>> {
        self.doc
            .get("Parameters")
            .and_then(Value::as_object)
            .map(|params| params.iter().map(|(k, p)| (k.clone(), p.get("Default").cloned())).collect())
            .unwrap_or_default()
    }

    /// The template bound to `stack`: parameters resolved, conditions evaluated.
    ///
    /// # Errors
    /// A parameter override names no parameter, a parameter has neither a default nor
    /// a value, or a condition does not evaluate.
    pub fn evaluate(&self, stack: &Stack) -> Result<Evaluated<'_>, String> {
        Evaluated::new(self, stack)
    }

    /// [`Evaluated::routes`] for [`Stack::default`].
    ///
    /// # Panics
    /// The template does not evaluate.
    pub fn routes(&self) -> Vec<Route> {
        self.evaluate(&Stack::default()).and_then(|e| e.routes()).unwrap_or_else(|e| panic!("routes: {e}"))
    }

    /// [`Evaluated::queue_consumers`] for [`Stack::default`].
    ///
    /// # Panics
    /// The template does not evaluate.
    pub fn queue_consumers(&self) -> Vec<QueueConsumer> {
        self.evaluate(&Stack::default()).and_then(|e| e.queue_consumers()).unwrap_or_else(|e| panic!("queue consumers: {e}"))
    }

    /// [`Evaluated::schedules`] for [`Stack::default`].
    ///
    /// # Panics
    /// The template does not evaluate.
    pub fn schedules(&self) -> Vec<Schedule> {
        self.evaluate(&Stack::default()).and_then(|e| e.schedules()).unwrap_or_else(|e| panic!("schedules: {e}"))
    }
}

/// A stack the template is deployed as: what the pseudo parameters return, and the
/// parameter values that differ from the defaults.
#[derive(Clone, Debug)]
pub struct Stack {
    pub name: String,
    /// The UUID at the end of the stack id.
    pub uuid: String,
    pub region: String,
    pub account: String,
    pub partition: String,
    pub url_suffix: String,
    pub parameters: BTreeMap<String, Value>,
}

impl Stack {
    /// A stack called `name` whose id ends in `uuid`, in [`REGION`] and [`ACCOUNT`].
    pub fn new(name: &str, uuid: &str) -> Self {
        Self {
            name: name.to_owned(),
            uuid: uuid.to_owned(),
            region: REGION.to_owned(),
            account: ACCOUNT.to_owned(),
            partition: "aws".to_owned(),
            url_suffix: "amazonaws.com".to_owned(),
            parameters: BTreeMap::new(),
        }
    }

    /// This stack with parameter `name` set to `value`.
    #[must_use]
    pub fn with_parameter(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.parameters.insert(name.to_owned(), value.into());
        self
    }

    /// `AWS::StackId`: `arn:aws:cloudformation:{region}:{account}:stack/{name}/{uuid}`.
    pub fn id(&self) -> String {
        format!("arn:{}:cloudformation:{}:{}:stack/{}/{}", self.partition, self.region, self.account, self.name, self.uuid)
    }
}

impl Default for Stack {
    fn default() -> Self {
        Self::new("continuity-test", "8d3a4c30-1f2b-11ef-9c5e-0a1b2c3d4e5f")
    }
}

/// One API Gateway route: an `Api` event of a function.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Route {
    /// Upper case (`GET`, `POST`, `OPTIONS`, `ANY`).
    pub method: String,
    /// As in the template (`/mcp`, `/oauth/{proxy+}`).
    pub path: String,
    /// The function's logical id.
    pub function: String,
    /// The authorizer's name in the Api's `Auth.Authorizers`, or `NONE`.
    pub authorizer: String,
    /// The event's name in the function's `Events`.
    pub event: String,
    /// The Api's logical id.
    pub api: String,
}

/// One SQS event source of a function.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueConsumer {
    /// The queue's logical id (from `!GetAtt Queue.Arn`), or the ARN as written.
    pub queue: String,
    pub function: String,
    pub event: String,
    pub batch_size: Option<u64>,
    /// `ScalingConfig.MaximumConcurrency`.
    pub max_concurrency: Option<u64>,
    /// Whether the function reports partial batch failures.
    pub reports_item_failures: bool,
}

/// One schedule (`ScheduleV2` or `Schedule` event) of a function.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    pub function: String,
    pub event: String,
    /// `ScheduleV2` or `Schedule`.
    pub kind: String,
    /// `rate(1 hour)`, `cron(…)`.
    pub expression: String,
    /// The event the function receives: `Input` as JSON (a string if it is not JSON),
    /// `None` without one.
    pub input: Option<Value>,
    /// The physical name SAM gives the schedule: `Name`, else (without `OmitName`) the
    /// event's logical id; `None` when CloudFormation generates it.
    pub name: Option<String>,
    /// The event's evaluated properties (retry policy, dead-letter config, …).
    pub properties: Value,
}

/// An explicit physical name a resource is given.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PhysicalName {
    /// The resource (for a schedule: the function and event, `Function.Event`).
    pub resource: String,
    /// The CloudFormation type the name belongs to (`AWS::Scheduler::Schedule` for a
    /// SAM schedule).
    pub resource_type: String,
    /// The property (`Name`, `AliasName`, …), or `Policy:collection` for a collection
    /// named inside an OpenSearch Serverless policy document.
    pub property: String,
    pub value: String,
}

/// A template bound to a stack.
#[derive(Debug)]
pub struct Evaluated<'t> {
    template: &'t Template,
    stack: Stack,
    parameters: BTreeMap<String, Value>,
    conditions: BTreeMap<String, bool>,
}

const PSEUDO: [&str; 8] = [
    "AWS::StackName",
    "AWS::StackId",
    "AWS::Region",
    "AWS::AccountId",
    "AWS::Partition",
    "AWS::URLSuffix",
    "AWS::NotificationARNs",
    "AWS::NoValue",
];

impl<'t> Evaluated<'t> {
    fn new(template: &'t Template, stack: &Stack) -> Result<Self, String> {
        let defaults = template.parameter_defaults();
        if let Some(unknown) = stack.parameters.keys().find(|k| !defaults.contains_key(*k)) {
            return Err(format!("parameter {unknown} is not in the template"));
        }
        let mut parameters = BTreeMap::new();
        for (name, default) in defaults {
            let value = stack.parameters.get(&name).cloned().or(default).ok_or(format!("parameter {name} has no value"))?;
            parameters.insert(name, value);
        }
        let mut evaluated = Self { template, stack: stack.clone(), parameters, conditions: BTreeMap::new() };
        let raw = template.doc.get("Conditions").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut done = BTreeMap::new();
        for name in raw.keys() {
            evaluated.condition_named(name, &raw, &mut done, &mut BTreeSet::new())?;
        }
        evaluated.conditions = done;
        Ok(evaluated)
    }

    fn condition_named(
        &self,
        name: &str,
        raw: &Map<String, Value>,
        done: &mut BTreeMap<String, bool>,
        visiting: &mut BTreeSet<String>,
    ) -> Result<bool, String> {
        if let Some(b) = done.get(name) {
            return Ok(*b);
        }
        if !visiting.insert(name.to_owned()) {
            return Err(format!("condition {name} refers to itself"));
        }
        let body = raw.get(name).ok_or(format!("no condition {name}"))?;
        let b = self.condition_value(body, raw, done, visiting)?;
        visiting.remove(name);
        done.insert(name.to_owned(), b);
        Ok(b)
    }

    fn condition_value(
        &self,
        v: &Value,
        raw: &Map<String, Value>,
        done: &mut BTreeMap<String, bool>,
        visiting: &mut BTreeSet<String>,
    ) -> Result<bool, String> {
        let Some((key, args)) = single(v) else { return Err(format!("not a condition: {v}")) };
        let list = |args: &Value| args.as_array().cloned().ok_or(format!("{key} wants a list"));
        match key {
            "Condition" => self.condition_named(args.as_str().ok_or("Condition wants a name")?, raw, done, visiting),
            "Fn::Not" => {
                let items = list(args)?;
                let [item] = items.as_slice() else { return Err("Fn::Not wants one condition".into()) };
                Ok(!self.condition_value(item, raw, done, visiting)?)
            }
            "Fn::And" | "Fn::Or" => {
                let mut results = Vec::new();
                for item in list(args)? {
                    results.push(self.condition_value(&item, raw, done, visiting)?);
                }
                Ok(if key == "Fn::And" { results.iter().all(|b| *b) } else { results.iter().any(|b| *b) })
            }
            "Fn::Equals" => {
                let items = list(args)?;
                let [a, b] = items.as_slice() else { return Err("Fn::Equals wants two values".into()) };
                Ok(scalar(&self.eval(a)?)? == scalar(&self.eval(b)?)?)
            }
            other => Err(format!("{other} is not a condition function")),
        }
    }

    /// The template this evaluation is of.
    pub fn template(&self) -> &Template {
        self.template
    }

    /// The stack these values are for.
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// A parameter's value (its default unless the stack overrides it).
    pub fn parameter(&self, name: &str) -> Option<&Value> {
        self.parameters.get(name)
    }

    /// Whether condition `name` holds.
    ///
    /// # Panics
    /// The template has no such condition.
    pub fn condition(&self, name: &str) -> bool {
        *self.conditions.get(name).unwrap_or_else(|| panic!("no condition {name}"))
    }

    /// `v` with every intrinsic function evaluated (`AWS::NoValue` at the top: `null`).
    ///
    /// # Errors
    /// An intrinsic is malformed, refers to an unknown parameter, condition or
    /// resource, or (`Fn::Select`) indexes out of range.
    pub fn eval(&self, v: &Value) -> Result<Value, String> {
        Ok(self.eval_opt(v)?.unwrap_or(Value::Null))
    }

    fn eval_opt(&self, v: &Value) -> Result<Option<Value>, String> {
        if let Some((key, args)) = single(v)
            && (key == "Ref" || key.starts_with("Fn::"))
        {
            return self.intrinsic(key, args);
        }
        Ok(Some(match v {
            Value::Object(map) => {
                let mut out = Map::new();
                for (k, item) in map {
                    if let Some(item) = self.eval_opt(item)? {
                        out.insert(k.clone(), item);
                    }
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                let mut out = Vec::new();
                for item in items {
                    if let Some(item) = self.eval_opt(item)? {
                        out.push(item);
                    }
                }
                Value::Array(out)
            }
            other => other.clone(),
        }))
    }

    fn reference(&self, name: &str) -> Result<Option<Value>, String> {
        let s = &self.stack;
        Ok(Some(match name {
            "AWS::NoValue" => return Ok(None),
            "AWS::StackName" => s.name.clone().into(),
            "AWS::StackId" => s.id().into(),
            "AWS::Region" => s.region.clone().into(),
            "AWS::AccountId" => s.account.clone().into(),
            "AWS::Partition" => s.partition.clone().into(),
            "AWS::URLSuffix" => s.url_suffix.clone().into(),
            "AWS::NotificationARNs" => Value::Array(Vec::new()),
            _ => match self.parameters.get(name) {
                Some(v) => v.clone(),
                None if self.template.declares(name) => format!("<Ref:{name}>").into(),
                // SAM's references to what it generates for a resource: `Api.Stage`,
                // `Function.Alias`, `Function.Version`.
                None if name
                    .split_once('.')
                    .is_some_and(|(r, what)| self.template.declares(r) && matches!(what, "Stage" | "Alias" | "Version")) =>
                {
                    format!("<Ref:{name}>").into()
                }
                None => return Err(format!("Ref {name}: no such parameter or resource")),
            },
        }))
    }

    fn intrinsic(&self, key: &str, args: &Value) -> Result<Option<Value>, String> {
        let list = |n: usize| -> Result<Vec<Value>, String> {
            match args.as_array() {
                Some(items) if items.len() == n => Ok(items.clone()),
                _ => Err(format!("{key} wants a list of {n}: {args}")),
            }
        };
        Ok(Some(match key {
            "Ref" => return self.reference(args.as_str().ok_or("Ref wants a name")?),
            "Fn::GetAtt" => {
                let (resource, attribute) = match args {
                    Value::String(s) => s.split_once('.').map(|(r, a)| (r.to_owned(), a.to_owned())).ok_or("Fn::GetAtt A.B")?,
                    _ => {
                        let items = list(2)?;
                        (scalar(&items[0])?, scalar(&self.eval(&items[1])?)?)
                    }
                };
                format!("<GetAtt:{resource}.{attribute}>").into()
            }
            "Fn::Sub" => {
                let (text, vars) = match args {
                    Value::String(s) => (s.clone(), Map::new()),
                    _ => {
                        let items = list(2)?;
                        let text = items[0].as_str().ok_or("Fn::Sub wants a string")?.to_owned();
                        let vars = self.eval(&items[1])?.as_object().cloned().ok_or("Fn::Sub wants a map of variables")?;
                        (text, vars)
                    }
                };
                self.substitute(&text, &vars)?.into()
            }
            "Fn::Join" => {
                let items = list(2)?;
                let delimiter = scalar(&items[0])?;
                let parts = self.eval(&items[1])?;
                let parts = parts.as_array().ok_or("Fn::Join wants a list")?;
                parts.iter().map(scalar).collect::<Result<Vec<_>, _>>()?.join(&delimiter).into()
            }
            "Fn::Select" => {
                let items = list(2)?;
                let index: usize = scalar(&self.eval(&items[0])?)?.parse().map_err(|e| format!("Fn::Select index: {e}"))?;
                let from = self.eval(&items[1])?;
                let from = from.as_array().ok_or("Fn::Select wants a list")?;
                from.get(index).cloned().ok_or(format!("Fn::Select index {index} out of range of {} items", from.len()))?
            }
            "Fn::Split" => {
                let items = list(2)?;
                let delimiter = scalar(&items[0])?;
                let text = scalar(&self.eval(&items[1])?)?;
                Value::Array(text.split(delimiter.as_str()).map(|s| Value::String(s.to_owned())).collect())
            }
            "Fn::If" => {
                let items = list(3)?;
                let name = items[0].as_str().ok_or("Fn::If wants a condition name")?;
                let chosen =
                    if *self.conditions.get(name).ok_or(format!("Fn::If: no condition {name}"))? { &items[1] } else { &items[2] };
                return self.eval_opt(chosen);
            }
            "Fn::Equals" => {
                let items = list(2)?;
                Value::Bool(scalar(&self.eval(&items[0])?)? == scalar(&self.eval(&items[1])?)?)
            }
            "Fn::Not" | "Fn::And" | "Fn::Or" => {
                let raw = self.template.doc.get("Conditions").and_then(Value::as_object).cloned().unwrap_or_default();
                let mut done = self.conditions.clone();
                let mut wrapped = Map::new();
                wrapped.insert(key.to_owned(), args.clone());
                Value::Bool(self.condition_value(&Value::Object(wrapped), &raw, &mut done, &mut BTreeSet::new())?)
            }
            "Fn::FindInMap" => {
                let items = list(3)?;
                let keys = items.iter().map(|k| self.eval(k).and_then(|k| scalar(&k))).collect::<Result<Vec<_>, _>>()?;
                self.template
                    .doc
                    .pointer(&format!("/Mappings/{}/{}/{}", keys[0], keys[1], keys[2]))
                    .cloned()
                    .ok_or(format!("Fn::FindInMap {keys:?}: not found"))?
            }
            "Fn::Base64" => base64::engine::general_purpose::STANDARD.encode(scalar(&self.eval(args)?)?).into(),
            "Fn::GetAZs" => Value::Array(["a", "b", "c"].iter().map(|z| format!("{}{z}", self.stack.region).into()).collect()),
            "Fn::Cidr" => {
                let items = list(3)?;
                let count: usize = scalar(&self.eval(&items[1])?)?.parse().map_err(|e| format!("Fn::Cidr count: {e}"))?;
                Value::Array((0..count).map(|i| format!("<Cidr:{i}>").into()).collect())
            }
            "Fn::ImportValue" => format!("<ImportValue:{}>", scalar(&self.eval(args)?)?).into(),
            other => return Err(format!("{other} is not supported")),
        }))
    }

    fn substitute(&self, text: &str, vars: &Map<String, Value>) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').ok_or(format!("Fn::Sub: unclosed ${{ in {text}"))?;
            let name = after[..end].trim();
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str("${");
                out.push_str(literal);
                out.push('}');
            } else if let Some(v) = vars.get(name) {
                out.push_str(&scalar(v)?);
            } else if PSEUDO.contains(&name) || self.parameters.contains_key(name) {
                out.push_str(&scalar(&self.reference(name)?.unwrap_or_default())?);
            } else if let Some((resource, attribute)) = name.split_once('.') {
                out.push_str(&format!("<GetAtt:{resource}.{attribute}>"));
            } else if self.template.declares(name) {
                out.push_str(&format!("<Ref:{name}>"));
            } else {
                return Err(format!("Fn::Sub: ${{{name}}} names no variable, parameter or resource"));
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// The resources that exist in this stack (their condition holds), as written.
    pub fn resources(&self) -> Vec<(String, Value)> {
        self.template
            .raw_resources()
            .into_iter()
            .filter(|(_, r)| r.get("Condition").and_then(Value::as_str).is_none_or(|c| self.conditions.get(c) == Some(&true)))
            .collect()
    }

    /// Whether resource `id` exists in this stack.
    pub fn has_resource(&self, id: &str) -> bool {
        self.template
            .doc
            .get("Resources")
            .and_then(|r| r.get(id))
            .is_some_and(|r| r.get("Condition").and_then(Value::as_str).is_none_or(|c| self.conditions.get(c) == Some(&true)))
    }

    /// The type of resource `id`, if it exists in this stack.
    pub fn resource_type(&self, id: &str) -> Option<String> {
        self.resources().into_iter().find(|(k, _)| k == id).and_then(|(_, r)| r.get("Type")?.as_str().map(str::to_owned))
    }

    /// The logical ids of the resources of type `kind` in this stack.
    pub fn resources_of_type(&self, kind: &str) -> Vec<String> {
        self.resources()
            .into_iter()
            .filter(|(_, r)| r.get("Type").and_then(Value::as_str) == Some(kind))
            .map(|(k, _)| k)
            .collect()
    }

    /// The evaluated properties of resource `id`; for an `AWS::Serverless::Function`,
    /// merged over `Globals.Function` as SAM does (maps merge, lists append, the
    /// function's own value wins).
    ///
    /// # Errors
    /// The resource is not in this stack, or its properties do not evaluate.
    pub fn properties(&self, id: &str) -> Result<Value, String> {
        let (_, resource) = self.resources().into_iter().find(|(k, _)| k == id).ok_or(format!("no resource {id}"))?;
        let own = resource.get("Properties").cloned().unwrap_or(Value::Object(Map::new()));
        let merged = match resource.get("Type").and_then(Value::as_str) {
            Some("AWS::Serverless::Function") => match self.template.doc.pointer("/Globals/Function") {
                Some(globals) => merge(globals, &own),
                None => own,
            },
            _ => own,
        };
        self.eval(&merged).map_err(|e| format!("{id}: {e}"))
    }

    /// The logical ids of the SAM functions in this stack.
    pub fn functions(&self) -> Vec<String> {
        self.resources_of_type("AWS::Serverless::Function")
    }

    /// Each function's events of type `kind` (`Api`, `SQS`, `ScheduleV2`): (function,
    /// event name, evaluated event properties).
    fn events(&self, kinds: &[&str]) -> Result<Vec<(String, String, String, Value)>, String> {
        let mut out = Vec::new();
        for function in self.functions() {
            let props = self.properties(&function)?;
            let Some(events) = props.get("Events").and_then(Value::as_object) else { continue };
            for (name, event) in events {
                let kind = event.get("Type").and_then(Value::as_str).unwrap_or_default();
                if kinds.contains(&kind) {
                    let properties = event.get("Properties").cloned().unwrap_or(Value::Object(Map::new()));
                    out.push((function.clone(), name.clone(), kind.to_owned(), properties));
                }
            }
        }
        Ok(out)
    }

    /// Every API Gateway route, sorted by path then method.
    ///
    /// # Errors
    /// A function does not evaluate or an `Api` event lacks its path or method.
    pub fn routes(&self) -> Result<Vec<Route>, String> {
        let mut routes = Vec::new();
        for (function, event, _, props) in self.events(&["Api"])? {
            let field =
                |k: &str| props.get(k).and_then(Value::as_str).map(str::to_owned).ok_or(format!("{function}.{event}: no {k}"));
            let path = field("Path")?;
            let method = field("Method")?.to_uppercase();
            // Without RestApiId, SAM makes an implicit API without a default authorizer.
            let api = props.get("RestApiId").map(placeholder_target).unwrap_or_else(|| "ServerlessRestApi".to_owned());
            let authorizer = match props.pointer("/Auth/Authorizer").and_then(Value::as_str) {
                Some(a) => a.to_owned(),
                None if self.has_resource(&api) => {
                    self.properties(&api)?.pointer("/Auth/DefaultAuthorizer").and_then(Value::as_str).unwrap_or("NONE").to_owned()
                }
                None => "NONE".to_owned(),
            };
            routes.push(Route { method, path, function: function.clone(), authorizer, event, api });
        }
        routes.sort_by(|a, b| (&a.path, &a.method, &a.function).cmp(&(&b.path, &b.method, &b.function)));
        Ok(routes)
    }

    /// Every SQS event source mapping, sorted by queue then function.
    ///
    /// # Errors
    /// A function does not evaluate or an `SQS` event lacks its queue.
    pub fn queue_consumers(&self) -> Result<Vec<QueueConsumer>, String> {
        let mut out = Vec::new();
        for (function, event, _, props) in self.events(&["SQS"])? {
            let queue = props.get("Queue").map(placeholder_target).ok_or(format!("{function}.{event}: no Queue"))?;
            let number = |pointer: &str| props.pointer(pointer).and_then(|v| scalar(v).ok()?.parse::<u64>().ok());
            let reports_item_failures = props
                .get("FunctionResponseTypes")
                .and_then(Value::as_array)
                .is_some_and(|types| types.iter().any(|t| t == "ReportBatchItemFailures"));
            out.push(QueueConsumer {
                queue,
                function,
                event,
                batch_size: number("/BatchSize"),
                max_concurrency: number("/ScalingConfig/MaximumConcurrency"),
                reports_item_failures,
            });
        }
        out.sort();
        Ok(out)
    }

    /// Every schedule (`ScheduleV2` and `Schedule` events), sorted by function then event.
    ///
    /// # Errors
    /// A function does not evaluate or a schedule lacks its expression.
    pub fn schedules(&self) -> Result<Vec<Schedule>, String> {
        let mut out = Vec::new();
        for (function, event, kind, props) in self.events(&["ScheduleV2", "Schedule"])? {
            let key = if kind == "ScheduleV2" { "ScheduleExpression" } else { "Schedule" };
            let expression = props.get(key).and_then(Value::as_str).ok_or(format!("{function}.{event}: no {key}"))?.to_owned();
            let input = props.get("Input").map(|i| match i.as_str() {
                Some(s) => serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.to_owned())),
                None => i.clone(),
            });
            let omit = props.get("OmitName").and_then(Value::as_bool).unwrap_or(false);
            let name = match props.get("Name").and_then(Value::as_str) {
                Some(n) => Some(n.to_owned()),
                // SAM names a ScheduleV2 after its event (function + event) unless told not to.
                None if kind == "ScheduleV2" && !omit => Some(format!("{function}{event}")),
                None => None,
            };
            out.push(Schedule { function, event, kind, expression, input, name, properties: props });
        }
        out.sort_by(|a, b| (&a.function, &a.event).cmp(&(&b.function, &b.event)));
        Ok(out)
    }

    /// Every explicit physical name: the [`NAME_PROPERTIES`] of each resource, the names
    /// SAM gives schedules, and the collections named inside OpenSearch Serverless
    /// policy documents.
    ///
    /// # Errors
    /// A resource does not evaluate, a name is not a string, or a policy is not JSON.
    pub fn physical_names(&self) -> Result<Vec<PhysicalName>, String> {
        let mut out = Vec::new();
        for (id, resource) in self.resources() {
            let kind = resource.get("Type").and_then(Value::as_str).unwrap_or_default().to_owned();
            let props = self.properties(&id)?;
            for key in NAME_PROPERTIES {
                // A reference names another resource (listed there), not this one.
                let reference = |v: &Value| v.as_str().is_some_and(|s| s.starts_with("<Ref:") || s.starts_with("<GetAtt:"));
                if let Some(v) = props.get(key).filter(|v| !reference(v)) {
                    out.push(PhysicalName {
                        resource: id.clone(),
                        resource_type: kind.clone(),
                        property: key.to_owned(),
                        value: scalar(v).map_err(|e| format!("{id}.{key}: {e}"))?,
                    });
                }
            }
            if kind.starts_with("AWS::OpenSearchServerless::") && kind.ends_with("Policy") {
                let policy = props.get("Policy").map(scalar).transpose()?.unwrap_or_default();
                for collection in policy_collections(&policy).map_err(|e| format!("{id}.Policy: {e}"))? {
                    out.push(PhysicalName {
                        resource: id.clone(),
                        resource_type: kind.clone(),
                        property: "Policy:collection".to_owned(),
                        value: collection,
                    });
                }
            }
        }
        for s in self.schedules()? {
            if let Some(name) = s.name {
                out.push(PhysicalName {
                    resource: format!("{}.{}", s.function, s.event),
                    resource_type: "AWS::Scheduler::Schedule".to_owned(),
                    property: "Name".to_owned(),
                    value: name,
                });
            }
        }
        out.sort();
        Ok(out)
    }
}

/// The collections an OpenSearch Serverless policy document names in its rules
/// (`collection/NAME`, `index/NAME/*`).
///
/// # Errors
/// The document is not JSON.
pub fn policy_collections(policy: &str) -> Result<BTreeSet<String>, String> {
    let doc: Value = serde_json::from_str(policy).map_err(|e| format!("not JSON: {e}"))?;
    let documents = match doc {
        Value::Array(items) => items,
        other => vec![other],
    };
    let mut out = BTreeSet::new();
    for document in &documents {
        for rule in document.get("Rules").and_then(Value::as_array).into_iter().flatten() {
            for resource in rule.get("Resource").and_then(Value::as_array).into_iter().flatten() {
                let resource = resource.as_str().unwrap_or_default();
                let name = resource
                    .strip_prefix("collection/")
                    .or_else(|| resource.strip_prefix("index/").map(|r| r.split('/').next().unwrap_or_default()));
                if let Some(name) = name {
                    out.insert(name.to_owned());
                }
            }
        }
    }
    Ok(out)
}

/// The route API Gateway would pick for `method` and `path`: the most specific
/// resource (a literal segment beats `{param}`, which beats `{proxy+}`), then the
/// exact method over `ANY`.
pub fn route_for<'r>(routes: &'r [Route], method: &str, path: &str) -> Option<&'r Route> {
    let wanted: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    routes
        .iter()
        .filter(|r| r.method.eq_ignore_ascii_case(method) || r.method == "ANY")
        .filter_map(|r| path_score(&r.path, &wanted).map(|score| (score, r.method != "ANY", r)))
        .max_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)))
        .map(|(_, _, r)| r)
}

/// Per segment of `template`: 2 literal, 1 `{param}`, 0 `{proxy+}`; `None` if `path`
/// does not match.
fn path_score(template: &str, path: &[&str]) -> Option<Vec<u8>> {
    let segments: Vec<&str> = template.split('/').filter(|s| !s.is_empty()).collect();
    let mut score = Vec::new();
    for (i, segment) in segments.iter().enumerate() {
        if segment.starts_with('{') && segment.ends_with("+}") {
            // Greedy: the last segment, matching one or more.
            return (i == segments.len() - 1 && path.len() > i).then(|| {
                score.push(0);
                score
            });
        }
        let part = path.get(i)?;
        if segment.starts_with('{') && segment.ends_with('}') {
            score.push(1);
        } else if segment == part {
            score.push(2);
        } else {
            return None;
        }
    }
    (segments.len() == path.len()).then_some(score)
}

/// `{"Key": args}` with a single key.
fn single(v: &Value) -> Option<(&str, &Value)> {
    let map = v.as_object()?;
    if map.len() != 1 {
        return None;
    }
    map.iter().next().map(|(k, v)| (k.as_str(), v))
}

/// A scalar as CloudFormation stringifies it.
fn scalar(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!("not a scalar: {other}")),
    }
}

/// `<GetAtt:Queue.Arn>` or `<Ref:Api>` → the logical id; anything else as a string.
fn placeholder_target(v: &Value) -> String {
    let s = scalar(v).unwrap_or_else(|_| v.to_string());
    let inner = s.strip_prefix("<GetAtt:").or_else(|| s.strip_prefix("<Ref:")).and_then(|r| r.strip_suffix('>'));
    match inner {
        Some(inner) => inner.split('.').next().unwrap_or(inner).to_owned(),
        None => s,
    }
}

/// SAM's Globals merge: maps merge key by key, lists append (globals first), and
/// otherwise — scalars, or an intrinsic on either side — the local value wins.
fn merge(global: &Value, local: &Value) -> Value {
    let intrinsic = |v: &Value| single(v).is_some_and(|(k, _)| k == "Ref" || k.starts_with("Fn::"));
    match (global, local) {
        (Value::Object(g), Value::Object(l)) if !intrinsic(global) && !intrinsic(local) => {
            let mut out = g.clone();
            for (k, v) in l {
                let merged = match g.get(k) {
                    Some(gv) => merge(gv, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(g), Value::Array(l)) => Value::Array(g.iter().chain(l).cloned().collect()),
        _ => local.clone(),
    }
}
