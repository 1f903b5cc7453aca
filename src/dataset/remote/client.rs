//! The clients of the stores: one per store and process, built from the environment (`AWS_*`,
//! `GOOGLE_*`, `HF_TOKEN`) and the storage options, and the small runtime their futures run on.
//! A forked process (a DataLoader worker) builds its own at its first read: a runtime's threads
//! and a client's connections do not cross a fork.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::http::HttpBuilder;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, RetryConfig};

use super::url::{ObjectUrl, StoreKey};
use crate::dataset::error::{DatasetError, Result};

/// The environment variable that carries the storage options to the processes feedbench
/// starts (ranks, LeRobot's driver, DataLoader workers): a JSON object of strings.
pub const OPTIONS_VARIABLE: &str = "FEEDBENCH_STORAGE_OPTIONS";

/// How long a connection may take to open before the endpoint is called unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one request may take, its body included, before the server is called too slow.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The storage options given in this process, by the URL prefix they are for (`""`: every
/// root; the command line's), longest first.
static OPTIONS: Mutex<Vec<(String, StorageOptions)>> = Mutex::new(Vec::new());

/// A store's settings, `KEY=VALUE` pairs as its builder names them.
pub type StorageOptions = Vec<(String, String)>;

/// Sets the storage options of every URL root read in this process (the command line's
/// `KEY=VALUE` pairs, as the stores' builders name their settings: `endpoint`, `region`,
/// `access_key_id`, `allow_http`, `timeout`…), before any object is read.
pub fn set_storage_options(options: StorageOptions) {
    register_storage_options("", options);
}

/// Sets the storage options of the roots under `prefix` (a root's URL: Python's
/// `FeedbenchDataset(root, storage_options=…)`), over those set for every root.
pub fn register_storage_options(prefix: &str, options: StorageOptions) {
    let mut all = OPTIONS.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|(p, _)| p != prefix);
    all.push((prefix.to_string(), options));
    all.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
}

/// The storage options of `url`: those given for the longest prefix of it, else those the
/// parent process passed on ([`OPTIONS_VARIABLE`]).
pub fn storage_options(url: &ObjectUrl) -> StorageOptions {
    let all = OPTIONS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, options)) = all.iter().find(|(prefix, _)| url.text.starts_with(prefix.as_str()))
    {
        return options.clone();
    }
    std::env::var(OPTIONS_VARIABLE)
        .ok()
        .and_then(|text| {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text).ok()
        })
        .map(|map| {
            map.into_iter()
                .filter_map(|(key, value)| value.as_str().map(|value| (key, value.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// One process's runtime and clients.
struct Clients {
    pid: u32,
    runtime: tokio::runtime::Runtime,
    /// By store and the options it was built with.
    stores: Mutex<HashMap<(StoreKey, StorageOptions), Arc<dyn ObjectStore>>>,
}

/// This process's clients, made at its first read (again in a forked child, whose parent's
/// runtime has no threads there: the parent's are left alone, never dropped in the child).
fn clients() -> Result<Arc<Clients>, String> {
    static CLIENTS: Mutex<Option<Arc<Clients>>> = Mutex::new(None);
    let mut held = CLIENTS.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    if let Some(clients) = held.as_ref().filter(|c| c.pid == pid) {
        return Ok(clients.clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("feedbench-remote")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime of remote reads: {e}"))?;
    let fresh = Arc::new(Clients { pid, runtime, stores: Mutex::default() });
    if let Some(parent) = held.replace(fresh.clone()) {
        std::mem::forget(parent);
    }
    Ok(fresh)
}

/// Runs `future` (a request to a store) to its end on this process's runtime, from a thread of
/// the caller's (a loader worker).
pub fn block_on<F: Future>(url: &ObjectUrl, future: F) -> Result<F::Output> {
    let clients = clients().map_err(|what| remote(url, what))?;
    Ok(clients.runtime.block_on(future))
}

/// The client of `url`'s store, made at its first use in this process.
pub fn store_of(url: &ObjectUrl) -> Result<Arc<dyn ObjectStore>> {
    let clients = clients().map_err(|what| remote(url, what))?;
    let key = (url.store.clone(), storage_options(url));
    let mut stores = clients.stores.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(store) = stores.get(&key) {
        return Ok(store.clone());
    }
    // Building reads no network; a store's own client needs the runtime entered.
    let _entered = clients.runtime.enter();
    let store = build(&key.0, &key.1).map_err(|what| remote(url, what))?;
    stores.insert(key, store.clone());
    Ok(store)
}

/// The error about `url`.
fn remote(url: &ObjectUrl, what: String) -> DatasetError {
    DatasetError::Remote { path: url.text.clone().into(), what }
}

/// Timeouts and retries as feedbench reads: a dead endpoint is said within seconds, a
/// throttled one retried with backoff.
fn client_options(allow_http: bool) -> ClientOptions {
    ClientOptions::new()
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(REQUEST_TIMEOUT)
        .with_allow_http(allow_http)
}

/// No retries inside the client: feedbench retries itself, counting them
/// ([`super::request::with_retries`]).
fn retry() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 0,
        retry_timeout: REQUEST_TIMEOUT,
    }
}

/// The connect and request timeouts of `url`'s store, as said: the storage options'
/// `connect_timeout` and `timeout` where given, else feedbench's.
pub fn timeouts(url: &ObjectUrl) -> (String, String) {
    let options = storage_options(url);
    let given = |key: &str| options.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
    (
        given("connect_timeout").unwrap_or_else(|| format!("{} s", CONNECT_TIMEOUT.as_secs())),
        given("timeout").unwrap_or_else(|| format!("{} s", REQUEST_TIMEOUT.as_secs())),
    )
}

/// The client of `key`, with `options` over the environment's settings.
fn build(key: &StoreKey, options: &[(String, String)]) -> Result<Arc<dyn ObjectStore>, String> {
    let unknown = |key: &str, store: &str| {
        format!(
            "storage option `{key}` is no setting of {store} (e.g. endpoint, region, allow_http)"
        )
    };
    match key {
        StoreKey::S3 { bucket } => {
            let mut builder = AmazonS3Builder::new()
                .with_client_options(client_options(false))
                .with_retry(retry())
                .with_region("us-east-1");
            for (key, value) in super::aws_files::s3_settings() {
                builder =
                    builder.with_config(key.parse().expect("a key object_store names"), value);
            }
            let from_env = std::env::vars()
                .filter(|(key, _)| key.starts_with("AWS_"))
                .filter_map(|(key, value)| Some((key.to_ascii_lowercase().parse().ok()?, value)));
            for (key, value) in from_env.collect::<Vec<(AmazonS3ConfigKey, String)>>() {
                builder = builder.with_config(key, value);
            }
            for (key, value) in options {
                let parsed: AmazonS3ConfigKey = key.parse().map_err(|_| unknown(key, "S3"))?;
                builder = builder.with_config(parsed, value);
            }
            let endpoint = builder.get_config_value(&AmazonS3ConfigKey::Endpoint);
            if endpoint.is_some_and(|e| e.starts_with("http://")) {
                builder = builder.with_allow_http(true);
            }
            let store = builder.with_bucket_name(bucket).build().map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
        StoreKey::Gcs { bucket } => {
            let mut builder = GoogleCloudStorageBuilder::from_env()
                .with_client_options(client_options(false))
                .with_retry(retry());
            for (key, value) in options {
                let parsed: GoogleConfigKey = key.parse().map_err(|_| unknown(key, "GCS"))?;
                builder = builder.with_config(parsed, value);
            }
            let store = builder.with_bucket_name(bucket).build().map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
        StoreKey::Http { origin, hub } => {
            let mut client = client_options(origin.starts_with("http://"));
            if let Some(token) = hub.then(|| std::env::var("HF_TOKEN").ok()).flatten() {
                let mut headers = object_store::HeaderMap::new();
                let value = format!("Bearer {token}")
                    .parse()
                    .map_err(|_| "HF_TOKEN holds characters no HTTP header may".to_string())?;
                headers.insert("authorization", value);
                client = client.with_default_headers(headers);
            }
            for (key, value) in options {
                let parsed: ClientConfigKey = key.parse().map_err(|_| unknown(key, "HTTP"))?;
                client = client.with_config(parsed, value);
            }
            let store = HttpBuilder::new()
                .with_url(origin)
                .with_client_options(client)
                .with_retry(retry())
                .build()
                .map_err(|e| e.to_string())?;
            Ok(Arc::new(store))
        }
    }
}
