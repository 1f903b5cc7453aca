//! Datasets whose root is a URL (`s3://`, `gs://`, `http(s)://`, `hf://`): their files are
//! objects, read by ranged GETs through the `object_store` crate, every store behind its one
//! interface. Nothing above the dataset sees this module: [`super::files`] hands it the paths
//! that name objects, so that a layer above passes a URL where it passed a directory.

pub mod aws_files;
pub mod client;
pub mod index_cache;
pub mod object;
pub mod request;
pub mod stats;
pub mod url;

pub use client::{register_storage_options, set_storage_options, OPTIONS_VARIABLE};
pub use object::{Fetch, RemoteObject};
pub use stats::{ReadMark, RemoteReads};
pub use url::{is_url, ObjectUrl, SCHEMES};
