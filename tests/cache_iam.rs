//! ElastiCache IAM authentication (`store_aws::cache_iam`), offline:
//!
//! - the token is the presigned `connect` request botocore makes (the independent
//!   implementation AWS's own examples use), signature included, with and without a
//!   session token;
//! - the cache signs in to a real Redis with `AUTH {user} {token}`: a Redis ACL user whose
//!   password is the token of the moment accepts it, a wrong user is refused, and once
//!   the connection is older than `MAX_CONNECTION_AGE` the next call makes a new one with
//!   a fresh token (the old token no longer accepted).
//!
//! What only AWS can check: ElastiCache validating the signature against IAM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use continuity_tests::aws::env;
use domain::ErrorCode;
use store_aws::cache_iam::{IamAuth, IamUser, MAX_CONNECTION_AGE, token_at};
use store_aws::{RedisCache, RedisSettings};

const T: u64 = 1_796_140_800; // 2026-12-01T16:00:00Z

fn query(url: &str) -> BTreeMap<String, String> {
    let (_, q) = url.split_once('?').unwrap();
    form_urlencoded::parse(q.as_bytes()).into_owned().collect()
}

fn botocore(creds: &Credentials, user: &IamUser, at: u64) -> String {
    let py = format!(
        r#"
import datetime, botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
botocore.auth.get_current_datetime = lambda: datetime.datetime.fromtimestamp({at}, datetime.timezone.utc).replace(tzinfo=None)
req = AWSRequest(method="GET", url="http://{cache}/", params={{"Action": "connect", "User": "{user}", "ResourceType": "ServerlessCache"}})
botocore.auth.SigV4QueryAuth(Credentials({key:?}, {secret:?}, {token}), "elasticache", "eu-west-1", expires=900).add_auth(req)
print(req.prepare().url)
"#,
        cache = user.cache_name,
        user = user.user,
        key = creds.access_key_id(),
        secret = creds.secret_access_key(),
        token = creds.session_token().map_or_else(|| "None".to_owned(), |t| format!("{t:?}")),
    );
    let out = std::process::Command::new(env("CONTINUITY_TEST_MOTO_PYTHON")).args(["-c", &py]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[test]
fn the_token_is_what_botocore_presigns() {
    let user = IamUser { user: "cty-app".into(), cache_name: "continuity-0a1b2c3d".into(), serverless: true };
    for creds in [
        Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test"),
        Credentials::new(
            "ASIAEXAMPLE",
            "c2VjcmV0/c2VjcmV0+c2VjcmV0",
            Some("IQoJb3JpZ2luX2VjE//session+token=".into()),
            None,
            "test",
        ),
    ] {
        let ours = token_at(&creds, &user, "eu-west-1", SystemTime::UNIX_EPOCH + Duration::from_secs(T)).unwrap();
        let theirs = botocore(&creds, &user, T);
        assert_eq!(ours.split('?').next(), theirs.strip_prefix("http://").unwrap().split('?').next());
        assert_eq!(query(&ours), query(&theirs), "ours: {ours}\nbotocore: {theirs}");
        assert_eq!(query(&ours).contains_key("X-Amz-Security-Token"), creds.session_token().is_some());
    }
}

async fn admin() -> redis::aio::MultiplexedConnection {
    redis::Client::open(env("CONTINUITY_TEST_REDIS_URL")).unwrap().get_multiplexed_async_connection().await.unwrap()
}

async fn set_password(user: &str, token: &str) {
    let mut c = admin().await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(format!(">{token}"))
        .arg("~*")
        .arg("+@all")
        .query_async(&mut c)
        .await
        .unwrap();
}

async fn connection_ids(user: &str) -> Vec<String> {
    let mut c = admin().await;
    let list: String = redis::cmd("CLIENT").arg("LIST").query_async(&mut c).await.unwrap();
    list.lines()
        .filter(|l| l.split(' ').any(|f| f == format!("user={user}")))
        .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")).map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_cache_signs_in_as_the_iam_user_and_renews_its_token() {
    let creds = Credentials::new("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", None, None, "test");
    let name = format!("cty-iam-{}", rand::random::<u32>());
    let user = IamUser { user: name.clone(), cache_name: "continuity-0a1b2c3d".into(), serverless: true };
    let now = Arc::new(Mutex::new(SystemTime::UNIX_EPOCH + Duration::from_secs(T)));
    let clock = {
        let now = now.clone();
        Arc::new(move || *now.lock().unwrap())
    };
    let auth = |u: IamUser| IamAuth::new(u, "eu-west-1", SharedCredentialsProvider::new(creds.clone())).with_clock(clock.clone());
    let token = |at: SystemTime| token_at(&creds, &user, "eu-west-1", at).unwrap();
    let start = *now.lock().unwrap();
    set_password(&name, &token(start)).await;

    let settings = RedisSettings::single(env("CONTINUITY_TEST_REDIS_URL"));
    let cache = RedisCache::new(&settings).unwrap().with_iam(auth(user.clone()));
    cache.ping().await.unwrap();
    let first = connection_ids(&name).await;
    assert_eq!(first.len(), 1, "signed in as the IAM user: {first:?}");

    // A user the cache does not know: refused, as ElastiCache refuses a bad token.
    let stranger = IamUser { user: format!("{name}-x"), ..user.clone() };
    let refused = RedisCache::new(&settings).unwrap().with_iam(auth(stranger));
    assert_eq!(refused.ping().await.unwrap_err().code, ErrorCode::Unavailable);

    // Still young: the same connection, whatever the password is now.
    let later = start + MAX_CONNECTION_AGE + Duration::from_secs(60);
    set_password(&name, &token(later)).await;
    cache.ping().await.unwrap();
    assert_eq!(connection_ids(&name).await, first);
    // Past the age: a new connection, signed with the token of the moment (the only
    // password the user now has).
    *now.lock().unwrap() = later;
    cache.ping().await.unwrap();
    let second = connection_ids(&name).await;
    assert!(second.iter().any(|id| !first.contains(id)), "a new connection: {first:?} then {second:?}");
}
