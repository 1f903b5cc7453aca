//! Which paths name objects, and where: `s3://BUCKET/KEY`, `gs://BUCKET/KEY`,
//! `http(s)://HOST/PATH` and `hf://datasets/OWNER/NAME[@REVISION]/PATH` (the Hub's resolve
//! URLs). A dataset's root and every path joined to it stay [`Path`]s, so that the layers above
//! pass a URL where they passed a directory; this module reads the text back.

use std::fmt;
use std::path::Path;

use crate::dataset::error::{DatasetError, Result};

/// The schemes a root may have, as users write them.
pub const SCHEMES: &str = "s3://, gs://, http://, https:// or hf://datasets/…";

/// The Hub's address where `HF_ENDPOINT` does not say another.
const HUB: &str = "https://huggingface.co";

/// The store an object is in: one client each, shared by every object of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum StoreKey {
    /// An S3-compatible bucket (AWS, R2, MinIO, Ceph: the endpoint from the environment or
    /// the storage options).
    S3 {
        /// The bucket.
        bucket: String,
    },
    /// A Google Cloud Storage bucket.
    Gcs {
        /// The bucket.
        bucket: String,
    },
    /// A web server answering range GETs, by its origin (`https://host:port`); the Hub is one.
    Http {
        /// Scheme, host and port.
        origin: String,
        /// Whether it is the Hub (its token, `HF_TOKEN`, goes with each request).
        hub: bool,
    },
}

/// An object's address: its store and its key there, and the URL as written (for messages).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectUrl {
    /// The store.
    pub store: StoreKey,
    /// The key within it, without a leading `/` (`prefix/meta/info.json`).
    pub key: String,
    /// The URL as the user's root and the dataset's file names make it.
    pub text: String,
}

impl fmt::Display for ObjectUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether `path` is written as a URL (`scheme://…`), whatever the scheme.
pub fn is_url(path: &Path) -> bool {
    path.to_str().and_then(|text| text.split_once("://")).is_some_and(|(scheme, _)| {
        let mut chars = scheme.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic())
            && chars.all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    })
}

impl ObjectUrl {
    /// The object `path` names, None where it is a local path; a URL of another scheme, or
    /// without a bucket or host, is an error naming it and the schemes read.
    pub fn of(path: &Path) -> Result<Option<Self>> {
        if !is_url(path) {
            return Ok(None);
        }
        let text = path.to_str().expect("a URL is text").to_string();
        let (scheme, rest) = text.split_once("://").expect("is_url found it");
        let refuse = |what: String| DatasetError::Remote { path: path.to_path_buf(), what };
        let (head, key) = rest.split_once('/').unwrap_or((rest, ""));
        let key = key.trim_matches('/').to_string();
        if head.is_empty() {
            return Err(refuse(format!("no bucket or host after {scheme}://")));
        }
        let store = match scheme.to_ascii_lowercase().as_str() {
            "s3" | "s3a" => StoreKey::S3 { bucket: head.to_string() },
            "gs" => StoreKey::Gcs { bucket: head.to_string() },
            "http" | "https" => StoreKey::Http { origin: format!("{scheme}://{head}"), hub: false },
            "hf" => return hub_object(path, &text, rest).map(Some),
            _ => {
                return Err(refuse(format!(
                    "unknown scheme {scheme}://; a dataset root is a local directory or a URL \
                     of {SCHEMES}"
                )))
            }
        };
        Ok(Some(Self { store, key, text }))
    }
}

/// `hf://datasets/OWNER/NAME[@REVISION]/PATH` as the Hub serves it:
/// `HF_ENDPOINT/datasets/OWNER/NAME/resolve/REVISION/PATH` (revision `main` unless given).
fn hub_object(path: &Path, text: &str, rest: &str) -> Result<ObjectUrl> {
    let parts: Vec<&str> = rest.trim_end_matches('/').splitn(4, '/').collect();
    let (kind, owner, name) = match parts.as_slice() {
        [kind, owner, name, ..] if !owner.is_empty() && !name.is_empty() => (*kind, *owner, *name),
        _ => {
            return Err(DatasetError::Remote {
                path: path.to_path_buf(),
                what: "expected hf://datasets/OWNER/NAME[@REVISION]".into(),
            })
        }
    };
    if kind != "datasets" {
        return Err(DatasetError::Remote {
            path: path.to_path_buf(),
            what: format!("hf://{kind}/…: expected a dataset repository, hf://datasets/OWNER/NAME"),
        });
    }
    let (name, revision) = name.split_once('@').unwrap_or((name, "main"));
    let within = parts.get(3).copied().unwrap_or("").trim_matches('/');
    let endpoint = std::env::var("HF_ENDPOINT").unwrap_or_else(|_| HUB.to_string());
    let endpoint = endpoint.trim_end_matches('/');
    let (origin, base) = match endpoint.split_once("://") {
        Some((scheme, rest)) => {
            let (host, base) = rest.split_once('/').unwrap_or((rest, ""));
            (format!("{scheme}://{host}"), base.trim_matches('/').to_string())
        }
        None => {
            return Err(DatasetError::Remote {
                path: path.to_path_buf(),
                what: format!("HF_ENDPOINT {endpoint:?}: expected a URL such as {HUB}"),
            })
        }
    };
    let key = [base.as_str(), "datasets", owner, name, "resolve", revision, within]
        .iter()
        .filter(|part| !part.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join("/");
    Ok(ObjectUrl { store: StoreKey::Http { origin, hub: true }, key, text: text.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(text: &str) -> Result<Option<ObjectUrl>> {
        ObjectUrl::of(Path::new(text))
    }

    #[test]
    fn local_paths_are_not_urls_and_joined_urls_keep_their_text() {
        assert!(of("/data/g1").unwrap().is_none());
        assert!(of("data/a:b").unwrap().is_none());
        let root = Path::new("s3://bucket/datasets/g1");
        let info = of(root.join("meta/info.json").to_str().unwrap()).unwrap().unwrap();
        assert_eq!(info.store, StoreKey::S3 { bucket: "bucket".into() });
        assert_eq!(info.key, "datasets/g1/meta/info.json");
        assert_eq!(info.text, "s3://bucket/datasets/g1/meta/info.json");
        let page = of("http://127.0.0.1:8080/g1/data/file-000.parquet").unwrap().unwrap();
        let origin = "http://127.0.0.1:8080".to_string();
        assert_eq!(page.store, StoreKey::Http { origin, hub: false });
        assert_eq!(page.key, "g1/data/file-000.parquet");
    }

    #[test]
    fn hub_urls_are_its_resolve_urls_at_their_revision() {
        let url = of("hf://datasets/unitree/g1@v2.1/meta/info.json").unwrap().unwrap();
        assert!(matches!(url.store, StoreKey::Http { hub: true, .. }));
        assert_eq!(url.key, "datasets/unitree/g1/resolve/v2.1/meta/info.json");
        let main = of("hf://datasets/unitree/g1").unwrap().unwrap();
        assert_eq!(main.key, "datasets/unitree/g1/resolve/main");
        let refused = of("hf://models/unitree/g1").unwrap_err().to_string();
        assert!(refused.contains("expected a dataset repository"), "{refused}");
    }

    #[test]
    fn unknown_schemes_and_empty_buckets_are_refused_naming_the_url() {
        let refused = of("ftp://host/g1").unwrap_err().to_string();
        assert!(refused.starts_with("ftp://host/g1: unknown scheme ftp://"), "{refused}");
        assert!(refused.contains("s3://"), "{refused}");
        let refused = of("s3:///g1").unwrap_err().to_string();
        assert!(refused.contains("no bucket or host"), "{refused}");
    }
}
