//! The ground floor: how long things took. The timing tree (per stage: calls, wall and CPU
//! time), the trace (spans on a timeline) and the clocks they read, and the one shape in which
//! long work says how it goes ([`Watch`]). Every other module may record into it; it imports
//! nothing of feedbench.

pub mod clock;
pub mod helpers;
pub mod instructions;
pub mod stage;
pub mod trace;
pub mod tree;
pub mod watch;

pub use clock::thread_cpu_time;
pub use clock::{
    available_memory_bytes, peak_rss_bytes, process_cpu_time, pss_and_anonymous_bytes,
    reset_peak_rss,
};
pub use helpers::{starting_threads, HelperThreads};
pub use instructions::InstructionCounter;
pub use trace::{Trace, TraceTrack};
pub use tree::{StageTotals, TimingTree};
pub use watch::{EndsWhen, NoOne, Progress, Watch};
