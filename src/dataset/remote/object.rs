//! Objects read where they are: by ranged GETs, each pinned to the version (ETag) first seen, so
//! that an object replaced while a run reads it is refused rather than read as a mix of two.

use std::ops::Range;
use std::time::Instant;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path as Key;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};

use super::client::{block_on, store_of};
use super::request::{failure, remote, with_retries, NOT_FOUND};
use super::stats;
use super::url::{ObjectUrl, StoreKey};
use crate::dataset::at_once::each_at_once;
use crate::dataset::error::Result;

/// An object opened for reading: its size and version as its first request saw them.
#[derive(Debug, Clone)]
pub struct RemoteObject {
    url: ObjectUrl,
    size: u64,
    /// Its ETag, where the store gives one: every later read must see the same.
    etag: Option<String>,
}

impl RemoteObject {
    /// Asks the store for `url`'s size and version (a HEAD request).
    pub fn open(url: ObjectUrl) -> Result<Self> {
        Self::find(url.clone())?.ok_or_else(|| remote(&url, NOT_FOUND.into()))
    }

    /// [`RemoteObject::open`], None where there is no object at `url` (one HEAD request).
    pub fn find(url: ObjectUrl) -> Result<Option<Self>> {
        Ok(head(&url)?.map(|meta| Self { size: meta.size, etag: meta.e_tag, url }))
    }

    /// The object's address.
    pub fn url(&self) -> &ObjectUrl {
        &self.url
    }

    /// Its version (ETag) when opened, where the store gives one.
    pub fn version(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// Its size in bytes when opened.
    pub fn len(&self) -> u64 {
        self.size
    }

    /// Whether it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// The bytes `range` of the object (one ranged GET), of the version first seen: a range
    /// beyond its end, a shorter body or another version is an error naming the URL.
    pub fn read(&self, range: Range<u64>) -> Result<Bytes> {
        if range.end > self.size {
            return Err(remote(
                &self.url,
                format!(
                    "bytes {}..{} lie beyond its end ({} bytes when it was opened)",
                    range.start, range.end, self.size
                ),
            ));
        }
        if range.is_empty() {
            return Ok(Bytes::new());
        }
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: self.etag.clone(),
            ..Default::default()
        };
        let bytes = get(&self.url, options, self.etag.as_deref())?;
        if bytes.len() as u64 != range.end - range.start {
            return Err(remote(
                &self.url,
                format!(
                    "bytes {}..{}: the server sent {} bytes, expected {} (a truncated body)",
                    range.start,
                    range.end,
                    bytes.len(),
                    range.end - range.start
                ),
            ));
        }
        Ok(bytes)
    }
}

/// How a reader fetches the ranges it needs of an object: how many requests it keeps in flight,
/// and how near two ranges must lie to be fetched as one (the gap read and dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fetch {
    /// Requests in flight at once.
    pub in_flight: usize,
    /// Ranges at most this many bytes apart are one request.
    pub gap: u64,
}

impl Default for Fetch {
    /// 8 requests in flight, ranges within 32 KiB merged.
    fn default() -> Self {
        Self { in_flight: 8, gap: 32 * 1024 }
    }
}

impl Fetch {
    /// `ranges` sorted, those within [`Fetch::gap`] of each other merged.
    pub fn merged(&self, ranges: &[Range<u64>]) -> Vec<Range<u64>> {
        let mut sorted: Vec<Range<u64>> =
            ranges.iter().filter(|r| !r.is_empty()).cloned().collect();
        sorted.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::new();
        for range in sorted {
            match merged.last_mut() {
                Some(last) if range.start <= last.end + self.gap => {
                    last.end = last.end.max(range.end)
                }
                _ => merged.push(range),
            }
        }
        merged
    }
}

impl RemoteObject {
    /// The bytes of `ranges`, as spans by offset: merged as `fetch` says, at most
    /// [`Fetch::in_flight`] requests at once.
    pub fn read_ranges(&self, ranges: &[Range<u64>], fetch: &Fetch) -> Result<Vec<(u64, Bytes)>> {
        each_at_once(&fetch.merged(ranges), fetch.in_flight, |range| {
            self.read(range.clone()).map(|bytes| (range.start, bytes))
        })
    }
}

/// The whole object at `url` (metadata files: one GET).
pub fn read_whole(url: &ObjectUrl) -> Result<Bytes> {
    get(url, GetOptions::default(), None)
}

/// The most one PUT request carries (S3's limit for a single upload).
const LARGEST_PUT: u64 = 5 << 30;

/// Puts the bytes of the local file `local` at `url` (one PUT, replacing what was there): how
/// the layout study places a candidate in a bucket. A web server takes no uploads, and a file
/// over 5 GiB is more than one PUT carries: each refused, naming it.
pub fn put_file(url: &ObjectUrl, local: &std::path::Path) -> Result<()> {
    if matches!(url.store, StoreKey::Http { .. }) {
        return Err(remote(url, "a web server takes no uploads; serve the files from it".into()));
    }
    let size = std::fs::metadata(local).map_err(|e| crate::dataset::DatasetError::io(local, e))?;
    if size.len() > LARGEST_PUT {
        return Err(remote(
            url,
            format!("{}: {} bytes, more than one PUT carries (5 GiB)", local.display(), size.len()),
        ));
    }
    let bytes = std::fs::read(local).map_err(|e| crate::dataset::DatasetError::io(local, e))?;
    let store = store_of(url)?;
    let payload = object_store::PutPayload::from(bytes);
    let started = Instant::now();
    block_on(url, store.put(&key(url), payload))?
        .map(drop)
        .map_err(|e| failure(url, e, 0, started.elapsed()))
}

/// Whether an object is at `url` (a HEAD request; absent is `false`, any other failure an error).
pub fn exists(url: &ObjectUrl) -> Result<bool> {
    Ok(head(url)?.is_some())
}

/// The keys of the objects under the "directory" `dir` (every level), sorted; None for a store
/// that cannot list (a plain web server).
pub fn list(dir: &ObjectUrl) -> Result<Option<Vec<String>>> {
    let store = store_of(dir)?;
    let prefix = key(dir);
    let listed: Result<Vec<_>, _> =
        block_on(dir, store.list(Some(&prefix)).map_ok(|meta| meta.location).try_collect())?;
    match listed {
        Ok(keys) => {
            let mut keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            keys.sort();
            Ok(Some(keys))
        }
        Err(_) if matches!(dir.store, StoreKey::Http { .. }) => Ok(None),
        Err(e) => Err(failure(dir, e, 0, std::time::Duration::ZERO)),
    }
}

/// A HEAD request (each try counted, [`super::stats`]): the object's size and version, None
/// where there is none.
fn head(url: &ObjectUrl) -> Result<Option<object_store::ObjectMeta>> {
    let store = store_of(url)?;
    with_retries(url, || {
        let started = Instant::now();
        let answer = block_on(url, store.head(&key(url)))?;
        stats::record(started.elapsed(), started.elapsed(), 0);
        Ok(match answer {
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            other => other.map(Some),
        })
    })
}

/// A GET (each try counted, [`super::stats`]); where `pinned` is set, the answer must be of
/// that version.
fn get(url: &ObjectUrl, options: GetOptions, pinned: Option<&str>) -> Result<Bytes> {
    let store = store_of(url)?;
    let location = key(url);
    with_retries(url, || {
        let started = Instant::now();
        block_on(url, async {
            let result = store.get_opts(&location, options.clone()).await;
            let first_byte = started.elapsed();
            let body = match result {
                Ok(result) => check_version(&location, result, pinned)?.bytes().await,
                Err(e) => Err(e),
            };
            let received = body.as_ref().map_or(0, |b| b.len() as u64);
            stats::record(first_byte, started.elapsed(), received);
            body
        })
    })
}

/// `result`, where it is of the version `pinned` (where set).
fn check_version(
    location: &Key,
    result: object_store::GetResult,
    pinned: Option<&str>,
) -> object_store::Result<object_store::GetResult> {
    if let (Some(pinned), Some(now)) = (pinned, result.meta.e_tag.as_deref()) {
        if pinned != now {
            return Err(object_store::Error::Precondition {
                path: location.to_string(),
                source: format!("its ETag is {now} now, {pinned} when first read").into(),
            });
        }
    }
    Ok(result)
}

fn key(url: &ObjectUrl) -> Key {
    Key::from(url.key.as_str())
}
