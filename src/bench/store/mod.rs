//! Where the studies keep their results: `jsonl`, the one JSON Lines store (a sweep's
//! `results.jsonl`, a layout study's), and `lock`, one writer of an output directory at a time.

pub mod jsonl;
pub mod lock;
