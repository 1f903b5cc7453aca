//! Every integration test in one binary, a module per subject (`cargo test --test tests
//! MODULE::` runs one): each binary links libtorch and FFmpeg, and 25 of them took most of a
//! clean build's link time and disk.

mod common;

mod bad_input;
mod bad_output;
mod cache;
mod cli;
mod cluster;
mod compare;
mod docs;
mod doctor;
mod faults;
mod faults_disk;
mod feedbench_dataset;
mod guard;
mod house;
mod kill_anywhere;
mod knobs;
mod layout;
mod lerobot;
mod lerobot_backend;
mod lerobot_train;
mod loader;
mod memory;
mod model;
mod page;
mod quality;
mod quiet;
mod ranks;
mod reader_g1;
mod reader_generated;
mod remote;
mod replay;
mod report;
mod report_advice;
mod report_stored;
mod stage;
mod sweep;
mod synth;
mod synth_stats;
mod timestamps;
mod transcode;
mod tune;
mod video;
