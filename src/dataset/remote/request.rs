//! One request to a store as feedbench makes it: tried again with backoff where it failed on the
//! way (a reset or closed connection, a 5xx such as S3's 503 SlowDown, a timeout), each retry
//! counted ([`super::stats`]), and its failure said in one line that names the URL, what
//! happened, after how many tries, and what helps.

use std::time::{Duration, Instant};

use super::client::timeouts;
use super::stats;
use super::url::ObjectUrl;
use crate::dataset::error::{DatasetError, Result};

/// Retries of a request that failed on the way, before its error is said.
pub const RETRIES: usize = 4;

/// What is said of an object that is not there.
pub(super) const NOT_FOUND: &str =
    "not found (no such object or bucket: is the URL, or the endpoint, right?)";

/// The wait before retry `retry` (0 first): 100 ms, doubled each time, at most 4 s.
fn backoff(retry: usize) -> Duration {
    Duration::from_millis(100 << retry.min(6)).min(Duration::from_secs(4))
}

/// `attempt` (one request), tried again up to [`RETRIES`] times with backoff while it fails on
/// the way; its last failure said for `url`.
pub(super) fn with_retries<T>(
    url: &ObjectUrl,
    mut attempt: impl FnMut() -> Result<object_store::Result<T>>,
) -> Result<T> {
    let started = Instant::now();
    let mut retry = 0;
    loop {
        match attempt()? {
            Ok(value) => return Ok(value),
            Err(error) if retry < RETRIES && transient(&error) => {
                stats::retried();
                std::thread::sleep(backoff(retry));
                retry += 1;
            }
            Err(error) => return Err(failure(url, error, retry, started.elapsed())),
        }
    }
}

/// Whether `error` failed on the way (another try may pass) rather than said no.
fn transient(error: &object_store::Error) -> bool {
    use object_store::Error::*;
    if matches!(
        error,
        NotFound { .. } | Precondition { .. } | PermissionDenied { .. } | Unauthenticated { .. }
    ) {
        return false;
    }
    let text = chain(error).to_ascii_lowercase();
    if text.contains("status code: 4") {
        return false;
    }
    [
        "status code: 5",
        "slowdown",
        "timed out",
        "connection",
        "error sending request",
        "decoding response body",
        "incomplete",
        "reset",
        "closed",
        "eof",
    ]
    .iter()
    .any(|sign| text.contains(sign))
}

/// The error about `url`.
pub(super) fn remote(url: &ObjectUrl, what: String) -> DatasetError {
    DatasetError::Remote { path: url.text.clone().into(), what }
}

/// `error` said for `url` after `retries` retries over `spent`: what happened in the user's
/// words, then the store's own text.
pub(super) fn failure(
    url: &ObjectUrl,
    error: object_store::Error,
    retries: usize,
    spent: Duration,
) -> DatasetError {
    let detail = chain(&error);
    let lower = detail.to_ascii_lowercase();
    let tries = match retries {
        0 => String::new(),
        n => format!(" after {n} retries over {:.1} s", spent.as_secs_f64()),
    };
    let what = match &error {
        object_store::Error::NotFound { .. } => NOT_FOUND.to_string(),
        object_store::Error::Precondition { .. } => format!(
            "the object changed while it was read ({detail}): refused rather than read as a \
             mix of two versions; run again to read the new one"
        ),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => format!(
            "access denied ({detail}): check the credentials (AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, HF_TOKEN) or the storage options"
        ),
        _ if detail.contains("status code: 403") => format!(
            "access denied, 403 ({detail}): check the credentials (AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, HF_TOKEN) or the storage options"
        ),
        _ if detail.contains("status code: 503") || lower.contains("slowdown") => format!(
            "the store throttled the requests (503 SlowDown){tries} ({detail}): fewer requests \
             in flight (requests_in_flight) or fewer workers ask less of it"
        ),
        _ if lower.contains("timed out") => {
            let (connect, request) = timeouts(url);
            format!(
                "no answer in time (connect timeout {connect}, request timeout {request}){tries}: \
                 the server is too slow or out of reach ({detail}); the storage options \
                 connect_timeout and timeout set them"
            )
        }
        _ if detail.contains("Connection refused") || lower.contains("dns error") => format!(
            "cannot reach the endpoint{tries} ({detail}): is the server up, and the endpoint \
             right?"
        ),
        _ if ["decoding response body", "body error", "before message length", "incomplete"]
            .iter()
            .any(|sign| lower.contains(sign)) =>
        {
            format!(
                "the server sent a truncated body{tries} ({detail}): the connection closed before \
                 the whole answer arrived"
            )
        }
        _ if lower.contains("error sending request") => format!(
            "the connection failed on the way{tries} ({detail}): is the server up, and the \
             link sound?"
        ),
        _ => format!("{detail}{tries}"),
    };
    remote(url, what)
}

/// The error's text and its causes', each once.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(current) = next {
        let text = current.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = current.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_read_from_its_place_not_from_digits_anywhere() {
        let url =
            ObjectUrl::of(std::path::Path::new("http://127.0.0.1:34037/pusht/meta/info.json"))
                .unwrap()
                .unwrap();
        let throttled = object_store::Error::Generic {
            store: "HTTP",
            source: "Error performing GET http://127.0.0.1:34037/pusht/meta/info.json in 2.8ms \
                     - Server returned non-2xx status code: 503 Service Unavailable: "
                .into(),
        };
        assert!(transient(&throttled));
        let said = failure(&url, throttled, 4, Duration::from_secs(2)).to_string();
        assert!(said.contains("throttled the requests (503 SlowDown) after 4 retries"), "{said}");
        let refused = object_store::Error::Generic {
            store: "HTTP",
            source: "Server returned non-2xx status code: 403 Forbidden: ".into(),
        };
        assert!(!transient(&refused));
        let said = failure(&url, refused, 0, Duration::ZERO).to_string();
        assert!(said.contains("access denied, 403"), "{said}");
    }

    #[test]
    fn retries_back_off_doubling_to_four_seconds() {
        let waits: Vec<u64> = (0..8).map(|r| backoff(r).as_millis() as u64).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 4000, 4000]);
    }
}
