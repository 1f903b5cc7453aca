//! The coded bytes a batch's frames need, fetched at once before they are decoded: for each
//! frame, the samples from its keyframe to the last it needs, of every remote file of the batch,
//! as ranges merged where they lie near and several requests in flight ([`Fetch`]). A decoder
//! then reads them from memory instead of asking the store frame by frame, paying its latency
//! once a batch rather than once a frame. Local files are read where they are, as before.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::raw;
use super::table::VideoFile;
use crate::dataset::at_once::each_at_once;
use crate::dataset::error::Result;
use crate::dataset::files::PositionedFile;
use crate::dataset::remote::{is_url, Fetch};
use crate::dataset::FrameMatch;

/// A remote file and the byte ranges a batch's frames need of it.
type Needed = (Arc<VideoFile>, Vec<std::ops::Range<u64>>);

/// Remote files with the ranges a batch's frames need fetched, by path.
#[derive(Debug, Default)]
pub struct Prefetched {
    files: BTreeMap<PathBuf, PositionedFile>,
}

impl Prefetched {
    /// Fetches what the frames of `wanted` (each a file and the times asked of it, each time
    /// served by the frame `matching` says) need of the remote files among them, as `fetch`
    /// says.
    /// A file that does not open, or a time no frame serves, is left to the decoder, which names
    /// it.
    pub fn fetch(
        wanted: &[(&Path, &[f64])],
        matching: FrameMatch,
        fetch: &Fetch,
    ) -> Result<Arc<Self>> {
        let mut ranges: BTreeMap<&Path, Needed> = BTreeMap::new();
        for &(path, times) in wanted {
            // Local files are read where they are: nothing to open or look up here, on every
            // batch of a local root.
            if raw::is_raw(path) || !is_url(path) {
                continue;
            }
            // A file that does not open is left to the decoder, which names it with its sample.
            let video = match ranges.get(path) {
                Some((video, _)) => video.clone(),
                None => match VideoFile::shared(path) {
                    Ok(video) => video,
                    Err(_) => continue,
                },
            };
            let entry = ranges.entry(path).or_insert_with(|| (video.clone(), Vec::new()));
            for &time in times {
                let Ok(frame) = video.nearest_frame(time, matching.tolerance_s, matching.contract)
                else {
                    continue;
                };
                let rank = video.rank_of_frame(frame);
                let start = video.decode_start(rank);
                let end = video.complete_after(rank).max(start + 1);
                entry.1.push(video.byte_range(start..end));
            }
        }
        let files: Vec<(&Path, Needed)> = ranges.into_iter().collect();
        // Files at once, each with its share of the requests in flight.
        let each = Fetch { in_flight: (fetch.in_flight / files.len().max(1)).max(1), ..*fetch };
        let fetched = each_at_once(&files, fetch.in_flight, |(path, (video, ranges))| {
            Ok((path.to_path_buf(), video.file().fetched(ranges, &each)?))
        })?;
        Ok(Arc::new(Self { files: fetched.into_iter().collect() }))
    }

    /// `path` with the ranges fetched for it, where it is a remote file of the batch.
    pub fn file(&self, path: &Path) -> Option<&PositionedFile> {
        self.files.get(path)
    }
}
